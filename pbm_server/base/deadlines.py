"""Deadline expressions, time-zone aware.

    every Saturday 03:00 UTC
    every day 05:00 America/New_York        (also: daily 05:00 ...)
    every 3 days 12:00 Europe/Zurich        (counted from the game's start date)
    at 2026-12-07 05:00 America/New_York    (once)

The time zone defaults to UTC.  Wall-clock times follow daylight saving time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

_EVERY = re.compile(
    r"^\s*(?:every\s+(?:(?P<n>\d+)\s+days|(?P<day>day|\w+day))|(?P<daily>daily))\s+"
    r"(?P<hh>\d{1,2}):(?P<mm>\d{2})(?:\s+(?P<tz>[\w/+-]+))?\s*$",
    re.I,
)
_AT = re.compile(
    r"^\s*(?:at|once)\s+(?P<d>\d{4}-\d{2}-\d{2})[ T](?P<hh>\d{1,2}):(?P<mm>\d{2})(?:\s+(?P<tz>[\w/+-]+))?\s*$", re.I
)


class DeadlineError(ValueError):
    pass


def _zone(name: str | None) -> ZoneInfo:
    if not name or name.upper() in ("UTC", "GMT", "Z"):
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a region (America) is a folder
        raise DeadlineError(f"unknown time zone {name!r} (use an IANA name such as Europe/Zurich)") from None


@dataclass(frozen=True)
class Deadline:
    text: str
    zone: ZoneInfo
    at: time
    weekday: int | None = None  # 0 = Monday
    every_days: int | None = None
    once: date | None = None

    def next_after(self, after: datetime, anchor: datetime | None = None) -> datetime | None:
        """The first deadline strictly after ``after`` (UTC-aware); None when a
        one-time deadline has passed."""
        local_after = after.astimezone(self.zone)
        if self.once is not None:
            moment = datetime.combine(self.once, self.at, self.zone).astimezone(timezone.utc)
            return moment if moment > after else None
        day = local_after.date()
        start = (anchor or after).astimezone(self.zone).date()
        for _ in range(0, 400 * (self.every_days or 1)):
            ok = True
            if self.weekday is not None and day.weekday() != self.weekday:
                ok = False
            if self.every_days and (day - start).days % self.every_days != 0:
                ok = False
            if ok:
                moment = datetime.combine(day, self.at, self.zone).astimezone(timezone.utc)
                if moment > after:
                    return moment
            day += timedelta(days=1)
        raise DeadlineError(f"no deadline found for {self.text!r}")


def parse_deadline(text: str) -> Deadline:
    m = _EVERY.match(text or "")
    if m:
        hh, mm = int(m["hh"]), int(m["mm"])
        if hh > 23 or mm > 59:
            raise DeadlineError(f"{m['hh']}:{m['mm']} is not a time of day")
        zone = _zone(m["tz"])
        if m["n"]:
            n = int(m["n"])
            if n < 1:
                raise DeadlineError("every 0 days is not a deadline")
            return Deadline(text, zone, time(hh, mm), every_days=n)
        day = (m["day"] or "day").lower()
        if m["daily"] or day == "day":
            return Deadline(text, zone, time(hh, mm), every_days=1)
        if day not in WEEKDAYS:
            raise DeadlineError(f"{m['day']!r} is not a day of the week")
        return Deadline(text, zone, time(hh, mm), weekday=WEEKDAYS.index(day))
    m = _AT.match(text or "")
    if m:
        try:
            d = date.fromisoformat(m["d"])
            at = time(int(m["hh"]), int(m["mm"]))
        except ValueError as exc:
            raise DeadlineError(str(exc)) from None
        return Deadline(text, _zone(m["tz"]), at, once=d)
    raise DeadlineError(
        f"cannot read the deadline {text!r}; write e.g. 'every Saturday 03:00 UTC', "
        "'every 3 days 12:00 Europe/Zurich', 'every day 05:00 America/New_York' or "
        "'at 2026-12-07 05:00 UTC'"
    )
