"""Orders as rows (issue 15.1): a giveaway order mail, an rmpm order mail and
a giveaway JOIN before round 1 write one entry of the state (state_entries)
each and leave the stored document alone; the players read what they read
when the document was rewritten; the state read back from the database -- by
a restarted server with nothing in memory -- is exactly the one the worker
had, and the turn runs on it."""

from __future__ import annotations

from tests.harness import wait_until
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
    document = pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'ring'")[0][0]

    def order(who: str, body: str) -> str:
        return pbm.text(pbm.mail(f"{who}@example.org", "ring", f"$${PASSWORD}$$\n{body}\n"))

    assert "accepted: 3 points to bob" in order("ann", "GIVE 3 TO bob")
    assert "accepted: 5 points to cy" in order("bob", "GIVE 5 TO cy")
    assert "accepted: 2 points to erin" in order("ann", "GIVE 1 TO bob\nGIVE 2 TO erin")  # replaces ann's
    refused = order("cy", "GIVE 9 TO dan")
    assert "add up to 9 points" in refused and "accepted" not in refused
    # the document was never written; the orders are rows of their own
    assert pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'ring'")[0][0] == document
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


def test_entries_one_change_adds_read_back_in_the_order_it_added_them(tmp_path):
    """Several keys added by one change come back from the database in the
    order the rules added them (not in the order of the rows), after the keys
    added by earlier changes."""
    from datetime import datetime, timezone

    from pbm_server.play.creation import create_game
    from pbm_server.play.gamestate import save_entries
    from pbm_server.store.db import Database
    from pbm_server.store.models import Game, current_state

    db = Database(f"sqlite:///{tmp_path / 'pbm.sqlite'}")
    db.upgrade()
    now = datetime(2026, 11, 24, tzinfo=timezone.utc)
    with db.write() as s:
        game = create_game(s, "giveaway", "g1", {}, None, now)
        first = dict(game.state, orders={"zed": 1})
        save_entries(s, game, game.state, first, {"orders": ["zed"]}, now)
        second = dict(first, orders={"zed": 1, "b": 2, "a": 3, "10": 4, "9": 5})
        save_entries(s, game, first, second, {"orders": ["b", "a", "10", "9"]}, now)
    with db.read() as s:
        fresh = s.query(Game).filter_by(name="g1").one()
        assert list(current_state(fresh)["orders"]) == ["zed", "b", "a", "10", "9"]
    db.dispose()


# -- rmpm: an order mail is one entry of the state's orders ------------------------------------
RMPM_MAILS = [
    ("ann", ["05-05 -> 05-04", "10-10 -> 11-10"]),
    ("bob", ["04-05 -> 03-05", "20-20 -> 19-20"]),
    ("ann", ["05-05 -> 04-05", "10-10 -> 10-11", "BUY"]),  # replaces ann's first set
    ("cy", ["06-06 -> 06-07", "garbage"]),  # refused: nothing held
    ("dan", ["07-07 -> 07-08", "20-22 -> 19-22"]),
    ("dan", ["CANCEL"]),
    ("eve", ["LEAVE"]),
    ("fay", ["01-20 -> 02-20", "25-20 -> 24-20"]),  # not on the board yet: refused
]


def _rmpm_world() -> dict:
    """Seven players on the board and one waiting to be placed; ann's second
    order set meets bob with AN 89: every other player pays her up to 50."""
    from games.rmpm import RULES

    spec = [("ann", ["05-05", "10-10"], 80, 60, 1000), ("bob", ["04-05", "20-20"], 5, 40, 30),
            ("cy", ["06-06", "20-21"], 30, 70, 500), ("dan", ["07-07", "20-22"], 9, 20, 0),
            ("eve", ["08-08", "20-23"], 50, 55, 10000), ("fay", None, 1, 0, 10000),
            ("gus", ["09-09", "21-20"], 12, 90, 70), ("hal", ["11-11", "21-21"], 3, 10, 45)]
    players = {h: {"number": n, "abbr": h[:2], "alias": h.title(), "chips": chips, "an": an, "pn": pn, "capital": cap,
                   **({"start": ["01-20", "25-20"]} if chips is None else {})}
               for n, (h, chips, an, pn, cap) in enumerate(spec, 1)}
    return RULES.import_state({"players": players, "owners": {"06-07": "cy"}, "bank": 1000, "kiosk": 200})


