"""The Prometheus figures of ``/metrics``, read from the database.

The listener, the back ends and the HTTP side are separate processes (and may
be separate servers on one PostgreSQL), and every mail leaves its trace in the
inbox and outbox rows: when it came (``received_at``), when it was handled
(``processed_at``, its status), when its reply was queued (``created_at``) and
accepted by the relay (``sent_at``).  So the HTTP side follows those rows
instead of each process counting in its own memory, and the counters cover
every process and every server on the database.

:class:`Follower` reads, at each scrape, the rows that arrived since the last
one and those it saw unsettled before (a mail still waiting, a reply not yet
delivered): the cost of a scrape grows with the mail since the last scrape and
the queue, never with the size of the tables.  Counters start at zero when the
HTTP side starts, as a process's counters do; Prometheus's ``rate()`` takes
care of restarts.

Gauges (queue depths, the age of the oldest waiting mail) are read afresh on
each scrape through the status indexes (:func:`pbm_server.mail.queues.waiting`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from sqlalchemy import Column, Connection, Row, Table, func, select

from pbm_server.base import clock
from pbm_server.mail.queues import waiting
from pbm_server.store.db import Database
from pbm_server.store.models import InboundMail, OutboundMail, table

#: seconds from arrival to handled, and from queued to accepted by the relay
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0, 86400.0)
#: an id missing between two rows may be a transaction still open (PostgreSQL
#: hands out ids before commit): it is looked for this long, then forgotten
GAP_SECONDS = 60.0
#: ids missing at once beyond this are not looked for (a sequence jumped)
MAX_GAP = 1000
#: rows read per statement
CHUNK = 2000

Settled = Callable[[Row[Any]], None]


class Follower:
    """Follows the rows of one table from arrival until they settle (leave
    the ``waiting`` states), calling ``on_new`` once per row and
    ``on_settled`` once per row that settles while followed."""

    def __init__(self, tbl: Table, columns: Sequence[Column[Any]], waiting_states: frozenset[str],
                 on_new: Settled, on_settled: Settled):
        self.table = tbl
        self.id = tbl.c.id
        self.status = tbl.c.status
        self.columns = [self.id, self.status, *columns]
        self.waiting_states = waiting_states
        self.on_new = on_new
        self.on_settled = on_settled
        self.next_id: int | None = None
        #: rows seen waiting (counted as new already)
        self.open: set[int] = set()
        #: ids skipped between two rows: id -> when first missed (monotonic seconds)
        self.gaps: dict[int, float] = {}

    def begin(self, conn: Connection) -> None:
        """Start from now: what is already there is not counted as new, but
        what is waiting counts when it settles."""
        self.next_id = (conn.scalar(select(func.max(self.id))) or 0) + 1
        ids = conn.execute(select(self.id).where(self.status.in_(self.waiting_states))).scalars()
        self.open = {int(i) for i in ids}

    def poll(self, conn: Connection) -> None:
        if self.next_id is None:
            self.begin(conn)
            return
        mono = time.monotonic()
        earlier = sorted(self.open | self.gaps.keys())
        self._read_new(conn, mono)
        self._recheck(conn, earlier, mono)

    def _take(self, row: Row[Any], new: bool) -> None:
        if new:
            self.on_new(row)
        if row.status in self.waiting_states:
            self.open.add(row.id)
        else:
            self.open.discard(row.id)
            self.on_settled(row)

    def _read_new(self, conn: Connection, mono: float) -> None:
        assert self.next_id is not None
        while True:
            rows = conn.execute(select(*self.columns).where(self.id >= self.next_id)
                                .order_by(self.id).limit(CHUNK)).all()
            for row in rows:
                if 0 < row.id - self.next_id <= MAX_GAP:
                    self.gaps.update(dict.fromkeys(range(self.next_id, row.id), mono))
                self._take(row, new=True)
                self.next_id = row.id + 1
            if len(rows) < CHUNK:
                return

    def _recheck(self, conn: Connection, ids: list[int], mono: float) -> None:
        """The rows seen waiting, and the ids missed, of earlier scrapes."""
        for start in range(0, len(ids), CHUNK):
            for row in conn.execute(select(*self.columns).where(self.id.in_(ids[start:start + CHUNK]))).all():
                # a missed id that is there now was a transaction still open: new
                self._take(row, new=self.gaps.pop(row.id, None) is not None)
        for missing, since in list(self.gaps.items()):
            if mono - since > GAP_SECONDS:
                del self.gaps[missing]


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


class MailMetrics:
    """The registry behind ``/metrics``: one per HTTP side."""

    def __init__(self, db: Database):
        self.db = db
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.received = Counter("pbm_mail_received", "Mails stored by the listener (one per recipient of ours)",
                                registry=r)
        self.handled = Counter("pbm_mail_handled", "Mails handled by a worker, by result "
                               "(done, dropped, duplicate, shunted)", ["result"], registry=r)
        self.handling = Histogram("pbm_mail_handling_seconds", "From a mail's arrival to the end of its handling "
                                  "(time queued included)", buckets=LATENCY_BUCKETS, registry=r)
        self.queued = Counter("pbm_mail_queued", "Mails the server queued to send, by kind", ["kind"], registry=r)
        self.delivered = Counter("pbm_mail_delivered", "Outbox mails settled, by result (sent, failed, held)",
                                 ["result"], registry=r)
        self.delivery = Histogram("pbm_mail_delivery_seconds", "From a mail's queueing to the relay's acceptance",
                                  buckets=LATENCY_BUCKETS, registry=r)
        self.gauges = {
            name: Gauge(name, text, registry=r) for name, text in (
                ("pbm_inbox_waiting", "Mails stored and not yet handled"),
                ("pbm_inbox_shunted", "Mails set aside after an error (pbm mail retry ID)"),
                ("pbm_outbox_pending", "Mails queued and not yet accepted by the relay"),
                ("pbm_outbox_failed", "Mails given up (pbm mail retry --outbox)"),
                ("pbm_outbox_held", "Mails not sent because their address is on hold"),
                ("pbm_mail_holds", "Addresses on hold for bounces"),
                ("pbm_inbox_oldest_waiting_seconds", "Age of the oldest mail not yet handled (0: none)"),
                ("pbm_outbox_oldest_pending_seconds", "Age of the oldest mail not yet delivered (0: none)"),
            )
        }
        self._lock = threading.Lock()
        inbox, outbox = table(InboundMail), table(OutboundMail)
        self.inbox = Follower(inbox, [inbox.c.received_at, inbox.c.processed_at], frozenset({"new"}),
                              lambda row: self.received.inc(), self._handled)
        self.outbox = Follower(outbox, [outbox.c.kind, outbox.c.created_at, outbox.c.sent_at],
                               frozenset({"pending"}), lambda row: self.queued.labels(row.kind).inc(), self._settled)

    def _handled(self, row: Row[Any]) -> None:
        self.handled.labels(row.status).inc()
        took = _seconds(row.received_at, row.processed_at)
        if took is not None:
            self.handling.observe(took)

    def _settled(self, row: Row[Any]) -> None:
        result = "sent" if row.status == "bounced" else row.status  # bounced: sent, and a bounce came back
        self.delivered.labels(result).inc()
        took = _seconds(row.created_at, row.sent_at)
        if result == "sent" and took is not None:
            self.delivery.observe(took)

    def refresh(self) -> None:
        with self._lock, self.db.read() as s:
            conn = s.connection()
            self.inbox.poll(conn)
            self.outbox.poll(conn)
            now = clock.now()
            w = waiting(s)
        values = {
            "pbm_inbox_waiting": w.inbox_new, "pbm_inbox_shunted": w.inbox_shunted,
            "pbm_outbox_pending": w.outbox_pending, "pbm_outbox_failed": w.outbox_failed,
            "pbm_outbox_held": w.outbox_held, "pbm_mail_holds": w.holds,
            "pbm_inbox_oldest_waiting_seconds": _seconds(w.oldest_new_at, now) or 0.0,
            "pbm_outbox_oldest_pending_seconds": _seconds(w.oldest_pending_at, now) or 0.0,
        }
        for name, value in values.items():
            self.gauges[name].set(value)

    def exposition(self) -> bytes:
        """Read the database, then the registry in Prometheus's text format."""
        self.refresh()
        return generate_latest(self.registry)
