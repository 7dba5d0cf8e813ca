"""The server's clock.  Games never read it: the server passes the time in.

``PBM_CLOCK_FILE`` (tests, rehearsals): the current time is the ISO 8601
timestamp in that file, re-read at every call, so a test can move time on
while the server runs.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone


def now() -> datetime:
    path = os.environ.get("PBM_CLOCK_FILE")
    if path:
        try:
            with open(path) as fh:
                text = fh.read().strip()
            if text:
                moment = datetime.fromisoformat(text)
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=timezone.utc)
                return moment.astimezone(timezone.utc)
        except (OSError, ValueError):
            pass
    return datetime.now(timezone.utc)
