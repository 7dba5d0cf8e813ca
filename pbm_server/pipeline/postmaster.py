"""Mail to postmaster@DOMAIN, forwarded to the GM within limits.

RFC 5321 makes a server take mail to postmaster, and anyone may send it: five
mails of 900 KB once reached the GM whole, and nothing bounded how many.
Here each forward carries at most the mail's first 64 KB (:data:`FORWARD_BYTES`;
the notice says when it was cut), and at most ``PBM_POSTMASTER_FORWARDS_PER_HOUR``
(default 20) are forwarded in any hour.  A mail beyond that stays in the inbox
(``pbm mail status``; its note says it was not forwarded); the GM gets one short
notice when the first one is held back in an hour, and the next mail forwarded
says how many were not.  The sender is never answered.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pbm_server.base.settings import Settings
from pbm_server.mail.compose import Composer
from pbm_server.mail.headers import clean_text
from pbm_server.mail.mailtext import IncomingMail, mask_unpaired
from pbm_server.mail.outbound import outbox_count
from pbm_server.play.notices import forward_to_gm, tell_gm
from pbm_server.store.models import InboundMail, OutboundMail

#: outbox kind of a mail to postmaster@DOMAIN forwarded to the GM
KIND = "gm-postmaster"
#: outbox kind of the GM's notice that forwards are being held back
HELD_KIND = "gm-postmaster-hd"  # outbox.kind holds 16 characters
#: the most of a mail forwarded
FORWARD_BYTES = 64 * 1024
#: how the inbox note of a mail not forwarded begins
NOT_FORWARDED = "to postmaster: not forwarded to the GM"


class Row(Protocol):
    """The inbox row in hand (pipeline/execute.py's InboxRow)."""

    id: int
    mail_from: str
    received_at: datetime

    def raw(self, s: Session) -> bytes: ...


def _not_forwarded_since_last(s: Session) -> int:
    """Mails to postmaster held back since the last one forwarded."""
    # the newest forward, read through ix_outbox_kind_created rather than every forward ever made
    last = s.scalar(select(OutboundMail.inbound_id).where(OutboundMail.kind == KIND)
                    .order_by(OutboundMail.created_at.desc(), OutboundMail.id.desc()).limit(1)) or 0
    return s.scalar(select(func.count()).select_from(InboundMail)
                    .where(InboundMail.id > last, InboundMail.note.like(NOT_FORWARDED + "%"))) or 0


def forward(s: Session, composer: Composer, settings: Settings, row: Row, mail: IncomingMail, abuse: str | None,
            now: datetime) -> str:
    """Forward the mail to the GM if the hour's limit allows; returns what
    became of it, for the inbox note."""
    gm = settings.gm_address
    if not gm:
        return "to postmaster: kept here (no PBM_GM_ADDRESS to forward it to)"
    limit = settings.postmaster_forwards_per_hour
    hour_ago = now - timedelta(hours=1)
    if outbox_count(s, KIND, hour_ago) >= limit:
        if not outbox_count(s, HELD_KIND, hour_ago):
            tell_gm(s, composer, gm, f"Mail to postmaster@{settings.domain} is held back: {limit} were forwarded to "
                    "you in the last hour, the most PBM_POSTMASTER_FORWARDS_PER_HOUR allows",
                    [("the rest", "kept in the inbox, not forwarded (pbm mail status lists them); the next one "
                                  "forwarded says how many were not")], now, kind=HELD_KIND, inbound_id=row.id)
        return f"{NOT_FORWARDED} (at most {limit} an hour are); kept here"
    raw = row.raw(s)
    whole = len(raw) <= FORWARD_BYTES
    details = [("envelope sender", clean_text(row.mail_from or "<>")),
               ("subject", clean_text(mask_unpaired(mail.subject)) or "(none)"),
               ("received", f"{row.received_at:%Y-%m-%d %H:%M:%S} UTC, inbox {row.id}"),
               ("the mail", "attached as received; its sender was not answered" if whole else
                f"its first {FORWARD_BYTES // 1024} KB attached: it was {len(raw):,} bytes, the rest was cut; "
                "its sender was not answered; all of it stays in the inbox")]
    if abuse is not None:
        details.append(("abuse report", abuse))
    held = _not_forwarded_since_last(s)
    if held:
        details.append(("not forwarded", f"{held} mail{'s' if held != 1 else ''} to postmaster before this one "
                                         f"{'were' if held != 1 else 'was'} not forwarded: at most {limit} an hour"))
    what = f"Mail to postmaster@{settings.domain} from {clean_text(mail.from_addr) or '(no From)'}"
    forward_to_gm(s, composer, gm, raw[:FORWARD_BYTES], what, details, now, kind=KIND, inbound_id=row.id,
                  whole=whole and mail.unread is None)
    return "to postmaster: forwarded to the GM" + ("" if whole else f" (its first {FORWARD_BYTES // 1024} KB)")
