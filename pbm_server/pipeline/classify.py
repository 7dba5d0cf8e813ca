"""The first stage of a mail's path: what kind of mail it is.

Before a line of it is read, every stored mail is one of five kinds: what came
back to a return path of ours (:class:`Bounce`), an abuse report
(:class:`AbuseReport`), a mail to postmaster@ (:class:`ToPostmaster`), an
automatic mail that must not be answered (:class:`Dropped`), or a mail whose
lines are read as commands (:class:`CommandMail`).  The worker
(pipeline/worker.py) handles each kind by its type; only a ``CommandMail`` goes on
to the sender's passwords, its route and its commands; :func:`read_commands`
says what such a mail says (its lines, its Subject, its passwords, its press).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from games.base import Line
from pbm_server.base.settings import Settings
from pbm_server.mail import bounces
from pbm_server.mail.mailtext import (
    IncomingMail,
    abuse_report,
    automatic_reason,
    command_lines,
    is_null_sender,
    split_passwords,
    subject_command,
)
from pbm_server.mail.replies import sent_mails
from pbm_server.play.press import PressBlock, extract

#: most passwords and pieces of passwords (the words after a stray $$) one mail
#: may carry: each is masked in everything the mail causes, at a cost of its
#: own (60,000 $$ marks stalled a back end for seconds)
MAX_SECRETS = 100


@dataclass(frozen=True)
class Bounce:
    """Sent to a return path of ours (``bounces+ID-TOKEN@``): never answered,
    no line read."""

    #: the outbox row the return path names, or -1 for a wrong (forged?) token
    outbox_id: int
    report: bounces.Report


@dataclass(frozen=True)
class AbuseReport:
    """An abuse report (ARF, RFC 5965) to an address of ours other than
    postmaster@: recorded, never answered."""

    summary: str


@dataclass(frozen=True)
class ToPostmaster:
    """Sent to postmaster@DOMAIN: forwarded to the GM, never answered."""

    #: the summary of the abuse report it is, if it is one (None: it is not)
    abuse: str | None = None


@dataclass(frozen=True)
class Dropped:
    """An automatic mail that must not be answered (mailtext.automatic_reason)."""

    reason: str


@dataclass(frozen=True)
class CommandMail:
    """Everything else: a mail whose lines are read and answered."""

    #: the local part of ours it went to: "pbm", or a game's name
    local: str


MailKind = Bounce | AbuseReport | ToPostmaster | Dropped | CommandMail


def our_locals(rcpts: Sequence[str], domain: str) -> list[str]:
    """The local parts (lower case) of the recipients at our domain."""
    at = "@" + domain.lower()
    return [r.lower().rsplit("@", 1)[0] for r in rcpts if r.lower().endswith(at)]


def classify(raw: bytes, envelope_from: str, rcpts: Sequence[str], mail: IncomingMail, settings: Settings,
             bounce_key: Callable[[], bytes]) -> MailKind:
    """The kind of the stored mail (``raw`` as received, with its envelope
    sender and its inbox row's recipients; ``mail``: it read by
    mailtext.read_mail).  ``bounce_key`` gives the HMAC key of the return
    paths: it is asked for only when the mail went to one.

    The intake stores one row per recipient (inbound.one_row_each), so
    ``rcpts`` names one address and the row is handled as mail to it; a row
    stored before that may name several: a return path among them, then
    postmaster, then the first counts."""
    ours = our_locals(rcpts, settings.domain)
    bounce_locals = [local for local in ours if bounces.is_bounce_local(local)]
    if bounce_locals:
        found = bounces.outbox_id_of(bounce_key(), bounce_locals[0])
        return Bounce(-1 if found is None else found, _report(raw, envelope_from, mail))
    # a mail beyond the caps (mail.unread) is never parsed again
    abuse = abuse_report(raw) if mail.content_type == "multipart/report" and mail.unread is None else None
    if "postmaster" in ours:
        return ToPostmaster(abuse)
    if abuse is not None:
        return AbuseReport(abuse)
    reason = automatic_reason(mail, envelope_from, settings.domain)
    if reason is None and settings.mailbox_address and (
            settings.internal_address(mail.from_addr) is not None
            or mail.headers.get("x-loop", "").strip().lower() == settings.server_address.lower()):
        reason = "from one of our own addresses (a loop)"  # the mailbox's addresses are ours too
    if reason:
        return Dropped(reason)
    return CommandMail(ours[0] if ours else "pbm")


def _report(raw: bytes, envelope_from: str, mail: IncomingMail) -> bounces.Report:
    """What a mail to a return path of ours says; one beyond the caps of
    mail/headers.py (nested too deeply ...) is not parsed again: not a bounce."""
    if mail.unread is not None:
        return bounces.Report("other", diagnostic=f"not read: {mail.unread}"[:200])
    try:
        return bounces.read_report(raw, is_null_sender(envelope_from))
    except RecursionError:
        return bounces.Report("other", diagnostic="not read: nested too deeply")


@dataclass
class CommandText:
    """What a command mail says: its command lines, its Subject as a
    candidate line, the passwords it carries, its press blocks, and what of
    it was not read (``notes``: said in the reply)."""

    lines: list[Line]
    #: the Subject as a command line (None: it is not one); whether it is
    #: read is the route's decision
    subject: Line | None
    #: every $$password$$ of the mail, in order (the first is the sender's)
    passwords: list[str]
    #: PRESS TO ... ENDPRESS blocks (press.py), never read as commands
    press: list[PressBlock]
    #: every password the mail carried: masked in whatever it causes
    secrets: set[str] = field(default_factory=set)
    #: words that may be a misplaced password but may just as well be a handle
    #: (the words after a stray $$, the userid of a failed `curio move` line):
    #: masked in the echo of the sender's own lines only, never elsewhere
    echo_secrets: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def read_commands(s: Session, mail: IncomingMail, domain: str) -> CommandText:
    """The command lines of a :class:`CommandMail` (quoted text of our own
    mails it answers left out), its Subject as a candidate line, its
    passwords and its press blocks.  A mail that was not read (beyond the
    caps of mail/headers.py, nested too deeply) has none of them: its reply
    says why."""
    if mail.unread is not None:
        return CommandText([], None, [], [], notes=[f"Your mail was not read: {mail.unread} Nothing was done."])
    answered = sent_mails(s, mail.references)  # our mails this one answers: their lines are never commands
    body, press, press_passwords = extract(mail.body, answered, domain)
    lines = command_lines(body, answered, domain)
    cut_after = getattr(lines, "cut_after", None)
    passwords, lines, stray = split_passwords(lines)
    passwords += press_passwords
    subject = subject_command(mail.subject, lines)
    if subject is not None:
        sub_passwords, sub_lines, sub_stray = split_passwords([subject])
        passwords += sub_passwords
        stray += sub_stray
        subject = sub_lines[0] if sub_lines else None
    fragments_of = [fragment for _, fragments in stray for fragment in fragments]
    carried = len(set(passwords) | set(fragments_of))
    if carried > MAX_SECRETS:
        return CommandText([], None, [], [], notes=[
            f"Your mail was not read: it holds {carried:,} passwords or pieces of passwords between $$ marks; at most "
            f"{MAX_SECRETS} are read. Nothing was done."])
    text = CommandText(lines, subject, passwords, press, secrets=set(passwords))
    for number, fragments in stray:
        # a $$ without its partner: the line may hold a password, so it is
        # neither read nor echoed, and its words are masked everywhere
        text.echo_secrets.update(fragments)
        where = "the Subject" if number == 0 else f"line {number}"
        text.notes.append(f"{where.capitalize()} has password marks without a partner and was not read; "
                          "write the password as $$password$$ on one line.")
    if cut_after is not None:
        text.notes.append(f"Only the first 300 command lines were read: lines after line {cut_after} were not read "
                          "as commands (a $$password$$ among them still counts).")
    if mail.html_only:
        text.notes.append("Your mail had no plain-text part; the server read its HTML part as text.")
    text.notes.extend(mail.notes)  # how the body was read (mailtext.unwrap)
    return text
