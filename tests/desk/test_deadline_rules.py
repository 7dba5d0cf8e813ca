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


# -- c. a first deadline less than 48 hours away is said -------------------------------


def test_game_new_on_the_cli_says_a_near_first_deadline(pbm_stopped):
    pbm = pbm_stopped
    pbm.set_clock("2026-11-23T12:00:00+00:00")  # a Monday
    out = pbm.new_game("sequence", "s1").stdout
    # the default deadline, every day 05:00 America/New_York, is Tuesday 10:00 UTC
    assert "the first deadline is in 22 hours (Tuesday 10:00 UTC" in out, out
    assert "every day 05:00 America/New_York, the default of sequence" in out
    assert "set another with --deadline EXPR" in out
    # a deadline far enough away needs no word
    quiet = pbm.new_game("giveaway", "g5", deadline="every Saturday 12:00 UTC").stdout
    assert "first deadline" not in quiet, quiet


def test_game_new_by_mail_says_a_near_first_deadline(table_stopped):
    t = table_stopped.setup(join=False)
    t.pbm.set_clock("2026-11-23T12:00:00+00:00")
    reply = t.gm("game new sequence s2")
    assert "the first deadline is in 22 hours (Tuesday 10:00 UTC" in reply, reply
    assert "set another with game deadline s2 EXPR" in reply
    assert "first deadline is in" not in t.gm("game new giveaway g7")  # Saturday 12:00: 5 days away


# -- d. the server's options at game new -----------------------------------------------


def test_cli_game_new_takes_early_grace_and_remind(table_stopped):
    t = table_stopped.setup(join=False)
    pbm = t.pbm
    out = pbm.cli("game", "new", "giveaway", "g8", "--option", "early=yes", "--option", "grace=30m",
                  "--option", "remind=24h", "--option", "no_order=split").stdout
    assert "early=on grace=30m remind=1d" in out, out
    row = pbm.sql("SELECT early, grace_minutes, remind_minutes, options FROM games WHERE name = 'g8'")[0]
    assert tuple(row[:3]) == (1, 30, 1440) and "split" in str(row[3])
    # refused values are refused as by `game set`, and nothing is created
    bad = pbm.cli("game", "new", "giveaway", "g9", "--option", "grace=soon", check=False)
    assert bad.returncode != 0 and "'soon' is not a duration" in bad.stderr + bad.stdout
    assert pbm.sql("SELECT count(*) FROM games WHERE name = 'g9'")[0][0] == 0
    # early processing works in the game made so
    for p in PLAYERS:
        t.player(p, "g8", "JOIN")
    for p in PLAYERS:
        t.player(p, "g8", "GIVE 3 TO " + {"alice": "bob", "bob": "carol", "carol": "alice"}[p])
    t.wait_mails("alice", "g8: round 1 report")
