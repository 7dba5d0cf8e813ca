"""The clock's side of the server: runs each game's turn at its deadline, and
calls each game's tick() now and then.

Exactly once: a turn runs in one write transaction that first re-reads the
game and checks its deadline is still due and its turn number unchanged; on
SQLite BEGIN IMMEDIATE and on PostgreSQL an advisory lock make two schedulers
(two ``pbm serve`` processes) take turns, so the second one finds the deadline
moved on and does nothing.  A deadline missed while the server was down is run
once at start; the next deadline is computed from the time of the run.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import select

from games import get_rules
from pbm_server import clock
from pbm_server.db import LOCK_SCHEDULER, Database
from pbm_server.gameplay import DeskError, Mailer, run_turn, tick
from pbm_server.models import Game

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, db: Database, settings, mailer: Mailer, on_mail=None):
        self.db = db
        self.settings = settings
        self.mailer = mailer
        self.on_mail = on_mail
        self._stop = threading.Event()
        self._last_tick = 0.0

    def due_games(self) -> list[int]:
        now = clock.now()
        with self.db.read() as s:
            return list(
                s.scalars(
                    select(Game.id).where(Game.status == "running", Game.next_deadline.is_not(None), Game.next_deadline <= now).order_by(Game.next_deadline)
                ).all()
            )

    def run_due(self) -> int:
        ran = 0
        for game_id in self.due_games():
            with self.db.write(lock=LOCK_SCHEDULER) as s:
                game = s.get(Game, game_id)
                now = clock.now()
                if game is None or game.status != "running" or game.next_deadline is None or game.next_deadline > now:
                    continue  # someone else ran it
                try:
                    run_turn(s, game, self.mailer, now, actor="scheduler", expected_turn=game.turn)
                except DeskError as exc:
                    log.warning("turn of %s not run: %s", game.name, exc)
                    game.next_deadline = None
                ran += 1
        return ran

    def run_ticks(self) -> int:
        done = 0
        with self.db.read() as s:
            ids = s.scalars(select(Game.id).where(Game.status == "running")).all()
        for game_id in ids:
            with self.db.write(lock=LOCK_SCHEDULER) as s:
                game = s.get(Game, game_id)
                if game is None or game.status != "running":
                    continue
                try:
                    if tick(s, game, self.mailer, clock.now()):
                        done += 1
                except Exception:
                    log.exception("tick of %s failed", game.name)
                    raise
        return done

    def run_once(self) -> int:
        n = self.run_due()
        if time.monotonic() - self._last_tick >= self.settings.tick_seconds:
            self._last_tick = time.monotonic()
            try:
                n += self.run_ticks()
            except Exception:
                log.exception("ticks failed")
        if n and self.on_mail:
            self.on_mail()
        return n

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:
                log.exception("scheduler pass failed")
            self._stop.wait(max(self.settings.poll_seconds, 0.2))

    def stop(self) -> None:
        self._stop.set()
