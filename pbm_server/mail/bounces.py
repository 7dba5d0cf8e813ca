"""Bounces: every mail the server sends carries a return path of its own, and
what comes back to it is read here.

* The envelope sender of outbox row N is ``bounces+N-TOKEN@DOMAIN`` (VERP),
  TOKEN the first 12 hex digits of HMAC-SHA256(key, "outbox:N").  The key is
  made by migration 0008 (32 random bytes, table ``server_secrets``), so every
  server on one database signs alike and nobody outside can make a valid
  bounce address: a forged bounce cannot put someone's address on hold.  The
  listener refuses a bounce address with a wrong token at RCPT (550), and
  ``pbm mail inject`` exits 67 for one.
* A mail to a valid bounce address is never answered (loop prevention).
  Only two kinds of mail count as a bounce and mark the outbox row
  ``bounced``: a delivery status notification (RFC 3464, multipart/report;
  report-type=delivery-status) with an ``Action: failed`` recipient, and a
  recognised MTA bounce without one (null envelope sender, and from
  MAILER-DAEMON or postmaster, or with a bounce Subject such as "Undelivered
  Mail Returned to Sender", or the opening words of qmail's or Exim's
  bounce text).  An auto-reply (RFC 3834 ``Auto-Submitted: auto-replied``,
  ``X-Autoreply``, ``Precedence: auto_reply``, an "Out of office" or
  vacation Subject) that an MTA or a mail client sends to the return path is
  never a bounce, whatever its envelope sender: a player on holiday is not
  held.  It, a report that only says ``delayed``, and anything else are
  recorded in the inbox note and change nothing.
* The bounce counts against the row's address (the outbox's, not what the
  report claims).  HOLD_AFTER bounces of different mails within HOLD_DAYS put
  the address on hold: nothing more is sent to it (outbox rows to it become
  ``held``), and the GM is told, naming the account and its games.  A mail
  from the address that proves it reads the server's mail there lifts the
  hold (pipeline/execute.py, :func:`hold_note`): one with the account's
  password, or a ``confirm``/``reset`` code mailed to it.  A mail that only
  says it is from there (anyone can write that From) does not.  ``pbm mail
  unhold`` lifts it too.
* The GM hears of bounces in a summary, at most one per
  ``PBM_GM_BOUNCE_NOTICE_SECONDS``: the first bounce after a quiet spell at
  once, later ones in the next summary (sent by the idle worker).  Bounces of
  mails to the GM are recorded but never reported to the GM (that could loop).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email import policy
from email.header import decode_header, make_header
from email.message import Message
from email.parser import BytesParser
from email.utils import parseaddr
from typing import Protocol

from sqlalchemy import bindparam, func, select, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session

from games.base import Result
from pbm_server.base import clock, logs
from pbm_server.base.settings import Settings
from pbm_server.mail.headers import clean_text
from pbm_server.store.db import Database
from pbm_server.store.lookup import account_by_email, audit, note_for_batch, noted_for_batch, server_key
from pbm_server.store.models import Bounce, Game, MailHold, Membership, OutboundMail, table

log = logging.getLogger(__name__)

#: an address bounced this many different mails within HOLD_DAYS: on hold
HOLD_AFTER = 3
HOLD_DAYS = 14
#: outbox kind of the GM's bounce summary, and of the notice that an address is on hold
SUMMARY_KIND = "gm-bounces"
HOLD_KIND = "gm-hold"
#: bounces listed in one summary (the rest are counted)
MAX_LISTED = 30
#: the idle worker looks for a due summary at most this often (seconds)
FLUSH_EVERY = 5.0

PREFIX = "bounces+"
TOKEN_LENGTH = 12
_LOCAL = re.compile(r"^bounces\+(\d{1,18})-([0-9a-f]{%d})$" % TOKEN_LENGTH)

KEY_NAME = "bounce_key"


def read_key(session: Session) -> bytes:
    """The HMAC key of the return paths (made by migration 0008; made here if
    someone removed it)."""
    return server_key(session, KEY_NAME)


def token(key: bytes, outbox_id: int) -> str:
    return hmac.new(key, f"outbox:{outbox_id}".encode(), hashlib.sha256).hexdigest()[:TOKEN_LENGTH]


def return_path(key: bytes, outbox_id: int, domain: str) -> str:
    """The envelope sender of outbox row ``outbox_id``."""
    return f"{PREFIX}{outbox_id}-{token(key, outbox_id)}@{domain}"


def is_bounce_local(local: str) -> bool:
    """A local part of the bounce form (valid or not)."""
    return local.lower().startswith(PREFIX)


def outbox_id_of(key: bytes, local: str) -> int | None:
    """The outbox row a bounce address names, if its token is right."""
    m = _LOCAL.match(local.lower())
    if m is None:
        return None
    row_id = int(m.group(1))
    return row_id if hmac.compare_digest(m.group(2), token(key, row_id)) else None


# -- reading what came back ------------------------------------------------------------------


#: Report.verdict of an auto-reply (RFC 3834) that came to a return path: never a bounce
AUTO_REPLY = "auto-reply"


@dataclass
class Report:
    """What a mail to a bounce address says."""

    #: failed: the mail was not delivered; delayed: not yet; auto-reply: an
    #: out-of-office answer; other: not a bounce
    verdict: str
    status: str = "unknown"
    diagnostic: str = ""


def _fields(part: Message) -> list[Message]:
    """The field blocks of a message/delivery-status part (per-message first)."""
    payload = part.get_payload()
    if isinstance(payload, list) and all(isinstance(p, Message) for p in payload):
        return list(payload)
    text = part.get_payload(decode=True) or b""
    blocks = re.split(rb"\r?\n\s*\r?\n", bytes(text).strip())
    return [BytesParser(policy=policy.compat32).parsebytes(b + b"\n\n", headersonly=True) for b in blocks if b.strip()]


#: Subjects of out-of-office and vacation answers, in the languages players write
_AUTO_SUBJECT = re.compile(
    r"out\s+of\s+(the\s+)?office|\bautomatic\s+reply\b|\bauto[- ]?(reply|response|antwort)\b|\bvacation\b"
    r"|\bon\s+holiday\b|\baway\s+from\s+(the\s+office|my\s+(e-?)?mail)|\babwesen|automatische\s+antwort"
    r"|r[ée]ponse\s+automatique|respuesta\s+autom[áa]tica|fuera\s+de\s+la\s+oficina|\bfr[åa]nvaro|\bferie\b",
    re.I)
#: Subjects MTAs give their own (non-RFC 3464) bounces
_BOUNCE_SUBJECT = re.compile(
    r"undeliver|returned\s+mail|mail\s+delivery\s+(failed|failure|system|subsystem)|delivery\s+(status\s+"
    r"notification\s+\(failure\)|failure|has\s+failed|failed)|failure\s+notice|non[- ]?delivery|nondeliverable"
    r"|could\s+not\s+be\s+delivered|mail\s+system\s+error|message\s+not\s+delivered|unzustellbar"
    r"|non\s+remis", re.I)
#: the From local parts of an MTA's own mail
_MTA_LOCALS = ("mailer-daemon", "mailer_daemon", "mail-daemon", "postmaster", "mdaemon")
#: how the body of a bounce without a report begins (qmail, Exim, sendmail)
_BOUNCE_BODY = re.compile(
    rb"this is the qmail-send program|created automatically by mail delivery software"
    rb"|the following addresses had permanent fatal errors|delivery to the following recipients? failed", re.I)


def _header(msg: Message, name: str) -> str:
    """A header field decoded (RFC 2047) and made one safe line."""
    value = msg.get(name)
    if value is None:
        return ""
    try:
        text = str(make_header(decode_header(str(value))))
    except Exception:  # a broken encoded word: the raw text
        text = str(value)
    return clean_text(text, limit=998)


def _declared_auto_reply(msg: Message) -> str | None:
    """The header by which an autoresponder calls its mail an auto-reply in
    so many words (``X-Autoreply``, ``Precedence: auto_reply``), or None."""
    for name in ("X-Autoreply", "X-Autorespond", "X-Autoresponse"):
        value = _header(msg, name)
        if value and value.lower() not in ("no", "false", "0"):
            return f"{name}: {value[:40]}"
    if _header(msg, "Precedence").lower() == "auto_reply":
        return "Precedence: auto_reply"
    return None


def _looks_auto_reply(msg: Message, subject: str) -> str | None:
    """An out-of-office Subject, or ``Auto-Submitted`` (RFC 3834; an MTA's
    bounce says it too, so this is asked after :func:`_mta_bounce`)."""
    if _AUTO_SUBJECT.search(subject):
        return f"Subject {subject[:80]!r}"
    auto = _header(msg, "Auto-Submitted").lower()
    if auto and not auto.startswith("no"):
        return f"Auto-Submitted: {auto[:40]}"
    return None


def _mta_bounce(msg: Message, raw: bytes, subject: str) -> bool:
    """Whether ``msg`` reads as an MTA's bounce in its own format."""
    sender = parseaddr(_header(msg, "From"))[1].lower()
    if sender.split("@", 1)[0] in _MTA_LOCALS:
        return True
    if _BOUNCE_SUBJECT.search(subject):
        return True
    return _BOUNCE_BODY.search(raw[:20_000]) is not None


