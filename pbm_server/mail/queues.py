"""Why mail waits: the state of the inbox and outbox as an operator asks for
it (`pbm mail status`, its ``--json``, and the HTTP side's ``/healthz``).

Every figure is read from the database, so it covers every back end and every
server sharing it.  The counts by state scan the tables (fine for a command
run by hand); what the HTTP side reads on each request uses the status
indexes only (:func:`waiting`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pbm_server.store.models import AuditEntry, InboundMail, MailboxState, MailHold, OutboundMail

#: the audit action outbound delivery writes once per relay outage
RELAY_FAILS = "relay fails"
#: how many rows each list of problems shows (the counts say how many there are)
SHOWN = 10


@dataclass(frozen=True)
class Problem:
    """One mail that needs a look: a shunted inbox row, a failed, retrying or
    bounced outbox row."""

    table: str
    id: int
    address: str
    at: datetime | None
    error: str
    attempts: int = 0
    next_attempt_at: datetime | None = None


@dataclass(frozen=True)
class Waiting:
    """What waits, from the status indexes: cheap enough for every request."""

    inbox_new: int
    inbox_shunted: int
    outbox_pending: int
    outbox_failed: int
    outbox_held: int
    holds: int
    #: the oldest mail not yet handled, and the oldest not yet delivered
    oldest_new_at: datetime | None
    oldest_pending_at: datetime | None


@dataclass(frozen=True)
class Relay:
    """What the relay last did: the last mail it accepted, the last fault."""

    relay: str
    last_accepted_at: datetime | None
    last_accepted_id: int | None
    last_fault_at: datetime | None
    last_fault: str | None

    @property
    def failing(self) -> bool:
        """A fault was reported, and no mail has gone out since."""
        return self.last_fault_at is not None and (
            self.last_accepted_at is None or self.last_accepted_at < self.last_fault_at)


@dataclass(frozen=True)
class Mailbox:
    """The IMAP mailbox the server reads (PBM_IMAP_URL): when it was last
    read, and since when and why it fails (running/mailbox.py)."""

    mailbox: str
    last_read_at: datetime | None
    fault_since: datetime | None
    fault: str | None


def mailbox_state(session: Session) -> Mailbox | None:
    """The mailbox's state row, if the server reads one (the newest read)."""
    row = session.scalars(select(MailboxState).order_by(MailboxState.last_read_at.desc()).limit(1)).first()
    return None if row is None else Mailbox(row.mailbox, row.last_read_at, row.fault_since, row.fault)


@dataclass(frozen=True)
class QueueStatus:
    inbox: dict[str, int]
    outbox: dict[str, int]
    waiting: Waiting
    relay: Relay
    shunted: list[Problem] = field(default_factory=list)
    failed: list[Problem] = field(default_factory=list)
    retrying: list[Problem] = field(default_factory=list)
    bounced: list[Problem] = field(default_factory=list)
    holds: list[tuple[str, datetime, str]] = field(default_factory=list)
    mailbox: Mailbox | None = None

    def as_json(self) -> dict[str, Any]:
        """Plain JSON types: times as ISO 8601 strings."""
        out: dict[str, Any] = _jsonable(asdict(self) | {"relay": asdict(self.relay) | {"failing": self.relay.failing}})
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _count(session: Session, model: type[InboundMail] | type[OutboundMail], status: str) -> int:
    return session.scalar(select(func.count()).select_from(model).where(model.status == status)) or 0


def waiting(session: Session) -> Waiting:
    oldest_new = session.scalar(select(InboundMail.received_at).where(InboundMail.status == "new")
                                .order_by(InboundMail.id).limit(1))
    oldest_pending = session.scalar(select(func.min(OutboundMail.created_at)).where(OutboundMail.status == "pending"))
    return Waiting(
        inbox_new=_count(session, InboundMail, "new"),
        inbox_shunted=_count(session, InboundMail, "shunted"),
        outbox_pending=_count(session, OutboundMail, "pending"),
        outbox_failed=_count(session, OutboundMail, "failed"),
        outbox_held=_count(session, OutboundMail, "held"),
        holds=session.scalar(select(func.count()).select_from(MailHold)) or 0,
        oldest_new_at=oldest_new,
        oldest_pending_at=oldest_pending,
    )


def relay_state(session: Session, relay: str) -> Relay:
    last = session.execute(select(OutboundMail.sent_at, OutboundMail.id).where(OutboundMail.sent_at.is_not(None))
                           .order_by(OutboundMail.sent_at.desc(), OutboundMail.id.desc()).limit(1)).first()
    fault = session.execute(select(AuditEntry.at, AuditEntry.detail).where(AuditEntry.action == RELAY_FAILS)
                            .order_by(AuditEntry.id.desc()).limit(1)).first()
    # a row still pending with an error holds the relay's newest answer, if it is newer than the audit line
    newest = session.execute(select(OutboundMail.next_attempt_at, OutboundMail.last_error)
                             .where(OutboundMail.status == "pending", OutboundMail.last_error.is_not(None))
                             .order_by(OutboundMail.id.desc()).limit(1)).first()
    fault_at, fault_text = (fault[0], fault[1]) if fault is not None else (None, None)
    if newest is not None and fault_at is not None and (last is None or last[0] is None or last[0] < fault_at):
        fault_text = newest[1]
    return Relay(relay=relay or "(none: the Maildir)", last_accepted_at=last[0] if last else None,
                 last_accepted_id=last[1] if last else None, last_fault_at=fault_at, last_fault=fault_text)


def _last_line(note: str | None) -> str:
    lines = (note or "").strip().splitlines()
    return lines[-1] if lines else ""


def _outbox_problems(session: Session, *where: Any) -> list[Problem]:
    rows = session.scalars(select(OutboundMail).where(*where).order_by(OutboundMail.id.desc()).limit(SHOWN)).all()
    return [Problem("outbox", r.id, r.to_addr, r.sent_at or r.created_at, r.last_error or "", r.attempts,
                    r.next_attempt_at if r.status == "pending" else None) for r in reversed(rows)]


def queue_status(session: Session, relay: str) -> QueueStatus:
    """Everything `pbm mail status` shows."""
    counts = {}
    for model, label in ((InboundMail, "inbox"), (OutboundMail, "outbox")):
        rows = session.execute(select(model.status, func.count()).group_by(model.status).order_by(model.status)).all()
        counts[label] = {str(st): int(n) for st, n in rows}
    shunted = session.scalars(select(InboundMail).where(InboundMail.status == "shunted")
                              .order_by(InboundMail.id.desc()).limit(SHOWN)).all()
    return QueueStatus(
        inbox=counts["inbox"],
        outbox=counts["outbox"],
        waiting=waiting(session),
        relay=relay_state(session, relay),
        shunted=[Problem("inbox", r.id, r.mail_from, r.processed_at or r.received_at, _last_line(r.note))
                 for r in reversed(shunted)],
        failed=_outbox_problems(session, OutboundMail.status == "failed"),
        retrying=_outbox_problems(session, OutboundMail.status == "pending", OutboundMail.last_error.is_not(None)),
        bounced=_outbox_problems(session, OutboundMail.status == "bounced"),
        holds=[(h.address, h.since, h.reason) for h in session.scalars(select(MailHold).order_by(MailHold.address))],
        mailbox=mailbox_state(session),
    )
