"""My games, by mail to pbm@DOMAIN over real SMTP: `games` marks the games
the sender plays, `status` with no name lists them with the turn, the next
deadline in the player's time zone and where they stand."""

from __future__ import annotations

import re

PW = {"alice": "alice-pass-1", "bob": "bob-pass-22", "carol": "carol-pass-3"}


def setup_games(pbm) -> dict[str, str]:
    emails = {h: pbm.register(h, pw) for h, pw in PW.items()}
    pbm.new_game("giveaway", "ring", deadline="every Saturday 03:00 UTC")
    pbm.new_game("giveaway", "other")
    for h in PW:
        assert "accepted" in pbm.flat(pbm.mail(emails[h], "ring", f"JOIN\n$${PW[h]}$$"))
    pbm.mail(emails["carol"], "other", f"JOIN\n$${PW['carol']}$$")
    assert "accepted" in pbm.flat(pbm.mail(emails["alice"], "ring", f"GIVE 2 TO bob\nGIVE 1 TO carol\n$${PW['alice']}$$"))
    pbm.mail(emails["alice"], "pbm", f"curio challenge alice bob $${PW['alice']}$$")
    return emails


def test_games_marks_mine_and_status_lists_them(pbm):
    emails = setup_games(pbm)
    text = pbm.text(pbm.mail(emails["alice"], "pbm", "games"))
    rows = {m.group(2): m.group(1) for m in re.finditer(r"^(\*| ) (\w+)@pbm\.test", text, re.M)}
    assert rows == {"curio": "*", "other": " ", "ring": "*"}, text
    assert "ring@pbm.test  Giveaway" in text and "(you play)" in text
    assert "* marks the games you play" in pbm.flat(pbm.mail(emails["alice"], "pbm", "games"))
    # an unregistered sender sees no marks
    text = pbm.text(pbm.mail("stranger@example.org", "pbm", "games"))
    assert "(you play)" not in text and "* ring@" not in text

    pbm.mail(emails["alice"], "pbm", f"timezone Europe/Zurich\n$${PW['alice']}$$")
    text = pbm.text(pbm.mail(emails["alice"], "pbm", f"status\n$${PW['alice']}$$"))
    flat = " ".join(text.split())
    assert "you play in 2 running games" in flat
    assert "ring@pbm.test Giveaway (giveaway), running" in flat
    assert re.search(r"round 1, next deadline: Sat \d{4}-\d\d-\d\d 03:00 UTC \(Sat \d{4}-\d\d-\d\d 0[45]:00 Europe/Zurich\)",
                     flat), flat
    assert "your orders for this round are held" in flat
    assert "board 101 vs bob (you play Light): your move (move 1)" in flat
    assert "other@" not in flat

    text = " ".join(pbm.text(pbm.mail(emails["bob"], "pbm", f"status\n$${PW['bob']}$$")).split())
    assert "no orders from you yet for this round" in text
    assert "board 101 vs alice (you play Dark): alice's move (move 1)" in text
    # status NAME works as before
    text = pbm.flat(pbm.mail(emails["bob"], "pbm", f"status ring\n$${PW['bob']}$$"))
    assert "Giveaway game ring: running" in text and "Orders received: 1 of 3" in text


def test_status_refusals_and_no_games(pbm):
    dan = pbm.register("dan", "dan-pass-44")
    text = pbm.flat(pbm.mail(dan, "pbm", "status"))
    assert "this needs your password" in text
    text = pbm.flat(pbm.mail("stranger@example.org", "pbm", "status"))
    assert "you are not registered" in text
    text = pbm.flat(pbm.mail(dan, "pbm", "status\n$$dan-pass-44$$"))
    assert "You play in no running game" in text
    text = pbm.flat(pbm.mail(dan, "pbm", "status a b\n$$dan-pass-44$$"))
    assert "expected: status (all your games) or status NAME" in text
    text = pbm.flat(pbm.mail(dan, "pbm", "help"))
    assert "status your games: turn, deadline" in text and "status NAME" in text


def test_every_kind_says_where_a_player_stands(pbm):
    """The Rules.standing line of each kind, through `status`."""
    erin = pbm.register("erin", "erin-pass-55")
    pw = "$$erin-pass-55$$"
    pbm.new_game("sequence", "four")
    pbm.new_game("agora_rpg", "agora")
    pbm.new_game("rmpm", "world")
    assert "accepted" in pbm.flat(pbm.mail(erin, "four", f"JOIN\n{pw}"))
    assert "accepted" in pbm.flat(pbm.mail(erin, "agora", f"JOIN\n{pw}"))
    assert "accepted" in pbm.flat(pbm.mail(erin, "world", f"JOIN bd 01-05 25-10 blue dragon\n{pw}"))
    flat = pbm.flat(pbm.mail(erin, "pbm", f"status\n{pw}"))
    assert "you play in 3 running games" in flat
    assert "10 pieces left, score 0, total 0; play whenever you like" in flat
    assert "5 movement tokens left this week; actions take effect when they arrive" in flat
    assert "your chips are placed at the next weekly update; no orders until then" in flat
