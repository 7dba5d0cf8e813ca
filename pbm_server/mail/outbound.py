"""The outbox: every mail the server sends is first a row in the same
transaction as the change that caused it, then delivered here.

Delivery goes to the relay (``PBM_RELAY``) or, without one, into a Maildir.  A
row is marked sent only after the relay accepted it; a refused or unreachable
relay means a retry with doubling delays, and after the retry period the row is
marked failed and the GM is told.  Each row keeps its Message-ID across retries,
so the rare re-send after a crash between "relay accepted" and "marked sent" is
recognisable as the same mail.

Before delivering a row the deliverer claims it (``claimed_by``/``claimed_until``
in one UPDATE whose row count says whether it got it), so two servers on one
database never both send it.  If the outcome of a delivery cannot be written
(disk full), it is kept in memory and written later with backoff; the mail is
not sent again meanwhile.
"""

from __future__ import annotations

import logging
import mailbox
import smtplib
import socket
import ssl
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import Integer, bindparam, func, or_, select
from sqlalchemy.orm import Session

from pbm_server.base import clock
from pbm_server.base.polling import Poller
from pbm_server.base.settings import Settings
from pbm_server.mail import bounces
from pbm_server.store.db import LOCK_OUTBOUND, Database
from pbm_server.store.models import OutboundMail, table

log = logging.getLogger(__name__)


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
_DUE = (select(_OUT.c.id).where(_OUT.c.status == "pending", _OUT.c.next_attempt_at <= bindparam("now"), _FREE)
        .order_by(_OUT.c.id).limit(bindparam("n", type_=Integer)))
_CLAIM = (_OUT.update().where(_OUT.c.id.in_(bindparam("ids", expanding=True)), _OUT.c.status == "pending", _FREE)
          .values(claimed_by=bindparam("me"), claimed_until=bindparam("until", type_=_OUT.c.claimed_until.type)))
_MINE = (select(_OUT.c.id).where(_OUT.c.id.in_(bindparam("ids", expanding=True)), _OUT.c.status == "pending",
                                 _OUT.c.claimed_by == bindparam("me")).order_by(_OUT.c.id))
_ROWS = select(_OUT.c.id, _OUT.c.to_addr, _OUT.c.raw, _OUT.c.status).where(
    _OUT.c.id.in_(bindparam("ids", expanding=True)))
_SENT = (_OUT.update().where(_OUT.c.id == bindparam("row_id"), _OUT.c.status == "pending")
         .values(status="sent", sent_at=bindparam("now", type_=_OUT.c.sent_at.type), last_error=None, attempts=_OUT.c.attempts + 1,
                 claimed_by=None, claimed_until=None))


class Pending(NamedTuple):
    """What delivery reads of an outbox row."""

    id: int
    to_addr: str
    raw: bytes
    status: str


#: outbox kind of a reply to a mail that proved no password (PBM_UNAUTHENTICATED_REPLIES_PER_HOUR)
UNPROVEN_REPLY = "reply-unproven"


def replies_sent_since(session: Session, to_addr: str, since: datetime) -> int:
    return session.scalar(
        select(func.count())
        .select_from(OutboundMail)
        .where(OutboundMail.to_addr == to_addr, OutboundMail.kind.in_(("reply", UNPROVEN_REPLY)),
               OutboundMail.created_at >= since)
    ) or 0


def unproven_replies_since(session: Session, since: datetime) -> int:
    """Replies to mails that proved no password, to anyone, since ``since``."""
    return session.scalar(
        select(func.count())
        .select_from(OutboundMail)
        .where(OutboundMail.kind == UNPROVEN_REPLY, OutboundMail.created_at >= since)
    ) or 0


class PermanentFailure(Exception):
    pass


class RelayMisconfigured(smtplib.SMTPException):
    """The relay and PBM_RELAY_* disagree (no STARTTLS, AUTH refused): retried."""


