"""The fourth stage of a mail's path: doing what it asks, inside the mail's
write transaction.

Each kind of mail (classify.py) is handled by its type: what comes back to a
return path of ours goes to bounces.py, an abuse report is recorded, a mail
to postmaster is forwarded to the GM, an automatic mail is dropped; none of
them is answered.  A command mail's lines run: the pbm@ lines through the
command registry, the game lines through the game's rules (moves.py), its
press through press.py; the result is an :class:`Answer`, which the reply
stage (reply.py) mails back.  The inbox row (:class:`InboxRow`) records what
became of the mail in the same transaction.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from games import get_rules
from games.base import Actor, Command, Context, Result, Rules, Section
from pbm_server.base.settings import Settings
from pbm_server.commands.dispatch import REGISTRY, ServerContext
from pbm_server.mail import bounces
from pbm_server.mail.compose import Composer, Reply, redact, thread_root
from pbm_server.mail.mailtext import IncomingMail
from pbm_server.mail.subjects import SERVER_HEAD, SubjectFacts
from pbm_server.pipeline import postmaster
from pbm_server.pipeline.authenticate import Sender, Vouched
from pbm_server.pipeline.classify import AbuseReport, Bounce, CommandText, Dropped, MailKind, ToPostmaster
from pbm_server.pipeline.route import NewGameOf, Routed, ToGame
from pbm_server.play import readycheck
from pbm_server.play.creation import create_game
from pbm_server.play.moves import apply_commands
from pbm_server.play.notices import Mailer, NoticeBudget
from pbm_server.play.ordercheck import CHECK_NOTE, check_orders
from pbm_server.play.press import Relay, refuse_elsewhere
from pbm_server.play.roster import fill_seats, hold_joins
from pbm_server.play.seeds import seed_hash
from pbm_server.play.statecache import StateCache
from pbm_server.play.turns import same_seed_hold
from pbm_server.store.lookup import audit, find_game
from pbm_server.store.models import Game, InboundMail, Order, inbox_raw, table

#: outbox kind of a mail to postmaster@DOMAIN forwarded to the GM
GM_POSTMASTER = postmaster.KIND

_INBOX = table(InboundMail)
_RAW = select(inbox_raw()).where(_INBOX.c.id == bindparam("id"))
_O = table(Order)
_HELD_ORDERS = select(_O.c.lines).where(_O.c.game_id == bindparam("game"), _O.c.handle == bindparam("handle"),
                                        _O.c.turn == bindparam("turn"))


@dataclass
class InboxRow:
    """The inbox row of the mail in hand, as the write transaction sees and
    changes it: read with the mail itself before the transaction (while new)
    and written back with one UPDATE, only while still new, when it is done
    (Worker.finish), not as an ORM object flushed three times."""

    id: int
    received_at: datetime
    mail_from: str
    status: str = "new"
    note: str | None = None
    dedup_key: str | None = None
    processed_at: datetime | None = None
    seed: str | None = None
    game_id: int | None = None
    #: the row's mail's bytes (shared with the other rows of its transaction)
    body_id: int | None = None
    #: every recipient of ours the mail's transaction reached (one row each)
    reached: list[str] = field(default_factory=list)

    def raw(self, s: Session) -> bytes:
        """The mail as received (only a mail forwarded whole needs it here)."""
        raw: bytes = s.connection().execute(_RAW, {"id": self.id}).scalar_one()
        return raw


@dataclass
class CommandWork:
    """A command mail as the stages before the write transaction left it."""

    text: CommandText
    sender: Sender
    routed: Routed
    vouched: Vouched
    #: what the reply says before any line's result, in order
    notes: list[str] = field(default_factory=list)
    #: every password the mail carried or its lines name; the pbm@ commands
    #: add the ones they see (one set: whatever the mail causes masks them)
    secrets: set[str] = field(default_factory=set)
    #: masked in the echo of the sender's own refused lines only
    echo_secrets: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, text: CommandText, sender: Sender, routed: Routed, vouched: Vouched) -> CommandWork:
        notes = text.notes + sender.notes + vouched.notes
        if routed.no_game is not None:
            notes.append(f"There is no game named {routed.no_game}; nothing was done.")
        return cls(text, sender, routed, vouched, notes, text.secrets | vouched.secrets,
                   text.echo_secrets | vouched.echo_secrets)

    @property
    def actor(self) -> Actor:
        return self.sender.actor

    @property
    def commands(self) -> list[Command]:
        return self.routed.commands

    @property
    def proven(self) -> bool:
        """The mail proved its sender: its password, or a line's credentials, matched."""
        return self.actor.authenticated or any(c.actor for c in self.commands)


