"""The suite under a shifted real clock (issue 40; docs/testing.md).

``PBM_TEST_REAL_CLOCK_AT`` (an ISO 8601 moment, e.g. ``2027-02-28T23:30:00Z``)
makes the real clock of the test run start there and tick on: ``time.time``,
``datetime.now`` and the like are moved by time-machine, the monotonic clock
and the kernel's timers are not (libfaketime moves the monotonic clock too, and
a Python thread's timed wait then sleeps for the whole shift).

The first process works out the shift once and leaves it in
``PBM_TEST_CLOCK_SHIFT_SECONDS``; the pytest-xdist workers and every
subprocess a test starts (``pbm serve``, the CLI: this folder is put first on
their PYTHONPATH, so Python imports this file at start-up) apply the same
shift, so all of them agree on the time.  Without either variable this file
does nothing.
"""

from __future__ import annotations

import os


def shift_seconds() -> float | None:
    """The shift of this run (set once, then inherited), or None."""
    known = os.environ.get("PBM_TEST_CLOCK_SHIFT_SECONDS")
    if known:
        return float(known)
    at = os.environ.get("PBM_TEST_REAL_CLOCK_AT")
    if not at:
        return None
    from datetime import datetime, timezone

    moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    shift = moment.timestamp() - datetime.now(timezone.utc).timestamp()
    os.environ["PBM_TEST_CLOCK_SHIFT_SECONDS"] = repr(shift)
    return shift


def start() -> None:
    shift = shift_seconds()
    # once a process: a pytest-xdist worker imports this file at start-up
    # (PYTHONPATH) and again from the suite's conftest
    if shift is None or os.environ.get("PBM_TEST_CLOCK_SHIFTED_IN") == str(os.getpid()):
        return
    os.environ["PBM_TEST_CLOCK_SHIFTED_IN"] = str(os.getpid())
    import time

    import time_machine

    # tick: the moved clock runs on at the real clock's speed from there
    time_machine.travel(time.time() + shift, tick=True).start()


start()
