"""Durations as the GM writes them ("90m", "6h", "2d", "0") and as mails show
them; and plain numbers as a URL or a command word carries them."""

from __future__ import annotations

import re

from pbm_server.base.errors import ServerRefused

#: ASCII digits only: str.isdigit() also takes '²' (which int() refuses) and other scripts' digits
_PLAIN_NUMBER = re.compile(r"[0-9]+", re.ASCII)

_DURATION = re.compile(r"^(\d+)\s*(m|min|mins|minutes?|h|hours?|d|days?)?$", re.I)


def parse_duration(text: str) -> int:
    """Minutes from '90m', '6h', '2d' or '0'."""
    m = _DURATION.match(text.strip())
    if not m or (m.group(2) is None and m.group(1) != "0"):
        raise ServerRefused(f"{text!r} is not a duration: write e.g. 30m, 6h, 2d or 0")
    n, unit = int(m.group(1)), (m.group(2) or "m").lower()
    return n * (1440 if unit.startswith("d") else 60 if unit.startswith("h") else 1)


def show_duration(minutes: int) -> str:
    if minutes == 0:
        return "0"
    if minutes % 1440 == 0:
        return f"{minutes // 1440}d"
    if minutes % 60 == 0:
        return f"{minutes // 60}h"
    return f"{minutes}m"


def plain_number(text: str, digits: int = 9) -> int | None:
    """``text`` as a number when it is ASCII digits 0-9 only, at most
    ``digits`` of them; None otherwise ('²', '٣', '-1', '1e3', a 23-digit
    number), so what a URL or a mail carries never reaches int() unchecked."""
    if len(text) > digits or not _PLAIN_NUMBER.fullmatch(text):
        return None
    return int(text)