def _delivery_status(part: Message, subject: str) -> Report:
    """A delivery-status part (RFC 3464): failed if any recipient failed,
    else delayed or something else."""
    failed: Report | None = None
    delayed = False
    diagnostic = ""
    for block in _fields(part)[1:] or _fields(part):
        action = str(block.get("Action", "")).strip().lower()
        status = clean_text(str(block.get("Status", "") or "")).split(" ")[0][:16] or "unknown"
        diagnostic = clean_text(str(block.get("Diagnostic-Code", "") or ""))
        if action == "failed" and failed is None:
            failed = Report("failed", status, diagnostic[:500] or subject)
        elif action == "delayed":
            delayed = True
    if failed is not None:
        return failed
    return Report("delayed" if delayed else "other", diagnostic=subject)


def _without_report(msg: Message, raw: bytes, subject: str, null_sender: bool) -> Report:
    """A mail without a delivery-status part: an auto-reply (never a bounce),
    an MTA's own bounce format (only with a null envelope sender), or
    something that is not a bounce."""
    mark = _declared_auto_reply(msg)
    if mark is not None:
        return Report(AUTO_REPLY, diagnostic=mark)
    if null_sender and _mta_bounce(msg, raw, subject):
        return Report("failed", "unknown", f"a bounce without a delivery-status report: {subject or '(no subject)'}")
    mark = _looks_auto_reply(msg, subject)
    if mark is not None:
        return Report(AUTO_REPLY, diagnostic=mark)
    if null_sender:
        return Report("other", diagnostic="a mail with a null sender that is neither a delivery-status report nor a "
                                          f"known bounce format: {subject or '(no subject)'}")
    return Report("other", diagnostic=f"not a bounce (from a real sender): {subject or '(no subject)'}")


