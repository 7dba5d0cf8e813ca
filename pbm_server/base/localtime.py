"""Times in mails: UTC, and the reader's own time zone when they chose one."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except Exception:
        return ZoneInfo("UTC")


def show_time(moment: datetime | None, tz: str | None = None) -> str:
    """A deadline for a mail: UTC, and the reader's own time zone if set."""
    if moment is None:
        return "none"
    text = moment.astimezone(timezone.utc).strftime("%a %Y-%m-%d %H:%M UTC")
    if tz and tz.upper() != "UTC":
        text += moment.astimezone(zone(tz)).strftime(f" (%a %Y-%m-%d %H:%M {tz})")
    return text
