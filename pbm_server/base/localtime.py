"""Times in mails: UTC, and the reader's own time zone when they chose one."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

#: what an IANA zone name is made of ("America/Argentina/Buenos_Aires", "Etc/GMT+3")
_ZONE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$")


class UnknownZone(ValueError):
    """A time zone name that names no zone (the message says so)."""


def known_zone(name: str) -> ZoneInfo:
    """The zone called ``name``; :class:`UnknownZone` for anything else: a
    region that is a folder of zones (``America``), a path, a file that is no
    zone.  ``UTC``, ``GMT`` and ``Z`` are UTC."""
    if name.upper() in ("UTC", "GMT", "Z"):
        return ZoneInfo("UTC")
    if len(name) > 64 or not _ZONE_NAME.match(name):
        raise UnknownZone(f"{name[:64]!r} is not a time zone name (use an IANA name such as Europe/Zurich)")
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, LookupError):
        # ZoneInfoNotFoundError is a KeyError; a folder (America) raises
        # IsADirectoryError, an unreadable file another OSError
        raise UnknownZone(f"unknown time zone {name!r}: use a full IANA name such as America/New_York or "
                          "Europe/Zurich (a region alone names no zone)") from None


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
