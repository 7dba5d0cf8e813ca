"""Players' votes to extend or pause (issue 44), through the real server over
SMTP: a two-thirds extension passes, a unanimous one fails on one "no", the
cap refuses a third extension in one turn, and every refusal changes nothing."""

from __future__ import annotations

import threading

from tests.desk.conftest import PLAYERS, PW, Table


def _deadline(pbm, game: str = "g1") -> str:
    return str(pbm.sql("SELECT next_deadline FROM games WHERE name = :n", n=game)[0][0])[:16]


def test_extension_votes_pass_fail_and_hit_the_cap(table_stopped: Table):
    t = table_stopped.setup()
    pbm = t.pbm
    assert _deadline(pbm).startswith("2026-11-21 03:00")
    # nothing to answer yet
    text = t.player("bob", "g1", "vote yes")
    assert "REFUSED" in text and "there is no vote under way in g1" in text, text
    # a draw: none of the turn-based kinds has one
    text = t.player("bob", "g1", "vote end")
    assert "REFUSED" in text and "no draw or agreed end" in text, text

    # two thirds (the default): alice proposes (her yes), carol's yes passes it
    text = " ".join(t.player("alice", "g1", "vote extend 24h").split())
    assert "your vote to extend the deadline of round 1 by 1d is open until" in text and "needs 2 yes of 3" in text, text
    asked = pbm.flat(t.wait_mails("bob", "a vote to extend round 1")[0])
    assert "alice proposes to extend the deadline of round 1 by 1d" in asked and "'vote yes' or 'vote no'" in asked
    status = " ".join(t.player("bob", "pbm", "status g1").split())
    assert "Vote under way: alice proposes to extend the deadline of round 1 by 1d" in status, status
    # one vote at a time
    text = " ".join(t.player("bob", "g1", "vote pause 2d").split())
    assert "REFUSED" in text and "a vote is already under way in g1: alice's vote" in text, text
    text = " ".join(t.player("carol", "g1", "vote yes").split())
    assert "passed" in text, text
    for p in PLAYERS:
        told = pbm.text(t.wait_mails(p, "the vote to extend the deadline of round 1 by 1d passed")[0])
        assert "alice: yes (proposed it)" in told and "carol: yes" in told and "bob: did not vote" in told, told
        assert "now Sun 2026-11-22 03:00 UTC" in " ".join(told.split()), told
    assert _deadline(pbm).startswith("2026-11-22 03:00")

    # unanimous: one "no" ends it at once, nothing moves
    assert "votes=unanimous" in t.gm("game set g1 votes=unanimous")
    text = " ".join(t.player("bob", "g1", "vote extend 12h").split())
    assert "needs 3 yes of 3" in text, text
    text = " ".join(t.player("carol", "g1", "vote no").split())
    assert "failed" in text and "it can no longer pass" in text, text
    told = pbm.text(t.wait_mails("alice", "the vote to extend the deadline of round 1 by 12h failed")[0])
    assert "carol: no" in told and "bob: yes (proposed it)" in told and "alice: did not vote" in told, told
    assert _deadline(pbm).startswith("2026-11-22 03:00")

    # a majority passes a second extension; a third in the same round is refused
    t.gm("game set g1 votes=majority")
    t.player("alice", "g1", "vote extend 6h")
    assert "passed" in t.player("bob", "g1", "vote yes")
    assert _deadline(pbm).startswith("2026-11-22 09:00")
    text = " ".join(t.player("carol", "g1", "vote extend 6h").split())
    assert "REFUSED" in text and "has been extended 2 time(s) by vote already" in text and "max_extensions=2" in text, text
    assert pbm.sql("SELECT count(*) FROM votes WHERE status = 'open'")[0][0] == 0
    assert _deadline(pbm).startswith("2026-11-22 09:00")
    # votes=off refuses every vote
    t.gm("game set g1 votes=off")
    text = t.player("alice", "g1", "vote pause 1d")
    assert "REFUSED" in text and "votes are off in g1" in text, text
    # curio boards have no turns: a vote there is refused, saying why
    pbm.new_game("curio", "c1")
    text = " ".join(t.player("alice", "c1", "vote extend 24h").split())
    assert "REFUSED" in text and "Curio has no turns or deadlines, so there is nothing to extend or pause" in text, text
    # help names the commands
    helptext = " ".join(t.player("alice", "pbm", "help").split())
    assert "vote extend DURATION" in helptext and "vote yes | vote no" in helptext and "confirm your seat" in helptext


def test_a_vote_is_decided_once_by_a_redelivered_ballot_and_racing_schedulers(table_stopped: Table):
    """The short variant of tests/reliability/test_vote_kill.py (heavy): the
    settling ballot delivered twice, and the close of a vote whose time is up
    tried by four schedulers at once, each decide it once."""
    t = table_stopped.setup()
    pbm = t.pbm
    t.player("alice", "g1", "vote extend 24h")
    ballot = pbm.build("bob@example.org", "g1", f"vote yes\n$${PW}$$")
    pbm.send_message(ballot)
    pbm.send_message(ballot)  # the same mail again (a confused MTA): same Message-ID
    pbm.settle()
    t.player("carol", "g1", "vote extend 12h")
    pbm.set_clock("2026-11-20T10:00:01+00:00")  # its 24 hours are up
    scheduler = pbm.server.scheduler
    racers = [threading.Thread(target=scheduler.run_people) for _ in range(3)]
    for r in racers:
        r.start()
    for r in racers:
        r.join()
    pbm.settle()
    assert [s for (s,) in pbm.sql("SELECT status FROM votes ORDER BY id")] == ["passed", "failed"]
    for p in PLAYERS:
        assert len(t.wait_mails(p, "the vote to extend the deadline of round 1 by 1d passed")) == 1, p
        assert len(t.wait_mails(p, "the vote to extend the deadline of round 1 by 12h failed")) == 1, p
    assert _deadline(pbm).startswith("2026-11-22 03:00")
    assert pbm.sql("SELECT count(*) FROM audit_log WHERE action IN ('vote passed', 'vote failed')")[0][0] == 2
