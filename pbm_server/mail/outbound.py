"""The outbox: every mail the server sends is first a row in the same
transaction as the change that caused it, then delivered here.

Delivery goes to the relay (``PBM_RELAY``) or, without one, into a Maildir.  A
row is marked sent only after the relay accepted it.  What goes wrong is one of
two things (:func:`_judge`):

- the relay itself fails: it cannot be reached, its certificate is not
  trusted, it refuses our EHLO, STARTTLS, AUTH or envelope sender, or answers
  a recipient with its own policy ("Must issue a STARTTLS command first").
  That is the relay's configuration (or ours), not the mail's: every row stays
  pending and is retried with doubling delays however long it takes, and the
  GM is told once per outage through channels that do not need the relay (the
  log at ERROR and a notice in the Maildir ``PBM_MAILDIR``); "once" means: not
  again until a delivery has worked since (the audit log remembers it across
  restarts and servers);
- the relay judges one mail: a 5xx to its RCPT TO or DATA.  The row is marked
  failed and the GM is told by mail; a 4xx there is retried until the retry
  period ends, then failed the same way.

Each row keeps its Message-ID across retries, so the rare re-send after a crash
between "relay accepted" and "marked sent" is recognisable as the same mail.

Before delivering a row the deliverer claims it (``claimed_by``/``claimed_until``
in one UPDATE whose row count says whether it got it), so two servers on one
database never both send it.  If the outcome of a delivery cannot be written
(disk full), it is kept in memory and written later with backoff; the mail is
not sent again meanwhile.
"""

from __future__ import annotations

import logging
import mailbox
import os
import re
import signal
import smtplib
import socket
import ssl
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Integer, bindparam, func, or_, select
from sqlalchemy.orm import Session

from pbm_server.base import clock, logs
from pbm_server.base.durations import plain_number
from pbm_server.base.polling import Poller
from pbm_server.base.settings import Settings
from pbm_server.mail import bounces
from pbm_server.mail.compose import Composer, written_out
from pbm_server.mail.headers import is_plain_address
from pbm_server.mail.queues import RELAY_FAILS
from pbm_server.store.db import LOCK_OUTBOUND, Database, IdleMark
from pbm_server.store.lookup import audit
from pbm_server.store.models import AuditEntry, OutboundMail, table

log = logging.getLogger(__name__)

#: PBM_FAILPOINT "sigkill-after-relay:N" (see Outbound._failpoint_after_relay)
FAILPOINT_KILL_AFTER_RELAY = "sigkill-after-relay:"


def outbox_count(session: Session, kinds: str | tuple[str, ...], since: datetime, *, to_addr: str | None = None,
                 domain: str | None = None) -> int:
    """Outbox rows of ``kinds`` made at or after ``since``: to one address,
    to the addresses of one domain, or to anyone.  The rate limits of mails
    that proved nothing ask it inside their write transaction, so it reads
    through the index ix_outbox_kind_created (kind, created_at): only the
    last hour's rows of those kinds, however large the outbox has grown.

    Asked of every mail that proved no sender (a third of the worker's CPU
    on such mail when each ask built its statement and flushed the session):
    so three statements made once, run on the transaction's connection;
    rows added through the session and not yet written are flushed first."""
    if any(isinstance(o, OutboundMail) for o in session.new):
        session.flush()
    wanted = [kinds] if isinstance(kinds, str) else list(kinds)
    params: dict[str, Any] = {"kinds": wanted, "since": since}
    if to_addr is not None:
        statement, params["to_addr"] = _COUNT_TO, to_addr
    elif domain is not None:
        escaped = domain.replace("/", "//").replace("%", "/%").replace("_", "/_")
        statement, params["pattern"] = _COUNT_DOMAIN, f"%@{escaped}"
    else:
        statement = _COUNT_ALL
    return int(session.connection().execute(statement, params).scalar() or 0)


_COUNTED = table(OutboundMail)
_COUNT_ALL = select(func.count()).select_from(_COUNTED).where(
    _COUNTED.c.kind.in_(bindparam("kinds", expanding=True)), _COUNTED.c.created_at >= bindparam("since"))
_COUNT_TO = _COUNT_ALL.where(_COUNTED.c.to_addr == bindparam("to_addr"))
_COUNT_DOMAIN = _COUNT_ALL.where(_COUNTED.c.to_addr.like(bindparam("pattern"), escape="/"))


def enqueue(
    session: Session,
    *,
    to_addr: str,
    message_id: str,
    raw: bytes,
    kind: str,
    now: datetime,
    inbound_id: int | None = None,
    game_id: int | None = None,
) -> OutboundMail:
    row = OutboundMail(
        created_at=now,
        inbound_id=inbound_id,
        game_id=game_id,
        kind=kind,
        to_addr=to_addr,
        message_id=message_id,
        raw=raw,
        status="pending",
        attempts=0,
        next_attempt_at=now,
    )
    session.add(row)
    return row


