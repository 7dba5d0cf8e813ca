"""The worker: takes stored mails in arrival order and handles each exactly once.

For one mail:
  1. read it (mailtext), decide whether it is automatic (dropped, never answered);
  2. find its route (pbm@ -> server commands; NAME@ -> that game), its lines,
     its sender's account, and check passwords -- the slow hashing happens
     here, outside any write transaction;
  3. in ONE write transaction: claim the row (still "new"?), drop a redelivered
     copy, run the commands, put the reply and notices in the outbox, mark the
     row done.  A crash before the commit leaves the row "new": it is handled
     again after the restart, and nothing of the first try remains.
A mail whose handling raises is "shunted": marked with its error, the GM is
told (at most one summary an hour, shunts.py), and the worker goes on.  A
database fault (disk full, locked, connection lost) is not the mail's fault:
the mail stays new and is tried again after a doubling delay.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, bindparam, select
from sqlalchemy.orm import Session

from games import KINDS, get_rules
from games.base import Actor, Command, Context, Line, Result, Rules, Section
from pbm_server import bounces, clock
from pbm_server.commands.dispatch import REGISTRY, ServerContext
from pbm_server.compose import Composer, Reply, redact, thread_root
from pbm_server.creation import create_game
from pbm_server.db import EXCLUSIVE, SERVER_KEY, SHARED, Database, RouteLocks, game_key, is_transient
from pbm_server.headers import clean_msgid, clean_msgids, clean_text
from pbm_server.lookup import Credentials, account_by_handle, audit, credentials_by_email, find_game, game_name_kind
from pbm_server.mailtext import (
    IncomingMail,
    abuse_report,
    automatic_reason,
    command_lines,
    dedup_key,
    mask_unpaired,
    read_mail,
    split_passwords,
    subject_command,
)
from pbm_server.models import Account, Game, InboundMail, Order, OutboundMail, table
from pbm_server.moves import apply_commands
from pbm_server.notices import Mailer, NoticeBudget, forward_to_gm, tell_gm
from pbm_server.outbound import UNPROVEN_REPLY, enqueue, enqueue_one, replies_sent_since, unproven_replies_since
from pbm_server.polling import Poller
from pbm_server.press import PressBlock, Relay, extract, refuse_elsewhere
from pbm_server.replies import sent_mails
from pbm_server.seeds import seed_hash
from pbm_server.senderauth import unverified_reason
from pbm_server.settings import Settings
from pbm_server.shunts import ShuntNotices
from pbm_server.statecache import StateCache
from pbm_server.subjects import SERVER_HEAD, SubjectFacts, reply_subject
from pbm_server.throttle import OK, THROTTLED, CredentialGate

log = logging.getLogger(__name__)

#: outbox kind of the GM's notice that the server stopped answering unproven mail
GM_QUIET = "gm-quiet"
#: outbox kind of a mail to postmaster@DOMAIN forwarded to the GM
GM_POSTMASTER = "gm-postmaster"

def prefixed_kinds() -> list[str]:
    """Kinds whose lines may also be sent to pbm@DOMAIN, starting with the
    kind's name (pbmserv style: "curio move 101 ..."): Rules.pbm_prefix."""
    return [kind for kind in KINDS if get_rules(kind).pbm_prefix]


@dataclass(frozen=True)
class ToServer:
    """The mail's lines are pbm@ commands (or it went to no known game)."""


@dataclass(frozen=True)
class ToGame:
    """The game lines go to the existing game ``name``."""

    name: str


@dataclass(frozen=True)
class NewGameOf:
    """The game lines are for kind ``kind``, of which no game exists yet:
    one named after the kind is created when the mail is handled."""

    kind: str


Route = ToServer | ToGame | NewGameOf

_INBOX = table(InboundMail)
# the worker's own statements on the inbox, made once (plain Core, bound
# parameters): building a statement costs more than running it on SQLite
_WAITING = (select(_INBOX.c.id).where(_INBOX.c.status == "new")
            .order_by(_INBOX.c.id).limit(bindparam("n", type_=Integer)))
_WAITING_UPTO = (select(_INBOX.c.id).where(_INBOX.c.status == "new", _INBOX.c.id <= bindparam("upto"))
                 .order_by(_INBOX.c.id).limit(bindparam("n", type_=Integer)))
_RCPTS = select(_INBOX.c.id, _INBOX.c.rcpt_tos).where(_INBOX.c.id.in_(bindparam("ids", expanding=True)))
_STORED = select(_INBOX.c.raw, _INBOX.c.mail_from, _INBOX.c.rcpt_tos).where(
    _INBOX.c.id == bindparam("id"), _INBOX.c.status == "new")
