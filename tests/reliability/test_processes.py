"""`pbm serve` is two processes (docs/benchmarks.md): the listener, and a back
end for the worker, outbound and scheduler.  A back end that dies is started
again, and the back end never outlives the listener."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.harness import wait_until


def children(pid: int) -> list[int]:
    """Child processes of every thread of ``pid``."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return [c for c in out if alive(c)]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"




def test_back_end_restarts_and_mail_still_answered(pbm):
    wait_until(lambda: len(children(pbm.proc.pid)) == 1)
    (back_end,) = children(pbm.proc.pid)
    os.kill(back_end, signal.SIGKILL)
    # mail accepted while the back end is down waits in the inbox ...
    mid = pbm.send("carol@example.org", "pbm", "help")
    # ... and is answered by the new back end
    wait_until(lambda: children(pbm.proc.pid) and children(pbm.proc.pid) != [back_end])
    pbm.settle(timeout=60)
    (reply,) = pbm.replies_to(mid)
    assert "register HANDLE PASSWORD" in pbm.text(reply)
    assert "back end exited" in pbm.serve_log()


def test_back_end_dies_with_the_listener(pbm):
    wait_until(lambda: len(children(pbm.proc.pid)) == 1)
    (back_end,) = children(pbm.proc.pid)
    pbm.stop(kill=True)  # SIGKILL: no chance to tell the back end
    wait_until(lambda: not alive(back_end), timeout=10)
    pbm.start()  # and a restart works on the same database
    assert "register HANDLE PASSWORD" in pbm.text(pbm.mail("dave@example.org", "pbm", "help"))


def test_sigterm_stops_both(pbm):
    wait_until(lambda: len(children(pbm.proc.pid)) == 1)
    (back_end,) = children(pbm.proc.pid)
    proc = pbm.proc
    pbm.stop()
    assert proc.returncode == 0
    wait_until(lambda: not alive(back_end), timeout=10)
