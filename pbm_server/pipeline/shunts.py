"""The GM's notices about shunted mail, rate-limited.

A sender who can make the worker fail on purpose must not be able to fill the
GM's mailbox: each shunted mail is recorded (inbox status ``shunted``, the
error in ``note``), and the GM gets at most one summary per
``gm_shunt_notice_seconds`` (default an hour) listing every mail shunted since
the previous summary.  The first shunt after a quiet spell is reported at once;
later ones wait for the next summary, which the idle worker sends when the
period is over.  Summaries are outbox rows of kind ``gm-shunts``, so the limit
holds across restarts and for every server on the database.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from pbm_server.base import clock
from pbm_server.base.settings import Settings
from pbm_server.mail.bounces import TellGM
from pbm_server.store.db import Database
from pbm_server.store.models import InboundMail, OutboundMail

KIND = "gm-shunts"
#: most mails listed in one summary (the rest are counted)
MAX_LISTED = 30
#: the idle worker looks for a due summary at most this often (seconds)
FLUSH_EVERY = 5.0


class ShuntNotices:
    def __init__(self, settings: Settings, tell_gm: TellGM):
        self.settings = settings
        self.tell_gm = tell_gm  # tell_gm(session, what, details, now, kind=...)
        self._next_flush = 0.0

    @staticmethod
    def _last(s: Session) -> OutboundMail | None:
        """The last summary (its inbound_id: the last mail it listed)."""
        return s.scalar(select(OutboundMail).where(OutboundMail.kind == KIND).order_by(OutboundMail.id.desc()).limit(1))

    def _due(self, s: Session, now: datetime) -> tuple[bool, OutboundMail | None]:
        last = self._last(s)
        return last is None or now - last.created_at >= timedelta(seconds=self.settings.gm_shunt_notice_seconds), last

    def shunted(self, s: Session, now: datetime) -> None:
        """A mail was just shunted (in session ``s``): summarise now if due."""
        due, last = self._due(s, now)
        if due:
            self._summary(s, now, last)

    def flush(self, db: Database) -> None:
        """Send a due summary of mails shunted since the last one (idle worker)."""
        if not self.settings.gm_address or time.monotonic() < self._next_flush:
            return
        self._next_flush = time.monotonic() + FLUSH_EVERY
        now = clock.now()
        with db.read() as s:
            due, last = self._due(s, now)
            if not due or last is None or not self._since(s, last):
                return
        with db.write() as s:
            due, last = self._due(s, now)
            if due and last is not None and self._since(s, last):
                self._summary(s, now, last)

    @staticmethod
    def _since(s: Session, last: OutboundMail | None) -> list[InboundMail]:
        q = select(InboundMail).where(InboundMail.status == "shunted")
        if last is not None:
            q = q.where(InboundMail.id > (last.inbound_id or 0))
        return list(s.scalars(q.order_by(InboundMail.id)))

    def _summary(self, s: Session, now: datetime, last: OutboundMail | None) -> None:
        rows = self._since(s, last)
        if not rows:
            return
        if len(rows) == 1:
            what = f"Mail {rows[0].id} could not be processed and was set aside (shunted)."
        else:
            what = f"{len(rows)} mails could not be processed and were set aside (shunted)."
        hours = self.settings.gm_shunt_notice_seconds / 3600
        details = []
        for row in rows[:MAX_LISTED]:
            error = (row.note or "").strip().splitlines()[-1:] or [""]
            details.append((f"mail {row.id}", f"from {row.mail_from}: {error[0][:200]}; resubmit: pbm mail retry {row.id}"))
        if len(rows) > MAX_LISTED:
            details.append(("and", f"{len(rows) - MAX_LISTED} more (pbm mail status)"))
        details.append(("next summary", f"at most one such mail per {hours:g} hour(s); `pbm mail status` lists them all"))
        self.tell_gm(s, what, details, now, kind=KIND, inbound_id=rows[-1].id)