_CLAIM = select(_INBOX.c.received_at, _INBOX.c.mail_from).where(
    _INBOX.c.id == bindparam("id"), _INBOX.c.status == "new")
_SAME = select(_INBOX.c.id).where(_INBOX.c.dedup_key == bindparam("key"), _INBOX.c.id != bindparam("id"),
                                  _INBOX.c.status != "new").limit(1)
_O = table(Order)
_HELD_ORDERS = select(_O.c.lines).where(_O.c.game_id == bindparam("game"), _O.c.handle == bindparam("handle"),
                                        _O.c.turn == bindparam("turn"))
_FINISH = _INBOX.update().where(_INBOX.c.id == bindparam("row_id"))


@dataclass
class InboxRow:
    """The inbox row of the mail in hand, as the write transaction sees and
    changes it: read with one plain SELECT when the mail is claimed and written
    back with one UPDATE when it is done (:meth:`Worker.claim`,
    :meth:`Worker.finish`), not as an ORM object flushed three times."""

    id: int
    received_at: datetime
    mail_from: str
    status: str = "new"
    note: str | None = None
    dedup_key: str | None = None
    processed_at: datetime | None = None
    seed: str | None = None
    game_id: int | None = None

    def raw(self, s: Session) -> bytes:
        """The mail as received (only a mail forwarded whole needs it here)."""
        raw: bytes = s.connection().execute(select(_INBOX.c.raw).where(_INBOX.c.id == self.id)).scalar_one()
        return raw


