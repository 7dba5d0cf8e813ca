"""The clock's side of the server: runs each game's turn at its deadline, and
calls each game's tick() now and then.

Exactly once: a turn runs in one write transaction that first re-reads the
game and checks its deadline is still due and its turn number unchanged; on
SQLite BEGIN IMMEDIATE and on PostgreSQL an advisory lock make two schedulers
(two ``pbm serve`` processes) take turns, so the second one finds the deadline
moved on and does nothing.  A deadline missed while the server was down is run
once at start; the next deadline is computed from the time of the run.

Early processing (``early``): a turn runs before its deadline once every
active player not on vacation has sent orders; the deadline it replaces is
used up, so the next one is the one after it.  A grace period (``grace``)
holds a passed deadline open until the missing orders are in or the grace
ends.  A deadline also waits while a mail received before it is still in
the inbox, so orders that arrived in time always count for their turn.
Reminders go once per deadline (``reminded_for``, written in the same
transaction as the reminder mails) to players who owe orders, ``remind``
before the deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from sqlalchemy import func, select

from games import get_rules
from games.base import Notice
from pbm_server import clock
from pbm_server.db import LOCK_SCHEDULER, Database
from pbm_server.gameplay import DeskError, Mailer, absent_handles, account_by_handle, audit, run_turn, show_time, tick
from pbm_server.models import Game, InboundMail, Order
from pbm_server.outbound import enqueue

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, db: Database, settings, mailer: Mailer, on_mail=None):
        self.db = db
        self.settings = settings
        self.mailer = mailer
        self.on_mail = on_mail
        self._stop = threading.Event()
        self._last_tick = 0.0

    def candidates(self) -> list[int]:
        """Running games with a deadline: the ones a pass looks at."""
        with self.db.read() as s:
            return list(
                s.scalars(
                    select(Game.id).where(Game.status == "running", Game.next_deadline.is_not(None)).order_by(Game.next_deadline)
                ).all()
            )

    @staticmethod
    def missing(s, game: Game, moment) -> tuple[list[str], list[str], frozenset[str]]:
        """(players, players who owe orders and are not on vacation, absent)."""
        rules = get_rules(game.kind)
        try:
            players = list(rules.players(game.state))
            waiting = list(rules.waiting_for(game.state))
        except Exception:  # a broken state: the turn run will say what is wrong
            log.exception("cannot read the players of %s", game.name)
            return [], [], frozenset()
        absent = absent_handles(s, players, moment)
        keys = {h.lower() for h in absent}
        return players, [h for h in waiting if h.lower() not in keys], absent

    @staticmethod
    def unprocessed_before(s, moment) -> bool:
        """Is a mail received by ``moment`` still waiting for the worker?"""
        return s.scalar(
            select(InboundMail.id).where(InboundMail.status == "new", InboundMail.received_at <= moment).limit(1)
        ) is not None

    def why_run(self, s, game: Game, now) -> str | None:
        """"deadline", "early" or None (not now)."""
        if game.status != "running" or game.next_deadline is None:
            return None
        rules = get_rules(game.kind)
        if not rules.has_turns:
            return None
        if game.next_deadline <= now:
            if self.unprocessed_before(s, game.next_deadline):
                return None  # orders sent in time are still in the inbox: they count for this turn
            if game.grace_minutes and now < game.next_deadline + timedelta(minutes=game.grace_minutes):
                players, owing, _ = self.missing(s, game, game.next_deadline)
                return "deadline" if players and not owing else None  # in grace: early once all are in
            return "deadline"
        if game.early and game.version != game.early_version:
            players, owing, _ = self.missing(s, game, game.next_deadline)
            if players and not owing:
                ordered = s.scalar(select(func.count()).select_from(Order).where(Order.game_id == game.id, Order.turn == game.turn))
                if ordered:
                    return "early"
        return None

    def run_due(self) -> int:
        ran = 0
        now = clock.now()
        with self.db.read() as s:
            due = [g.id for g in s.scalars(select(Game).where(Game.id.in_(self.candidates()))).all() if self.why_run(s, g, now)]
        for game_id in due:
            with self.db.write(lock=LOCK_SCHEDULER) as s:
                game = s.get(Game, game_id)
                now = clock.now()
                if game is None:
                    continue
                why = self.why_run(s, game, now)  # again, under the lock: someone else may have run it
                if why is None:
                    continue
                try:
                    with s.begin_nested():  # a refused turn leaves nothing behind
                        run_turn(s, game, self.mailer, now, actor="scheduler" if why == "deadline" else "scheduler (early)", expected_turn=game.turn)
                    if why == "early":
                        game.early_version = game.version
                except Exception as exc:
                    # the game refused (DeskError) or failed: nothing of the turn is
                    # kept; the deadline is taken off so it is not retried every
                    # pass, and the GM is told
                    if not isinstance(exc, DeskError):
                        log.exception("turn of %s failed", game.name)
                    else:
                        log.warning("turn of %s not run: %s", game.name, exc)
                    missed = game.next_deadline
                    game.next_deadline = None
                    audit(s, now, "scheduler", "turn failed", f"{game.name} {game.turn}: {type(exc).__name__}: {exc}", game)
                    self.tell_gm(s, f"The turn of {game.name} due at {show_time(missed)} was not run.", [
                        ("game", game.name), ("turn", str(game.turn)), ("error", f"{type(exc).__name__}: {exc}"),
                        ("what now", f"fix the cause, then run the turn by hand: pbm turn run {game.name} --turn {game.turn} "
                                     f"(the deadlines of {game.deadline or 'the game'} resume after that run)"),
                    ], now)
                ran += 1
        return ran

    def tell_gm(self, s, what: str, details: list[tuple[str, str]], now) -> None:
        if not self.settings.gm_address:
            return
        composer = self.mailer.composer
        body = composer.render("server/gm_notice.txt", {"what": what, "details": details})
        mid, raw = composer.message(to_addr=self.settings.gm_address, to_name="game master", from_local="pbm",
                                    subject="pbm-server: " + what[:60], body=body, auto="auto-generated", now=now)
        enqueue(s, to_addr=self.settings.gm_address, message_id=mid, raw=raw, kind="gm", now=now)

    def run_reminders(self) -> int:
        sent = 0
        now = clock.now()

        def window(g: Game) -> bool:
            return (
                g.status == "running" and g.next_deadline is not None and g.remind_minutes > 0
                and g.reminded_for != g.next_deadline
                and g.next_deadline - timedelta(minutes=g.remind_minutes) <= now < g.next_deadline
            )

        with self.db.read() as s:
            ids = [g.id for g in s.scalars(select(Game).where(Game.id.in_(self.candidates()))).all() if window(g)]
        for game_id in ids:
            with self.db.write(lock=LOCK_SCHEDULER) as s:
                game = s.get(Game, game_id)
                now = clock.now()
                if game is None or not window(game):
                    continue  # another scheduler sent them
                rules = get_rules(game.kind)
                if not rules.has_turns:
                    game.reminded_for = game.next_deadline
                    continue
                players, owing, _ = self.missing(s, game, game.next_deadline)
                if not players:
                    continue  # nobody to remind yet; players who join later still get one
                for handle in owing:
                    acc = account_by_handle(s, handle)
                    if acc is None:
                        continue
                    notice = Notice(
                        to=[acc.handle],
                        subject=f"{game.name}: reminder, no orders for {rules.turn_name} {game.turn} yet",
                        template="server/reminder.txt",
                        data={
                            "game": game.name,
                            "address": f"{game.name}@{self.settings.domain}",
                            "turn_name": rules.turn_name,
                            "turn": game.turn,
                            "deadline": show_time(game.next_deadline, acc.timezone),
                            "grace": (f"{game.grace_minutes // 60} hours" if game.grace_minutes % 60 == 0 else f"{game.grace_minutes} minutes")
                            if game.grace_minutes else "",
                        },
                    )
                    sent += len(self.mailer.send_notices(s, game, rules, [notice], now))
                game.reminded_for = game.next_deadline
                audit(s, now, "scheduler", "reminders", f"{game.name} {rules.turn_name} {game.turn}: " + (", ".join(owing) or "nobody owes orders"), game)
        return sent

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
        n += self.run_reminders()
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