class Outbound(Poller):
    """Delivers pending outbox rows until stopped."""

    def __init__(self, db: Database, settings: Settings, on_failed: Callable[[Session, OutboundMail], None] | None = None):
        super().__init__(settings.poll_seconds)
        self.db = db
        self.settings = settings
        self.on_failed = on_failed  # callable(session, row) -> None: tell the GM
        #: rows a pass may take (``pbm serve`` takes one at a time while mail streams in)
        self.batch: Callable[[], int] = lambda: 100
        #: who claims rows: stable across a restart of this server (so it takes
        #: back its own claims at once), different for another server
        self.identity = f"{socket.gethostname()}|{settings.listen}"[:64]
        #: row id -> (error, permanent) of attempts the database would not take
        self._unrecorded: dict[int, tuple[str | None, bool]] = {}
        self._db_failures = 0
        self._db_retry_at = 0.0
        #: the HMAC key of the return paths (read once)
        self._bounce_key: bytes | None = None
        #: the relay session (_deliver), kept between passes while mail flows
        self._smtp: smtplib.SMTP | None = None
        self._smtp_used = 0.0  # monotonic time it was last used

    # -- one delivery -------------------------------------------------------------
    def _deliver(self, row: Pending, sender: str = "") -> None:
        """``sender``: the envelope sender, the row's own return path (bounces.py).
        The relay session is kept for the rows that follow (one connection
        for a turn's hundreds of reports, and for a stream of replies), until
        it has been idle for KEEP_SECONDS; after any error it is closed and the
        next row opens a new one."""
        relay = self.settings.relay_host_port
        if relay is None:
            box = mailbox.Maildir(self.settings.maildir, create=True)
            # as a delivering MTA would write it: where a bounce would go
            box.add((f"Return-Path: <{sender}>\r\n".encode() if sender else b"") + row.raw)
            return
        host, port = relay
        try:
            smtp = self._relay_session(host, port)
            options: list[str] = []
            if not row.to_addr.isascii() and smtp.has_extn("smtputf8"):
                options.append("SMTPUTF8")  # RFC 6531; the mail's bytes go as they are
            smtp.sendmail(sender, [row.to_addr], row.raw, mail_options=options)
        except BaseException as exc:
            self._end_session()
            if isinstance(exc, smtplib.SMTPRecipientsRefused):
                code = next(iter(exc.recipients.values()))[0]
                if 500 <= code < 600:
                    raise PermanentFailure(f"relay refused the recipient: {exc.recipients}") from exc
            elif isinstance(exc, RelayMisconfigured):
                log.warning("relay %s:%s: cannot deliver: see the outbox row's last_error", host, port)
            elif isinstance(exc, smtplib.SMTPResponseException) and 500 <= exc.smtp_code < 600:
                raise PermanentFailure(f"relay answered {exc.smtp_code} {exc.smtp_error!r}") from exc
            raise

    #: a relay session idle this long is closed (a relay drops idle clients:
    #: Postfix's smtpd after 300 s, and its own cache keeps them 2 s)
    KEEP_SECONDS = 2.0
    #: how long a kept session may take to answer NOOP before a new one is opened
    NOOP_SECONDS = 5.0

    def _relay_session(self, host: str, port: int) -> smtplib.SMTP:
        if self._smtp is not None and time.monotonic() - self._smtp_used > 0.5:
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
        PBM_RELAY_USER.  A relay that will not do what the settings ask is a
        temporary failure (the operator can fix it before the retry period ends)."""
        settings = self.settings
        name = settings.ehlo_name
        smtp: smtplib.SMTP
        if settings.relay_tls == "tls":
            smtp = smtplib.SMTP_SSL(host, port, local_hostname=name, timeout=30, context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(host, port, local_hostname=name, timeout=30)
        try:
            smtp.ehlo()
            if settings.relay_tls == "starttls":
                if not smtp.has_extn("starttls"):
                    raise RelayMisconfigured("the relay does not offer STARTTLS (PBM_RELAY_TLS=starttls)")
                smtp.starttls(context=ssl.create_default_context())
                smtp.ehlo()
            if settings.relay_user:
                try:
                    smtp.login(settings.relay_user, settings.relay_password())
                except smtplib.SMTPAuthenticationError as exc:
                    # never the password: only the relay's code and words
                    raise RelayMisconfigured(f"the relay refused AUTH for {settings.relay_user}: {exc.smtp_code}") from None
                except smtplib.SMTPNotSupportedError:
                    raise RelayMisconfigured("the relay offers no AUTH here (PBM_RELAY_USER is set)") from None
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

    def _record(self, row_id: int, error: str | None, permanent: bool) -> None:
        """The outcome of one attempt, in one transaction (frees the claim)."""
        with self.db.write(lock=LOCK_OUTBOUND) as s:
            now = clock.now()
            if error is None:  # the common case, in one statement
                s.connection().execute(_SENT, {"row_id": row_id, "now": now})
                return
            fresh = s.get(OutboundMail, row_id)
            if fresh is None or fresh.status != "pending":
                return
            fresh.attempts += 1
            fresh.claimed_by = fresh.claimed_until = None
            fresh.last_error = error
            expired = now - fresh.created_at >= timedelta(seconds=self.settings.retry_period_seconds)
            if permanent or expired:
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
        for row_id, (error, permanent) in list(self._unrecorded.items()):
            try:
                self._record(row_id, error, permanent)
            except Exception:
                self._db_failed(f"record the delivery of outbox row {row_id}")
                return False
            del self._unrecorded[row_id]
        return True

    def run_once(self, limit: int = 100) -> int:
        """Deliver what is due; returns how many rows were handled."""
        if time.monotonic() < self._db_retry_at:
            return 0
        # first the rows the relay accepted but we could not mark: never send them again
        if not self._record_unrecorded():
            return 0
        now = clock.now()
        try:
            with self.db.read() as s:
                due = s.connection().execute(_DUE, {"now": now, "me": self.identity, "n": limit}).scalars().all()
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

    def _deliver_rows(self, mine: list[int], held: set[str]) -> int:
        handled = 0
        rows: dict[int, Pending] = {}
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
            error: str | None = None
            permanent = False
            assert self._bounce_key is not None
            try:
                self._deliver(row, bounces.return_path(self._bounce_key, row.id, self.settings.domain))
            except PermanentFailure as exc:
                error, permanent = str(exc), True
            except ValueError as exc:  # e.g. a non-ASCII address smtplib cannot send to: retrying cannot help
                error, permanent = f"cannot be sent: {type(exc).__name__}: {exc}", True
            except (OSError, smtplib.SMTPException, socket.timeout) as exc:
                error = f"{type(exc).__name__}: {exc}"
            handled += 1
            try:
                self._record(row_id, error, permanent)
            except Exception:
                # e.g. the disk filled right after the relay accepted the mail:
                # keep the outcome in memory, keep the row claimed, and retry
                # the recording with backoff -- never the delivery
                self._unrecorded[row_id] = (error, permanent)
                self._db_failed(f"record the delivery of outbox row {row_id}")
                break
            self._db_failures = 0
            if error is not None and not permanent:
                # the relay is down: the other due rows would fail the same way
                break
        return handled

    def step(self) -> int:
        return self.run_once(limit=self.batch())