def _replayed(kind: str, state: dict, mails: list[tuple[str, list[str]]]) -> dict:
    """The state the worker keeps after ``mails``: the same rules on the same
    lines, in this process."""
    import random
    from datetime import datetime, timezone

    from games import get_rules
    from games.base import Actor, Context, Line

    rules = get_rules(kind)
    for handle, lines in mails:
        ctx = Context(now=datetime.now(timezone.utc), rng=random.Random(1), turn=1, game_name="x",
                      actor=Actor(handle, f"{handle}@example.org", True))
        state = rules.apply(state, rules.parse([Line(i + 1, t) for i, t in enumerate(lines)]), ctx).state
    return state


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def test_rmpm_orders_are_entries_and_read_back_as_the_worker_had_them(pbm_stopped):
    pbm = pbm_stopped
    world = _rmpm_world()
    store_game(pbm, "rmpm", "world", world, list(world["players"]))
    pbm.start()
    document = pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'world'")[0][0]

    def orders(who: str, lines: list[str]):
        return pbm.mail(f"{who}@example.org", "world", f"$${PASSWORD}$$\n" + "\n".join(lines) + "\n")

    replies = [_squeezed(pbm.text(orders(h, lines))) for h, lines in RMPM_MAILS]
    # what the players read is what the whole decoded game gave them before
    # (these sentences are the replies of the version that rewrote the state)
    assert "accepted; now: chip 1 moves left to 05-04 (number 5)" in replies[0]
    assert "Before you (4): gu (PN 90), cy (PN 70), an (PN 60), ev (PN 55)." in replies[1]
    assert ("encounter on 04-05 with bo (Bob), AN 89: each of the 6 other players pays up to 50 WCU to an: "
            "225 WCU in all") in replies[2]
    assert "Your chips would end on 04-05 and 10-13: MN 9, AN 89, PN 68, capital 725 WCU." in replies[2]
    assert "Before you (2): gu (PN 90), cy (PN 70)." in replies[2]
    assert "none of its orders were taken: you have no orders for this week yet" in replies[3]
    assert "accepted: your orders for this week are withdrawn" in replies[5]
    assert "accepted: you leave the game at the update of week 1" in replies[6]
    assert "your chips are placed at the update of week 1; send orders after that report" in replies[7]

    # the document was never written: the orders are rows of their own
    assert pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'world'")[0][0] == document
    assert sorted(k for (k,) in pbm.sql("SELECT key FROM state_entries")) == ["ann", "bob", "dan", "eve"]
    # read fresh from the database: the state the worker kept, orders in the order they came
    expected = _replayed("rmpm", world, RMPM_MAILS)
    fresh = pbm.state("world")
    assert fresh == expected and list(fresh["orders"]) == list(expected["orders"]) == ["ann", "bob", "eve"]

    status = {h: _squeezed(pbm.text(pbm.mail(f"{h}@example.org", "pbm", f"$${PASSWORD}$$\nstatus")))
              for h in ("ann", "gus", "fay")}
    assert "your orders for this week are held" in status["ann"]
    assert "no orders from you yet for this week" in status["gus"]
    assert "your chips are placed at the next weekly update; no orders until then" in status["fay"]

    # a restarted server, nothing in memory, answers the same set the same way
    pbm.stop()
    pbm.start()
    again = _squeezed(pbm.text(orders("ann", RMPM_MAILS[2][1])))

    def analysis(text: str) -> str:
        return text[text.index("How your orders would run"):text.index("Before you")]

    assert analysis(again) == analysis(replies[2])
    assert pbm.state("world") == expected

    # the week runs on the orders as held, and writes the state whole again
    pbm.run_turn("world")
    # the game's deadline is the real clock's next Saturday 03:00: in the day
    # before it, hal's reminder may come before the report
    for count in range(1, 4):
        reports = [m for m in pbm.wait_for("hal@example.org", count) if "report of week" in str(m["Subject"])]
        if reports:
            break
    assert reports, [str(m["Subject"]) for m in pbm.inbox("hal@example.org")]
    report = _squeezed(pbm.text(reports[0]))
    assert ("01 an: encounter on 04-05 with bo (Bob), AN 89: each of the 5 other players pays up to 50 WCU to an: "
            "175 WCU in all") in report
    assert "01 an: bought 04-05 for 500 WCU" in report
    assert "LEFT THE GAME: 05 ev Eve" in report
    assert "01 an Ann 05-05 10-10 04-05 10-13 9 89 68" in report
    assert "04 da Dan 07-07 20-22 07-07 20-22 - 9 20" in report
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0
    after = pbm.state("world")
    assert after["orders"] == {} and after["week"] == 2 and "eve" not in after["players"]
    assert after["players"]["ann"]["capital"] == 675


