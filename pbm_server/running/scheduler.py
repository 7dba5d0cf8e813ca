"""The clock's side of the server: runs each game's turn at its deadline, and
calls each game's tick() now and then.

Exactly once: a turn runs in one write transaction that first re-reads the
game and checks its deadline is still due and its turn number unchanged; on
SQLite BEGIN IMMEDIATE and on PostgreSQL an advisory lock make two schedulers
(two ``pbm serve`` processes) take turns, so the second one finds the deadline
moved on and does nothing.  A deadline missed while the server was down is run
once at start; the next deadline is computed from the time of the run.  A
turn the game keeps open at its deadline (too few players, say) is tried
once; the GM is told why, and the next try is the next deadline.

Early processing (``early``): a turn runs before its deadline once every
active player not on vacation has sent orders; the deadline it replaces is
used up, so the next one is the one after it.  A grace period (``grace``)
holds a passed deadline open until the missing orders are in or the grace
ends.  A deadline also waits while a mail received before it is still in
the inbox, so orders that arrived in time always count for their turn.
Reminders go once per deadline (``reminded_for``, written in the same
transaction as the reminder mails) to players who owe orders, ``remind``
before the deadline.

Each step (turn, reminders, tick) runs for one game at a time, in its own
transaction: a game whose step raises is logged and its GM told -- once per
error, remembered in ``scheduler_faults`` until the step works again -- and
the other games go on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select
from sqlalchemy.orm import Session

from games import get_rules
from games.base import Notice
from pbm_server.base import clock
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.base.settings import Settings
from pbm_server.play import alerting, readycheck, votes
from pbm_server.play.moves import tick
from pbm_server.play.notices import Mailer, tell_gm
from pbm_server.play.people import extend_for_missing
from pbm_server.play.turns import run_turn, why_not_done
from pbm_server.play.vacations import absent_handles
from pbm_server.store.db import LOCK_SCHEDULER, SHARED, Database, game_key
from pbm_server.store.lookup import account_by_handle, audit
from pbm_server.store.models import Game, InboundMail, Order, SchedulerFault, UTCDateTime, minutes_before

log = logging.getLogger(__name__)


#: The running games that may have something to do at ``now``, in one query:
#: a deadline passed, an early game changed since it was last judged, or a
#: reminder window open and its reminders not sent.  The database picks them
#: (a pass every half second over thousands of games reads and decodes only
#: those), a superset that the steps then judge exactly.  Made once: building
#: it costs more than running it on a few games.
_MAYBE_BUSY = (
    select(Game.id, Game.next_deadline, Game.early, Game.version, Game.early_version, Game.remind_minutes,
           Game.reminded_for)
    .where(Game.status == "running", Game.next_deadline.is_not(None),
           or_(Game.next_deadline <= bindparam("now", type_=UTCDateTime),
               and_(Game.early.is_(True), or_(Game.early_version.is_(None), Game.early_version != Game.version)),
               # the date arithmetic last: only for the games that still owe reminders
               and_(Game.remind_minutes > 0, or_(Game.reminded_for.is_(None), Game.reminded_for != Game.next_deadline),
                    minutes_before(Game.next_deadline, Game.remind_minutes) <= bindparam("now", type_=UTCDateTime))))
    .order_by(Game.next_deadline))

#: every running game's id and kind (the minute's tick)
_RUNNING_KINDS = select(Game.id, Game.kind).where(Game.status == "running").order_by(Game.id)


class Scheduler:
    def __init__(self, db: Database, settings: Settings, mailer: Mailer, on_mail: Callable[[], None] | None = None):
        self.db = db
        self.settings = settings
        self.mailer = mailer
        self.on_mail = on_mail
        self._stop = threading.Event()
        self._last_tick = 0.0
        #: game id -> (version, when): an early game judged not ready at that
        #: version; not judged again (its state not read) until the version
        #: changes or EARLY_RECHECK_SECONDS pass (a vacation declared at pbm@
        #: changes who owes orders without changing the game)
        self._not_ready: dict[int, tuple[int, float]] = {}

    EARLY_RECHECK_SECONDS = 60.0

    def _overview(self, now: datetime) -> list[Any]:
        """The running games that may have something to do at ``now``, with
        the columns a pass decides on (:data:`_MAYBE_BUSY`)."""
        with self.db.read() as s:
            return self._overview_in(s, now)

    @staticmethod
    def _overview_in(s: Session, now: datetime) -> list[Any]:
        return list(s.connection().execute(_MAYBE_BUSY, {"now": now}).all())

    def _maybe_due(self, now: datetime, overview: list[Any] | None = None) -> list[int]:
        out = []
        mono = time.monotonic()
        for r in self._overview(now) if overview is None else overview:
            if r.next_deadline <= now:
                out.append(r.id)
            elif r.early and r.version != r.early_version:
                seen = self._not_ready.get(r.id)
                if seen is None or seen[0] != r.version or mono - seen[1] >= self.EARLY_RECHECK_SECONDS:
                    out.append(r.id)
        return out

    def _judge(self, s: Session, game: Game, now: datetime) -> str | None:
        why = self.why_run(s, game, now)
        if why is None and game.early and game.next_deadline is not None and game.next_deadline > now:
            self._not_ready[game.id] = (game.version, time.monotonic())
        return why

    @staticmethod
    def missing(s: Session, game: Game, moment: datetime) -> tuple[list[str], list[str], frozenset[str]]:
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
    def unprocessed_before(s: Session, moment: datetime) -> bool:
        """Is a mail received by ``moment`` still waiting for the worker?"""
        return s.scalar(
            select(InboundMail.id).where(InboundMail.status == "new", InboundMail.received_at <= moment).limit(1)
        ) is not None

    def why_run(self, s: Session, game: Game, now: datetime) -> str | None:
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

    # -- one step for each game, each on its own ------------------------------------
    def _each_game(self, step: str, ids: list[int], work: Callable[[Session, Game], int | None]) -> int:
        """``work`` for each game in its own write transaction.  A game whose
        step raises is logged, its GM told once, and the next game goes on."""
        done = 0
        for game_id in ids:
            try:
                with self.db.read() as s:
                    name = s.scalar(select(Game.name).where(Game.id == game_id))
                if name is None:
                    continue
                # the game's key: no worker is processing a mail of it meanwhile
                with self.db.write(lock=LOCK_SCHEDULER, keys=[game_key(name)], world=SHARED) as s:
                    game = s.get(Game, game_id)
                    if game is None:
                        continue
                    ran = work(s, game)
                    if ran is None:
                        continue  # the step did not apply to the game (now): it says nothing about a fault
                    done += ran
                    fault = s.get(SchedulerFault, (game_id, step))
                    if fault is not None:  # it works again
                        s.delete(fault)
                        audit(s, clock.now(), "scheduler", f"{step} works again", f"{game.name}: after {fault.error}", game)
            except Exception as exc:
                log.exception("%s of game %s failed", step, game_id)
                self._fault(game_id, step, exc)
        return done

    def _fault(self, game_id: int, step: str, exc: Exception) -> None:
        """Remember that ``step`` fails for the game; tell the GM unless they
        were told of this very error already."""
        error = f"{type(exc).__name__}: {exc}"[:2000]
        try:
            with self.db.write(lock=LOCK_SCHEDULER, world=SHARED) as s:
                # the name only: the game's state may be what is broken
                name = s.scalar(select(Game.name).where(Game.id == game_id))
                if name is None:
                    return
                now = clock.now()
                fault = s.get(SchedulerFault, (game_id, step))
                if fault is not None and fault.error == error:
                    return  # the GM knows
                if fault is None:
                    s.add(SchedulerFault(game_id=game_id, step=step, error=error, since=now, told_at=now))
                else:
                    fault.error, fault.told_at = error, now
                audit(s, now, "scheduler", f"{step} failed", f"{name}: {error}", game_id=game_id)
                tell_gm(s, self.mailer.composer, self.settings.gm_address, f"The {step} of {name} failed; the other games go on.", [
                    ("game", name), ("step", step), ("error", error),
                    ("what now", f"the {step} of {name} is tried again every pass; you hear again only if the error changes. "
                                 f"Look at the game with: pbm game show {name}"),
                ], now)
        except Exception:
            log.exception("could not record the failed %s of game %s", step, game_id)

    def _select(self, ids: list[int], wanted: Callable[[Session, Game], object]) -> list[int]:
        """The games of ``ids`` that ``wanted`` picks, read without a lock and
        one by one (a row that cannot be loaded must not hide the others).  A
        game that cannot be judged is picked: its step then fails under the
        lock, and is reported there."""
        out: list[int] = []
        if not ids:
            return out
        with self.db.read() as s:
            for game_id in ids:
                try:
                    game = s.get(Game, game_id)
                    if game is not None and wanted(s, game):
                        out.append(game_id)
                except Exception:
                    out.append(game_id)
        return out

    # -- the steps ----------------------------------------------------------------------
    def run_due(self, overview: list[Any] | None = None) -> int:
        """Each due turn run; ``overview``: this pass's :meth:`_overview`, if read."""
        now = clock.now()
        due = self._select(self._maybe_due(now, overview), lambda s, g: self._judge(s, g, now))
        return self._each_game("turn", due, self._run_due_turn)

    def _run_due_turn(self, s: Session, game: Game) -> int | None:
        now = clock.now()
        why = self.why_run(s, game, now)  # again, under the lock: someone else may have run it
        if why is None:
            return None  # not due (any more): says nothing of a fault
        if why == "deadline" and extend_for_missing(s, self.mailer, game, now):
            return 1  # nmr=extend: the deadline moved once for missing orders (play/people.py)
        try:
            due = game.next_deadline
            with s.begin_nested():  # a refused turn leaves nothing behind
                outcome = run_turn(s, game, self.mailer, now, actor="scheduler" if why == "deadline" else "scheduler (early)", expected_turn=game.turn)
            if why == "early":
                game.early_version = game.version
            elif not outcome.turn_done and game.status != "finished":
                # the game kept its turn open (too few players, say): the GM hears why
                rules = get_rules(game.kind)
                tell_gm(s, self.mailer.composer, self.settings.gm_address,
                        f"The turn of {game.name} due at {show_time(due)} did not run.", [
                    ("game", game.name), ("turn", f"{rules.turn_name} {game.turn}"),
                    ("why", why_not_done(outcome)),
                    ("what now", f"the turn stays open and is tried again at the next deadline, {show_time(game.next_deadline)}; "
                                 f"to run it sooner: pbm turn run {game.name} --turn {game.turn}"),
                ], now)
        except Exception as exc:
            # the game refused (ServerRefused) or failed: nothing of the turn is
            # kept; the deadline is taken off so it is not retried every
            # pass, and the GM is told
            if not isinstance(exc, ServerRefused):
                log.exception("turn of %s failed", game.name)
            else:
                log.warning("turn of %s not run: %s", game.name, exc)
            missed = game.next_deadline
            game.next_deadline = None
            audit(s, now, "scheduler", "turn failed", f"{game.name} {game.turn}: {type(exc).__name__}: {exc}", game)
            tell_gm(s, self.mailer.composer, self.settings.gm_address, f"The turn of {game.name} due at {show_time(missed)} was not run.", [
                ("game", game.name), ("turn", str(game.turn)), ("error", f"{type(exc).__name__}: {exc}"),
                ("what now", f"fix the cause, then run the turn by hand: pbm turn run {game.name} --turn {game.turn} "
                             f"(the deadlines of {game.deadline or 'the game'} resume after that run)"),
            ], now)
        return 1

    @staticmethod
    def _in_reminder_window(g: Any, now: datetime) -> bool:
        """``g``: a game, or a row of the overview (the same columns)."""
        return (
            g.next_deadline is not None and g.remind_minutes > 0
            and g.reminded_for != g.next_deadline
            and g.next_deadline - timedelta(minutes=g.remind_minutes) <= now < g.next_deadline
        )

    @classmethod
    def _reminder_window(cls, g: Game, now: datetime) -> bool:
        return g.status == "running" and cls._in_reminder_window(g, now)

    def run_reminders(self, overview: list[Any] | None = None) -> int:
        """Each game's reminders that are due; ``overview`` as for :meth:`run_due`."""
        now = clock.now()
        maybe = [r.id for r in (self._overview(now) if overview is None else overview) if self._in_reminder_window(r, now)]
        ids = self._select(maybe, lambda s, g: self._reminder_window(g, now))
        return self._each_game("reminders", ids, self._remind)

    def _remind(self, s: Session, game: Game) -> int | None:
        """The reminders of ``game``: how many mails; None when it is not (or
        no longer: the clock moved on, another scheduler sent them) their time."""
        now = clock.now()
        if not self._reminder_window(game, now) or game.next_deadline is None:
            return None
        rules = get_rules(game.kind)
        if not rules.has_turns:
            game.reminded_for = game.next_deadline
            return 0
        players, owing, _ = self.missing(s, game, game.next_deadline)
        if not players:
            return 0  # nobody to remind yet; players who join later still get one
        sent = 0
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
            sent += len(self.mailer.send_notices(s, game, rules, [notice], now, stream="reminders"))
        game.reminded_for = game.next_deadline
        alerting.reminder(s, game, rules, owing, now)
        audit(s, now, "scheduler", "reminders", f"{game.name} {rules.turn_name} {game.turn}: " + (", ".join(owing) or "nobody owes orders"), game)
        return sent

    def run_people(self, due: tuple[list[int], list[int]] | None = None) -> int:
        """Players' votes whose time is up closed, pauses by vote ended, and
        ready checks' seats past their window handed on (play/votes.py,
        play/readycheck.py): each game in its own transaction, under its key.
        ``due``: the games of each, as :meth:`_look` found them."""
        if due is None:
            now = clock.now()
            with self.db.read() as s:
                due = votes.due_games(s, now), readycheck.due_games(s, now)
        voting, ready = due
        n = self._each_game("votes", voting, lambda s, g: votes.due_work(s, self.mailer, g, clock.now()))
        return n + self._each_game("ready", ready, lambda s, g: readycheck.due_work(s, self.mailer, g, clock.now()))

    def _look(self, now: datetime) -> tuple[tuple[list[int], list[int]], list[Any]]:
        """One read transaction for what a pass decides on: the games with
        votes or ready checks due, and the overview (:meth:`_overview`)."""
        with self.db.read() as s:
            due = votes.due_games(s, now), readycheck.due_games(s, now)
            return due, self._overview_in(s, now)

    def run_ticks(self) -> int:
        with self.db.read() as s:
            running = s.connection().execute(_RUNNING_KINDS).all()
        # a write transaction per game only for the kinds that tick (a minute's
        # thousands of giveaway games would hold SQLite's one writer for nothing)
        ids = [game_id for game_id, kind in running if _ticks(kind)]
        return self._each_game("tick", ids, self._tick)

    def _tick(self, s: Session, game: Game) -> int:
        if game.status != "running":
            return 0
        return 1 if tick(s, game, self.mailer, clock.now()) else 0

    def run_once(self) -> int:
        # one look at the running games for both steps, unless a turn ran
        # (it moved its game's deadline): a pass every half second over
        # thousands of games costs the back end's CPU
        # votes first: one that closes at a deadline is decided before that turn runs
        due, overview = self._look(clock.now())
        n = self.run_people(due)
        if any(due):  # a vote may have closed or a seat moved: look at the games again
            overview = self._overview(clock.now())
        n += self.run_due(overview)
        n += self.run_reminders(overview if n == 0 else None)
        if time.monotonic() - self._last_tick >= self.settings.tick_seconds:
            self._last_tick = time.monotonic()
            n += self.run_ticks()
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


def _ticks(kind: str) -> bool:
    try:
        return get_rules(kind).ticks
    except Exception:  # a kind this server no longer has: its tick says so (and the GM hears)
        return True
