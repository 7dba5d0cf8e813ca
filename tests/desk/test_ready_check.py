"""The ready check (issue 44 item 4), through the real server over SMTP: the
last seat taken begins it, a silent seat goes to the waiting list when its
window ends, and the game starts when every seat is ready; and a pause by
vote that the scheduler ends, and a vote that runs out of time."""

from __future__ import annotations

import json
import urllib.request

import pytest

from pbm_server.web import app as web_app
from tests.desk.conftest import Table


@pytest.fixture(autouse=True)
def _pages_checked_at_once(monkeypatch):
    """A page is checked against its game at every request, not kept a second
    (PageCache.FRESH_SECONDS): the test reads each change at once."""
    monkeypatch.setattr(web_app.PageCache, "FRESH_SECONDS", 0.0)


def _page(pbm, name: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}/games/{name}.json", timeout=20) as resp:
        return json.loads(resp.read())


def test_a_silent_seat_goes_to_the_waiting_list_and_the_game_starts_when_all_are_ready(table_stopped: Table):
    t = table_stopped.setup(join=False)
    pbm = t.pbm
    # no ready check set: there is nothing to confirm, and the GM cannot start one
    text = t.player("alice", "g1", "ready")
    assert "REFUSED" in text and "g1 has no ready check under way" in text, text
    assert "has no ready check" in t.gm("game start g1")
    assert "ready=2d" in t.gm("game set g1 seats=2 ready=48h")
    t.player("alice", "g1", "JOIN")
    text = t.player("bob", "g1", "JOIN")
    # the last seat is taken: both are asked, and no turn runs meanwhile
    for p in ("alice", "bob"):
        asked = pbm.flat(t.wait_mails(p, "are you ready?")[0])
        assert "mail 'ready' with your $$password$$ to g1@pbm.test by Sat 2026-11-21 10:00 UTC" in asked, asked
    assert pbm.sql("SELECT next_deadline FROM games WHERE name = 'g1'")[0][0] is None
    assert "waiting list, number 1" in " ".join(t.player("carol", "g1", "JOIN").split())
    text = " ".join(t.player("alice", "g1", "ready").split())
    assert "you are ready; still waiting for: bob" in text, text
    status = " ".join(t.player("carol", "pbm", "status g1").split())
    assert "Ready check under way" in status and "alice ready; bob not yet (by Sat 2026-11-21 10:00 UTC)" in status, status
    assert any("alice ready; bob not yet" in line for line in _page(pbm, "g1")["people"])
    who = " ".join(t.player("carol", "pbm", "who g1").split())
    assert "Ready check under way" in who and "alice ready; bob not yet" in who, who

    # bob's window ends: his seat goes to carol, who is asked in turn
    pbm.set_clock("2026-11-21T10:00:01+00:00")
    gone = pbm.flat(t.wait_mails("bob", "your seat went to the waiting list")[0])
    assert "your seat has gone to carol" in gone
    asked = pbm.flat(t.wait_mails("carol", "are you ready?")[0])
    assert "by Mon 2026-11-23 10:00 UTC" in asked, asked
    assert t.wait_mails("alice", "carol takes bob's seat")
    assert "bob" not in " ".join(t.player("alice", "pbm", "who g1").split()).split("Waiting")[0]
    text = " ".join(t.player("bob", "g1", "ready").split())
    assert "REFUSED" in text and "you have no seat in g1" in text, text
    assert pbm.sql("SELECT next_deadline FROM games WHERE name = 'g1'")[0][0] is None

    # carol confirms: every seat is ready, and the game starts from now
    text = " ".join(t.player("carol", "g1", "ready").split())
    assert "so is everyone: g1 has started; first deadline Sat 2026-11-28 03:00 UTC" in text, text
    started = pbm.flat(t.wait_mails("alice", "g1 has started")[0])
    assert "Every seat of g1 is ready: alice, carol." in started, started
    assert str(pbm.sql("SELECT next_deadline FROM games WHERE name = 'g1'")[0][0]).startswith("2026-11-28 03:00")
    assert _page(pbm, "g1")["people"] == []
    text = t.player("alice", "g1", "ready")
    assert "REFUSED" in text and "g1 has started already" in text, text
    assert "has started already" in t.gm("game start g1")


