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
