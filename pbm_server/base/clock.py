"""The server's clock.  Games never read it: the server passes the time in.

The setting ``clock_file`` (``PBM_CLOCK_FILE``; tests, rehearsals): the current
time is the ISO 8601 timestamp in that file, re-read at every call, so a test
can move time on while the server runs.  Each process sets it once from its
settings with :func:`use_file`.

The file holds ``MOMENT`` (the clock stands there) or ``MOMENT @SECONDS``
(the clock runs on from MOMENT, which it showed at the Unix time SECONDS): a
rehearsal or a test gets the date it needs while retries, claims and waits
still see time pass.  No file, an empty one or one that does not read: the
real clock.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

_file: str | None = None


def use_file(path: str | None) -> None:
    """Read the time from ``path`` from now on (None or empty: the real clock)."""
    global _file
    _file = path or None


def now() -> datetime:
    path = _file
    if path:
        try:
            with open(path) as fh:
                text = fh.read().strip()
            if text:
                stamp, _, since = text.partition(" @")
                moment = datetime.fromisoformat(stamp.strip())
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=timezone.utc)
                if since:
                    moment += timedelta(seconds=time.time() - float(since))
                return moment.astimezone(timezone.utc)
        except (OSError, ValueError):
            pass
    return datetime.now(timezone.utc)
