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
told, and the worker goes on.
"""

from __future__ import annotations

import logging
import random
import traceback
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import select

from games import get_rules
from games.base import Actor, Command, Context, Line, Result
from pbm_server import clock
from pbm_server.accounts import COMMANDS as ACCOUNT_COMMANDS
from pbm_server.accounts import ServerContext, run_line
from pbm_server.compose import Composer, Reply
from pbm_server.db import LOCK_PROCESSING, Database
from pbm_server.gameplay import (
    Mailer,
    account_by_email,
    account_by_handle,
    apply_commands,
    audit,
    create_game,
    find_game,
    seed_hash,
)
from pbm_server.mailtext import IncomingMail, automatic_reason, command_lines, dedup_key, read_mail, subject_command, take_passwords
from pbm_server.models import Game, InboundMail, Order
from pbm_server.outbound import enqueue, replies_sent_since
from pbm_server.polling import Poller
from pbm_server.passwords import verify_password
from pbm_server.senderauth import unverified_reason
from pbm_server.settings import Settings

log = logging.getLogger(__name__)

#: game kinds whose lines may also be sent to pbm@DOMAIN, prefixed by the kind
#: (pbmserv style: "curio move 101 ...")
PREFIXED_KINDS = ("curio",)


@dataclass
class Prepared:
    """Everything learnt about a mail before the write transaction."""

    inbox_id: int
    mail: IncomingMail | None = None
    drop: str | None = None
    dedup: str | None = None
    route: str = "pbm"  # "pbm" or a game name
    server_lines: list[Line] = field(default_factory=list)
    game_lines: list[Line] = field(default_factory=list)
    game_kind: str | None = None
    commands: list[Command] = field(default_factory=list)
    actor: Actor | None = None
    bad_password: bool = False
    #: why the From address cannot be trusted (Authentication-Results); None: trusted or not checked
    unverified: str | None = None
    secrets: set[str] = field(default_factory=set)
    emails: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Worker(Poller):
    def __init__(self, db: Database, settings: Settings, composer: Composer):
        super().__init__(settings.poll_seconds)
        self.db = db
        self.settings = settings
        self.composer = composer
        self.mailer = Mailer(composer)
        self.on_processed = None  # callable() after each commit

    # -- loop ----------------------------------------------------------------
    def next_id(self) -> int | None:
        with self.db.read() as s:
            return s.scalar(select(InboundMail.id).where(InboundMail.status == "new").order_by(InboundMail.id).limit(1))

    def run_once(self) -> bool:
        inbox_id = self.next_id()
        if inbox_id is None:
            return False
        self.process(inbox_id)
        if self.on_processed:
            self.on_processed()
        return True

    def step(self) -> bool:
        return self.run_once()

    # -- one mail --------------------------------------------------------------
    def process(self, inbox_id: int) -> None:
        try:
            prep = self.prepare(inbox_id)
            if prep is None:
                return
            with self.db.write(lock=LOCK_PROCESSING) as s:
                row = s.get(InboundMail, inbox_id)
                if row is None or row.status != "new":
                    return  # another worker got it first
                self.execute(s, row, prep)
        except Exception as exc:  # shunt: set aside with its error, tell the GM
            log.exception("mail %s failed", inbox_id)
            self.shunt(inbox_id, exc)

    def prepare(self, inbox_id: int) -> Prepared | None:
        with self.db.read() as s:
            row = s.get(InboundMail, inbox_id)
            if row is None or row.status != "new":
                return None
            raw, envelope_from, rcpts = row.raw, row.mail_from, list(row.rcpt_tos)
        prep = Prepared(inbox_id)
        mail = read_mail(raw, envelope_from)
        prep.mail = mail
        prep.dedup = dedup_key(raw, mail.message_id)
        prep.drop = automatic_reason(mail, envelope_from, self.settings.domain)
        if prep.drop:
            return prep
        if self.settings.trusted_authserv_id:
            prep.unverified = unverified_reason(mail.auth_results, self.settings.trusted_authserv_id, mail.from_addr)
        ours = [r.lower() for r in rcpts if r.lower().endswith("@" + self.settings.domain.lower())]
        local = ours[0].split("@", 1)[0] if ours else "pbm"
        lines = command_lines(mail.body)
        passwords, lines = take_passwords(lines)
        prep.secrets.update(passwords)
        subject = subject_command(mail.subject)
        if subject is not None:
            sub_passwords, sub_lines = take_passwords([subject])
            prep.secrets.update(sub_passwords)
            passwords += sub_passwords
            subject = sub_lines[0] if sub_lines else None
        if mail.html_only:
            prep.notes.append("Your mail had no plain-text part; the server read its HTML part as text.")

        with self.db.read() as s:
            account = account_by_email(s, mail.from_addr)
            if local == "pbm":
                prep.route = "pbm"
                # a Subject is a command only for the account commands (and
                # curio): "Game question" must not be read as a GM command
                first = subject.text.split()[0].lower() if subject is not None else ""
                if first in ACCOUNT_COMMANDS or first in PREFIXED_KINDS:
                    lines = [subject] + lines
                for line in lines:
                    first = line.text.split()[0].lower()
                    if first in PREFIXED_KINDS:
                        prep.game_lines.append(line)
                        prep.game_kind = first
                    else:
                        prep.server_lines.append(line)
                if prep.game_lines:
                    game = s.scalar(select(Game).where(Game.kind == prep.game_kind).order_by(Game.id).limit(1))
                    prep.route = game.name if game else f"+{prep.game_kind}"  # "+kind": create on demand
            else:
                game = find_game(s, local)
                if game is None:
                    prep.route = "pbm"
                    prep.notes.append(f"There is no game named {local}; nothing was done.")
                    return prep
                prep.route = game.name
                prep.game_kind = game.kind
                rules = get_rules(game.kind)
                if subject is not None:
                    tried = rules.parse([subject])
                    if tried and all(c.ok for c in tried):
                        lines = [subject] + lines
                prep.game_lines = lines
            hash_ = account.password_hash if account else None
            handle = account.handle if account else None

            if prep.game_lines:
                rules = get_rules(prep.game_kind)
                prep.commands = rules.parse(prep.game_lines)
                for cmd in prep.commands:
                    self._check_command(s, cmd, mail.from_addr, prep)

        authenticated = False
        if passwords and prep.unverified:
            prep.notes.append(f"The sender of this mail could not be verified ({prep.unverified}), so its password "
                              "was not checked and nothing that needs it was done.")
            passwords = []
        if passwords:
            authenticated = any(verify_password(hash_, pw) for pw in passwords)
            if not authenticated:
                prep.bad_password = True
        is_gm = bool(self.settings.gm_address) and mail.from_addr == self.settings.gm_address.lower() and authenticated
        prep.actor = Actor(handle=handle, email=mail.from_addr, authenticated=authenticated, is_gm=is_gm)
        if handle:
            prep.emails[handle] = mail.from_addr
        return prep

    def _check_command(self, s, cmd: Command, sender: str, prep: Prepared) -> None:
        if cmd.credentials:
            userid, password = cmd.credentials
            prep.secrets.add(password)
            if prep.unverified:
                prep.secrets.add(userid)
                if cmd.error is None:
                    cmd.error = f"the sender of this mail could not be verified ({prep.unverified}); nothing was done"
                return
            acc = account_by_handle(s, userid)
            ok = verify_password(acc.password_hash if acc else None, password)
            if ok and acc.email == sender:
                cmd.actor = acc.handle
            else:
                # the "userid" slot may hold a misplaced password: never echo it
                prep.secrets.add(userid)
                if cmd.error is None:
                    cmd.error = f"the userid, its password and the sender address {sender} do not match; nothing was done"
        for h in cmd.accounts:
            acc = account_by_handle(s, h)
            if acc is None:
                if cmd.error is None:
                    cmd.error = f"there is no account named {h}; they must register first"
            else:
                prep.emails[acc.handle] = acc.email

    # -- the write transaction ---------------------------------------------------
    def execute(self, s, row: InboundMail, prep: Prepared) -> None:
        now = clock.now()
        row.dedup_key = prep.dedup
        row.processed_at = now
        dup = s.scalar(
            select(InboundMail.id).where(InboundMail.dedup_key == prep.dedup, InboundMail.id != row.id, InboundMail.status != "new").limit(1)
        )
        if dup is not None:
            row.status, row.note = "duplicate", f"same Message-ID and content as mail {dup}"
            return
        if prep.drop:
            row.status, row.note = "dropped", prep.drop
            return
        mail = prep.mail
        reply = Reply(notes=list(prep.notes))
        reply_from = "pbm"
        actor = prep.actor
        if prep.bad_password:
            if actor.handle is None:
                reply.notes.append(f"No account is registered for {mail.from_addr}, so the password in your mail cannot be checked; nothing was done. Register first: mail \"register HANDLE PASSWORD\" to {self.settings.server_address}.")
            else:
                reply.notes.append(f"The password in your mail does not match the account {actor.handle} of {mail.from_addr}; nothing was done.")
            audit(s, now, actor.handle or mail.from_addr, "bad password", f"mail {row.id}")
        else:
            if prep.server_lines:
                sctx = ServerContext(
                    s, self.settings, self.composer, mail.from_addr, now, is_gm=actor.is_gm,
                    handle=actor.handle, authenticated=actor.authenticated, mailer=self.mailer, secrets=prep.secrets,
                )
                for line in prep.server_lines:
                    reply.results.append(run_line(sctx, line))
                reply.sections.extend(sctx.sections)
                for action, detail in sctx.audit:
                    audit(s, now, actor.handle or mail.from_addr, action, detail)
            if prep.game_lines:
                reply_from = self._run_game(s, row, prep, reply, now)
        if not reply.results and not reply.notes and not reply.sections:
            reply.notes.append(
                "Your mail held no commands. Mail \"help\" to " + self.settings.server_address + " for the list of commands."
            )
        reply.results.sort(key=lambda r: r.line.number)
        if self.settings.failpoint and mail.subject == self.settings.failpoint:
            raise RuntimeError(f"failpoint {self.settings.failpoint!r} reached")
        row.status = "done"
        self._send_reply(s, row, prep, reply, reply_from, now)

    def _run_game(self, s, row: InboundMail, prep: Prepared, reply: Reply, now) -> str:
        if prep.route.startswith("+"):
            game = create_game(s, prep.game_kind, prep.game_kind, {}, None, now, actor="system")
        else:
            game = find_game(s, prep.route)
        rules = get_rules(game.kind)
        reply.kind = game.kind
        row.game_id = game.id
        if game.status != "running":
            for cmd in prep.commands:
                reply.results.append(Result(cmd.line, False, f"{game.name} is {game.status}; nothing was done", cmd.text))
            return game.name
        # the game draws from its turn's random stream (gameplay.apply_commands);
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
        outcome = apply_commands(s, game, rules, prep.commands, ctx, row.id)
        answered = {id(r.line) for r in outcome.results}
        results = list(outcome.results)
        for cmd in prep.commands:
            if id(cmd.line) not in answered and not any(r.line == cmd.line for r in results):
                results.append(Result(cmd.line, cmd.ok, cmd.error or "no answer from the game", cmd.text))
        reply.results.extend(results)
        reply.sections.extend(outcome.sections)
        handle = prep.actor.handle
        if rules.has_turns and handle:
            held = s.scalar(select(Order).where(Order.game_id == game.id, Order.handle == handle, Order.turn == game.turn))
            if held is not None or handle in outcome.orders:
                reply.orders = list(outcome.orders.get(handle, held.lines if held else []))
                reply.order_title = f"The orders the server now holds for you for {rules.turn_name} {game.turn}"
        self.mailer.send_notices(s, game, rules, outcome.notices, now, inbound_id=row.id, secrets_=prep.secrets)
        return game.name

    def _send_reply(self, s, row: InboundMail, prep: Prepared, reply: Reply, reply_from: str, now) -> None:
        mail = prep.mail
        since = now - timedelta(hours=1)
        count = replies_sent_since(s, mail.from_addr, since)
        limit = self.settings.reply_limit_per_hour
        # The limit stops exchanges with robots; a mail that proved its sender
        # (a matching password) is a player at work and always answered.
        proven = prep.actor.authenticated or any(c.actor for c in prep.commands)
        if count >= limit and not proven:
            row.note = f"not answered: {count} replies to {mail.from_addr} in the last hour (limit {limit})"
            return
        if count == limit - 1 and not proven:
            reply.notes.append(
                f"You have had {limit} replies within an hour; the server will not answer this address again until the hour is over."
            )
        subject = mail.subject.strip()
        subject = ("Re: " + subject) if subject and not subject.lower().startswith("re:") else (subject or "Your mail to pbm-server")
        handle = prep.actor.handle if prep.actor else None
        mid, raw = self.composer.message(
            to_addr=mail.from_addr,
            to_name=handle,
            from_local=reply_from,
            subject=subject,
            body=self.composer.reply(reply),
            auto="auto-replied",
            now=now,
            in_reply_to=mail.message_id,
            references=mail.references,
            secrets=prep.secrets,
        )
        enqueue(s, to_addr=mail.from_addr, message_id=mid, raw=raw, kind="reply", now=now, inbound_id=row.id, game_id=row.game_id)

    # -- shunt -------------------------------------------------------------------
    def shunt(self, inbox_id: int, exc: Exception) -> None:
        detail = "".join(traceback.format_exception(exc))[-4000:]
        try:
            with self.db.write(lock=LOCK_PROCESSING) as s:
                row = s.get(InboundMail, inbox_id)
                if row is None or row.status != "new":
                    return
                now = clock.now()
                row.status, row.note, row.processed_at = "shunted", detail, now
                audit(s, now, "system", "shunt", f"mail {inbox_id}: {type(exc).__name__}: {exc}")
                self.tell_gm(s, f"Mail {inbox_id} could not be processed and was set aside (shunted).", [("error", f"{type(exc).__name__}: {exc}"), ("from", row.mail_from), ("resubmit", f"pbm mail retry {inbox_id}")], now)
        except Exception:
            log.exception("could not shunt mail %s", inbox_id)

    def tell_gm(self, s, what: str, details: list[tuple[str, str]], now) -> None:
        if not self.settings.gm_address:
            return
        body = self.composer.render("server/gm_notice.txt", {"what": what, "details": details})
        mid, raw = self.composer.message(to_addr=self.settings.gm_address, to_name="game master", from_local="pbm", subject="pbm-server: " + what[:60], body=body, auto="auto-generated", now=now)
        enqueue(s, to_addr=self.settings.gm_address, message_id=mid, raw=raw, kind="gm", now=now)
