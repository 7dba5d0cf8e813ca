"""Five players, three rounds of Giveaway by mail over SMTP to a running
`pbm serve`: joining, orders and refusals, rings, a forfeit, the tie rule and
the winner, all as the players read them in their mailboxes."""

from __future__ import annotations

PLAYERS = ["alice", "bob", "carol", "dave", "erin"]


def flat(text: str) -> str:
    """The mail text with line wrapping undone."""
    return " ".join(text.split())


def password(handle: str) -> str:
    return f"{handle}-gives-{len(handle)}x"


def row(text: str, handle: str) -> list[str]:
    """The cells of ``handle``'s line in the report's score table:
    held, received, bonus, score, next."""
    for line in text.splitlines():
        cells = line.split()
        if len(cells) == 6 and cells[0] == handle:
            return cells[1:]
    raise AssertionError(f"no score table row for {handle} in:\n{text}")


def reports(pbm, addr: str, round_: int) -> list:
    return [m for m in pbm.inbox(addr) if m["Subject"].startswith(f"gift: round {round_} report")]


def test_three_rounds_by_mail(pbm):
    mail = {h: pbm.register(h, password(h)) for h in PLAYERS}
    pbm.new_game("giveaway", "gift")

    def send(handle: str, *lines: str) -> str:
        body = f"$${password(handle)}$$\n" + "\n".join(lines)
        text = pbm.text(pbm.mail(mail[handle], "gift", body))
        assert password(handle) not in text
        return flat(text)

    for n, h in enumerate(PLAYERS, 1):
        text = send(h, "JOIN")
        assert f"accepted: you are in the game with 3 points for round 1 ({n} player" in text

    # -- round 1: all five pass 3 round one ring -----------------------------------------
    ring = {"alice": "bob", "bob": "carol", "carol": "dave", "dave": "erin", "erin": "alice"}
    for h in ["alice", "bob", "carol", "dave"]:
        text = send(h, f"GIVE 3 TO {ring[h]}")
        assert f"accepted: 3 points to {ring[h]}" in text
        assert f"GIVE 3 TO {ring[h]}" in text
        assert "It gives away 3 of the 3 points you hold, as it must." in text

    text = send("erin", "GIVE 2 TO alice", "GIVE 1 TO zed")
    assert "REFUSED (line 3): there is no player 'zed' in this game; you can give to: alice, bob, carol, dave" in text
    assert "REFUSED (line 2): not taken: a mail's GIVE lines are one order" in text
    assert "That order was refused: you have no order for round 1 yet. You hold 3 points" in text
    text = send("erin", "GIVE 2 TO alice")
    assert "your GIVE lines add up to 2 points, short of your holding of 3: an order must give away exactly 3" in text
    text = send("erin", "give 1 to ALICE", "give 2 to Alice")
    assert "GIVE 3 TO alice" in text and "REFUSED" not in text

    pbm.run_turn("gift")
    for h in PLAYERS:
        (report,) = reports(pbm, mail[h], 1)
        text = pbm.text(report)
        assert "alice > bob > carol > dave > erin > alice: 5 players passing 3 points" in flat(text)
        assert "each receives 15 instead of 3 (+12)" in flat(text)
        for p in PLAYERS:
            assert row(text, p) == ["3", "3", "12", "15", "18"]
        assert "Round 2: every player now holds" in text

    # -- round 2: a ring of three, a gift that is not a ring, and a forfeit -----------------
    for h, to in [("alice", "bob"), ("bob", "carol"), ("carol", "alice")]:
        assert "REFUSED" not in send(h, f"GIVE 18 TO {to}")
    text = send("dave", "GIVE 9 TO erin", "GIVE 9 TO alice")
    assert "It gives away 18 of the 18 points you hold, as it must." in text
    text = send("dave", "GIVE 20 TO alice")
    assert "more than your holding of 18" in text
    assert "That order was refused: the order you sent before still holds." in text
    assert "now holds for you for round 2: GIVE 9 TO erin GIVE 9 TO alice" in text
    # erin sends nothing this round

    pbm.run_turn("gift")
    (report,) = reports(pbm, mail["carol"], 2)
    text = pbm.text(report)
    assert "alice > bob > carol > alice: 3 players passing 18 points, each receives 54" in flat(text)
    assert "erin held 18, sent no order and forfeited all of it." in flat(text)
    assert row(text, "alice") == ["18", "27", "36", "63", "66"]
    assert row(text, "bob") == ["18", "18", "36", "54", "57"]
    assert row(text, "dave") == ["18", "0", "0", "0", "3"]
    assert row(text, "erin") == ["18", "9", "0", "9", "12"]

    # -- round 3: alice passes 100; dave and erin tie at 0 --------------------------------
    for h, line in [
        ("alice", "GIVE 66 TO bob"),
        ("bob", "GIVE 57 TO alice"),
        ("carol", "GIVE 57 TO alice"),
        ("dave", "GIVE 3 TO carol"),
        ("erin", "GIVE 12 TO carol"),
    ]:
        assert "REFUSED" not in send(h, line)

    pbm.run_turn("gift")
    for h in PLAYERS:
        (report,) = reports(pbm, mail[h], 3)
        assert report["Subject"] == "gift: round 3 report - alice wins"
        text = pbm.text(report)
        assert "No ring formed this round." in text
        assert row(text, "alice") == ["66", "114", "0", "114", "-"]
        assert row(text, "dave") == ["3", "0", "0", "0", "-"]
        assert row(text, "erin") == ["12", "0", "0", "0", "-"]
        assert "alice wins the game with 114 points." in flat(text)
        assert "The game is over. The winner is alice." in text
        assert "The game is over. The winner is alice." in (pbm.html(report) or "")
    shown = pbm.cli("game", "show", "gift").stdout
    assert "Winner: alice." in shown
