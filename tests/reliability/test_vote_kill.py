"""A players' vote decided while the back end is killed is decided once
(issue 44): the ballot that settles it, and the scheduler's close when its
time is up, each race a SIGKILL of the back end; after the restarts every
player has heard each result once and the deadline moved once."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from tests.desk.conftest import PLAYERS, PW, T0, Table
from tests.harness import PbmServer, wait_until
from tests.reliability.test_processes import children

# SIGKILL of the back end: `pbm serve` in its own processes
pytestmark = pytest.mark.process

PASSED = "the vote to extend the deadline of round 1 by 1d passed"
FAILED = "the vote to extend the deadline of round 1 by 12h failed"
DEADLINE = "SELECT next_deadline FROM games WHERE name = 'g1'"


def _table(pbm: PbmServer) -> Table:
    """The GM desk's game of three with alice's vote to extend by 24h open,
    set up by a server in the test's own process (registering by mail costs
    seconds a mail through subprocesses), then `pbm serve` as a subprocess."""
    pbm.set_clock(T0)
    pbm.process = False
    pbm.start()
    t = Table(pbm).setup()
    assert "is open until" in " ".join(t.player("alice", "g1", "vote extend 24h").split())
    pbm.settle()
    pbm.stop()
    pbm.process = True
    pbm.start()
    return t


def _kill_back_end(pbm: PbmServer, within: float) -> None:
    """SIGKILL the back end after a random moment up to ``within`` seconds;
    wait for the listener to start a new one."""
    wait_until(lambda: len(children(pbm.proc.pid)) == 1)
    (back_end,) = children(pbm.proc.pid)
    time.sleep(random.uniform(0, within))
    os.kill(back_end, signal.SIGKILL)
    wait_until(lambda: children(pbm.proc.pid) and children(pbm.proc.pid) != [back_end], timeout=60)


def _ballot_raced_by_a_kill(pbm: PbmServer) -> None:
    """bob's yes passes alice's vote; the back end is killed around it."""
    pbm.send("bob@example.org", "g1", f"vote yes\n$${PW}$$")
    _kill_back_end(pbm, 0.3)
    pbm.settle(timeout=60)


@pytest.mark.heavy  # two starts of `pbm serve`'s back end: about 25 s (in CI: test_votes.py's race)
def test_a_vote_settled_while_the_back_end_is_killed_is_decided_once(pbm_stopped):
    t = _table(pbm_stopped)
    pbm = t.pbm
    _ballot_raced_by_a_kill(pbm)
    assert [s for (s,) in pbm.sql("SELECT status FROM votes")] == ["passed"]
    for p in PLAYERS:
        assert len(t.wait_mails(p, PASSED)) == 1, p
    assert str(pbm.sql(DEADLINE)[0][0])[:16] == "2026-11-22 03:00"


@pytest.mark.heavy  # three starts of `pbm serve`'s back end: about 35 s
def test_votes_decided_by_mail_and_by_the_scheduler_around_kills_are_decided_once(pbm_stopped):
    t = _table(pbm_stopped)
    pbm = t.pbm
    _ballot_raced_by_a_kill(pbm)
    # a vote nobody answers, closed by the scheduler when its time is up, and a kill meanwhile
    assert "is open until" in " ".join(t.player("carol", "g1", "vote extend 12h").split())
    pbm.set_clock("2026-11-20T10:00:01+00:00")  # T0 + 24 h
    _kill_back_end(pbm, 0.3)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM votes WHERE status = 'open'")[0][0] == 0, timeout=60)
    pbm.settle(timeout=60)
    pbm.stop()
    pbm.start()  # a second start decides nothing again
    pbm.settle(timeout=60)
    assert [s for (s,) in pbm.sql("SELECT status FROM votes ORDER BY id")] == ["passed", "failed"]
    for p in PLAYERS:
        assert len(t.mails(p, PASSED)) == 1, p
        assert len(t.mails(p, FAILED)) == 1, p
    assert str(pbm.sql(DEADLINE)[0][0])[:16] == "2026-11-22 03:00"
    assert pbm.sql("SELECT count(*) FROM audit_log WHERE action IN ('vote passed', 'vote failed')")[0][0] == 2
