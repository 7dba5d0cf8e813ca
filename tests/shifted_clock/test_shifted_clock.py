"""The shifted real clock that .ci/run runs the date-sensitive tests under
(tests/shifted_clock/sitecustomize.py, docs/testing.md): every process of a
run -- the test's own and the `pbm serve` or CLI it starts -- sees the same
moved date, once, ticking on, while timed waits keep real time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytestmark = pytest.mark.nodb

HERE = Path(__file__).parent
PROBE = ("import datetime, runpy, sys, threading, time\n"
         "if len(sys.argv) > 1: runpy.run_path(sys.argv[1])  # the suite's conftest loads it once more\n"
         "t = time.monotonic(); threading.Event().wait(0.05); waited = time.monotonic() - t\n"
         "print(datetime.datetime.now(datetime.timezone.utc).isoformat(), waited < 5)\n")


def _run(env_extra: dict[str, str], *again: str) -> tuple[datetime, bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBM_TEST_CLOCK")}
    env.pop("PBM_TEST_REAL_CLOCK_AT", None)
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    out = subprocess.run([sys.executable, "-c", PROBE, *again], env=env, capture_output=True, text=True, timeout=60, check=True)
    moment, waited = out.stdout.split()
    return datetime.fromisoformat(moment), waited == "True"


def test_a_process_started_under_the_shift_sees_the_moved_date_and_real_waits():
    moment, waited = _run({"PBM_TEST_REAL_CLOCK_AT": "2031-12-31T23:30:00Z"})
    assert datetime(2031, 12, 31, 23, 30, tzinfo=timezone.utc) <= moment
    assert moment < datetime(2032, 1, 1, 0, 30, tzinfo=timezone.utc)
    assert waited  # a timed wait of 50 ms is not stretched by the shift (libfaketime's was)


def test_a_child_inherits_the_shift_of_its_parent_once():
    # a worker or a server started by a shifted test process: the shift in seconds, not the moment;
    # an xdist worker applies it at start-up and is handed the file again by conftest
    real_now = time.time() - float(os.environ.get("PBM_TEST_CLOCK_SHIFT_SECONDS", "0"))  # this run may be shifted
    shift = datetime(2031, 6, 1, tzinfo=timezone.utc).timestamp() - real_now
    moment, _ = _run({"PBM_TEST_CLOCK_SHIFT_SECONDS": repr(shift),
                      "PBM_TEST_CLOCK_SHIFTED_IN": str(os.getpid())},  # the parent's mark does not stop the child
                     str(HERE / "sitecustomize.py"))
    assert datetime(2031, 6, 1, tzinfo=timezone.utc) <= moment < datetime(2031, 6, 1, 1, tzinfo=timezone.utc)