def read_report(raw: bytes, null_sender: bool) -> Report:
    """What came back to a return path: a DSN (RFC 3464) read with the email
    package; else what :func:`_without_report` makes of it."""
    msg = BytesParser(policy=policy.compat32).parsebytes(raw)
    subject = _header(msg, "Subject")[:200]
    for part in msg.walk():
        if part.get_content_type() in ("message/delivery-status", "message/global-delivery-status"):
            return _delivery_status(part, subject)
    return _without_report(msg, raw, subject, null_sender)


# -- what a bounce changes ---------------------------------------------------------------------


def is_held(session: Session, address: str) -> bool:
    return session.get(MailHold, address.lower()) is not None


def held_addresses(session: Session) -> set[str]:
    return set(session.scalars(select(MailHold.address)))


def held_among(session: Session, addresses: list[str]) -> set[str]:
    """Those of ``addresses`` (lower case) that are on hold, in one query."""
    wanted = sorted({a.lower() for a in addresses})
    if not wanted:
        return set()
    return set(session.scalars(select(MailHold.address).where(MailHold.address.in_(wanted))))


def games_of(session: Session, address: str) -> list[str]:
    """Names of the games the account at ``address`` plays."""
    acc = account_by_email(session, address)
    if acc is None:
        return []
    return list(session.scalars(
        select(Game.name).join(Membership, Membership.game_id == Game.id)
        .where(Membership.account_id == acc.id, Membership.left_at.is_(None), Game.status != "finished")
        .order_by(Game.name).distinct()))


class TellGM(Protocol):
    """How a notice reaches the game master (``Worker.tell_gm``)."""

    def __call__(self, s: Session, what: str, details: list[tuple[str, str]], now: datetime, kind: str = "gm",
                 inbound_id: int | None = None) -> None: ...


