"""The worker: takes stored mails in arrival order and handles each exactly
once, stage by stage (:meth:`Worker.process`):

  1. classify (classify.py): a bounce, an abuse report, a mail to postmaster
     or an automatic mail is handled by its kind and never answered; a
     command mail's lines, Subject, passwords and press are read;
  2. authenticate (authenticate.py): the sender's account and password --
     the slow hashing happens here, outside any write transaction;
  3. route (route.py): pbm@ -> server commands, NAME@ -> that game, a
     pbmserv-style line -> its kind's game (a new one if none); the game
     lines parsed, and their own credentials checked (``Sender.vouch``);
  4. execute (execute.py), in ONE write transaction with 5: drop a
     redelivered copy (looked for while the mail's route was held), run the
     commands, put the notices in the outbox;
  5. reply (reply.py): the answer in the outbox; the row marked done, only
     while still "new" (else another worker had it: everything rolls back).
A crash before the commit leaves the row "new": it is handled again after the
restart, and nothing of the first try remains.  A mail whose handling raises
is "shunted": marked with its error, the GM is told (at most one summary an
hour, shunts.py), and the worker goes on.  A database fault (disk full,
locked, connection lost) is not the mail's fault: the mail stays new and is
tried again after a doubling delay.

While mail waits, a worker takes up to PBM_BATCH mails of different games at
once (:meth:`Worker.process_batch`): their tries are counted in one commit,
each is prepared on its own, and all are executed in ONE write transaction.
A mail that fails (raises) rolls the batch back; its mails are then handled
one at a time, each in a commit of its own, so the one at fault is shunted
alone while the others' results stand.  One
commit (one fsync) for the batch instead of two per mail; each game still has
one mail in hand at a time, in arrival order.  A mail already started once
and never finished (``tries`` above 0) is never batched: it goes alone, so a
mail that kills its process takes no innocent batch-mate to the set-aside
limit with it.

Before a worker starts on a mail it counts the try (``inbox.tries``) in a
commit of its own: a mail whose handling was started twice and never
finished -- its process was killed, by the OOM killer or a crash, and the
supervisor restarted it -- is set aside with a GM notice, as a shunted mail
is, instead of being taken a third time (a poison mail would otherwise kill
every back end that takes it, forever).
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypeVar, cast

from sqlalchemy import Integer, bindparam, case, func, select, type_coerce
from sqlalchemy.orm import Session

from games.base import Actor
from pbm_server.accounts import throttle
from pbm_server.base import clock, logs
from pbm_server.base.polling import Poller
from pbm_server.base.settings import Settings
from pbm_server.commands.recovery import mail_unlock_code
from pbm_server.mail import bounces
from pbm_server.mail.compose import Composer
from pbm_server.mail.mailtext import IncomingMail, dedup_key, read_mail
from pbm_server.pipeline.authenticate import Authentication, begin_authentication
from pbm_server.pipeline.classify import Bounce, CommandMail, CommandText, MailKind, classify, our_locals, read_commands
from pbm_server.pipeline.execute import CommandWork, Executor, InboxRow
from pbm_server.pipeline.reply import Replier
from pbm_server.pipeline.route import NewGameOf, Routed, ToGame, route
from pbm_server.pipeline.shunts import ShuntNotices
from pbm_server.play import turns
from pbm_server.play.notices import Mailer, tell_gm
from pbm_server.play.statecache import StateCache
from pbm_server.store.db import EXCLUSIVE, SERVER_KEY, SHARED, Database, IdleMark, RouteLocks, game_key, is_transient
from pbm_server.store.lookup import Credentials, audit, credentials_ahead, credentials_by_email, games_ahead, load_games
from pbm_server.store.models import Account, InboundBody, InboundMail, preload_states, table

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_INBOX = table(InboundMail)
_BODY = table(InboundBody)
# the worker's own statements on the inbox, made once (plain Core, bound
# parameters): building a statement costs more than running it on SQLite
_WAITING = (select(_INBOX.c.id).where(_INBOX.c.status == "new")
            .order_by(_INBOX.c.id).limit(bindparam("n", type_=Integer)))
_WAITING_UPTO = (select(_INBOX.c.id).where(_INBOX.c.status == "new", _INBOX.c.id <= bindparam("upto"))
                 .order_by(_INBOX.c.id).limit(bindparam("n", type_=Integer)))
_RCPTS = select(_INBOX.c.id, _INBOX.c.rcpt_tos).where(_INBOX.c.id.in_(bindparam("ids", expanding=True)))
# the row, and whether its mail's bytes (stored once for all the rows of a
# mail) are shared with other rows; the bytes themselves: _BODY_RAW
# the mail's bytes come with it, unless they are those of the body read last
# (``cached``: Worker._read keeps the last mail whose bytes several rows share)
# what a mail's preparation reads of its row (and of its body's row)
_ROW = (_INBOX.c.mail_from, _INBOX.c.rcpt_tos, _INBOX.c.body_id, _INBOX.c.received_at,
        _BODY.c.rcpt_tos.label("reached"), _BODY.c.rcpt_tos.is_not(None).label("shared"))
_STORED = select(*_ROW, type_coerce(case((_INBOX.c.body_id == bindparam("cached"), None), else_=_BODY.c.raw),
                                    _BODY.c.raw.type).label("raw")).join_from(
    _INBOX, _BODY, _BODY.c.id == _INBOX.c.body_id).where(_INBOX.c.id == bindparam("id"), _INBOX.c.status == "new")
_BODY_RAW = select(_BODY.c.raw).where(_BODY.c.id == bindparam("body"))
# a batch's rows with one SELECT, and the bytes of their bodies up to
# AHEAD_BODY_BYTES each with another (a larger one is read with its mail)
_STORED_OF = select(_INBOX.c.id, *_ROW).join_from(_INBOX, _BODY, _BODY.c.id == _INBOX.c.body_id).where(
    _INBOX.c.id.in_(bindparam("ids", expanding=True)), _INBOX.c.status == "new")
_BODIES = select(_BODY.c.id, _BODY.c.raw).where(_BODY.c.id.in_(bindparam("ids", expanding=True)),
                                                func.length(_BODY.c.raw) <= bindparam("most", type_=Integer))
# a copy handled before: the same key, or the mail's key without a recipient
# (``legacy``), which rows stored before one row per recipient carry
_SAME = select(_INBOX.c.id).where(_INBOX.c.dedup_key.in_([bindparam("key"), bindparam("legacy")]),
                                  _INBOX.c.id != bindparam("id"), _INBOX.c.status != "new").limit(1)
# the copies handled before of a batch's mails, with one SELECT
_SAME_OF = select(_INBOX.c.id, _INBOX.c.dedup_key).where(_INBOX.c.dedup_key.in_(bindparam("keys", expanding=True)),
                                                         _INBOX.c.status != "new")
_FINISH = _INBOX.update().where(_INBOX.c.id == bindparam("row_id"))
# the row of a mail handled: written only while it is still new (another
# worker's, had it got there first: then nothing of this handling stands)
_FINISH_NEW = _INBOX.update().where(_INBOX.c.id == bindparam("row_id"), _INBOX.c.status == "new")
_TRIES = select(_INBOX.c.tries).where(_INBOX.c.id == bindparam("id"), _INBOX.c.status == "new")
_TRY = _INBOX.update().where(_INBOX.c.id == bindparam("row_id")).values(tries=_INBOX.c.tries + bindparam("add"))

#: a mail whose handling was started this many times without finishing is set aside
MAX_TRIES = 2
#: PBM_FAILPOINT "sigkill:SUBJECT": a mail with that Subject kills its process (SIGKILL,
#: as the OOM killer does) once its try is counted -- for the kill tests
FAILPOINT_KILL = "sigkill:"
#: PBM_FAILPOINT "sigkill-before-commit:SUBJECT": killed once that mail has been
#: handled inside its (batch's) write transaction, before the commit
FAILPOINT_KILL_UNCOMMITTED = "sigkill-before-commit:"
_TRIES_OF = select(_INBOX.c.id, _INBOX.c.tries).where(_INBOX.c.id.in_(bindparam("ids", expanding=True)),
                                                     _INBOX.c.status == "new")
_TRY_EACH = _INBOX.update().where(_INBOX.c.id.in_(bindparam("ids", expanding=True))).values(
    tries=_INBOX.c.tries + bindparam("add"))


def recipient_key(mail_key: str, rcpts: list[str], domain: str) -> str:
    """The duplicate key of an inbox row: the mail's key (mailtext.dedup_key:
    Message-ID and content) with the row's recipient, so that the rows one
    mail made for several of our addresses are not copies of each other, and
    a redelivery to the same address is one."""
    h = hashlib.sha256(mail_key.encode("ascii"))
    for local in our_locals(rcpts, domain):
        h.update(b"\0" + local.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


@dataclass
class Prepared:
    """A mail after the stages that need no lock: its kind, and for a
    command mail what was read, who sent it and where its lines go."""

    inbox_id: int
    mail: IncomingMail
    kind: MailKind
    #: what a redelivered copy of this mail to this recipient has alike
    #: (:func:`recipient_key`), and the mail's key without the recipient
    dedup: str
    legacy_dedup: str
    #: its inbox row as the read found it (new): the write transaction's
    #: InboxRow, with no SELECT of its own (Worker.handle; Worker.finish
    #: writes it back only while it is still new)
    stored: InboxRow
    #: a command mail's work for the execute stage (None: another kind)
    work: CommandWork | None = None
    #: the copy of it handled before (None: none), looked for while this
    #: worker held its route (``copy_known``), so that no copy could be
    #: handled between that look and this mail's commit
    copy_of: int | None = None
    copy_known: bool = False

    @property
    def actor(self) -> Actor:
        """Who sent it: an unproven stranger until a password proved otherwise."""
        if self.work is not None:
            return self.work.actor
        return Actor(handle=None, email=self.mail.from_addr, authenticated=False)

    @property
    def routed(self) -> Routed | None:
        """Where a command mail's lines go (None: another kind of mail)."""
        return self.work.routed if self.work is not None else None

    @property
    def route(self) -> ToGame | NewGameOf | None:
        """The game the mail's lines go to, or the kind of game they make."""
        where = self.routed.route if self.routed is not None else None
        return where if isinstance(where, (ToGame, NewGameOf)) else None