def enqueue_one(session: Session, *, to_addr: str, message_id: str, raw: bytes, kind: str, now: datetime,
                inbound_id: int | None = None, game_id: int | None = None) -> None:
    """The same row as :func:`enqueue`, written at once with one plain INSERT
    on the transaction's connection and kept by no session: the worker's
    reply, one per mail."""
    session.connection().execute(_INSERT_ONE, {
        "created_at": now, "inbound_id": inbound_id, "game_id": game_id, "kind": kind, "to_addr": to_addr,
        "message_id": message_id, "raw": raw, "status": "pending", "attempts": 0, "next_attempt_at": now})


_OUT = table(OutboundMail)
_INSERT_ONE = _OUT.insert()
# delivery's own statements, made once (plain Core, bound parameters)
_FREE = or_(_OUT.c.claimed_until.is_(None), _OUT.c.claimed_until < bindparam("now"),
            _OUT.c.claimed_by == bindparam("me"))
_DUE = (select(_OUT.c.id).where(_OUT.c.status == "pending", _OUT.c.next_attempt_at <= bindparam("now"), _FREE,
                                _OUT.c.kind != "alert")  # alerts: mail/alerts.py posts them
        .order_by(_OUT.c.id).limit(bindparam("n", type_=Integer)))
#: any row still to relay, due or not (a pass that finds none may rest)
_ANY_PENDING = select(_OUT.c.id).where(_OUT.c.status == "pending", _OUT.c.kind != "alert").limit(1)
_CLAIM = (_OUT.update().where(_OUT.c.id.in_(bindparam("ids", expanding=True)), _OUT.c.status == "pending", _FREE)
          .values(claimed_by=bindparam("me"), claimed_until=bindparam("until", type_=_OUT.c.claimed_until.type)))
_MINE = (select(_OUT.c.id).where(_OUT.c.id.in_(bindparam("ids", expanding=True)), _OUT.c.status == "pending",
                                 _OUT.c.claimed_by == bindparam("me")).order_by(_OUT.c.id))
_ROWS = select(_OUT.c.id, _OUT.c.to_addr, _OUT.c.raw, _OUT.c.status, _OUT.c.kind, _OUT.c.game_id).where(
    _OUT.c.id.in_(bindparam("ids", expanding=True)))
_SENT = (_OUT.update().where(_OUT.c.id == bindparam("row_id"), _OUT.c.status == "pending")
         .values(status="sent", sent_at=bindparam("now", type_=_OUT.c.sent_at.type), last_error=None, attempts=_OUT.c.attempts + 1,
                 claimed_by=None, claimed_until=None))



