"""The outbox: every mail the server sends is first a row in the same
transaction as the change that caused it, then delivered here.

Delivery goes to the relay (``PBM_RELAY``) or, without one, into a Maildir.  A
row is marked sent only after the relay accepted it; a refused or unreachable
relay means a retry with doubling delays, and after the retry period the row is
marked failed and the GM is told.  Each row keeps its Message-ID across retries,
so the rare re-send after a crash between "relay accepted" and "marked sent" is
recognisable as the same mail.
"""

from __future__ import annotations

import logging
import mailbox
import smtplib
import socket
from collections.abc import Callable
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from pbm_server import clock
from pbm_server.db import LOCK_OUTBOUND, Database
from pbm_server.models import OutboundMail
from pbm_server.polling import Poller
from pbm_server.settings import Settings

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


def replies_sent_since(session: Session, to_addr: str, since: datetime) -> int:
    return session.scalar(
        select(func.count())
        .select_from(OutboundMail)
        .where(OutboundMail.to_addr == to_addr, OutboundMail.kind == "reply", OutboundMail.created_at >= since)
    ) or 0


class PermanentFailure(Exception):
    pass


class Outbound(Poller):
    """Delivers pending outbox rows until stopped."""

    def __init__(self, db: Database, settings: Settings, on_failed: Callable[[Session, OutboundMail], None] | None = None):
        super().__init__(settings.poll_seconds)
        self.db = db
        self.settings = settings
        self.on_failed = on_failed  # callable(session, row) -> None: tell the GM
        #: rows a pass may take (``pbm serve`` takes one at a time while mail streams in)
        self.batch: Callable[[], int] = lambda: 100

    # -- one delivery -------------------------------------------------------------
    def _deliver(self, row: OutboundMail) -> None:
        relay = self.settings.relay_host_port
        if relay is None:
            box = mailbox.Maildir(self.settings.maildir, create=True)
            box.add(row.raw)
            return
        host, port = relay
        try:
            with smtplib.SMTP(host, port, timeout=30, local_hostname="pbm-server") as smtp:
                smtp.sendmail("", [row.to_addr], row.raw)
        except smtplib.SMTPRecipientsRefused as exc:
            code = next(iter(exc.recipients.values()))[0]
            if 500 <= code < 600:
                raise PermanentFailure(f"relay refused the recipient: {exc.recipients}") from exc
            raise
        except smtplib.SMTPResponseException as exc:
            if 500 <= exc.smtp_code < 600:
                raise PermanentFailure(f"relay answered {exc.smtp_code} {exc.smtp_error!r}") from exc
            raise

    @contextmanager
    def _claim(self, row_id: int):
        """PostgreSQL: hold a session advisory lock on the row while delivering it
        and marking it, so two servers sharing the database never both send it.
        The lock goes with the connection, so a crashed server frees it at once.
        (SQLite: one server per database file; nothing to claim.)"""
        if self.db.is_sqlite:
            yield True
            return
        with self.db.engine.connect() as conn:
            key = {"a": LOCK_OUTBOUND, "b": row_id}
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:a, :b)"), key).scalar())
            conn.commit()
            try:
                yield got
            finally:
                if got:
                    conn.execute(text("SELECT pg_advisory_unlock(:a, :b)"), key)
                    conn.commit()

    def run_once(self, limit: int = 100) -> int:
        """Deliver what is due; returns how many rows were handled."""
        now = clock.now()
        with self.db.read() as s:
            due = s.scalars(
                select(OutboundMail.id)
                .where(OutboundMail.status == "pending", OutboundMail.next_attempt_at <= now)
                .order_by(OutboundMail.id)
                .limit(limit)
            ).all()
        handled = 0
        for row_id in due:
            if self._stop.is_set():
                break
            with self._claim(row_id) as mine:
                if not mine:
                    continue  # another server is delivering it right now
                with self.db.read() as s:
                    row = s.get(OutboundMail, row_id)
                    if row is None or row.status != "pending":
                        continue
                error: str | None = None
                permanent = False
                try:
                    self._deliver(row)
                except PermanentFailure as exc:
                    error, permanent = str(exc), True
                except ValueError as exc:  # e.g. a non-ASCII address smtplib cannot send to: retrying cannot help
                    error, permanent = f"cannot be sent: {type(exc).__name__}: {exc}", True
                except (OSError, smtplib.SMTPException, socket.timeout) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                handled += 1
                with self.db.write(lock=LOCK_OUTBOUND) as s:
                    fresh = s.get(OutboundMail, row_id)
                    if fresh is None or fresh.status != "pending":
                        continue
                    now = clock.now()
                    fresh.attempts += 1
                    if error is None:
                        fresh.status = "sent"
                        fresh.sent_at = now
                        fresh.last_error = None
                        continue
                    fresh.last_error = error
                    expired = now - fresh.created_at >= timedelta(seconds=self.settings.retry_period_seconds)
                    if permanent or expired:
                        fresh.status = "failed"
                        log.warning("outbox %s to %s failed: %s", fresh.id, fresh.to_addr, error)
                        if self.on_failed is not None:
                            self.on_failed(s, fresh)
                    else:
                        delay = min(
                            self.settings.retry_base_seconds * (2 ** (fresh.attempts - 1)),
                            self.settings.retry_max_seconds,
                        )
                        fresh.next_attempt_at = now + timedelta(seconds=delay)
                if error is not None and not permanent:
                    # the relay is down: the other due rows would fail the same way
                    break
        return handled

    def step(self) -> int:
        return self.run_once(limit=self.batch())