# -- giveaway: a JOIN before round 1 is one entry of the joins --------------------------------
def _joining(handles: list[str]) -> dict:
    """A giveaway before round 1 as every version stored it: all players in the list."""
    return {"schema": 1, "options": {"no_order": "forfeit", "round_limit": 0}, "round": 1, "status": "joining",
            "players": [{"handle": h, "holding": 3, "active": True, "score": None, "left_round": None}
                        for h in handles],
            "orders": {}, "winner": None, "end_note": None, "last": None}


def _accounts(pbm, handles: list[str]) -> None:
    """Accounts (the tests' one password) that play in no game yet."""
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account

    db = Database(pbm.db_url)
    hashed = hash_password(PASSWORD)
    with db.write() as s:
        s.add_all(Account(handle=h, handle_key=h, handle_skeleton=h, email=f"{h}@example.org", password_hash=hashed,
                          created_at=pbm.now()) for h in handles)
    db.dispose()


def test_giveaway_joins_are_entries_and_read_back_as_the_worker_had_them(pbm_stopped):
    pbm = pbm_stopped
    listed = ["ann", "bob", "cy", "dan", "eve", "fay"]
    store_game(pbm, "giveaway", "gift", _joining(listed), listed)
    _accounts(pbm, ["gil", "hoa", "ivo"])
    pbm.start()
    document = pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'gift'")[0][0]
    mails: list[tuple[str, list[str]]] = []

    def send(who: str, *lines: str) -> str:
        mails.append((who, list(lines)))
        return _squeezed(pbm.text(pbm.mail(f"{who}@example.org", "gift", f"$${PASSWORD}$$\n" + "\n".join(lines) + "\n")))

    # the replies are word for word those of the version that rewrote the players list
    assert "accepted: you are in the game with 3 points for round 1 (7 players so far; a round needs at least 3)" \
        in send("gil", "JOIN")
    both = send("hoa", "JOIN", "GIVE 3 TO ann")
    assert "(8 players so far; a round needs at least 3)" in both and "accepted: 3 points to ann" in both
    assert "REFUSED (line 2): you are already playing in this game" in send("gil", "JOIN")
    assert "accepted: 3 points to gil" in send("ann", "GIVE 3 TO gil")

    # the document was never written; the joins and the orders are rows of their own
    assert pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'gift'")[0][0] == document
    assert sorted(pbm.sql("SELECT field, key FROM state_entries")) == [
        ("joins", "gil"), ("joins", "hoa"), ("orders", "ann"), ("orders", "hoa")]
    expected = _replayed("giveaway", _joining(listed), mails)
    assert pbm.state("gift") == expected and list(expected["joins"]) == ["gil", "hoa"]

    status = {h: _squeezed(pbm.text(pbm.mail(f"{h}@example.org", "pbm", f"$${PASSWORD}$$\nstatus")))
              for h in ("gil", "hoa")}
    assert "gift@pbm.test Giveaway (giveaway), running" in status["gil"]
    assert "no orders from you yet for this round" in status["gil"]
    assert "your orders for this round are held" in status["hoa"]

    # a LEAVE writes the game whole: the joiners are in the list now, in join order
    assert "accepted: you have left the game before round 1" in send("bob", "LEAVE")
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0
    whole = pbm.state("gift")
    assert [p["handle"] for p in whole["players"]] == ["ann", "cy", "dan", "eve", "fay", "gil", "hoa"]
    assert "joins" not in whole
    assert "(8 players so far; a round needs at least 3)" in send("ivo", "JOIN")
    expected = _replayed("giveaway", _joining(listed), mails)
    assert pbm.state("gift") == expected

    # a restarted server, nothing in memory, sees the same game
    pbm.stop()
    pbm.start()
    assert pbm.state("gift") == expected
    view = _squeezed(pbm.text(pbm.mail("ivo@example.org", "pbm", f"$${PASSWORD}$$\nstatus gift")))
    assert "Round 1 has not been played yet: players may still JOIN (8 so far)." in view
    assert "Orders received: 2 of 8." in view
    assert "REFUSED (line 2): you are already playing in this game" in send("ivo", "JOIN")

    # the round runs with everybody who joined; the state is written whole again
    pbm.run_turn("gift")
    wait_until(lambda: any("round 1 report" in str(m["Subject"]) for m in pbm.inbox("ivo@example.org")))
    report = _squeezed(pbm.text(next(m for m in pbm.inbox("ivo@example.org") if "round 1 report" in str(m["Subject"]))))
    assert "ann held 3 and gave 3 to gil." in report
    assert "hoa held 3 and gave 3 to ann." in report
    assert "ivo held 3, sent no order and forfeited all of it." in report
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0
    after = pbm.state("gift")
    assert [p["handle"] for p in after["players"]] == ["ann", "cy", "dan", "eve", "fay", "gil", "hoa", "ivo"]
    assert after["round"] == 2 and "joins" not in after