def test_a_pause_by_vote_ends_by_itself_and_a_vote_runs_out_of_time(table_stopped: Table):
    t = table_stopped.setup()
    pbm = t.pbm
    # too long a pause for the year's allowance is refused
    text = " ".join(t.player("alice", "g1", "vote pause 15d").split())
    assert "REFUSED" in text and "may be paused by vote for 14d a year" in text and "at most 14d is left" in text, text
    t.player("alice", "g1", "vote pause 2d")
    assert "passed" in t.player("bob", "g1", "vote yes")
    paused = pbm.flat(t.wait_mails("carol", "g1 is paused")[0])
    assert "The players have voted to pause g1 for 2d" in paused and "until Sat 2026-11-21 10:00 UTC" in paused
    assert pbm.sql("SELECT status FROM games WHERE name = 'g1'")[0][0] == "paused"
    assert any("Paused by a vote of the players until" in line for line in _page(pbm, "g1")["people"])
    text = " ".join(t.player("alice", "g1", "vote pause 13d").split())
    assert "REFUSED" in text and "g1 is paused" in text, text
    # the scheduler resumes it when the time is up
    pbm.set_clock("2026-11-21T10:00:01+00:00")
    back = pbm.flat(t.wait_mails("carol", "g1 is running again")[0])
    assert "The pause of g1 the players voted for is over" in back
    assert pbm.sql("SELECT status FROM games WHERE name = 'g1'")[0][0] == "running"
    # 2d of the 14d used: 13d is refused now
    text = " ".join(t.player("bob", "g1", "vote pause 13d").split())
    assert "REFUSED" in text and "2d of that has been used this year, so at most 12d is left" in text, text

    # a vote nobody answers fails when its 24 hours are up, and says so
    text = " ".join(t.player("bob", "g1", "vote extend 1d").split())
    assert "open until Sun 2026-11-22 10:00 UTC" in text, text
    pbm.set_clock("2026-11-22T10:00:01+00:00")
    told = pbm.text(t.wait_mails("alice", "the vote to extend the deadline of round 1 by 1d failed")[0])
    assert "too few by Sun 2026-11-22 10:00 UTC" in " ".join(told.split()) and "alice: did not vote" in told, told
    # the GM's own pause is on the game's page
    t.gm("game pause g1")
    assert any(line.startswith("Paused by the game master since") for line in _page(pbm, "g1")["people"])


def test_a_turn_the_gm_runs_by_hand_ends_the_ready_check(table_stopped: Table):
    t = table_stopped.setup(join=False)
    pbm = t.pbm
    t.gm("game set g1 seats=3 ready=48h")
    for p in ("alice", "bob", "carol"):  # a giveaway round needs three
        t.player(p, "g1", "JOIN")
    t.wait_mails("bob", "are you ready?")
    t.player("alice", "g1", "ready")
    turn = pbm.sql("SELECT turn FROM games WHERE name = 'g1'")[0][0]
    ran = t.gm(f"turn run g1 {turn}")
    assert "REFUSED" not in ran, ran
    told = pbm.flat(t.wait_mails("bob", "the ready check is over")[0])
    assert "ran the turn of g1 before every seat was ready" in told and "Not confirmed, but kept: bob, carol" in told, told
    assert pbm.sql("SELECT turn FROM games WHERE name = 'g1'")[0][0] == turn + 1
    # the check is over: nobody is asked any more, and the pages and status say nothing of it
    assert "REFUSED" in t.player("bob", "g1", "ready")
    assert "Ready check" not in " ".join(t.player("alice", "pbm", "status g1").split())
    assert _page(pbm, "g1")["people"] == []
