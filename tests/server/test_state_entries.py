"""Orders as rows (issue 15.1): a giveaway order mail writes one entry of the
state (state_entries) and leaves the stored document alone; the state read
back from the database -- by a restarted server with nothing in memory -- is
exactly the one the worker had, and the turn runs on it."""

from __future__ import annotations

from tests.scale.test_scale import PASSWORD, store_game


def _state(players: list[tuple[str, int]]) -> dict:
    return {"schema": 1, "options": {"no_order": "forfeit", "round_limit": 0}, "round": 2, "status": "playing",
            "players": [{"handle": h, "holding": n, "active": True, "score": None, "left_round": None}
                        for h, n in players],
            "orders": {"erin": [[4, "ann"]]}, "winner": None, "end_note": None, "last": None}


def test_orders_are_entries_over_an_untouched_document(pbm_stopped):
    pbm = pbm_stopped
    players = [("ann", 3), ("bob", 5), ("cy", 4), ("dan", 3), ("erin", 4)]
    store_game(pbm, "giveaway", "ring", _state(players), [h for h, _ in players])
    pbm.start()
    document = pbm.sql("SELECT state FROM games WHERE name = 'ring'")[0][0]

    def order(who: str, body: str) -> str:
        return pbm.text(pbm.mail(f"{who}@example.org", "ring", f"$${PASSWORD}$$\n{body}\n"))

    assert "accepted: 3 points to bob" in order("ann", "GIVE 3 TO bob")
    assert "accepted: 5 points to cy" in order("bob", "GIVE 5 TO cy")
    assert "accepted: 2 points to erin" in order("ann", "GIVE 1 TO bob\nGIVE 2 TO erin")  # replaces ann's
    refused = order("cy", "GIVE 9 TO dan")
    assert "add up to 9 points" in refused and "accepted" not in refused
    # the document was never written; the orders are rows of their own
    assert pbm.sql("SELECT state FROM games WHERE name = 'ring'")[0][0] == document
    assert sorted(pbm.sql("SELECT key FROM state_entries")) == [("ann",), ("bob",)]
    seen = pbm.state("ring")["orders"]
    assert list(seen) == ["erin", "ann", "bob"]  # the stored order first, then as they came
    assert seen["ann"] == [[1, "bob"], [2, "erin"]]

    # a restarted server reads the document with its entries: the same state
    pbm.stop()
    pbm.start()
    status = pbm.text(pbm.mail("ann@example.org", "pbm", f"$${PASSWORD}$$\nstatus ring"))
    assert "GIVE 1 TO bob" in status and "GIVE 2 TO erin" in status
    assert "Orders received: 3 of 5." in status
    assert "accepted: 4 points to ann" in order("cy", "GIVE 4 TO ann")
    assert list(pbm.state("ring")["orders"]) == ["erin", "ann", "bob", "cy"]

    # the turn runs on it, and writes the state whole again
    pbm.run_turn("ring")
    report = pbm.text(pbm.wait_for("dan@example.org", 1)[0])
    assert "ann held 3 and gave 1 to bob, 2 to erin." in report
    assert "cy held 4 and gave 4 to ann." in report
    assert "dan held 3, sent no order and forfeited all of it." in report
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0
    assert pbm.state("ring")["orders"] == {} and pbm.state("ring")["round"] == 3
