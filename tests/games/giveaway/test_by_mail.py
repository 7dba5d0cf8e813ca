"""Five players, three rounds of Giveaway by mail over SMTP to a running
`pbm serve`: joining, orders and refusals, rings, a forfeit, a player
leaving, the tie rule and the winner, all as the players read them in their
mailboxes."""

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

    # -- round 3: erin leaves; bob and carol tie at 114, so dave wins with 66 --------------
    text = send("dave", "GIVE 3 TO erin")
    assert "accepted: 3 points to erin" in text
    text = send("erin", "LEAVE")
    assert "accepted: you have left the game; your 12 points are forfeited" in text
    (dropped,) = [m for m in pbm.wait_for(mail["dave"], 1) if "erin left" in m["Subject"]]
    assert dropped["Subject"] == "gift: erin left, your order no longer holds"
    assert "Your order for round 3 gave points to erin, so it no longer holds" in flat(pbm.text(dropped))
    text = send("alice", "GIVE 66 TO erin")
    assert "REFUSED (line 2): erin has left the game: give to players still in it" in text
    for h, line in [
        ("alice", "GIVE 66 TO dave"),
        ("bob", "GIVE 57 TO carol"),
        ("carol", "GIVE 57 TO bob"),
        ("dave", "GIVE 3 TO alice"),
    ]:
        assert "REFUSED" not in send(h, line)

    pbm.run_turn("gift")
    assert reports(pbm, mail["erin"], 3) == []
    for h in ["alice", "bob", "carol", "dave"]:
        (report,) = reports(pbm, mail[h], 3)
        assert report["Subject"] == "gift: round 3 report - dave wins"
        text = pbm.text(report)
        assert "bob > carol > bob: 2 players passing 57 points, each receives 114 instead of 57" in flat(text)
        assert row(text, "alice") == ["66", "3", "0", "3", "-"]
        assert row(text, "bob") == row(text, "carol") == ["57", "57", "57", "114", "-"]
        assert row(text, "dave") == ["3", "66", "0", "66", "-"]
        assert "erin" not in text.split("Scores")[1]
        assert "Tied scores drop out of contention (rule 1): 114." in flat(text)
        assert "dave wins the game with 66 points." in flat(text)
        assert "The game is over. The winner is dave." in text
        assert "The game is over. The winner is dave." in (pbm.html(report) or "")
    shown = pbm.cli("game", "show", "gift").stdout
    assert "Winner: dave." in shown