@dataclass
class Prepared:
    """Everything learnt about a mail before the write transaction."""

    inbox_id: int
    mail: IncomingMail
    #: who sent it: until the passwords are checked, an unproven stranger
    actor: Actor
    drop: str | None = None
    dedup: str | None = None
    route: Route = ToServer()
    server_lines: list[Line] = field(default_factory=list)
    game_lines: list[Line] = field(default_factory=list)
    game_kind: str | None = None
    commands: list[Command] = field(default_factory=list)
    bad_password: bool = False
    #: the $$password$$ was not checked: too many failed attempts (throttle.py)
    throttled: bool = False
    #: why the From address cannot be trusted (Authentication-Results); None: trusted or not checked
    unverified: str | None = None
    secrets: set[str] = field(default_factory=set)
    #: words that may be a misplaced password but may just as well be a handle
    #: (the userid of a failed `curio move` line, the words after a stray $$):
    #: masked in the echo of the sender's own lines only, never elsewhere
    echo_secrets: set[str] = field(default_factory=set)
    emails: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: an abuse report (ARF): its summary; recorded, never answered
    abuse: str | None = None
    #: sent to postmaster@DOMAIN: forwarded to the GM, never answered
    postmaster: bool = False
    #: (account handle key, old password) of `password` lines -> it matched (checked once, here)
    verified: dict[tuple[str, str], bool] = field(default_factory=dict)
    #: PRESS TO ... ENDPRESS blocks (pbm_server/press.py), never read as commands
    press: list[PressBlock] = field(default_factory=list)
    #: the game the mail was addressed to (NAME@DOMAIN): where its press goes
    press_game: str | None = None
    #: sent to a return path of ours (bounces+ID-TOKEN@): the outbox id, or -1 for a forged token
    bounce_of: int | None = None
    bounce_report: bounces.Report | None = None


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
        self.states = StateCache()  # decoded game states by version
        self.routes = RouteLocks(db)  # the route (game) of the mail in hand
        self.on_processed: Callable[[], None] | None = None  # after each commit
        self._routes_of: dict[int, str] = {}  # inbox id -> route key (waiting)
        #: the inbox id of the mail this worker is handling (set by process
        #: and prepare: with a route held, prepare may take an older mail)
        self.in_hand: int | None = None

    # -- loop ----------------------------------------------------------------
    #: how many of the oldest waiting mails a worker looks at to find one whose
    #: game (route) no other worker is busy with
    LOOK_AHEAD = 256
    FIRST_LOOK = 32

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

    def pick(self) -> tuple[int, str] | None:
        """The oldest waiting mail of a route nobody else is working on, with
        that route's key taken; None when there is none."""
        tried: set[str] = set()
        # a short look first (it is all a backlog needs while few workers
        # are busy), the whole look-ahead only if every route in it is taken
        for limit in (self.FIRST_LOOK, self.LOOK_AHEAD):
            waiting = self.waiting(limit=limit)
            for candidate, key in waiting:
                if key in tried:
                    continue
                tried.add(key)
                if not self.routes.take(key):
                    continue  # another worker is on this game
                # under the key, the mail's preparation looks again for the
                # route's oldest waiting mail (Worker.first_of_route)
                return candidate, key
            if len(waiting) < self.FIRST_LOOK:
                break  # that was all there is
        return None

    def next_id(self) -> int | None:
        """The oldest waiting mail (for tools and tests; the loop uses pick)."""
        waiting = self.waiting()
        return waiting[0][0] if waiting else None

    def run_once(self) -> bool:
        picked = self.pick()
        if picked is None:
            self.shunts.flush(self.db)
            if self.settings.gm_address:
                self.bounces.flush(self.db)
            return False
        inbox_id, key = picked
        try:
            self.process(inbox_id, held=key)
        finally:
            self.routes.release(key)
        if self.on_processed:
            self.on_processed()
        return True

    def close(self) -> None:
        self.routes.close()

    def step(self) -> bool:
        return self.run_once()

    # -- one mail --------------------------------------------------------------
    def process(self, inbox_id: int, held: str | None = None) -> None:
        """One mail, start to end.  ``held``: the route key this worker holds
        (never asked for again inside: that would wait for itself)."""
        self.in_hand = inbox_id
        try:
            prep = self.prepare(inbox_id, held)
            inbox_id = self.in_hand  # the route's oldest, which prepare may have found instead
            if prep is None:
                return
            keys, world = self.locks_for(prep, held)
            with self.db.write(keys=keys, world=world) as s:
                row = self.claim(s, prep.inbox_id)
                if row is None:
                    return  # another worker got it first
                self.execute(s, row, prep)
                self.finish(s, row)
            self.states.keep()
        except Exception as exc:
            inbox_id = self.in_hand  # a shunt sets aside the mail that failed
            self.states.drop()
            if is_transient(exc):
                # the database, not the mail: leave it new and try again later
                self._back_off(inbox_id, exc)
                return
            # shunt: set aside with its error, tell the GM
            log.exception("mail %s failed", inbox_id)
            if not self.shunt(inbox_id, exc):
                self._back_off(inbox_id, exc)  # not even that could be written
                return
        self._db_failures = 0

    @staticmethod
    def locks_for(prep: Prepared, held: str | None) -> tuple[list[str], str]:
        """The locks of a mail's write transaction (pbm_server/db.py): the GM's
        mails may touch any game and take the world; everybody else's take
        their game's key and share the world."""
        if prep.actor.is_gm:
            return [], EXCLUSIVE
        keys = []
        if prep.server_lines or prep.bounce_of is not None:
            keys.append(SERVER_KEY)
        route = prep.route
        if isinstance(route, ToGame):
            keys.append(game_key(route.name))
        elif isinstance(route, NewGameOf):
            keys.append(game_key(route.kind))
        return [k for k in keys if k != held], SHARED

    def _back_off(self, inbox_id: int, exc: Exception) -> None:
        """Wait before the next try, doubling like outbound's retries."""
        self._db_failures += 1
        delay = min(self.settings.retry_base_seconds * 2 ** (self._db_failures - 1), self.settings.retry_max_seconds)
        log.warning("mail %s: database error (%s); next try in %.1f s", inbox_id, exc, delay)
        self._stop.wait(delay)

    def prepare(self, inbox_id: int, held: str | None = None) -> Prepared | None:
        """Everything about the mail that needs no lock, read in one read
        transaction (the password checks' slow hashing included: a read
        transaction blocks no writer).  ``held``: the route key the worker
        took for this mail; then the mail prepared is the route's oldest
        waiting one, which may be another (see :meth:`first_of_route`), and
        None if the route has none left."""
        with self.db.read() as s:
            if held is not None:
                first = self.first_of_route(s, inbox_id, held)
                if first is None:
                    return None
                inbox_id = self.in_hand = first
            return self._prepare(s, inbox_id)

    def first_of_route(self, s: Session, candidate: int, key: str) -> int | None:
        """Under the route's key, afresh: its oldest waiting mail up to the
        candidate picked from an earlier look.  That is another mail if one of
        the route was committed late with a smaller id (PostgreSQL hands ids
        out before commit); None if another worker has taken the candidate and
        the route has nothing older."""
        return next((i for i, k in self.waiting(upto=candidate, session=s) if k == key), None)

    def _prepare(self, s: Session, inbox_id: int) -> Prepared | None:
        stored = s.connection().execute(_STORED, {"id": inbox_id}).first()
        if stored is None:
            return None
        raw, envelope_from, rcpts = stored.raw, stored.mail_from, list(stored.rcpt_tos or [])
        mail = read_mail(raw, envelope_from)
        prep = Prepared(inbox_id, mail, Actor(handle=None, email=mail.from_addr, authenticated=False))
        prep.dedup = dedup_key(raw, mail.message_id)
        ours = [r.lower() for r in rcpts if r.lower().endswith("@" + self.settings.domain.lower())]
        bounce_locals = [r.split("@", 1)[0] for r in ours if bounces.is_bounce_local(r.split("@", 1)[0])]
        if bounce_locals:  # what came back to a return path of ours: never answered, no line read
            if self._bounce_key is None:
                self._bounce_key = bounces.read_key(s)
            found = bounces.outbox_id_of(self._bounce_key, bounce_locals[0])
            prep.bounce_of = -1 if found is None else found
            null = envelope_from.strip() in ("", "<>") or envelope_from.strip().lower() == "mailer-daemon"
            prep.bounce_report = bounces.read_report(raw, null)
            return prep
        prep.abuse = abuse_report(raw) if mail.content_type == "multipart/report" else None
        prep.postmaster = any(r.split("@", 1)[0] == "postmaster" for r in ours)
        if prep.abuse is not None or prep.postmaster:
            return prep  # recorded or forwarded to the GM; never answered, no line read
        prep.drop = automatic_reason(mail, envelope_from, self.settings.domain)
        if prep.drop:
            return prep
        if self.settings.trusted_authserv_id:
            prep.unverified = unverified_reason(mail.auth_results, self.settings.trusted_authserv_id, mail.from_addr)
        local = ours[0].split("@", 1)[0] if ours else "pbm"
        answered = sent_mails(s, mail.references)  # our mails this one answers: their lines are never commands
        body, prep.press, press_passwords = extract(mail.body, answered, self.settings.domain)
        lines = command_lines(body, answered, self.settings.domain)
        cut_after = getattr(lines, "cut_after", None)
        passwords, lines, stray = split_passwords(lines)
        passwords += press_passwords
        prep.secrets.update(passwords)
        subject = subject_command(mail.subject, lines)
        if subject is not None:
            sub_passwords, sub_lines, sub_stray = split_passwords([subject])
            prep.secrets.update(sub_passwords)
            passwords += sub_passwords
            stray += sub_stray
            subject = sub_lines[0] if sub_lines else None
        for number, fragments in stray:
            # a $$ without its partner: the line may hold a password, so it is
            # neither read nor echoed, and its words are masked everywhere
            prep.echo_secrets.update(fragments)
            where = "the Subject" if number == 0 else f"line {number}"
            prep.notes.append(f"{where.capitalize()} has password marks without a partner and was not read; "
                              "write the password as $$password$$ on one line.")
        if cut_after is not None:
            prep.notes.append(f"Only the first 300 command lines were read: lines after line {cut_after} were not read.")
        if mail.html_only:
            prep.notes.append("Your mail had no plain-text part; the server read its HTML part as text.")

        gate = CredentialGate(self.db, self.settings, mail.from_addr, clock.now(), on_lockout=self.tell_owner, session=s)
        account = credentials_by_email(s, mail.from_addr)
        handle = account.handle if account else None
        # the slow hashing, outside any write transaction: one password per account
        # per mail, the first; an unregistered sender's is not checked at all
        # (the reply says there is no account)
        authenticated = False
        if passwords and prep.unverified:
            prep.notes.append(f"The sender of this mail could not be verified ({prep.unverified}), so its password "
                              "was not checked and nothing that needs it was done.")
            passwords = []
        if passwords:
            verdict = gate.check(account, passwords[0]) if account is not None else None
            authenticated = verdict == OK
            prep.throttled = verdict == THROTTLED
            if len(set(passwords)) > 1:
                gate.note("Only the first $$password$$ of a mail is checked as your password.")
            if not authenticated:
                prep.bad_password = True
        is_gm = bool(self.settings.gm_address) and mail.from_addr == self.settings.gm_address.lower() and authenticated
        actor = prep.actor = Actor(handle=handle, email=mail.from_addr, authenticated=authenticated, is_gm=is_gm)

        if local == "pbm":
            self._route_server(s, prep, actor, subject, lines)
        else:
            named = game_name_kind(s, local)
            if named is None:
                prep.notes.extend(gate.notes)
                prep.notes.append(f"There is no game named {local}; nothing was done.")
                return prep
            name, kind = named
            prep.route = ToGame(name)
            prep.press_game = name
            prep.game_kind = kind
            rules = get_rules(kind)
            if subject is not None:
                tried = rules.parse([subject])
                if tried and all(c.ok for c in tried):
                    lines = [subject] + lines
            prep.game_lines = lines
        if prep.game_lines and prep.game_kind is not None:
            prep.commands = get_rules(prep.game_kind).parse(prep.game_lines)
            for cmd in prep.commands:
                self._check_command(s, cmd, mail.from_addr, prep, gate)
        self._check_password_lines(s, prep, mail.from_addr, gate)
        prep.notes.extend(gate.notes)
        if handle:
            prep.emails[handle] = mail.from_addr
        return prep

    def _check_password_lines(self, s: Session, prep: Prepared, sender: str, gate: CredentialGate) -> None:
        """`password HANDLE OLD NEW`: the old password is checked here, through
        the gate (once per account per mail, throttled), not in the write
        transaction; commands.account.cmd_password reads the verdict."""
        for line in prep.server_lines:
            words = line.text.split()
            if len(words) == 4 and words[0].lower() == "password":
                acc = account_by_handle(s, words[1])
                if acc is not None and acc.email == sender:
                    prep.verified[(acc.handle_key, words[2])] = gate.check(acc, words[2]) == OK


    @staticmethod
    def _route_server(s: Session, prep: Prepared, actor: Actor, subject: Line | None, lines: list[Line]) -> None:
        """Lines to pbm@: server commands, and the lines of a game kind that
        takes its commands there (Rules.pbm_prefix)."""
        prefixed = prefixed_kinds()
        if subject is not None:
            first = subject.text.split()[0].lower()
            if first in prefixed or REGISTRY.is_subject_command(subject.text, actor):
                lines = [subject] + lines
        for line in lines:
            first = line.text.split()[0].lower()
            if first in prefixed:
                prep.game_lines.append(line)
                prep.game_kind = first
            else:
                prep.server_lines.append(line)
        if prep.game_kind is not None:
            game = s.scalar(select(Game).where(Game.kind == prep.game_kind).order_by(Game.id).limit(1))
            prep.route = ToGame(game.name) if game else NewGameOf(prep.game_kind)

    def _check_command(self, s: Session, cmd: Command, sender: str, prep: Prepared, gate: CredentialGate) -> None:
        if cmd.credentials:
            userid, password = cmd.credentials
            prep.secrets.add(password)
            if prep.unverified:
                prep.echo_secrets.add(userid)
                if cmd.error is None:
                    cmd.error = f"the sender of this mail could not be verified ({prep.unverified}); nothing was done"
                return
            acc = account_by_handle(s, userid)
            verdict = gate.check(acc, password, handle=userid)
            if verdict == OK and acc is not None and acc.email == sender:
                cmd.actor = acc.handle
            else:
                # the "userid" slot may hold a misplaced password: never echo it
                prep.echo_secrets.add(userid)
                if cmd.error is None and verdict == THROTTLED:
                    cmd.error = "too many failed password attempts: the password was not checked (see above); nothing was done"
                elif cmd.error is None:
                    cmd.error = f"the userid, its password and the sender address {sender} do not match; nothing was done"
        for h in cmd.accounts:
            acc = account_by_handle(s, h)
            if acc is None:
                if cmd.error is None:
                    cmd.error = f"there is no account named {h}; they must register first"
            else:
                prep.emails[acc.handle] = acc.email

    # -- the write transaction ---------------------------------------------------
    @staticmethod
    def claim(s: Session, inbox_id: int) -> InboxRow | None:
        """The mail's row if it is still new (else another worker has it)."""
        found = s.connection().execute(_CLAIM, {"id": inbox_id}).first()
        return None if found is None else InboxRow(inbox_id, found.received_at, found.mail_from)

    @staticmethod
    def finish(s: Session, row: InboxRow) -> None:
        """What became of the mail, written in the same transaction."""
        s.connection().execute(_FINISH, {
            "row_id": row.id, "status": row.status, "note": row.note, "dedup_key": row.dedup_key,
            "processed_at": row.processed_at, "seed": row.seed, "game_id": row.game_id})

    def execute(self, s: Session, row: InboxRow, prep: Prepared) -> None:
        now = clock.now()
        row.dedup_key = prep.dedup
        row.processed_at = now
        dup = s.connection().execute(_SAME, {"key": prep.dedup, "id": row.id}).scalar()
        if dup is not None:
            row.status, row.note = "duplicate", f"same Message-ID and content as mail {dup}"
            return
        if prep.bounce_of is not None:
            row.status = "done"
            if prep.bounce_of < 0 or prep.bounce_report is None:
                row.status, row.note = "dropped", "to a return path whose token is wrong (forged?); not answered"
            else:
                row.note = self.bounces.handle(s, prep.bounce_of, prep.bounce_report, row.id, now)
            return
        if prep.abuse is not None or prep.postmaster:
            self._not_to_answer(s, row, prep, now)
            return
        if prep.drop:
            row.status, row.note = "dropped", prep.drop
            return
        unheld = bounces.lift_hold(s, prep.mail.from_addr, now, "system", f"mail {row.id} came from it")
        mail = prep.mail
        reply = Reply(notes=list(prep.notes))
        if unheld:
            reply.notes.append("Mail from the server to your address had bounced, so it had stopped writing to you. "
                               "Your mail shows the address works: you get the server's mail again from now on.")
        reply_from = "pbm"
        actor = prep.actor
        facts = SubjectFacts()
        thread: str | None = None
        if prep.bad_password:
            facts.bad_password = True
            if isinstance(prep.route, ToGame | NewGameOf) and prep.game_lines:
                facts.head = prep.route.name if isinstance(prep.route, ToGame) else prep.route.kind
            if prep.throttled:  # the throttle's note above says why
                reply.notes.append("The password in your mail was not checked; nothing was done.")
            elif actor.handle is None:
                reply.notes.append(f"No account is registered for {mail.from_addr}, so the password in your mail cannot be checked; nothing was done. Register first: mail \"register HANDLE PASSWORD\" to {self.settings.server_address}.")
            else:
                reply.notes.append(f"The password in your mail does not match the account {actor.handle} of {mail.from_addr}; nothing was done.")
            audit(s, now, actor.handle or mail.from_addr, "bad password", f"mail {row.id}")
        else:
            if prep.server_lines:
                sctx = ServerContext(
                    s, self.settings, self.composer, mail.from_addr, now, is_gm=actor.is_gm,
                    handle=actor.handle, authenticated=actor.authenticated, mailer=self.mailer, secrets=prep.secrets,
                    verify=lambda acc, pw: prep.verified.get((acc.handle_key, pw), False),
                )
                for line in prep.server_lines:
                    reply.results.append(REGISTRY.run_line(sctx, line))
                reply.sections.extend(sctx.sections)
                for action, detail in sctx.audit:
                    audit(s, now, actor.handle or mail.from_addr, action, detail)
            if prep.game_lines:
                reply_from, thread = self._run_game(s, row, prep, reply, now, facts)
            if prep.press:
                reply_from = self._press(s, row, prep, reply, now, facts) or reply_from
        if not reply.results and not reply.notes and not reply.sections:
            reply.notes.append(
                "Your mail held no commands. Mail \"help\" to " + self.settings.server_address + " for the list of commands."
            )
        reply.results.sort(key=lambda r: r.line.number)
        if prep.echo_secrets:
            # only the refused lines' echoes: a good line's handle stays as written
            reply.results = [r if r.ok else dataclasses.replace(r, text=redact(r.text, prep.echo_secrets))
                             for r in reply.results]
        if self.settings.failpoint and mail.subject == self.settings.failpoint:
            raise RuntimeError(f"failpoint {self.settings.failpoint!r} reached")
        row.status = "done"
        self._send_reply(s, row, prep, reply, reply_from, now, facts, thread)

    def _not_to_answer(self, s: Session, row: InboxRow, prep: Prepared, now: datetime) -> None:
        """An abuse report is recorded (inbox note, audit); a mail to postmaster
        is forwarded to the GM whole.  Neither is ever answered."""
        notes = []
        if prep.abuse is not None:
            notes.append(f"abuse report (ARF): {prep.abuse}")
            audit(s, now, "system", "abuse report", f"mail {row.id}: {prep.abuse}")
        if prep.postmaster:
            gm = self.settings.gm_address
            if gm:
                mail = prep.mail
                what = f"Mail to postmaster@{self.settings.domain} from {clean_text(mail.from_addr) or '(no From)'}"
                details = [("envelope sender", clean_text(row.mail_from or "<>")),
                           ("subject", clean_text(mask_unpaired(mail.subject)) or "(none)"),
                           ("received", f"{row.received_at:%Y-%m-%d %H:%M:%S} UTC, inbox {row.id}"),
                           ("the mail", "attached as received; its sender was not answered")]
                if prep.abuse is not None:
                    details.append(("abuse report", prep.abuse))
                forward_to_gm(s, self.composer, gm, row.raw(s), what, details, now, kind=GM_POSTMASTER, inbound_id=row.id)
                notes.append("to postmaster: forwarded to the GM")
            else:
                notes.append("to postmaster: kept here (no PBM_GM_ADDRESS to forward it to)")
        row.status = "dropped" if prep.abuse is not None and not prep.postmaster else "done"
        row.note = "; ".join(notes) + "; not answered"

    def _run_game(self, s: Session, row: InboxRow, prep: Prepared, reply: Reply, now: datetime,
                  facts: SubjectFacts) -> tuple[str, str | None]:
        """Run the mail's game lines; returns (the game's name, the thread
        root of the reply), and fills ``facts`` for the reply's Subject."""
        route = prep.route
        if isinstance(route, NewGameOf):
            # another mail may have made it since this one was read
            game = find_game(s, route.kind) or create_game(s, route.kind, route.kind, {}, None, now, actor="system")
        elif isinstance(route, ToGame):
            found = find_game(s, route.name)
            if found is None:  # removed after the mail was read: a clear answer, not a shunt
                reply.notes.append(f"There is no game named {route.name} any more; nothing was done.")
                return "pbm", None
            game = found
        else:
            raise ValueError(f"game lines without a game route: {route!r}")
        rules = get_rules(game.kind)
        reply.kind = game.kind
        row.game_id = game.id
        facts.game = True
        facts.head = game.name + (f" {rules.turn_name} {game.turn}" if rules.has_turns else "")
        if game.status != "running":
            facts.halted = game.status
            for cmd in prep.commands:
                reply.results.append(Result(cmd.line, False, f"{game.name} is {game.status}; nothing was done", cmd.text))
            return game.name, self._thread(game, rules, prep.commands, [], facts)
        # the game draws from its turn's random stream (moves.apply_commands);
        # the mail records which published stream that was
        row.seed = seed_hash(game.turn_seed)
        ctx = Context(
            # the time the listener accepted the mail: actions count in the
            # order (and at the moment) they were received, not processed
            now=row.received_at,
            rng=random.Random(0),  # replaced by the turn's stream in apply_commands
            actor=prep.actor,
            turn=game.turn,
            game_name=game.name,
            emails=dict(prep.emails),
        )
        outcome = apply_commands(s, game, rules, prep.commands, ctx, row.id, states=self.states)
        answered = {id(r.line) for r in outcome.results}
        results = list(outcome.results)
        for cmd in prep.commands:
            if id(cmd.line) not in answered and not any(r.line == cmd.line for r in results):
                results.append(Result(cmd.line, cmd.ok, cmd.error or "no answer from the game", cmd.text))
        reply.results.extend(results)
        reply.sections.extend(outcome.sections)
        handle = prep.actor.handle
        if rules.has_turns and handle:
            # the orders held: those this mail gave, else those read from the table
            held = outcome.orders.get(handle)
            if held is None:
                held = s.connection().execute(_HELD_ORDERS, {"game": game.id, "handle": handle, "turn": game.turn}).scalar()
            if held is not None:
                reply.orders = list(held)
                reply.order_title = f"The orders the server now holds for you for {rules.turn_name} {game.turn}"
        # a mail makes at most PBM_MAX_NOTICES_PER_MAIL mails for others (the GM's: no limit)
        budget = None if prep.actor.is_gm else NoticeBudget(self.settings.max_notices_per_mail)
        self.mailer.send_notices(s, game, rules, outcome.notices, now, inbound_id=row.id, secrets_=prep.secrets,
                                 budget=budget)
        withheld = budget.note() if budget is not None else None
        if withheld:
            reply.notes.append(withheld)
            row.note = withheld
        if rules.has_turns:  # the turn now open (a mail may have started the game)
            facts.head = f"{game.name} {rules.turn_name} {game.turn}"
        return game.name, self._thread(game, rules, prep.commands, outcome.sections, facts)

    def _press(self, s: Session, row: InboxRow, prep: Prepared, reply: Reply, now: datetime,
               facts: SubjectFacts) -> str | None:
        """The mail's press blocks relayed to its game's players (press.py)."""
        if prep.press_game is None:
            reply.results.extend(refuse_elsewhere(prep.press, self.settings))
            return None
        game = find_game(s, prep.press_game)
        if game is None:
            raise LookupError(f"the game {prep.press_game} went away while the mail was handled")
        row.game_id = game.id
        if facts.head == SERVER_HEAD:  # a mail of press only: name its game
            facts.head = game.name
        players = get_rules(game.kind).players(self.states.state(game))
        relay = Relay(s, self.composer, self.settings, game, players, prep.actor, now, row.id,
                      prep.secrets | prep.echo_secrets)
        reply.results.extend(relay.run(prep.press))
        return game.name

    def _thread(self, game: Game, rules: Rules[Any], commands: list[Command], sections: list[Section], facts: SubjectFacts) -> str:
        """The reply's thread root: the game's, or that of the game's thread
        (a curio board) the reply's sections or commands are about."""
        items: list[Section | Command] = [*sections, *commands]
        for item in items:
            found = rules.thread_of(item)
            if found is not None:
                key, label = found
                facts.head = f"{game.name} {label}"
                return thread_root(self.settings.domain, game.name, game.id, key)
        return thread_root(self.settings.domain, game.name, game.id)

    def _send_reply(self, s: Session, row: InboxRow, prep: Prepared, reply: Reply, reply_from: str, now: datetime,
                    facts: SubjectFacts, thread: str | None) -> None:
        mail = prep.mail
        since = now - timedelta(hours=1)
        limit = self.settings.reply_limit_per_hour
        # The limit stops exchanges with robots; a mail that proved its sender
        # (a matching password) is a player at work and always answered, so
        # its replies are not even counted.
        proven = prep.actor.authenticated or any(c.actor for c in prep.commands)
        count = 0 if proven else replies_sent_since(s, mail.from_addr, since)
        if count >= limit and not proven:
            row.note = f"not answered: {count} replies to {mail.from_addr} in the last hour (limit {limit})"
            return
        if not proven:
            # a budget for all unproven senders together: robots answering from a
            # new address each time get past the per-address limit
            everyone = unproven_replies_since(s, since)
            budget = self.settings.unauthenticated_replies_per_hour
            if everyone >= budget:
                row.note = ((row.note + "; ") if row.note else "") + (
                    f"not answered: {everyone} replies to mails without a password in the last hour "
                    f"(PBM_UNAUTHENTICATED_REPLIES_PER_HOUR {budget})")
                self._tell_gm_quiet(s, now, budget)
                return
        if count == limit - 1 and not proven:
            reply.notes.append(
                f"You have had {limit} replies within an hour; the server will not answer this address again until the hour is over."
            )
        # the Subject says what became of the mail (subjects.py); only
        # cleaned values go into the reply's headers (headers.py)
        subject = clean_text(reply_subject(facts, reply.results, reply.orders))
        handle = prep.actor.handle if prep.actor else None
        mid, raw = self.composer.message(
            to_addr=mail.from_addr,
            to_name=handle,
            from_local=reply_from,
            subject=subject,
            body=self.composer.reply(reply, max_bytes=None if proven else self.settings.max_unauthenticated_reply_bytes),
            auto="auto-replied",
            now=now,
            in_reply_to=clean_msgid(mail.message_id),
            references=clean_msgids(mail.references),
            secrets=prep.secrets,
            thread=thread,
        )
        enqueue_one(s, to_addr=mail.from_addr, message_id=mid, raw=raw, kind="reply" if proven else UNPROVEN_REPLY,
                now=now, inbound_id=row.id, game_id=row.game_id)

    def _tell_gm_quiet(self, s: Session, now: datetime, budget: int) -> None:
        """The GM hears once an hour that mails without a password go unanswered."""
        if s.scalar(select(OutboundMail.id).where(OutboundMail.kind == GM_QUIET,
                                                  OutboundMail.created_at >= now - timedelta(hours=1)).limit(1)):
            return
        self.tell_gm(s, f"The server has stopped answering mails without a password: {budget} replies to such "
                     "mails within an hour (PBM_UNAUTHENTICATED_REPLIES_PER_HOUR).",
                     [("what", "such mails are still processed; they get no reply until the hour is over"),
                      ("see", "pbm mail status; the inbox note of each mail says it was not answered"),
                      ("next notice", "at most one such mail per hour")],
                     now, kind=GM_QUIET)

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
                audit(s, now, "system", "shunt", f"mail {inbox_id}: {type(exc).__name__}: {exc}")
                self.shunts.shunted(s, now)  # the GM hears at most once per PBM_GM_SHUNT_NOTICE_SECONDS
        except Exception:
            log.exception("could not shunt mail %s", inbox_id)
            return False
        return True

    def tell_owner(self, s: Session, account: Account | Credentials, until: datetime) -> None:
        """An account's owner, once per lockout: someone keeps guessing."""
        what = (f"Someone has sent many wrong passwords for your account {account.handle}. Until {until:%Y-%m-%d %H:%M} UTC "
                "no password for it is checked, so mails that need it are refused. If this was not you, nothing is lost; "
                f"if you have forgotten your password, send 'forgot {account.handle}' to {self.settings.server_address} "
                "for a one-time code (it comes to this address only).")
        body = self.composer.render("server/gm_notice.txt", {"what": what, "details": []})
        mid, raw = self.composer.message(to_addr=account.email, to_name=account.handle, from_local="pbm", subject="pbm-server: failed password attempts", body=body, auto="auto-generated", now=clock.now())
        enqueue(s, to_addr=account.email, message_id=mid, raw=raw, kind="notice", now=clock.now())

    def tell_gm(self, s: Session, what: str, details: list[tuple[str, str]], now: datetime, kind: str = "gm",
                inbound_id: int | None = None) -> None:
        tell_gm(s, self.composer, self.settings.gm_address, what, details, now, kind=kind, inbound_id=inbound_id)