class Bounces:
    """Records bounces, holds addresses, and tells the GM (rate-limited)."""

    def __init__(self, settings: Settings, tell_gm: TellGM):
        self.settings = settings
        self.tell_gm = tell_gm  # tell_gm(session, what, details, now, kind=..., inbound_id=...)
        self._next_flush = 0.0

    def handle(self, s: Session, outbox_id: int, report: Report, inbound_id: int, now: datetime) -> str:
        """One mail to a bounce address; returns the inbox note."""
        if report.verdict == AUTO_REPLY:
            return (f"an auto-reply ({report.diagnostic}) to the return path of outbox {outbox_id}: not a bounce, "
                    "not counted toward a hold; dropped, not answered")
        if report.verdict != "failed":
            return f"to the return path of outbox {outbox_id}: {report.verdict}: {report.diagnostic}; not answered"
        row = s.get(OutboundMail, outbox_id)
        if row is None:
            return f"bounce for outbox {outbox_id}, which no longer exists; not answered"
        if s.scalar(select(Bounce.id).where(Bounce.outbox_id == outbox_id)) is not None:
            return f"another bounce for outbox {outbox_id} (counted once); not answered"
        address = row.to_addr.lower()
        row.status = "bounced"
        row.bounced_at = now
        row.last_error = f"bounced: {report.status} {report.diagnostic}".strip()[:1000]
        to_gm = row.kind.startswith("gm")
        s.add(Bounce(at=now, outbox_id=outbox_id, address=address, status=report.status,
                     diagnostic=report.diagnostic[:1000] or "(none given)", inbound_id=inbound_id,
                     told_at=now if to_gm else None))  # the GM's own bounces are never reported to the GM
        s.flush()
        audit(s, now, "system", "bounce", f"outbox {outbox_id} to {address}: {report.status} {report.diagnostic[:200]}")
        note = f"bounce for outbox {outbox_id} to {address} ({report.status})"
        log.info("bounce: outbox %s to %s came back (%s %s)", outbox_id, address, report.status, report.diagnostic[:200],
                 extra=logs.facts(event="bounce", outbox=outbox_id, recipient=address, status=report.status,
                                  inbox=inbound_id))
        held = self._maybe_hold(s, address, now)
        if held:
            note += "; the address is now on hold"
        if not to_gm:
            self._summary_if_due(s, now)
        return note + "; not answered"

    def _maybe_hold(self, s: Session, address: str, now: datetime) -> bool:
        if is_held(s, address):
            return False
        if self.settings.gm_address and address == self.settings.gm_address.lower():
            return False  # the GM's address is never held: the GM would hear nothing more
        since = now - timedelta(days=HOLD_DAYS)
        recent = s.scalar(select(func.count()).select_from(Bounce).where(Bounce.address == address, Bounce.at >= since)) or 0
        if recent < HOLD_AFTER:
            return False
        reason = f"{recent} mails bounced within {HOLD_DAYS} days"
        s.add(MailHold(address=address, since=now, reason=reason))
        # what waits for it is not sent either
        s.execute(update(OutboundMail).where(OutboundMail.to_addr == address, OutboundMail.status == "pending")
                  .values(status="held", last_error="not sent: the address is on hold (bounces)")
                  .execution_options(synchronize_session=False))
        audit(s, now, "system", "hold", f"{address}: {reason}")
        log.info("hold: %s (%s); nothing more is sent to it until it writes", address, reason,
                 extra=logs.facts(event="hold", recipient=address, reason=reason))
        acc = account_by_email(s, address)
        games = games_of(s, address)
        who = f"{acc.handle} <{address}>" if acc else address
        self.tell_gm(
            s, f"{address} is on hold: mail to it bounced repeatedly.",
            [("player", who),
             ("bounces", reason),
             ("what happens", "the server sends nothing more to the address until a mail comes from it"),
             ("games", ", ".join(games) if games else "(none)"),
             ("what the player misses", "replies, reports and notices, until the hold is lifted"),
             ("lifted", "when a mail comes from the address, or by `pbm mail unhold " + address + "`")],
            now, kind=HOLD_KIND)
        return True

    # -- the GM's summary --------------------------------------------------------------------

    def _last_summary(self, s: Session) -> datetime | None:
        return s.scalar(select(func.max(OutboundMail.created_at)).where(OutboundMail.kind == SUMMARY_KIND))

    def _due(self, s: Session, now: datetime) -> bool:
        last = self._last_summary(s)
        return last is None or now - last >= timedelta(seconds=self.settings.gm_bounce_notice_seconds)

    def _untold(self, s: Session) -> list[Bounce]:
        return list(s.scalars(select(Bounce).where(Bounce.told_at.is_(None)).order_by(Bounce.id)))

    def _summary_if_due(self, s: Session, now: datetime) -> None:
        if self._due(s, now):
            self._summary(s, now)

    def flush(self, db: Database) -> None:
        """A due summary of bounces not yet told (the idle worker)."""
        if time.monotonic() < self._next_flush:
            return
        self._next_flush = time.monotonic() + FLUSH_EVERY
        now = clock.now()
        with db.read() as s:
            if not self._due(s, now) or s.scalar(select(Bounce.id).where(Bounce.told_at.is_(None)).limit(1)) is None:
                return
        with db.write() as s:
            if self._due(s, now):
                self._summary(s, now)

    def _summary(self, s: Session, now: datetime) -> None:
        rows = self._untold(s)
        if not rows:
            return
        for b in rows:
            b.told_at = now
        if not self.settings.gm_address:
            return
        held = held_addresses(s)
        what = (f"A mail to {rows[0].address} bounced." if len(rows) == 1
                else f"{len(rows)} mails bounced.")
        details = []
        for b in rows[:MAX_LISTED]:
            state = "; address on hold" if b.address in held else ""
            details.append((f"outbox {b.outbox_id}", f"to {b.address}: {b.status} {b.diagnostic[:200]}{state}"))
        if len(rows) > MAX_LISTED:
            details.append(("and", f"{len(rows) - MAX_LISTED} more (pbm mail status)"))
        hours = self.settings.gm_bounce_notice_seconds / 3600
        details.append(("hold", f"an address whose mails bounce {HOLD_AFTER} times within {HOLD_DAYS} days is held "
                                "(nothing more is sent to it) until it writes again"))
        details.append(("next summary", f"at most one such mail per {hours:g} hour(s); `pbm mail status` lists them all"))
        self.tell_gm(s, what, details, now, kind=SUMMARY_KIND)