class _TakenElsewhere(Exception):
    """The mail's row was no longer new when its handling was written: another
    worker handled it; this handling is rolled back."""


class _MailFault(Exception):
    """A mail of a batch raised (not a database fault): the batch is rolled
    back and its mails handled one by one."""

    def __init__(self, inbox_id: int):
        super().__init__(f"mail {inbox_id} failed inside a batch")
        self.inbox_id = inbox_id


class _Stored(NamedTuple):
    """An inbox row as :data:`_STORED` reads it (Worker._stored_ahead)."""

    mail_from: str
    rcpt_tos: list[str] | None
    body_id: int
    received_at: datetime
    reached: list[str] | None
    shared: bool
    raw: bytes | None


@dataclass
class _Head:
    """A mail prepared up to its sender's password hash (Worker._prepare_head)."""

    prep: Prepared
    #: a command mail's lines and passwords (None: another kind of mail)
    text: CommandText | None = None
    #: its authentication, begun (None: not yet)
    auth: Authentication | None = None
    #: the result of its password check when the batch ran it ahead
    ok: bool | None = None


class Worker(Poller):
    def __init__(self, db: Database, settings: Settings, composer: Composer):
        super().__init__(settings.poll_seconds)
        self.db = db
        self.settings = settings
        self.composer = composer
        self.mailer = Mailer(composer)
        self.shunts = ShuntNotices(settings, self.tell_gm)
        self.bounces = bounces.Bounces(settings, self.tell_gm)
        self._bounce_key: bytes | None = None
        self._db_failures = 0  # transient database errors in a row
        #: whether a look found no mail waiting since the last commit (run_once),
        #: and whether the last look found none (pick)
        self.idle = IdleMark(db)
        self._none_waiting = False
        self.states = StateCache()  # decoded game states by version
        #: the workers of this machine that share the waiting mail (pbm serve
        #: sets it): a batch takes at most its share of the waiting games
        self.sharers = 1
        self._others_seen = -1e9  # when a route was last found taken by another worker
        self.prepare_threads = self.PREPARE_THREADS
        #: the stages that run in the mail's write transaction
        self.executor = Executor(settings, composer, self.mailer, self.bounces, self.states)
        self.replier = Replier(settings, composer)
        self.routes = RouteLocks(db)  # the route (game) of the mail in hand
        self.on_processed: Callable[[], None] | None = None  # after each commit
        self._routes_of: dict[int, str] = {}  # inbox id -> route key (waiting)
        #: the inbox id of the mail this worker is handling (set by process
        #: and prepare: with a route held, prepare may take an older mail)
        self.in_hand: int | None = None
        #: the mail whose try (inbox.tries) this worker counted last
        self._counted: int | None = None
        #: the routes given back during this pass (Worker._release)
        self._released: set[str] = set()
        #: the threads that prepare a batch's mails (made at the first batch)
        self._preparers: ThreadPoolExecutor | None = None
        #: the last mail read whose bytes several rows share (Worker._read)
        self._last_read: tuple[int, str, bytes, IncomingMail, str] | None = None

    # -- loop ----------------------------------------------------------------
    #: how many of the oldest waiting mails a worker looks at to find one whose
    #: game (route) no other worker is busy with
    LOOK_AHEAD = 256
    FIRST_LOOK = 32
    #: how soon a worker looks again when every game with waiting mail is taken
    BUSY_ELSEWHERE_SECONDS = 0.02

    def route_key(self, rcpts: list[str]) -> str:
        """What a mail's processing is serialized on: its game's key for a mail
        to NAME@DOMAIN, the server's for pbm@ (and postmaster@)."""
        domain = "@" + self.settings.domain.lower()
        for r in rcpts:
            r = r.lower()
            if r.endswith(domain):
                local = r[: -len(domain)]
                if local in ("pbm", "postmaster") or bounces.is_bounce_local(local):
                    return SERVER_KEY
                return game_key(local)
        return SERVER_KEY

    def waiting(self, upto: int | None = None, limit: int | None = None,
                session: Session | None = None) -> list[tuple[int, str]]:
        """(inbox id, route key) of the oldest waiting mails, oldest first
        (``upto``: only those with an id up to that one; ``session``: a read
        transaction of the caller's to look in).

        The ids come from the (status, id) index alone; a mail's recipients
        never change, so its route is read and worked out once per worker and
        remembered (the ids of mails no longer waiting are forgotten), not
        decoded again for every mail picked while a backlog waits.  Plain
        Core statements on the transaction's connection: no ORM objects."""
        if session is None:
            with self.db.read() as s:
                return self.waiting(upto, limit, s)
        conn = session.connection()
        n = limit or self.LOOK_AHEAD
        found = conn.execute(_WAITING, {"n": n}) if upto is None else conn.execute(_WAITING_UPTO, {"n": n, "upto": upto})
        ids = list(found.scalars())
        unknown = [i for i in ids if i not in self._routes_of]
        if unknown:
            for i, r in conn.execute(_RCPTS, {"ids": unknown}):
                self._routes_of[i] = self.route_key(list(r or []))
        if upto is None and limit is None and len(self._routes_of) > 4 * self.LOOK_AHEAD:
            keep = set(ids)
            self._routes_of = {i: k for i, k in self._routes_of.items() if i in keep}
        return [(i, self._routes_of[i]) for i in ids if i in self._routes_of]

    def pick(self, n: int = 1) -> list[tuple[int, str]]:
        """Up to ``n`` of the oldest waiting mails, each of a route nobody
        else is working on, with those routes' keys taken; [] when there is
        none."""
        tried: set[str] = set()
        picked: list[tuple[int, str]] = []
        self._none_waiting = False
        # a short look first (it is all a backlog needs while few workers
        # are busy), the whole look-ahead only if every route in it is taken
        for limit in (self.FIRST_LOOK, self.LOOK_AHEAD):
            waiting = self.waiting(limit=limit)
            if limit == self.FIRST_LOOK and (sharers := self._sharers()) > 1:
                # a fair share of the games waiting: the other workers find
                # theirs now, not after this batch gave its routes back
                n = min(n, max(1, -(-len({key for _, key in waiting}) // sharers)))
            for candidate, key in waiting:
                if key in tried:
                    continue
                tried.add(key)
                if not self.routes.take(key):
                    self._others_seen = time.monotonic()
                    continue  # another worker is on this game
                # under the key, the mail's preparation looks again for the
                # route's oldest waiting mail (Worker.first_of_route)
                picked.append((candidate, key))
                if len(picked) >= n:
                    return picked
            if picked or len(waiting) < self.FIRST_LOOK:
                break  # that was all there is, or enough to go on with
        self._none_waiting = not tried
        if not picked and tried:
            # mail waits, but every game of it is in other hands (another
            # worker's batch, another host's): look again soon, not after
            # the whole poll interval (nobody wakes us when they are done)
            self.look_again_in(self.BUSY_ELSEWHERE_SECONDS)
        return picked

    #: how long a route found taken by another worker counts as a sign of
    #: other workers (another host's, whom ``sharers`` does not know of)
    OTHERS_SEEN_SECONDS = 1.0

    def _sharers(self) -> int:
        """The workers sharing the waiting mail: those of this machine
        (``sharers``), and at least one more while another's routes were
        seen lately."""
        if time.monotonic() - self._others_seen < self.OTHERS_SEEN_SECONDS:
            return max(self.sharers, 2)
        return self.sharers

    def next_id(self) -> int | None:
        """The oldest waiting mail (for tools and tests; the loop uses pick)."""
        waiting = self.waiting()
        return waiting[0][0] if waiting else None

    def run_once(self) -> bool:
        # nothing committed anywhere since a look found no mail waiting: no
        # mail is waiting now either (SQLite; Database.change_mark)
        if self.idle.unchanged():
            picked = []
        else:
            picked = self.pick(self.settings.batch)
            if not picked and self._none_waiting:
                self.idle.found_nothing()
        if not picked:
            self.shunts.flush(self.db)
            if self.settings.gm_address:
                self.bounces.flush(self.db)
            return False
        self._released.clear()
        try:
            if len(picked) == 1:
                self.process(*picked[0])
                if picked[0][1] != SERVER_KEY:
                    self._stay_with(picked[0][1])
            else:
                self.process_batch(picked)
        finally:
            for _, key in picked:
                self._release(key)
        if self.on_processed:
            self.on_processed()
        return True

    def _release(self, key: str) -> None:
        """Give a route back (once: a batch gives its routes back as soon as
        it committed)."""
        if key not in self._released:
            self._released.add(key)
            self.routes.release(key)

    #: mails of one game a pass handles in a row, its route held, while that
    #: game's next mail is the oldest waiting (Worker._stay_with)
    STAY_WITH_GAME = 16

    def _stay_with(self, key: str) -> None:
        """After a game's mail handled alone: go on with that game's next
        mails, its route held, while each is the oldest of all waiting mail
        (at most STAY_WITH_GAME in all), resting between them as between
        passes.  A busy game then stays with the worker whose memory holds
        its state decoded (a 10,000-player giveaway's document takes 16 ms to
        decode), instead of going back and forth between back ends; the
        order of the game's mails and of all mail is the same.  The route is
        given back when the pass ends, as before."""
        for _ in range(self.STAY_WITH_GAME - 1):
            if self.stopping:
                return
            waiting = self.waiting(limit=1)
            if not waiting or waiting[0][1] != key:
                return
            if self.on_processed:
                self.on_processed()  # the last mail's reply goes out now, not after the pass
            self.rest_between()
            self.process(waiting[0][0], held=key)

    def close(self) -> None:
        if self._preparers is not None:
            self._preparers.shutdown()
            self._preparers = None
        self.routes.close()

    def step(self) -> bool:
        return self.run_once()

    # -- one mail --------------------------------------------------------------
    def process(self, inbox_id: int, held: str | None = None) -> None:
        """One mail, start to end, stage by stage: classify, authenticate and
        route (:meth:`prepare`, no lock held), then execute and reply in one
        write transaction.  ``held``: the route key this worker holds (never
        asked for again inside: that would wait for itself)."""
        self.in_hand = inbox_id
        self._counted = None
        started = time.monotonic()
        try:
            prep = self.prepare(inbox_id, held)
        except Exception as exc:
            self._failed(self.in_hand, exc)
            return
        if prep is not None:
            self._commit_one(prep, {held} if held else set(), started)

    def _commit_one(self, prep: Prepared, held: set[str], started: float) -> None:
        """A prepared mail's write transaction, on its own."""
        try:
            keys, world = self.locks_for(prep, held)
            with self.db.write(keys=keys, world=world) as s:
                row = self.handle(s, prep)
            self.states.keep()
        except _TakenElsewhere:
            self.states.drop()  # another worker handled it: nothing of this stands
            return
        except Exception as exc:
            self._failed(self.in_hand, exc)
            return
        self._db_failures = 0
        self._log_handled(prep, row, (time.monotonic() - started) * 1000)

    def _failed(self, inbox_id: int | None, exc: Exception) -> None:
        """The handling of ``inbox_id`` raised: a database fault leaves it new
        (tried again after a delay); anything else sets it aside (shunt) and
        the GM is told."""
        self.states.drop()
        if is_transient(exc) or inbox_id is None:
            # the database, not the mail: leave it new and try again later
            self._untry(inbox_id)
            self._back_off(inbox_id, exc)
            return
        log.exception("mail %s failed: shunted", inbox_id,
                      extra=logs.facts(event="mail handled", inbox=inbox_id, result="shunted", error=repr(exc)[:300]))
        if inbox_id is not None and not self.shunt(inbox_id, exc):
            self._back_off(inbox_id, exc)  # not even that could be written

    def handle(self, s: Session, prep: Prepared) -> InboxRow:
        """Execute and reply, in the caller's write transaction: the row as
        the mail's read found it, a redelivered copy dropped, the commands
        run, the answer queued, the row marked -- only if it is still new,
        else _TakenElsewhere rolls the handling back (another worker had it)."""
        row = prep.stored
        now = clock.now()
        if not self.duplicate(s, row, prep, now):
            answer = self.executor.execute(s, row, prep.kind, prep.mail, prep.work, now)
            if answer is not None and prep.work is not None:
                self.replier.send(s, row, prep.mail, prep.work, answer, now)
        if not self.finish(s, row):
            raise _TakenElsewhere(f"mail {row.id} was handled by another worker meanwhile")
        failpoint = self.settings.failpoint
        if failpoint.startswith(FAILPOINT_KILL_UNCOMMITTED) and \
                prep.mail.subject == failpoint[len(FAILPOINT_KILL_UNCOMMITTED):]:
            os.kill(os.getpid(), signal.SIGKILL)  # handled, not committed: the kill tests
        return row

    # -- several mails, one commit ---------------------------------------------------
    def process_batch(self, picked: list[tuple[int, str]]) -> None:
        """Mails of different routes (each route's key held), handled in one
        write transaction (see the module's docstring).  A mail started
        before and never finished, and a GM's mail (which takes the whole
        world), are handled alone."""
        self.in_hand = None
        self._counted = None
        held = {key for _, key in picked}
        started = time.monotonic()
        try:
            firsts, fresh, again = self._count_tries(picked)
        except Exception as exc:
            self._failed(None, exc)
            return
        for inbox_id, key in again:
            self.process(inbox_id, held=key)  # alone, counted there (and set aside at the limit)
        preps: list[Prepared] = []
        alone: list[Prepared] = []
        for inbox_id, prep, fault in self._prepare_all(fresh):
            if fault is not None:
                self.in_hand = self._counted = inbox_id
                self._failed(inbox_id, fault)
            elif prep is not None:
                # a GM's mail takes the whole world, and a mail that needs another
                # game's key (or the server's) waits for it: neither while this
                # worker holds the routes of a whole batch
                (alone if prep.actor.is_gm or self.locks_for(prep, held)[0] else preps).append(prep)
        route_of = dict(firsts)
        if preps:
            self._commit_batch(preps, route_of, started)
            for prep in preps:
                self._release(route_of[prep.inbox_id])
        for prep in alone:
            self.in_hand = self._counted = prep.inbox_id
            self._commit_one(prep, {route_of[prep.inbox_id]}, started)

    #: threads preparing a batch's mails side by side (pbm serve sets
    #: ``prepare_threads`` from the cores and the workers sharing them): the
    #: password checks (Argon2, about 20 ms of CPU each) release the
    #: interpreter lock, so a deadline rush of first mails uses every core
    PREPARE_THREADS = max(1, min(4, os.cpu_count() or 1))

    #: a batch's bodies up to this size are read with one SELECT; a larger one
    #: with its own mail (a batch never holds many large mails at once)
    AHEAD_BODY_BYTES = 64 * 1024

    def _prepare_all(self, ids: list[int]) -> list[tuple[int, Prepared | None, Exception | None]]:
        """A batch's mails prepared; (id, what was prepared, what it raised).
        In four passes: every mail read and classified (:meth:`_prepare_head`,
        the batch's rows read with one SELECT), every command mail's
        authentication begun up to its sender's password hash (what every
        mail asks -- its copy handled before, its sender's account, the
        throttle's counts -- asked once for the batch), the hashes back to
        back (side by side on ``prepare_threads`` threads), then every mail's
        remaining stages (:meth:`_prepare_tail`, the games asked once).
        Between Argon2 runs, which sweep 19 MiB through a core's caches, the
        Python stages would run cold, at about half speed.  A mail from a
        sender seen earlier in the batch begins its authentication only in
        its tail, in order: the throttle's counts it reads must include the
        earlier mail's check (accounts/throttle.py), and a tail after one
        whose check wrote them reads in a read transaction begun after that
        write."""
        ahead: dict[int, Any] = {}

        def rows_ahead(s: Session, rest: list[int]) -> None:
            ahead.clear()
            ahead.update(self._stored_ahead(s, rest))

        heads = self._each_read(ids, lambda s, i: self._prepare_head(s, i, authenticate=False, stored=ahead.pop(i, None)),
                                before=rows_ahead)
        read = {i: h for i, (h, _) in heads.items() if h is not None}
        senders: set[str] = set()

        def begin(s: Session, inbox_id: int) -> _Head:
            found = read[inbox_id]
            if not found.prep.copy_known:  # this worker holds the mail's route (pick)
                self._look_for_copy(s, found.prep)
            if found.text is not None and found.prep.mail.from_addr not in senders:
                senders.add(found.prep.mail.from_addr)
                found.auth = self._begin_authentication(s, found)
            return found

        begun = self._each_read(list(read), begin, before=lambda s, rest: self._heads_ahead(s, [read[i] for i in rest]))
        self._hash_ahead([h for h, _ in begun.values() if h is not None and h.auth is not None
                          and h.auth.check is not None])
        ready = {i: h for i, (h, _) in begun.items() if h is not None}
        # after a tail whose checks wrote the throttle's counts, the next reads
        # them in a read transaction begun after the write (SQLite's reads see
        # the database as it was when their transaction began)
        tails = self._each_read(list(ready), lambda s, i: self._prepare_tail(s, ready[i]),
                                wrote=lambda prep: prep.work is not None and prep.work.sender.gate.wrote,
                                before=lambda s, rest: self._tails_ahead(s, [ready[i] for i in rest]))
        faults = {i: e for i, (_, e) in (*heads.items(), *begun.items()) if e is not None}
        return [(i, *tails[i]) if i in tails else (i, None, faults.get(i)) for i in ids]

    def _stored_ahead(self, s: Session, ids: list[int]) -> dict[int, Any]:
        """The rows of ``ids`` still new, by id, as :meth:`_prepare_head`
        reads one (``raw`` None: read with the mail, or the body read last)."""
        conn = s.connection()
        rows = conn.execute(_STORED_OF, {"ids": ids}).all()
        cached = self._last_read[0] if self._last_read is not None else -1
        wanted = sorted({r.body_id for r in rows} - {cached})
        bodies = dict(conn.execute(_BODIES, {"ids": wanted, "most": self.AHEAD_BODY_BYTES}).all()) if wanted else {}
        return {r.id: _Stored(r.mail_from, r.rcpt_tos, r.body_id, r.received_at, r.reached, r.shared,
                              bodies.get(r.body_id)) for r in rows}

    def _heads_ahead(self, s: Session, heads: list[_Head]) -> None:
        """What the heads' authentication asks of every mail, asked once: the
        copies handled before, the senders' accounts, the throttle's counts."""
        preps = [h.prep for h in heads if not h.prep.copy_known]
        if len(preps) > 1:
            keys = sorted({k for p in preps for k in (p.dedup, p.legacy_dedup)})
            handled = s.connection().execute(_SAME_OF, {"keys": keys}).all()
            for p in preps:
                p.copy_of = next((i for i, k in handled if k in (p.dedup, p.legacy_dedup) and i != p.inbox_id), None)
                p.copy_known = True
        self._senders_ahead(s, heads)

    def _tails_ahead(self, s: Session, heads: list[_Head]) -> None:
        """What the tails ask of every mail, asked once: the games' names and
        kinds, and for the mails whose authentication begins in the tail (a
        sender's second mail in the batch) the senders' accounts and counts."""
        games = [kind.local for h in heads if isinstance(kind := h.prep.kind, CommandMail) and kind.local != "pbm"]
        if len(games) > 1:
            games_ahead(s, games)
        self._senders_ahead(s, [h for h in heads if h.auth is None])

    @staticmethod
    def _senders_ahead(s: Session, heads: list[_Head]) -> None:
        asking = [h.prep.mail.from_addr for h in heads if h.text is not None and h.text.passwords]
        if len(asking) > 1:
            credentials_ahead(s, asking)
            throttle.look_ahead(s, [(account.handle, sender) for sender in set(asking)
                                    if (account := credentials_by_email(s, sender)) is not None])

    def _each_read(self, ids: list[int], step: Callable[[Session, int], _T],
                   wrote: Callable[[_T], bool] = lambda _: False,
                   before: Callable[[Session, list[int]], None] | None = None,
                   ) -> dict[int, tuple[_T | None, Exception | None]]:
        """``step`` for each mail, in one read transaction (each begun costs
        about a quarter of a millisecond): (what it gave, what it raised) by
        id.  After a step that ``wrote`` (judged by what it gave), the next
        mail goes on in a new one, which sees that write; so does it after a
        step that raised, which may have written before it raised, or met a
        database error that spoilt the transaction (PostgreSQL refuses the
        rest of it).  ``before``: run first in each transaction, given the
        mails left (what the steps ask of every mail, asked once for them)."""
        out: dict[int, tuple[_T | None, Exception | None]] = {}
        rest = list(ids)
        while rest:
            left = len(rest)
            try:
                with self.db.read() as s:
                    if before is not None:
                        before(s, rest)
                    while rest:
                        inbox_id = rest.pop(0)
                        try:
                            done = step(s, inbox_id)
                        except Exception as exc:
                            out[inbox_id] = None, exc
                            break
                        out[inbox_id] = done, None
                        if wrote(done):
                            break
            except Exception as exc:
                if len(rest) == left:  # no transaction to be had: each mail has the fault
                    out.update((i, (None, exc)) for i in rest)
                    rest.clear()
        return out

    def _hash_ahead(self, heads: list[_Head]) -> None:
        """The password checks of ``heads``, back to back; each result kept
        on its head (a check that raises is left to run again in its tail,
        where the mail's handling takes the fault)."""
        def run(head: _Head) -> None:
            assert head.auth is not None and head.auth.check is not None
            try:
                head.ok = head.auth.check.run()
            except Exception:
                head.ok = None

        if len(heads) < 2 or self.prepare_threads < 2:
            for head in heads:
                run(head)
            return
        if self._preparers is None:
            self._preparers = ThreadPoolExecutor(self.prepare_threads, thread_name_prefix="prepare")
        list(self._preparers.map(run, heads))

    def _count_tries(self, picked: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], list[int], list[tuple[int, str]]]:
        """Under the routes' keys, in one commit: each route's oldest waiting
        mail (``firsts``), and a try counted of each of them never started
        before (``fresh``); the others (started before, never finished) are
        returned to go alone (``again``)."""
        with self.db.write(world=SHARED) as s:
            waiting = self.waiting(upto=max(i for i, _ in picked), session=s)
            firsts: list[tuple[int, str]] = []
            for candidate, key in picked:
                first = next((i for i, k in waiting if k == key and i <= candidate), None)
                if first is not None:
                    firsts.append((first, key))
            if not firsts:
                return [], [], []
            conn = s.connection()
            ids = [i for i, _ in firsts]
            tries: dict[int, int] = {i: t for i, t in conn.execute(_TRIES_OF, {"ids": ids})}
            fresh = [i for i in ids if tries.get(i) == 0]
            if fresh:
                conn.execute(_TRY_EACH, {"ids": fresh, "add": 1})
        return firsts, fresh, [(i, k) for i, k in firsts if (tries.get(i) or 0) > 0]

    def _commit_batch(self, preps: list[Prepared], route_of: dict[int, str], started: float) -> None:
        """The write transaction of a batch.  A database fault ends the whole
        batch (every mail stays new, its try taken back); a mail that raises
        anything else rolls the batch back, and its mails are then handled
        one by one, so that only the one at fault is shunted.  No savepoint a
        mail: a mail that raises is a bug, rare, and a SAVEPOINT and RELEASE
        (with the flush before each) cost every mail of every batch 6 % of the
        write transaction.  ``route_of``: each mail's route key, held by this
        worker."""
        held = set(route_of.values())
        keys = sorted({k for p in preps for k in self.locks_for(p, held)[0]})
        done: list[tuple[Prepared, InboxRow]] = []
        try:
            with self.db.write(keys=keys, world=SHARED) as s:
                # one SELECT for the batch's games, two for the states not in memory,
                # two for what every game's mail asks (rolled back? a ready check?),
                # one for what every sender's reply asks (held for bounces?)
                games = load_games(s, self._games_of(preps))
                preload_states(s, self.states.stale(games))
                turns.look_ahead(s, [g.id for g in games])
                bounces.look_ahead(s, [p.mail.from_addr for p in preps])
                for prep in preps:
                    self.in_hand = prep.inbox_id
                    try:
                        row = self.handle(s, prep)
                    except Exception as exc:
                        if is_transient(exc):
                            raise
                        raise _MailFault(prep.inbox_id) from exc
                    done.append((prep, row))
        except Exception as exc:
            self.states.drop()
            self._untry_all([p.inbox_id for p in preps])
            if is_transient(exc):
                self._back_off(preps[0].inbox_id, exc)
                return
            # a mail of the batch raised, or the batch as a whole failed (its
            # commit?): each mail alone, so that only the one at fault is set aside
            if isinstance(exc, _MailFault):
                log.info("mail %s failed inside a batch of %d: each is handled alone", exc.inbox_id, len(preps), exc_info=exc)
            else:
                log.warning("a batch of %d mails failed (%r): each is handled alone", len(preps), exc)
            for prep in preps:
                self.process(prep.inbox_id, held=route_of[prep.inbox_id])
            return
        self.states.keep()
        self._db_failures = 0
        ms = (time.monotonic() - started) * 1000 / len(preps)
        for prep, row in done:
            self._log_handled(prep, row, ms)

    @staticmethod
    def _games_of(preps: list[Prepared]) -> list[str]:
        return [where.name for p in preps if isinstance(where := p.route, ToGame)]

    @staticmethod
    def _log_handled(prep: Prepared, row: InboxRow, ms: float) -> None:
        """One line per mail handled: inbox id, what it was, its game, sender, result, time."""
        where = prep.route
        game = where.name if isinstance(where, ToGame) else where.kind if where is not None else None
        kind = type(prep.kind).__name__
        log.info("mail %s (%s%s) from %s: %s%s, %.1f ms", row.id, kind, f", game {game}" if game else "",
                 prep.mail.from_addr or "<>", row.status, f" ({row.note})" if row.note else "", ms,
                 extra=logs.facts(event="mail handled", inbox=row.id, kind=kind, game=game,
                                  sender=prep.mail.from_addr or "<>", result=row.status, note=row.note,
                                  ms=round(ms, 1)))

    @staticmethod
    def locks_for(prep: Prepared, held: set[str]) -> tuple[list[str], str]:
        """The locks of a mail's write transaction (pbm_server/store/db.py): the GM's
        mails may touch any game and take the world; everybody else's take
        their game's key and share the world."""
        if prep.actor.is_gm:
            return [], EXCLUSIVE
        keys = []
        routed = prep.routed
        if isinstance(prep.kind, Bounce) or (routed is not None and routed.server_lines):
            keys.append(SERVER_KEY)
        where = prep.route
        if isinstance(where, ToGame):
            keys.append(game_key(where.name))
        elif isinstance(where, NewGameOf):
            keys.append(game_key(where.kind))
        return [k for k in keys if k not in held], SHARED

    def _back_off(self, inbox_id: int | None, exc: Exception) -> None:
        """Wait before the next try, doubling like outbound's retries."""
        self._db_failures += 1
        delay = min(self.settings.retry_base_seconds * 2 ** (self._db_failures - 1), self.settings.retry_max_seconds)
        log.warning("mail %s: database error (%s); next try in %.1f s", inbox_id, exc, delay)
        self._stop.wait(delay)

    def prepare(self, inbox_id: int, held: str | None = None) -> Prepared | None:
        """The stages that need no lock, in one read transaction (the password
        checks' slow hashing included: a read transaction blocks no writer),
        after the try is counted (:meth:`count_try`: None if the mail is set
        aside).  ``held``: the route key the worker took for this mail; then
        the mail prepared is the route's oldest waiting one, which may be
        another (see :meth:`first_of_route`), and None if the route has none
        left."""
        if held is not None:
            with self.db.read() as s:
                first = self.first_of_route(s, inbox_id, held)
            if first is None:
                return None
            inbox_id = self.in_hand = first
        if not self.count_try(inbox_id):
            return None
        with self.db.read() as s:
            prep = self._prepare(s, inbox_id)
            if prep is not None and held is not None:
                self._look_for_copy(s, prep)
            return prep

    def _look_for_copy(self, s: Session, prep: Prepared) -> None:
        """Look for a copy handled before, while this worker holds the mail's
        route: a later copy (the same recipient: the same route) waits for
        this one, so none can be handled before this mail commits; the write
        transaction then asks nothing (Worker.duplicate)."""
        prep.copy_of, prep.copy_known = self.copy_of(s, prep), True

    # -- tries ---------------------------------------------------------------------
    def count_try(self, inbox_id: int) -> bool:
        """Count a start of the mail's handling, committed before it starts;
        False (nothing to handle) if the mail is no longer new, or if its
        handling was started MAX_TRIES times before and never finished: then
        it is set aside (shunted) and the GM told, as for a mail that fails."""
        with self.db.write(world=SHARED) as s:
            conn = s.connection()
            tries = conn.execute(_TRIES, {"id": inbox_id}).scalar()
            if tries is None:
                return False
            if tries >= MAX_TRIES:
                self._set_aside(s, inbox_id, tries)
                return False
            conn.execute(_TRY, {"row_id": inbox_id, "add": 1})
        self._counted = inbox_id
        return True

    def _set_aside(self, s: Session, inbox_id: int, tries: int) -> None:
        """A mail that killed its process ``tries`` times is shunted (its
        count back at 0, so that `pbm mail retry` gives it another chance)."""
        now = clock.now()
        note = (f"set aside: its handling was started {tries} times and never finished (the process handling it was "
                f"killed: out of memory, or a crash); `pbm mail retry {inbox_id}` takes it again")
        s.connection().execute(_FINISH.values(tries=0), {
            "row_id": inbox_id, "status": "shunted", "note": note, "dedup_key": None, "processed_at": now,
            "seed": None, "game_id": None})
        audit(s, now, "system", "shunt", f"mail {inbox_id}: started {tries} times, never finished")
        log.error("mail %s: started %d times and never finished: set aside", inbox_id, tries,
                  extra=logs.facts(event="mail handled", inbox=inbox_id, result="shunted", error="never finished"))
        self.shunts.shunted(s, now)

    def _untry_all(self, ids: list[int]) -> None:
        """The tries of a batch that a database fault ended: taken back."""
        try:
            with self.db.write(world=SHARED) as s:
                s.connection().execute(_TRY_EACH, {"ids": ids, "add": -1})
        except Exception:
            log.warning("mails %s: could not take back their tries", ids)

    def _untry(self, inbox_id: int | None) -> None:
        """The try counted for the mail did finish (a database fault ended
        it, not a kill): take it back, if the database lets us."""
        if inbox_id is None or self._counted != inbox_id:
            return
        try:
            with self.db.write(world=SHARED) as s:
                s.connection().execute(_TRY, {"row_id": inbox_id, "add": -1})
        except Exception:
            log.warning("mail %s: could not take back its try", inbox_id)

    def first_of_route(self, s: Session, candidate: int, key: str) -> int | None:
        """Under the route's key, afresh: its oldest waiting mail up to the
        candidate picked from an earlier look.  That is another mail if one of
        the route was committed late with a smaller id (PostgreSQL hands ids
        out before commit); None if another worker has taken the candidate and
        the route has nothing older."""
        return next((i for i, k in self.waiting(upto=candidate, session=s) if k == key), None)

    def _prepare(self, s: Session, inbox_id: int) -> Prepared | None:
        """Classify, authenticate, route: the mail's stages before its write transaction."""
        head = self._prepare_head(s, inbox_id)
        return None if head is None else self._prepare_tail(s, head)

    def _prepare_head(self, s: Session, inbox_id: int, authenticate: bool = True,
                      stored: Any = None) -> _Head | None:
        """The stages up to the sender's password hash: the mail read and
        classified, a command mail's lines read and its authentication begun
        (``authenticate=False``: not even that, it begins later).  ``stored``:
        its row as the batch's read found it (:meth:`_stored_ahead`)."""
        if stored is None:
            cached = self._last_read[0] if self._last_read is not None else -1
            stored = s.connection().execute(_STORED, {"id": inbox_id, "cached": cached}).first()
        if stored is None:
            return None
        envelope_from, rcpts = stored.mail_from, list(stored.rcpt_tos or [])
        raw, mail, mail_key = self._read(s, stored.body_id, envelope_from, stored.shared, stored.raw)
        failpoint = self.settings.failpoint
        if failpoint.startswith(FAILPOINT_KILL) and mail.subject == failpoint[len(FAILPOINT_KILL):]:
            os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would, while the mail is in hand
        kind = classify(raw, envelope_from, rcpts, mail, self.settings, lambda: self._read_bounce_key(s))
        row = InboxRow(inbox_id, stored.received_at, envelope_from, body_id=stored.body_id,
                       reached=list(stored.reached or []))
        head = _Head(Prepared(inbox_id, mail, kind, recipient_key(mail_key, rcpts, self.settings.domain), mail_key, row))
        if isinstance(kind, CommandMail):  # only a command mail has lines and a sender to prove
            head.text = read_commands(s, mail, self.settings.domain)
            if authenticate:
                head.auth = self._begin_authentication(s, head)
        return head

    def _read(self, s: Session, body_id: int, envelope_from: str, shared: bool,
              raw: bytes | None = None) -> tuple[bytes, IncomingMail, str]:
        """A row's mail: its bytes, what was read of them, its duplicate key
        (mailtext.dedup_key).  The rows of one mail to several of our
        addresses share the bytes, and the last such mail is kept: its other
        rows are not read and parsed again (issue 41: 100 rows of a 1 MB mail
        parsed the megabyte 100 times, 50 ms each, while later mail waited).
        What was read is never changed by the stages after."""
        cached = self._last_read
        if cached is not None and cached[0] == body_id and cached[1] == envelope_from:
            return cached[2], cached[3], cached[4]
        if raw is None:  # the bytes of the body read last, but from another sender
            raw = cast(bytes, s.connection().execute(_BODY_RAW, {"body": body_id}).scalar_one())
        mail = read_mail(raw, envelope_from)
        mail_key = dedup_key(raw, mail.message_id)
        if shared:
            self._last_read = (body_id, envelope_from, raw, mail, mail_key)
        return raw, mail, mail_key

    def _begin_authentication(self, s: Session, head: _Head) -> Authentication:
        assert head.text is not None
        return begin_authentication(s, self.db, self.settings, head.prep.mail, head.text.passwords, clock.now(),
                                    self.tell_owner)

    def _prepare_tail(self, s: Session, head: _Head) -> Prepared:
        """The stages after the hash: the authentication finished (its check
        run here unless the batch ran it ahead, :attr:`_Head.ok`), the lines
        routed and their own credentials checked."""
        prep, text = head.prep, head.text
        if text is None:
            return prep
        assert isinstance(prep.kind, CommandMail)
        if head.auth is None:
            head.auth = self._begin_authentication(s, head)
        check = head.auth.check
        ok = head.ok if head.ok is not None or check is None else check.run()
        sender = head.auth.finish(ok, session=s)
        routed = route(s, prep.kind.local, text, sender.actor)
        prep.work = CommandWork.of(text, sender, routed, sender.vouch(s, routed))
        return prep

    def _read_bounce_key(self, s: Session) -> bytes:
        """The HMAC key of the return paths, read once per worker."""
        if self._bounce_key is None:
            self._bounce_key = bounces.read_key(s)
        return self._bounce_key

    # -- the write transaction ---------------------------------------------------
    @staticmethod
    def duplicate(s: Session, row: InboxRow, prep: Prepared, now: datetime) -> bool:
        """Whether the mail is a redelivered copy of one already handled (then
        the row says so and nothing else is done)."""
        row.dedup_key = prep.dedup
        row.processed_at = now
        dup = prep.copy_of if prep.copy_known else Worker.copy_of(s, prep)
        if dup is None:
            return False
        row.status, row.note = "duplicate", f"same Message-ID, content and recipient as mail {dup}"
        return True

    @staticmethod
    def copy_of(s: Session, prep: Prepared) -> int | None:
        """The copy of the mail handled before, if any."""
        found: int | None = s.connection().execute(
            _SAME, {"key": prep.dedup, "legacy": prep.legacy_dedup, "id": prep.inbox_id}).scalar()
        return found

    @staticmethod
    def finish(s: Session, row: InboxRow) -> bool:
        """What became of the mail, written in the same transaction; False
        (nothing written) if the row is no longer new."""
        done = s.connection().execute(_FINISH_NEW, {
            "row_id": row.id, "status": row.status, "note": row.note, "dedup_key": row.dedup_key,
            "processed_at": row.processed_at, "seed": row.seed, "game_id": row.game_id})
        return bool(done.rowcount)

    # -- shunt -------------------------------------------------------------------
    def shunt(self, inbox_id: int, exc: Exception) -> bool:
        """Set the mail aside; False if that could not be written."""
        detail = "".join(traceback.format_exception(exc))[-4000:]
        try:
            with self.db.write(world=SHARED) as s:
                row = s.get(InboundMail, inbox_id)
                if row is None or row.status != "new":
                    return True  # another worker has dealt with it
                now = clock.now()
                row.status, row.note, row.processed_at = "shunted", detail, now
                row.tries = 0  # its handling ended: `pbm mail retry` starts afresh
                audit(s, now, "system", "shunt", f"mail {inbox_id}: {type(exc).__name__}: {exc}")
                self.shunts.shunted(s, now)  # the GM hears at most once per PBM_GM_SHUNT_NOTICE_SECONDS
        except Exception:
            log.exception("could not shunt mail %s", inbox_id)
            return False
        return True

    def tell_owner(self, s: Session, account: Account | Credentials, until: datetime) -> None:
        """An account's owner, while checks from their address are blocked: an
        unlock code (commands/recovery.py; none if one is open)."""
        mail_unlock_code(s, self.composer, self.settings, account, until, clock.now())

    def tell_gm(self, s: Session, what: str, details: list[tuple[str, str]], now: datetime, kind: str = "gm",
                inbound_id: int | None = None) -> None:
        tell_gm(s, self.composer, self.settings.gm_address, what, details, now, kind=kind, inbound_id=inbound_id)
