"""Issue 17.4, deadlines: a turn that does not complete keeps its deadline,
pause/resume keeps the rhythm, a near first deadline is said at creation,
and the server's early/grace/remind options at `game new`."""

from __future__ import annotations

from tests.desk.conftest import PLAYERS


def next_deadline(pbm, game: str = "g1") -> str:
    line = [row for row in pbm.cli("game", "list").stdout.splitlines() if row.startswith(game + " ")][0]
    return line.split("next deadline", 1)[1].strip()


def two_players(t):
    t.setup(join=False)
    for p in PLAYERS[:2]:
        t.player(p, "g1", "JOIN")
    return t


# -- a. a turn that cannot complete ------------------------------------------------


def test_turn_run_by_hand_that_cannot_complete_keeps_the_deadline(table_stopped):
    t = two_players(table_stopped)
    pbm = t.pbm
    assert next_deadline(pbm) == "2026-11-21 03:00 UTC"
    out = pbm.run_turn("g1").stdout
    assert "did not complete its turn" in out and "at least 3 players" in out, out
    assert "the deadline stays Sat 2026-11-21 03:00 UTC" in out
    assert next_deadline(pbm) == "2026-11-21 03:00 UTC"
    assert t.turn() == 1
    # and by mail
    reply = t.gm("turn run g1 1")
    assert "round 1 did not run" in reply and "at least 3 players" in reply, reply
    assert next_deadline(pbm) == "2026-11-21 03:00 UTC"


def test_scheduler_turn_that_cannot_complete_tells_the_gm(table_stopped):
    t = two_players(table_stopped)
    pbm = t.pbm
    pbm.set_clock("2026-11-21T03:00:00+00:00")
    gm = t.wait_mails("gm@example.org", "did not run")
    text = " ".join(pbm.text(gm[0]).split())
    assert "at least 3 players and 2 have joined" in text, text
    assert "Sat 2026-11-28 03:00 UTC" in text
    pbm.settle()
    # at its deadline the turn is tried once; the next try is the next deadline
    assert next_deadline(pbm) == "2026-11-28 03:00 UTC"
    assert t.turn() == 1 and len(t.mails("gm@example.org", "did not run")) == 1


# -- b. pause and resume -------------------------------------------------------------


def test_resume_keeps_the_deadline_an_early_turn_moved_on(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    t.gm("game set g1 early=on")
    for p in PLAYERS:
        t.order(p)
    for p in PLAYERS:
        t.wait_mails(p, "round 1 report")
    # ran early on Thursday: the Saturday 21 deadline is used up
    assert next_deadline(pbm) == "2026-11-28 03:00 UTC"
    assert "paused" in t.gm("game pause g1")
    pbm.set_clock("2026-11-20T10:00:00+00:00")
    reply = t.gm("game resume g1")
    assert "next deadline Sat 2026-11-28 03:00 UTC" in reply, reply
    assert next_deadline(pbm) == "2026-11-28 03:00 UTC"


def test_resume_after_the_paused_deadline_passed_takes_the_next_one(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    t.gm("game pause g1")
    pbm.set_clock("2026-11-24T10:00:00+00:00")  # Saturday 21 passed during the pause
    assert "next deadline Sat 2026-11-28 03:00 UTC" in t.gm("game resume g1")
    pbm.settle()
    assert t.turn() == 1 and next_deadline(pbm) == "2026-11-28 03:00 UTC"