@dataclass
class Answer:
    """What a command mail came to, for the reply stage."""

    reply: Reply
    #: the Subject's facts (subjects.py)
    facts: SubjectFacts
    #: the local part the reply comes from: "pbm" or the game's name
    reply_from: str = "pbm"
    #: the thread root the reply names (None: none)
    thread: str | None = None


class Executor:
    """Runs a prepared mail in its write transaction."""

    def __init__(self, settings: Settings, composer: Composer, mailer: Mailer, bounces_: bounces.Bounces,
                 states: StateCache):
        self.settings = settings
        self.composer = composer
        self.mailer = mailer
        self.bounces = bounces_
        self.states = states

    def execute(self, s: Session, row: InboxRow, kind: MailKind, mail: IncomingMail, work: CommandWork | None,
                now: datetime) -> Answer | None:
        """Do what the mail of ``kind`` asks; the answer to mail back (None:
        the mail is not answered).  ``work``: a command mail's, else None."""
        if isinstance(kind, Bounce):
            self._bounce(s, row, kind, now)
        elif isinstance(kind, AbuseReport):
            self._abuse(s, row, kind, now)
        elif isinstance(kind, ToPostmaster):
            self._to_postmaster(s, row, mail, kind, now)
        elif isinstance(kind, Dropped):
            row.status, row.note = "dropped", kind.reason
        elif work is None:
            raise ValueError(f"a command mail without its work: {kind!r}")
        else:
            return self._answer(s, row, mail, work, now)
        return None

    # -- mails that are never answered ------------------------------------------------
    def _bounce(self, s: Session, row: InboxRow, kind: Bounce, now: datetime) -> None:
        """What came back to a return path of ours (bounces.py): never answered."""
        if kind.outbox_id < 0:
            row.status, row.note = "dropped", "to a return path whose token is wrong (forged?); not answered"
            return
        row.status = "dropped" if kind.report.verdict == bounces.AUTO_REPLY else "done"
        row.note = self.bounces.handle(s, kind.outbox_id, kind.report, row.id, now)

    @staticmethod
    def _abuse_note(s: Session, row: InboxRow, summary: str, now: datetime) -> str:
        """An abuse report audited; returns its inbox note."""
        audit(s, now, "system", "abuse report", f"mail {row.id}: {summary}")
        return f"abuse report (ARF): {summary}"

    def _abuse(self, s: Session, row: InboxRow, kind: AbuseReport, now: datetime) -> None:
        """An abuse report is recorded (inbox note, audit), never answered."""
        row.status = "dropped"
        row.note = self._abuse_note(s, row, kind.summary, now) + "; not answered"

    def _to_postmaster(self, s: Session, row: InboxRow, mail: IncomingMail, kind: ToPostmaster,
                       now: datetime) -> None:
        """A mail to postmaster is forwarded to the GM, within limits
        (postmaster.py; an abuse report among them recorded as well), never
        answered."""
        notes = [] if kind.abuse is None else [self._abuse_note(s, row, kind.abuse, now)]
        notes.append(postmaster.forward(s, self.composer, self.settings, row, mail, kind.abuse, now))
        row.status = "done"
        row.note = "; ".join(notes) + "; not answered"

    # -- command mails ----------------------------------------------------------------
    def _answer(self, s: Session, row: InboxRow, mail: IncomingMail, work: CommandWork, now: datetime) -> Answer:
        """A command mail: its lines run; the answer says what became of them."""
        answer = Answer(Reply(notes=list(work.notes)), SubjectFacts())
        reply = answer.reply
        if work.sender.bad_password:
            self._refuse_password(s, row, mail, work, reply, now, answer.facts)
        else:
            self._run_lines(s, row, mail, work, answer, now)
        # a hold for bounces is lifted only by a mail that proves its sender (bounces.hold_note)
        held = bounces.hold_note(s, mail.from_addr, now, f"mail {row.id}",
                                 work.proven or bounces.proves_code(reply.results))
        if held:
            reply.notes.insert(len(work.notes), held)
        if not reply.results and not reply.notes and not reply.sections:
            reply.notes.append(
                "Your mail held no commands. Mail \"help\" to " + self.settings.server_address + " for the list of commands."
            )
        reply.results.sort(key=lambda r: r.line.number)
        if work.echo_secrets:
            # only the refused lines' echoes: a good line's handle stays as written
            reply.results = [r if r.ok else dataclasses.replace(r, text=redact(r.text, work.echo_secrets))
                             for r in reply.results]
        if self.settings.failpoint and mail.subject == self.settings.failpoint:
            raise RuntimeError(f"failpoint {self.settings.failpoint!r} reached")
        row.status = "done"
        return answer

    def _refuse_password(self, s: Session, row: InboxRow, mail: IncomingMail, work: CommandWork, reply: Reply,
                         now: datetime, facts: SubjectFacts) -> None:
        """The mail's password did not match (or was not checked): nothing is
        run, the reply says why, the audit log keeps it."""
        actor, route = work.actor, work.routed.route
        facts.bad_password = True
        if isinstance(route, ToGame | NewGameOf) and work.routed.game_lines:
            facts.head = route.name if isinstance(route, ToGame) else route.kind
        if work.sender.throttled:  # the throttle's note above says why
            reply.notes.append("The password in your mail was not checked; nothing was done.")
        elif actor.handle is None:
            reply.notes.append(f"No account is registered for {mail.from_addr}, so the password in your mail cannot be checked; nothing was done. Register first: mail \"register HANDLE PASSWORD\" to {self.settings.server_address}.")
        else:
            reply.notes.append(f"The password in your mail does not match the account {actor.handle} of {mail.from_addr}; "
                               f"nothing was done. Forgot it? Mail \"forgot {actor.handle}\" to "
                               f"{self.settings.server_address}: a code to set a new one comes back to this address.")
        audit(s, now, actor.handle or mail.from_addr, "bad password", f"mail {row.id} from {mail.from_addr}")

    def _run_lines(self, s: Session, row: InboxRow, mail: IncomingMail, work: CommandWork, answer: Answer,
                   now: datetime) -> None:
        """The mail's server lines, game lines and press run; sets where the
        reply comes from and its thread root."""
        actor, routed, reply = work.actor, work.routed, answer.reply
        # a mail makes at most PBM_MAX_NOTICES_PER_MAIL mails to addresses other than
        # its sender's, its pbm@ lines' and its game's together (the GM's: no limit)
        budget = None if actor.is_gm else NoticeBudget(self.settings.max_notices_per_mail)
        if routed.server_lines:
            verified = work.vouched.verified
            sctx = ServerContext(
                s, self.settings, self.composer, mail.from_addr, now, is_gm=actor.is_gm,
                handle=actor.handle, authenticated=actor.authenticated, mailer=self.mailer, secrets=work.secrets,
                verify=lambda acc, pw: verified.get((acc.handle_key, pw), False), budget=budget,
            )
            for line in routed.server_lines:
                reply.results.append(REGISTRY.run_line(sctx, line))
            reply.sections.extend(sctx.sections)
            for action, detail in sctx.audit:
                audit(s, now, actor.handle or mail.from_addr, action, detail)
        reply.results.extend(self._misdirected(routed))
        if routed.press_game is not None:  # mailed to a game: its answer comes from there, whatever the lines were
            answer.reply_from = answer.facts.head = routed.press_game
        if routed.game_lines or routed.check:
            answer.reply_from, answer.thread = self._run_game(s, row, work, reply, now, answer.facts, budget)
        if work.text.press and routed.check:
            reply.notes.append("CHECK: the press in this mail was not sent (a CHECK mail changes nothing).")
        elif work.text.press:
            answer.reply_from = self._press(s, row, work, reply, now, answer.facts) or answer.reply_from
        if answer.thread is None and routed.press_game is not None:
            # a mail to a game's address without game lines (press only, or pbm@
            # commands sent there): its reply is game mail too and names the
            # game's thread root first, as every mail of the game does
            game = find_game(s, routed.press_game)
            if game is not None:
                answer.thread = thread_root(self.settings.domain, game.name, game.id)

    def _misdirected(self, routed: Routed) -> list[Result]:
        """The pbm@ commands sent to a game's address (route.py): refused,
        saying where they go."""
        server, out = self.settings.server_address, []
        for line in routed.misdirected:
            words = line.text.split()
            cmd = REGISTRY.get(words[0])
            echo = cmd.echo(words) if cmd is not None and cmd.echo is not None else line.text
            out.append(Result(line, False, f"{words[0].lower()!r} is a command of {server}, not of the game "
                                           f"{routed.press_game}: mail it to {server}; nothing was done", echo))
        return out

    def _game_of(self, s: Session, routed: Routed, reply: Reply, now: datetime) -> Game | None:
        """The game the lines go to (made now for a new game's first mail);
        None, said in the reply, if it was removed after the mail was read."""
        route = routed.route
        if isinstance(route, NewGameOf):
            # another mail may have made it since this one was read
            return find_game(s, route.kind) or create_game(s, route.kind, route.kind, {}, None, now, actor="system")
        if isinstance(route, ToGame):
            found = find_game(s, route.name)
            if found is None:  # removed after the mail was read: a clear answer, not a shunt
                reply.notes.append(f"There is no game named {route.name} any more; nothing was done.")
            return found
        raise ValueError(f"game lines without a game route: {route!r}")

    def _run_game(self, s: Session, row: InboxRow, work: CommandWork, reply: Reply, now: datetime,
                  facts: SubjectFacts, budget: NoticeBudget | None) -> tuple[str, str | None]:
        """Run the mail's game lines; returns (the game's name, the thread
        root of the reply), and fills ``facts`` for the reply's Subject."""
        game = self._game_of(s, work.routed, reply, now)
        if game is None:
            return "pbm", None
        rules = get_rules(game.kind)
        reply.kind = game.kind
        row.game_id = game.id
        facts.game = True
        facts.head = game.name + (f" {rules.turn_name} {game.turn}" if rules.has_turns else "")
        commands = work.commands
        if game.status != "running":
            facts.halted = game.status
            for cmd in commands:
                reply.results.append(Result(cmd.line, False, f"{game.name} is {game.status}; nothing was done", cmd.text))
            return game.name, self._thread(game, rules, commands, [], facts)
        if rules.has_turns and not work.actor.is_gm and same_seed_hold(s, game):
            # ``turn rollback NAME N --same-seed``: the turn runs again with its
            # revealed seed, so it takes no orders (nor CHECKs) until it has run
            why = (f"{game.name} {rules.turn_name} {game.turn} was rolled back by the game master to run again with "
                   f"the same seed, which its report revealed: no orders are taken until {rules.turn_name} "
                   f"{game.turn} has run again; nothing was done")
            for cmd in commands:
                reply.results.append(Result(cmd.line, False, why, cmd.text))
            return game.name, self._thread(game, rules, commands, [], facts)
        # the game draws from its turn's random stream (moves.apply_commands);
        # the mail records which published stream that was
        row.seed = seed_hash(game.turn_seed)
        ctx = Context(
            # the time the listener accepted the mail: actions count in the
            # order (and at the moment) they were received, not processed
            now=row.received_at,
            rng=random.Random(0),  # replaced by the turn's stream in apply_commands
            actor=work.actor,
            turn=game.turn,
            game_name=game.name,
            emails=dict(work.vouched.emails),
        )
        if work.routed.check:  # CHECK: what would be accepted, nothing changed (ordercheck.py)
            return game.name, self._check(game, rules, commands, ctx, reply, facts)
        commands, waiting = hold_joins(s, game, rules, commands, work.actor, now)  # a full game's waiting list
        reply.results.extend(waiting)
        outcome = apply_commands(s, game, rules, commands, ctx, row.id, states=self.states)
        answered = {id(r.line) for r in outcome.results}
        results = list(outcome.results)
        for cmd in commands:
            if id(cmd.line) not in answered and not any(r.line == cmd.line for r in results):
                results.append(Result(cmd.line, cmd.ok, cmd.error or "no answer from the game", cmd.text))
        reply.results.extend(results)
        reply.sections.extend(outcome.sections)
        handle = work.actor.handle
        if rules.has_turns and handle:
            # the orders held: those this mail gave, else those read from the table
            held = outcome.orders.get(handle)
            if held is None:
                held = s.connection().execute(_HELD_ORDERS, {"game": game.id, "handle": handle, "turn": game.turn}).scalar()
            if held is not None:
                reply.orders = list(held)
                reply.order_title = f"The orders the server now holds for you for {rules.turn_name} {game.turn}"
        self.mailer.send_notices(s, game, rules, outcome.notices, now, inbound_id=row.id, secrets_=work.secrets,
                                 budget=budget)
        fill_seats(s, self.mailer, game, now)  # seats freed go to the waiting list (roster.py)
        readycheck.after_change(s, self.mailer, game, now)  # the last seat taken: the ready check begins
        withheld = budget.note() if budget is not None else None
        if withheld:
            reply.notes.append(withheld)
            row.note = withheld
        if rules.has_turns:  # the turn now open (a mail may have started the game)
            facts.head = f"{game.name} {rules.turn_name} {game.turn}"
        return game.name, self._thread(game, rules, commands, outcome.sections, facts)

    def _check(self, game: Game, rules: Rules[Any], commands: list[Command], ctx: Context, reply: Reply,
               facts: SubjectFacts) -> str:
        """A CHECK mail's lines tried on a copy of the game; the reply's thread root."""
        reply.results.extend(check_orders(rules, self.states.state(game), commands, ctx))
        reply.notes.append(CHECK_NOTE if commands else "CHECK: there were no lines below the CHECK line to check.")
        facts.head += " CHECK"
        return self._thread(game, rules, commands, [], facts)

    def _press(self, s: Session, row: InboxRow, work: CommandWork, reply: Reply, now: datetime,
               facts: SubjectFacts) -> str | None:
        """The mail's press blocks relayed to its game's players (press.py)."""
        press, press_game = work.text.press, work.routed.press_game
        if press_game is None:
            reply.results.extend(refuse_elsewhere(press, self.settings))
            return None
        game = find_game(s, press_game)
        if game is None:
            raise LookupError(f"the game {press_game} went away while the mail was handled")
        row.game_id = game.id
        if facts.head == SERVER_HEAD:  # a mail of press only: name its game
            facts.head = game.name
        players = get_rules(game.kind).players(self.states.state(game))
        relay = Relay(s, self.composer, self.settings, game, players, work.actor, now, row.id,
                      work.secrets | work.echo_secrets)
        reply.results.extend(relay.run(press))
        return game.name

    def _thread(self, game: Game, rules: Rules[Any], commands: list[Command], sections: list[Section],
                facts: SubjectFacts) -> str:
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
