"""One broken game does not stop the others: the scheduler runs each game's
step on its own, tells the GM once, and goes on."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from tests.harness import wait_until

START = datetime(2007, 12, 7, 12, 0, tzinfo=timezone.utc)
GAMES = ("s1", "s2", "s3")  # created in this order: s1 ticks first
PLAYERS = {"ann": "ann@example.org", "bob": "bob@example.org"}


def digests(pbm, game: str) -> list:
    return [m for m in pbm.inbox(PLAYERS["ann"]) if str(m["Subject"]).startswith(f"{game}: plays ")]


def gm_notices(pbm, game: str) -> list:
    return [m for m in pbm.inbox("gm@example.org") if f"tick of {game} failed" in str(m["Subject"])]


def test_a_game_whose_tick_fails_does_not_stop_the_others(pbm_stopped):
    pbm = pbm_stopped
    pbm.set_clock(START)
    pbm.start()
    for handle, email in PLAYERS.items():
        pbm.register(handle, f"pw-{handle}-77", email=email)
    for game in GAMES:
        pbm.new_game("sequence", game, deadline="at 2030-01-01 00:00 UTC")
        for handle, email in PLAYERS.items():
            assert "accepted" in pbm.flat(pbm.mail(email, game, f"JOIN\n$$pw-{handle}-77$$"))
        # bob plays once: ann, on digests (the default), is owed one in an hour
        assert "accepted: play 1" in pbm.flat(pbm.mail(PLAYERS["bob"], game, "Piece 1: 2, 1\n$$pw-bob-77$$"))
    pbm.settle()

    # s1's stored state is damaged behind the server's back: its tick raises
    good = pbm.state("s1")
    broken = {**good, "players": {h: {k: v for k, v in d.items() if k != "mail"} for h, d in good["players"].items()}}
    pbm.set_state("s1", broken)

    pbm.set_clock(START + timedelta(minutes=61))
    # the two sound games still send their digests ...
    wait_until(lambda: digests(pbm, "s2") and digests(pbm, "s3"), what="the digests of s2 and s3")
    assert not digests(pbm, "s1")
    # ... and the GM hears of s1 once, with the error, not at every tick
    wait_until(lambda: gm_notices(pbm, "s1"), what="the GM's notice")
    time.sleep(3)  # six more ticks (PBM_TICK_SECONDS is 0.5), each failing for s1 again
    (notice,) = gm_notices(pbm, "s1")
    text = pbm.flat(notice)
    assert "KeyError" in text and "'mail'" in text and "the other games go on" in text
    assert len(pbm.sql("SELECT * FROM scheduler_faults")) == 1

    # repaired, s1 ticks again (ann gets its digest) and the fault is forgotten ...
    pbm.set_state("s1", good)
    wait_until(lambda: digests(pbm, "s1"), what="the digest of s1")
    wait_until(lambda: not pbm.sql("SELECT * FROM scheduler_faults"), what="the fault to be cleared")
    # ... so the same damage later is news to the GM again
    assert "accepted: play 2" in pbm.flat(pbm.mail(PLAYERS["bob"], "s1", "Piece 2: 15, 2\n$$pw-bob-77$$"))
    pbm.set_state("s1", {**pbm.state("s1"), "players": broken["players"]})
    wait_until(lambda: len(gm_notices(pbm, "s1")) == 2, what="a second notice")
    assert len(digests(pbm, "s2")) == 1  # nothing new happened in s2: no second digest


def test_a_game_the_server_cannot_read_stops_no_other_reminder_or_turn(table_stopped):
    """Three turn-based games; the first one's kind is damaged in the
    database, so its deadline check, reminders and tick all raise."""
    from tests.desk.conftest import DEADLINE
    from tests.desk.conftest import PLAYERS as TABLE

    t = table_stopped.setup()  # g1, with three players
    pbm = t.pbm
    for game in ("g2", "g3"):
        pbm.new_game("giveaway", game, deadline=DEADLINE)
        for p in TABLE:
            t.player(p, game, "JOIN")
    pbm.execute("UPDATE games SET kind = 'lost' WHERE name = 'g1'")

    pbm.set_clock("2026-11-20T04:00:00+00:00")  # the reminder window of Saturday 03:00
    for p in TABLE:
        for game in ("g2", "g3"):
            t.wait_mails(p, f"{game}: reminder")
    pbm.set_clock("2026-11-21T03:00:00+00:00")  # the deadline
    for p in TABLE:
        reports = t.wait_mails(p, "round 1 report", count=2)
        assert sorted(str(m["Subject"]).split(":")[0] for m in reports) == ["g2", "g3"]
    time.sleep(2)  # more passes of the scheduler, each failing for g1 again
    pbm.settle()
    for p in TABLE:  # no reminder or report of g1 (the replies to the players' orders name g1 too)
        assert [m for m in t.mails(p, "g1") if m["Auto-Submitted"] != "auto-replied"] == []
    # the GM hears once of each step that fails for g1, and of nothing else
    told = sorted(str(m["Subject"]) for m in pbm.inbox("gm@example.org") if "failed" in str(m["Subject"]))
    assert told == [f"pbm-server: The {step} of g1 failed; the other games go on." for step in ("reminders", "tick", "turn")]
    faults = pbm.sql("SELECT step, error FROM scheduler_faults ORDER BY step")
    assert [(step, error) for step, error in faults] == [(s, "KeyError: 'lost'") for s in ("reminders", "tick", "turn")]