_HELD = select(table(MailHold).c.address).where(table(MailHold).c.address == bindparam("address"))


#: commands whose success proves the sender reads mail the server sent to this address
CODE_COMMANDS = frozenset({"confirm", "reset", "unlock", "undo"})


def proves_code(results: Iterable[Result]) -> bool:
    """Did a line of a mail prove a code the server mailed (a ``confirm`` or
    ``reset`` line that worked)?"""
    for r in results:
        words = r.line.text.split(None, 1)
        if r.ok and words and words[0].lower() in CODE_COMMANDS:
            return True
    return False


def hold_note(s: Session, address: str, now: datetime, mail: str, proven: bool) -> str | None:
    """What the reply to a mail from ``address`` says of a hold on it (None:
    there is none).  The hold is lifted only if the mail ``proven`` its
    sender (a password or a code): a From is no proof, anyone can write it."""
    if _known_unheld(s, address) or s.connection().execute(_HELD, {"address": address.lower()}).first() is None:
        return None  # the common case: the batch's look, or one plain SELECT
    if proven:
        lift_hold(s, address, now, "system", f"{mail} came from it with a password or a code")
        return ("Mail from the server to your address had bounced, so it had stopped writing to you. "
                "Your mail shows the address works: you get the server's mail again from now on.")
    return ("Mail from the server to your address bounced repeatedly, so it is not writing to it. This mail did "
            "not change that: only a mail with your $$password$$ (or a confirm code) from this address does, "
            "since anyone can put an address in a From line.")


def look_ahead(s: Session, addresses: list[str]) -> None:
    """Which of a worker batch's senders are held, for all of them with one
    SELECT: :func:`hold_note` then asks nothing for them."""
    wanted = sorted({a.lower() for a in addresses if a})
    if wanted:
        held = set(s.connection().execute(_HELD_AMONG, {"addresses": wanted}).scalars())
        note_for_batch(s, _NOT_HELD, (a for a in wanted if a not in held))


def _known_unheld(s: Session, address: str) -> bool:
    """The batch's look says ``address`` is not held, and no hold made since
    is in the session (a hold is made only as an ORM object: _maybe_hold)."""
    key = address.lower()
    # not once: a sender writes to several games of a batch, and a hold is
    # made only as an ORM object, which the session shows
    if not noted_for_batch(s, _NOT_HELD, key, once=False):
        return False
    made = sa_inspect(MailHold).identity_key_from_primary_key((key,))
    return made not in s.identity_map and not any(isinstance(o, MailHold) for o in s.new)


#: Session.info key: the batch's senders known not to be held (look_ahead)
_NOT_HELD = "pbm_senders_not_held"
_HELD_AMONG = select(table(MailHold).c.address).where(
    table(MailHold).c.address.in_(bindparam("addresses", expanding=True)))


def lift_hold(s: Session, address: str, now: datetime, actor: str, why: str) -> bool:
    """Take ``address`` off hold; False if it was not held."""
    if s.connection().execute(_HELD, {"address": address.lower()}).first() is None:
        return False  # the common case, one plain SELECT
    hold = s.get(MailHold, address.lower())
    if hold is None:
        return False
    s.delete(hold)
    audit(s, now, actor, "unhold", f"{address.lower()}: {why}")
    return True