def kill_once(settings: Settings) -> None:
    """A kill failpoint (PBM_FAILPOINT, rehearsals and the kill tests) fires:
    the process kills itself with SIGKILL, once per run of a test -- the file
    ``failpoint-fired`` beside PBM_MAILDIR records it, so the restarted
    process goes on."""
    fired = os.path.join(os.path.dirname(os.path.abspath(settings.maildir)), "failpoint-fired")
    try:
        os.close(os.open(fired, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)

class Pending(NamedTuple):
    """What delivery reads of an outbox row."""

    id: int
    to_addr: str
    raw: bytes
    status: str
    kind: str
    game_id: int | None


#: outbox kind of a reply to a mail that proved no password (PBM_UNAUTHENTICATED_REPLIES_PER_HOUR)
UNPROVEN_REPLY = "reply-unproven"


class PermanentFailure(Exception):
    """The relay's verdict on one mail (a 5xx to its RCPT TO or DATA): the row fails."""


class TemporaryFailure(Exception):
    """A 4xx to one mail's RCPT TO or DATA: retried until the retry period ends."""


class RelayFault(Exception):
    """The relay itself fails (unreachable, untrusted, its policy on our
    session): the row stays pending however old it is."""


class RelayMisconfigured(smtplib.SMTPException):
    """The relay and PBM_RELAY_* disagree (no STARTTLS, AUTH refused)."""


#: answers to RCPT TO or DATA that speak of our session, not of the recipient
#: (Postfix checks HELO, client and sender at RCPT TO: smtpd_delay_reject)
_SESSION_CODES = frozenset({421, 530, 534, 535, 538})
_SESSION_WORDS = re.compile(
    r"helo command rejected|client host rejected|sender address rejected|relay access denied|starttls|"
    r"authentication required|fully-qualified hostname", re.IGNORECASE)
#: what delivery does with a row after an attempt
SENT, KEEP, RETRY, FAIL = "sent", "keep", "retry", "fail"


def _answer(code: int, text: bytes | str) -> str:
    words = text.decode(errors="replace") if isinstance(text, bytes) else text
    return f"{code} {' '.join(words.split())}"


def _about_the_session(code: int, text: bytes | str) -> bool:
    words = text.decode(errors="replace") if isinstance(text, bytes) else text
    return code in _SESSION_CODES or _SESSION_WORDS.search(words) is not None


def _relay_fault(exc: BaseException, relay: str) -> RelayFault:
    """The relay itself failed: what happened, in the words an operator needs."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = (f"its TLS certificate was not accepted ({exc.verify_message or exc.reason}); the certificate must "
               f"be valid for the host in PBM_RELAY and signed by a CA this machine trusts (a private CA: "
               f"SSL_CERT_FILE=/path/ca.pem in the server's environment)")
    elif isinstance(exc, ssl.SSLError):
        why = f"TLS failed ({exc.reason or exc}); PBM_RELAY_TLS must match the port: starttls for 587, tls for 465"
    elif isinstance(exc, ConnectionRefusedError):
        why = "nothing accepts connections there (connection refused)"
    elif isinstance(exc, (TimeoutError, socket.timeout)):
        why = "it did not answer in time"
    elif isinstance(exc, RelayMisconfigured):
        why = str(exc)
    elif isinstance(exc, smtplib.SMTPHeloError):
        why = (f"it refused our greeting (EHLO) with {_answer(exc.smtp_code, exc.smtp_error)}; PBM_RELAY_EHLO_NAME "
               f"(default PBM_DOMAIN) must be a fully qualified name the relay accepts")
    elif isinstance(exc, smtplib.SMTPSenderRefused):
        why = f"it refused the envelope sender {exc.sender} with {_answer(exc.smtp_code, exc.smtp_error)}"
    elif isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()))
        why = f"it answered the recipient with its own policy: {_answer(code, text)}"
    elif isinstance(exc, smtplib.SMTPResponseException):
        why = f"it answered {_answer(exc.smtp_code, exc.smtp_error)}"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return RelayFault(f"the relay {relay} fails: {why}")


def _judge(exc: BaseException, relay: str) -> Exception:
    """What a failed send means: :class:`PermanentFailure` (this mail is
    refused), :class:`TemporaryFailure` (this mail, later) or
    :class:`RelayFault` (the relay, every mail)."""
    if isinstance(exc, (smtplib.SMTPRecipientsRefused, smtplib.SMTPDataError)):
        text: bytes | str
        if isinstance(exc, smtplib.SMTPRecipientsRefused):
            code, text = next(iter(exc.recipients.values()))
            what = "the recipient"
        else:
            code, text, what = exc.smtp_code, exc.smtp_error, "the mail (DATA)"
        if _about_the_session(code, text):
            return _relay_fault(exc, relay)
        if 500 <= code < 600:
            return PermanentFailure(f"the relay {relay} refused {what}: {_answer(code, text)}")
        return TemporaryFailure(f"the relay {relay} deferred {what}: {_answer(code, text)}")
    if isinstance(exc, smtplib.SMTPSenderRefused) and exc.smtp_code == 552:
        # Postfix answers a too large mail at MAIL FROM (SIZE=): a verdict on this mail
        return PermanentFailure(f"the relay {relay} refused the mail: {_answer(exc.smtp_code, exc.smtp_error)}")
    if isinstance(exc, (OSError, smtplib.SMTPException)):  # an SSL error is both OSError and ValueError
        return _relay_fault(exc, relay)
    if isinstance(exc, ValueError):  # something in this row smtplib cannot send: retrying cannot help
        return PermanentFailure(f"cannot be sent: {type(exc).__name__}: {exc}")
    raise exc


_LEADING_DOT = re.compile(rb"(?m)^\.")


def pipelines(smtp: smtplib.SMTP) -> bool:
    """The relay offers PIPELINING (RFC 2920; Postfix does)."""
    return bool(smtp.does_esmtp and smtp.has_extn("pipelining"))


def quoted(addr: str) -> str:
    """An address as smtplib.quoteaddr writes it in MAIL and RCPT, without
    its parse (about a tenth of a reply's delivery) for a plain address,
    which it writes as it is, in angle brackets."""
    return f"<{addr}>" if is_plain_address(addr) else smtplib.quoteaddr(addr)


class Stream:
    """Mails one after another over a relay session that offers PIPELINING
    (RFC 2920): a mail's MAIL, RCPT and DATA go in one write, after the
    text of the mail before it -- the standard lets a mail's text begin a
    group --, and the relay's answers to both are read together.  One write
    and one wait a mail instead of four of each one command at a time; on
    loopback each write also costs the relay a wake-up.

    What becomes of a mail is told as what smtplib raises for it (None: the
    relay took it), for the mail before with the next one's commands, and
    for the last one by :meth:`finish`."""

    def __init__(self, smtp: smtplib.SMTP):
        self.smtp = smtp
        #: the text of the mail whose DATA the relay took (354), not written yet
        self.text = b""

    @property
    def waiting(self) -> bool:
        """A mail's text waits to be written (with the next commands, or by :meth:`finish`)."""
        return bool(self.text)

    def send(self, sender: str, rcpt: str, raw: bytes,
             options: list[str]) -> tuple[BaseException | None, BaseException | None]:
        """This mail's commands written, after the waiting text: (what
        became of the mail before -- None also when none waited --, what
        became of this one's commands: None when the relay waits for its
        text, which then waits here).  Commands that cannot be written at
        all (a ValueError) leave the text before waiting."""
        smtp = self.smtp
        params = ([f"SIZE={len(raw)}"] if smtp.has_extn("size") else []) + options
        if "SMTPUTF8" in options:
            smtp.command_encoding = "utf-8"  # as smtplib does for it
        try:
            commands = (f"MAIL FROM:{quoted(sender)}{''.join(' ' + p for p in params)}\r\n"
                        f"RCPT TO:{quoted(rcpt)}\r\nDATA\r\n").encode(smtp.command_encoding)
        except ValueError as exc:  # nothing went out: the text before still waits
            return None, exc
        before, self.text = self.text, b""
        try:
            smtp.send(before + commands)
        except (OSError, smtplib.SMTPException) as exc:
            return (exc if before else None), exc
        earlier = self._taken() if before else None
        if earlier is not None and not isinstance(earlier, smtplib.SMTPResponseException):
            return earlier, earlier  # the session broke: no answer to this mail either
        try:
            mail, to, data = smtp.getreply(), smtp.getreply(), smtp.getreply()
            refused: smtplib.SMTPException | None = None
            if mail[0] != 250:
                refused = smtplib.SMTPSenderRefused(mail[0], mail[1], sender)
            elif to[0] not in (250, 251):
                refused = smtplib.SMTPRecipientsRefused({rcpt: to})
            elif data[0] != 354:
                refused = smtplib.SMTPDataError(data[0], data[1])
            if refused is not None:
                if data[0] == 354:  # it waits for the text all the same: an empty one ends it
                    smtp.send(b".\r\n")
                    smtp.getreply()
                _after_refusal(smtp, mail[0], to[0], data[0])
                return earlier, refused
        except (OSError, smtplib.SMTPException) as exc:
            return earlier, exc
        text = _LEADING_DOT.sub(b"..", raw)
        self.text = text + (b"" if text.endswith(b"\r\n") else b"\r\n") + b".\r\n"
        return earlier, None

    def finish(self) -> BaseException | None:
        """The waiting text written and the relay's answer read: what became
        of that mail (None: the relay took it, or none waited)."""
        text, self.text = self.text, b""
        if not text:
            return None
        try:
            self.smtp.send(text)
        except (OSError, smtplib.SMTPException) as exc:
            return exc
        return self._taken()

    def _taken(self) -> BaseException | None:
        """The answer to a mail's text: None if the relay took it."""
        try:
            code, answer = self.smtp.getreply()
        except (OSError, smtplib.SMTPException) as exc:
            return exc
        if code == 250:
            return None
        return smtplib.SMTPDataError(code, answer)  # a 421: the relay closes the session, the next read fails


def _after_refusal(smtp: smtplib.SMTP, *codes: int) -> None:
    """As smtplib leaves a session after a refusal: closed on a 421 (the
    relay is closing it), else reset for the next mail."""
    if 421 in codes:
        smtp.close()
        return
    try:
        smtp.rset()
    except (OSError, smtplib.SMTPException):
        smtp.close()


#: what an attempt's outcome is called in the log
_SAID = {SENT: "sent", KEEP: "kept (the relay fails)", RETRY: "to be tried again", FAIL: "refused by the relay"}


def _log_delivery(row: Pending, outcome: str, error: str | None, ms: float) -> None:
    """One line per delivery attempt: outbox id, recipient, kind, game, result, time."""
    log.info("mail out: outbox %s to %s (%s): %s%s, %.1f ms", row.id, row.to_addr, row.kind, _SAID[outcome],
             f": {error}" if error else "", ms,
             extra=logs.facts(event="mail out", outbox=row.id, recipient=row.to_addr, kind=row.kind,
                              game_id=row.game_id, result=outcome, error=error, ms=round(ms, 1)))


class Outbound(Poller):
    """Delivers pending outbox rows until stopped."""

    def __init__(self, db: Database, settings: Settings, on_failed: Callable[[Session, OutboundMail], None] | None = None):
        super().__init__(settings.poll_seconds)
        self.db = db
        self.settings = settings
        self.on_failed = on_failed  # callable(session, row) -> None: tell the GM
        #: whether a look found no row pending since the last commit (run_once)
        self.idle = IdleMark(db)
        #: rows a pass may take (``pbm serve`` takes one at a time while mail streams in)
        self.batch: Callable[[], int] = lambda: 100
        #: who claims rows: stable across a restart of this server (so it takes
        #: back its own claims at once), different for another server
        self.identity = f"{socket.gethostname()}|{settings.listen}"[:64]
        #: row id -> (error, outcome) of attempts the database would not take
        self._unrecorded: dict[int, tuple[str | None, str]] = {}
        self._db_failures = 0
        self._db_retry_at = 0.0
        #: the HMAC key of the return paths (read once)
        self._bounce_key: bytes | None = None
        #: the relay session (_deliver), kept between passes while mail flows
        self._smtp: smtplib.SMTP | None = None
        self._smtp_used = 0.0  # monotonic time it was last used
        #: the session's mails in a row, when the relay offers PIPELINING
        self._stream: Stream | None = None
        #: the row whose text waits to go with the next row's commands
        self._waiting: tuple[Pending, float] | None = None
        #: the GM knows that the relay fails (reset when a delivery works)
        self._outage_told = False
        self._composer: Composer | None = None

    # -- one delivery -------------------------------------------------------------
    def _deliver(self, row: Pending, sender: str, started: float) -> list[tuple[Pending, float, BaseException | None]]:
        """``sender``: the envelope sender, the row's own return path (bounces.py).
        The rows this settled, each with what became of it (None: the relay
        took it): this row, unless the relay waits for its text (a
        :class:`Stream`: it goes with the next row's commands, or when the
        pass ends, :meth:`_finish_stream`), and the row whose text went with
        this row's commands.  Each is judged by :func:`_judge` (what it means
        for the row) in :meth:`_outcome`.
        The relay session is kept for the rows that follow (one connection
        for a turn's hundreds of reports, and for a stream of replies), until
        it has been idle for KEEP_SECONDS; after an error of a row's own
        commands it is closed and the next row opens a new one."""
        relay = self.settings.relay_host_port
        if relay is None:
            try:
                box = mailbox.Maildir(self.settings.maildir, create=True)
                # as a delivering MTA would write it: where a bounce would go
                box.add((f"Return-Path: <{sender}>\r\n".encode() if sender else b"") + row.raw)
            except OSError as exc:
                return [(row, started, RelayFault(f"cannot write to the Maildir {self.settings.maildir}: {exc}"))]
            return [(row, started, None)]
        host, port = relay
        try:
            smtp = self._relay_session(host, port)
        except (OSError, ValueError, smtplib.SMTPException) as exc:
            self._end_session()
            return [(row, started, _relay_fault(exc, self._where()))]
        options: list[str] = []
        if not row.to_addr.isascii():
            if not smtp.has_extn("smtputf8"):
                return [(row, started, PermanentFailure(
                    f"{row.to_addr} has characters outside ASCII, and the relay {self._where()} does not offer "
                    f"SMTPUTF8 (RFC 6531), which mail to such an address needs; a relay that offers it would take it"))]
            options.append("SMTPUTF8")  # RFC 6531; the mail's bytes go as they are
        try:
            if not pipelines(smtp):
                try:
                    smtp.sendmail(sender, [row.to_addr], row.raw, mail_options=options)
                except (OSError, ValueError, smtplib.SMTPException) as exc:
                    self._end_session()
                    return [(row, started, exc)]
                return [(row, started, None)]
            if self._stream is None or self._stream.smtp is not smtp:
                self._stream = Stream(smtp)
            before = self._waiting
            earlier, mine = self._stream.send(sender, row.to_addr, row.raw, options)
        except BaseException:
            self._end_session()
            raise
        if mine is not None and self._stream.waiting:
            return [(row, started, mine)]  # this row cannot be written: the text before waits on
        self._waiting = None if mine is not None else (row, started)
        settled = [(*before, earlier)] if before is not None else []
        if mine is not None:
            self._end_session()
            settled.append((row, started, mine))
        return settled

    def _finish_stream(self) -> list[tuple[Pending, float, BaseException | None]]:
        """The text of the row that waits for the next row's commands,
        written now (the pass ends): that row and what became of it."""
        waiting, self._waiting = self._waiting, None
        if waiting is None or self._stream is None:
            return []
        try:
            taken = self._stream.finish()
        except BaseException:
            self._end_session()
            raise
        if taken is not None:
            self._end_session()
        return [(*waiting, taken)]

    #: a relay session idle this long is closed (a relay drops idle clients:
    #: Postfix's smtpd after 300 s, and its own cache keeps them 2 s)
    KEEP_SECONDS = 2.0
    #: how long a kept session may take to answer NOOP before a new one is opened
    NOOP_SECONDS = 5.0

    def _relay_session(self, host: str, port: int) -> smtplib.SMTP:
        if self._smtp is not None and self._waiting is None and time.monotonic() - self._smtp_used > 0.5:
            # kept from an earlier pass: still there?  (a NOOP costs one round
            # trip; a dead session costs the row a retry period)
            try:
                if self._smtp.sock is not None:
                    self._smtp.sock.settimeout(self.NOOP_SECONDS)  # a relay that went silent
                if self._smtp.noop()[0] != 250:
                    raise smtplib.SMTPServerDisconnected("NOOP refused")
                if self._smtp.sock is not None:
                    self._smtp.sock.settimeout(self._smtp.timeout)
            except (OSError, smtplib.SMTPException):
                self._smtp.close()
                self._smtp = None
        if self._smtp is None:
            self._smtp = self._connect(host, port)
        self._smtp_used = time.monotonic()
        return self._smtp

    def _end_idle_session(self) -> None:
        if self._smtp is not None and time.monotonic() - self._smtp_used > self.KEEP_SECONDS:
            self._end_session()

    def run(self, after_busy: Callable[[float], None] | None = None) -> None:
        try:
            super().run(after_busy)
        finally:
            self._end_session()

    def _end_session(self) -> None:
        """The relay session closed; a row whose text had not gone out is
        left claimed and unmarked: the next pass sends it."""
        self._stream, self._waiting = None, None
        smtp, self._smtp = self._smtp, None
        if smtp is None:
            return
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()

    def _connect(self, host: str, port: int) -> smtplib.SMTP:
        """A session with the relay, greeted with PBM_RELAY_EHLO_NAME (or the
        domain), secured as PBM_RELAY_TLS says and authenticated with
        PBM_RELAY_USER.  A relay that will not do what the settings ask fails
        itself (:class:`RelayFault`): the mail waits until the operator fixed it."""
        settings = self.settings
        name = settings.ehlo_name
        smtp: smtplib.SMTP
        if settings.relay_tls == "tls":
            smtp = smtplib.SMTP_SSL(host, port, local_hostname=name, timeout=30, context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(host, port, local_hostname=name, timeout=30)
        try:
            smtp.ehlo_or_helo_if_needed()  # SMTPHeloError when the relay refuses the name
            if settings.relay_tls == "starttls":
                if not smtp.has_extn("starttls"):
                    raise RelayMisconfigured("it does not offer STARTTLS (PBM_RELAY_TLS=starttls)")
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo_or_helo_if_needed()
            if settings.relay_user:
                try:
                    smtp.login(settings.relay_user, settings.relay_password())
                except smtplib.SMTPAuthenticationError as exc:
                    # never the password: only the relay's code and words
                    raise RelayMisconfigured(f"it refused AUTH for {settings.relay_user}: {exc.smtp_code}") from None
                except smtplib.SMTPNotSupportedError:
                    raise RelayMisconfigured("it offers no AUTH here (PBM_RELAY_USER is set)") from None
        except BaseException:
            smtp.close()
            raise
        return smtp

    # -- claims --------------------------------------------------------------------
    def _claim(self, row_ids: list[int], now: datetime) -> list[int]:
        """Take the rows for this deliverer, in one transaction: an UPDATE of
        those still pending and unclaimed (or whose claim expired, or ours from
        before a restart), then the ids that are now ours.  Two servers on one
        database -- SQLite or PostgreSQL -- so never both deliver a row.  Rows
        claimed but not reached in this pass stay ours; another server takes
        them only after the claim expired."""
        lease = timedelta(seconds=self.settings.outbound_claim_seconds)
        with self.db.write() as s:
            conn = s.connection()
            conn.execute(_CLAIM, {"ids": row_ids, "now": now, "me": self.identity, "until": now + lease})
            return list(conn.execute(_MINE, {"ids": row_ids, "me": self.identity}).scalars())

    def _record(self, row_id: int, error: str | None, outcome: str) -> None:
        """The outcome of one attempt (SENT, KEEP, RETRY or FAIL), in one
        transaction (frees the claim)."""
        self._record_all([(row_id, error, outcome)])

    def _record_all(self, outcomes: list[tuple[int, str | None, str]]) -> None:
        """The outcomes of several attempts in ONE transaction (one fsync for
        a relay session's run of replies).  KEEP (the relay failed) never
        gives a row up; RETRY does after PBM_RETRY_PERIOD_SECONDS."""
        with self.db.write(lock=LOCK_OUTBOUND) as s:
            now = clock.now()
            sent = [{"row_id": row_id, "now": now} for row_id, _, outcome in outcomes if outcome == SENT]
            if sent:  # the common case: one statement, run for each row
                s.connection().execute(_SENT, sent)
            for row_id, error, outcome in outcomes:
                if outcome != SENT:
                    self._record_failure(s, row_id, error, outcome, now)

    def _record_failure(self, s: Session, row_id: int, error: str | None, outcome: str, now: datetime) -> None:
        fresh = s.get(OutboundMail, row_id)
        if fresh is None or fresh.status != "pending":
            return
        fresh.attempts += 1
        fresh.claimed_by = fresh.claimed_until = None
        fresh.last_error = error
        expired = now - fresh.created_at >= timedelta(seconds=self.settings.retry_period_seconds)
        if outcome == FAIL or (outcome == RETRY and expired):
            fresh.status = "failed"
            log.warning("outbox %s to %s failed: %s", fresh.id, fresh.to_addr, error)
            if self.on_failed is not None:
                self.on_failed(s, fresh)
        else:
            fresh.next_attempt_at = now + timedelta(seconds=self._delay(fresh.attempts))

    def _hold(self, row_id: int) -> None:
        """The row's address is on hold (it bounced repeatedly): not sent."""
        with self.db.write(lock=LOCK_OUTBOUND) as s:
            fresh = s.get(OutboundMail, row_id)
            if fresh is None or fresh.status != "pending":
                return
            fresh.status = "held"
            fresh.claimed_by = fresh.claimed_until = None
            fresh.last_error = "not sent: the address is on hold (bounces); see pbm mail status"
        log.info("mail out: outbox %s to %s: held (the address bounced repeatedly)", row_id, fresh.to_addr,
                 extra=logs.facts(event="mail out", outbox=row_id, recipient=fresh.to_addr, result="held"))

    def _delay(self, attempts: int) -> float:
        delay: float = min(self.settings.retry_base_seconds * (2 ** (attempts - 1)), self.settings.retry_max_seconds)
        return delay

    def _db_failed(self, what: str) -> None:
        """The database refused a write (disk full, locked, gone): wait as for a
        failed delivery, doubling, before touching it again."""
        self._db_failures += 1
        delay = self._delay(self._db_failures)
        self._db_retry_at = time.monotonic() + delay
        log.exception("outbound: could not %s; next try in %.1f s", what, delay)

    def _record_unrecorded(self) -> bool:
        """Record attempts whose outcome could not be written; False if the
        database still refuses."""
        if not self._unrecorded:
            return True
        outcomes = [(row_id, error, outcome) for row_id, (error, outcome) in self._unrecorded.items()]
        try:
            self._record_all(outcomes)
        except Exception:
            self._db_failed(f"record the delivery of outbox rows {sorted(self._unrecorded)}")
            return False
        self._unrecorded.clear()
        return True

    def run_once(self, limit: int = 100) -> int:
        """Deliver what is due; returns how many rows were handled."""
        if time.monotonic() < self._db_retry_at:
            return 0
        # first the rows the relay accepted but we could not mark: never send them again
        if not self._record_unrecorded():
            return 0
        # nothing committed anywhere since a look found nothing pending at
        # all: nothing is due now either (SQLite; Database.change_mark)
        if self.idle.unchanged():
            self._end_idle_session()
            return 0
        now = clock.now()
        try:
            with self.db.read() as s:
                conn = s.connection()
                due = conn.execute(_DUE, {"now": now, "me": self.identity, "n": limit}).scalars().all()
                if not due and conn.execute(_ANY_PENDING).first() is None:
                    self.idle.found_nothing()
            mine = self._claim(list(due), clock.now()) if due else []
            held: set[str] = set()
            if mine:
                with self.db.read() as s:
                    if self._bounce_key is None:
                        self._bounce_key = bounces.read_key(s)
                    held = bounces.held_addresses(s)
        except Exception:
            self._db_failed("read and claim the outbox")
            return 0
        if not mine:
            self._end_idle_session()
            return 0
        return self._deliver_rows(mine, held)

    #: outbox rows read at once (their bytes are in memory together)
    READ_CHUNK = 20
    #: deliveries whose outcomes are written in one commit: a kill between
    #: the relay's 250 and that commit sends at most this many replies again
    MARK_BATCH = 20

    def _deliver_rows(self, mine: list[int], held: set[str]) -> int:
        """Deliver the claimed rows over the relay session; their outcomes are
        written together, MARK_BATCH at a time and at the end (also when a
        delivery fails and the pass stops)."""
        handled = 0
        rows: dict[int, Pending] = {}
        marks: list[tuple[Pending, str | None, str, float]] = []
        for n, row_id in enumerate(mine):  # the others: another server has them, or they are done
            if self._stop.is_set():
                break
            if n % self.READ_CHUNK == 0:
                chunk = mine[n:n + self.READ_CHUNK]
                try:
                    with self.db.read() as s:
                        rows = {r.id: Pending(*r) for r in s.connection().execute(_ROWS, {"ids": chunk})}
                except Exception:
                    self._db_failed(f"read outbox row {row_id}")
                    break
            row = rows.pop(row_id, None)
            if row is None or row.status != "pending":
                continue
            if row.to_addr.lower() in held:
                try:
                    self._hold(row_id)
                except Exception:
                    self._db_failed(f"hold outbox row {row_id}")
                    break
                handled += 1
                continue
            settled = self._attempt(row)
            handled += 1
            marks += settled
            self._failpoint_after_relay(marks)
            if any(outcome in (KEEP, RETRY) for _, _, outcome, _ in settled):
                # the relay is down: the other due rows would fail the same way
                break
            if len(marks) >= self.MARK_BATCH and not self._mark(marks):
                break
        marks += [self._outcome(*settled) for settled in self._finish_stream()]
        self._failpoint_after_relay(marks)
        self._mark(marks)
        return handled

    def _attempt(self, row: Pending) -> list[tuple[Pending, str | None, str, float]]:
        """One delivery begun: the rows it settled, each with (error,
        outcome, milliseconds) -- this row's, unless its text waits for the
        next row's commands, and the row's whose text went with them."""
        assert self._bounce_key is not None
        self.db.writer_idle()
        started = time.monotonic()
        try:
            row = row._replace(raw=written_out(row.raw))  # a reply kept as its parts (compose.py)
        except Exception as exc:  # our own parts: a fault of the server, never of the relay
            log.exception("outbox row %s could not be written out", row.id)
            return [(row, f"the server could not write this mail out ({type(exc).__name__})", FAIL, 0.0)]
        return [self._outcome(*settled) for settled in
                self._deliver(row, self.settings.address(
                    bounces.return_path(self._bounce_key, row.id, self.settings.domain).rpartition("@")[0]), started)]

    def _outcome(self, row: Pending, started: float, exc: BaseException | None) -> tuple[Pending, str | None, str, float]:
        """What became of a row, as delivery records it: (row, error, outcome, milliseconds)."""
        ms = (time.monotonic() - started) * 1000
        if exc is None:
            return row, None, SENT, ms
        judged = exc if isinstance(exc, (PermanentFailure, TemporaryFailure, RelayFault)) else _judge(exc, self._where())
        outcome = FAIL if isinstance(judged, PermanentFailure) else RETRY if isinstance(judged, TemporaryFailure) else KEEP
        return row, str(judged), outcome, ms

    def _where(self) -> str:
        relay = self.settings.relay_host_port
        return f"{relay[0]}:{relay[1]}" if relay else self.settings.maildir

    def _mark(self, marks: list[tuple[Pending, str | None, str, float]]) -> bool:
        """Write the outcomes gathered (and empty the list); False if the
        database refused: then they are kept in memory, the rows stay
        claimed, and the recording is retried with backoff -- never the
        deliveries (e.g. the disk filled right after the relay accepted)."""
        if not marks:
            return True
        outcomes = [(row.id, error, outcome) for row, error, outcome, _ in marks]
        try:
            self._record_all(outcomes)
        except Exception:
            self._unrecorded.update((row_id, (error, outcome)) for row_id, error, outcome in outcomes)
            self._db_failed(f"record the delivery of outbox rows {[o[0] for o in outcomes]}")
            marks.clear()
            return False
        self._db_failures = 0
        for row, error, outcome, ms in marks:
            _log_delivery(row, outcome, error, ms)
            if outcome == SENT and self._outage_told:
                self._outage_told = False
                log.info("the relay works again: the mail kept meanwhile goes out")
            elif outcome == KEEP:
                assert error is not None
                self._tell_relay_fault(error)
        marks.clear()
        return True

    def _failpoint_after_relay(self, marks: list[tuple[Pending, str | None, str, float]]) -> None:
        """PBM_FAILPOINT "sigkill-after-relay:N": killed (SIGKILL) once N
        replies were accepted by the relay and not yet marked -- the kill
        tests.  It fires once: the file ``failpoint-fired`` beside the Maildir
        PBM_MAILDIR records it (the restarted back end sends those N again)."""
        failpoint = self.settings.failpoint
        if not failpoint.startswith(FAILPOINT_KILL_AFTER_RELAY):
            return
        wanted = failpoint[len(FAILPOINT_KILL_AFTER_RELAY):]
        if sum(1 for m in marks if m[2] == SENT) < (plain_number(wanted) or 1):
            return
        kill_once(self.settings)

    def step(self) -> int:
        return self.run_once(limit=self.batch())

    # -- the relay fails: tell the GM once, without the relay -------------------------
    def _tell_relay_fault(self, error: str) -> None:
        """Once per outage: the log at ERROR and a notice to the GM in the
        Maildir PBM_MAILDIR.  Not again until a delivery has worked since the
        last notice -- also one written before a restart or by another server
        (the audit log's RELAY_FAILS lines)."""
        if self._outage_told:
            return
        self._outage_told = True
        try:
            with self.db.write(lock=LOCK_OUTBOUND) as s:
                told = s.scalar(select(AuditEntry.at).where(AuditEntry.action == RELAY_FAILS)
                                .order_by(AuditEntry.id.desc()).limit(1))
                if told is not None and s.scalar(
                        select(OutboundMail.id).where(OutboundMail.status.in_(("sent", "bounced")),
                                                      OutboundMail.sent_at > told).limit(1)) is None:
                    return  # told already, and nothing went out since
                now = clock.now()
                audit(s, now, "system", RELAY_FAILS, error)
                waiting = s.scalar(select(func.count()).select_from(OutboundMail)
                                   .where(OutboundMail.status == "pending")) or 0
        except Exception:
            self._outage_told = False  # the next failure tries again
            log.exception("outbound: could not record that the relay fails")
            return
        log.error("%s; the %d mail(s) waiting are kept and retried until it works (none is given up for this); "
                  "a notice for the GM is in the Maildir %s", error, waiting, self.settings.maildir)
        if self._composer is None:
            self._composer = Composer(self.settings)
        composer = self._composer
        what = "The relay fails: no mail goes out until it works again; none is lost."
        body = composer.render("server/gm_notice.txt", {"what": what, "details": [
            ("relay", self.settings.relay), ("error", error), ("mails waiting", str(waiting)),
            ("what happens", "every mail stays queued and is tried again with growing delays; "
                             "this notice is not repeated until a mail has gone out"),
        ]})
        _, raw = composer.message(to_addr=self.settings.gm_address or self.settings.server_address,
                                  to_name="game master", from_local="pbm", subject="pbm-server: the relay fails",
                                  body=body, auto="auto-generated", now=now)
        try:
            mailbox.Maildir(self.settings.maildir, create=True).add(raw)
        except OSError as exc:
            log.error("could not write the relay notice into the Maildir %s: %s", self.settings.maildir, exc)
