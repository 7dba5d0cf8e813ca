"""Curio as pbmserv players knew it, over SMTP (issue 18.5): `curio history`,
`curio show <board>#<n>` from the requester's side as it stood then (never a
face they could not see then), `curio games <userid>`, `curio ratings` and
both ratings on the board mail; refusals that change nothing."""

from __future__ import annotations

import json
import re

from games.curio.view import parse_ascii_board

PW = {"alice": "alice-pass-1", "bob": "bob-pass-22", "carol": "carol-pass-333"}

#: board 101 from a fixed start, so the test knows every face: Light's c2
#: (4 toward Light, 1 toward Dark) takes Dark's c3 on move 3 and turns round.
STATE = {
    "version": 1,
    "next_board": 102,
    "boards": {
        "101": {
            "number": 101, "light": "alice", "dark": "bob",
            "setup": {"base": 4, "rows": 5, "cols": 5, "num_pieces": 10, "turn": True, "limit": True,
                      "face": "large", "capture": "le", "draw_moves": 50},
            "seed": 0,
            "start": {"to_move": "light", "ply": 0, "quiet": 0, "pieces": {
                "a1": {"side": "light", "own": 2, "other": 1, "revealed": False},
                "c2": {"side": "light", "own": 4, "other": 1, "revealed": False},
                "c3": {"side": "dark", "own": 3, "other": 2, "revealed": False},
                "e5": {"side": "dark", "own": 4, "other": 4, "revealed": False},
            }},
            "moves": [],
            "status": "active",
            "started": "2026-11-20T10:00:00+00:00",
        }
    },
}


def setup(pbm) -> dict[str, str]:
    """alice, bob and carol registered; the curio game holds board 101 with
    its three moves played by mail."""
    addr = {h: pbm.register(h, pw) for h, pw in PW.items()}
    STATE["boards"]["101"]["position"] = STATE["boards"]["101"]["start"]
    path = pbm.tmp / "curio.json"
    path.write_text(json.dumps(STATE))
    pbm.cli("game", "import", "curio", "curio", str(path))
    for who, move in (("alice", "a1-a2#1"), ("bob", "e5-e4#2"), ("alice", "c2-c3#3")):
        text = pbm.flat(pbm.mail(addr[who], "pbm", f"curio move 101 {who} {PW[who]} {move}"))
        assert "REFUSED" not in text, text
    return addr


def board_after(text: str, n: int) -> dict[str, str]:
    m = re.search(rf"Position after move {n}:\n", text)
    assert m, text
    return parse_ascii_board(text[m.end():])


def moves_of(pbm) -> list[str]:
    return pbm.state("curio")["boards"]["101"]["moves"]


def test_history_and_the_position_after_move_n_as_the_requester_saw_it(pbm):
    addr = setup(pbm)
    # bob's board mail after the capture: he knows both faces of the piece on c3 now
    last = pbm.text(pbm.wait_for(addr["bob"], 1)[-1])
    assert board_after(last, 3)["c3"] == "(41)", last

    history = pbm.text(pbm.mail(addr["carol"], "pbm", "curio history 101"))
    assert "accepted: the 3 moves of board 101 follow" in history, history
    for line in ("   1. alice (Light) a1-a2", "   2. bob (Dark)    e5-e4", "   3. alice (Light) c2xc3  capture",
                 "Still running: move 4, bob (Dark) to move."):
        assert line in history, history

    # after move 2 bob saw only the 1 of alice's c2 piece: the 4 is not shown
    reply = pbm.text(pbm.mail(addr["bob"], "pbm", f"curio show 101#2\n$${PW['bob']}$$"))
    assert "accepted: board 101 after move 2, as bob saw it" in reply, reply
    then = board_after(reply, 2)
    assert then["c2"] == "(1)" and then["c3"] == "[3]" and then["e4"] == "[4]", then
    assert "(41)" not in reply and "(14)" not in reply and "[14]" not in reply, reply
    assert "Ratings: alice 1500 (no rated boards yet), bob 1500 (no rated boards yet)." in " ".join(reply.split())
    # a stranger (or a player without the password) gets what both players knew then
    seen = board_after(pbm.text(pbm.mail(addr["carol"], "pbm", "curio show 101#2")), 2)
    assert seen["c2"] == "[?]" and seen["c3"] == "(?)", seen
    seen = board_after(pbm.text(pbm.mail(addr["alice"], "pbm", "curio show 101#2")), 2)
    assert seen["c2"] == "[?]", seen
    # showas with the inline password: alice's own faces, the enemy's face toward her
    mine = pbm.mail(addr["alice"], "pbm", f"curio showas alice {PW['alice']} 101#0")
    start = board_after(pbm.text(mine), 0)
    assert (start["a1"], start["c2"], start["c3"], start["e5"]) == ("[2]", "[4]", "(2)", "(4)"), start
    assert "curio showas alice **** 101#0" in pbm.text(mine)
    assert moves_of(pbm) == ["a1-a2", "e5-e4", "c2xc3"]


def test_refusals_name_what_was_wrong_and_change_nothing(pbm):
    addr = setup(pbm)
    before = pbm.state("curio")
    reply = pbm.flat(pbm.mail(addr["bob"], "pbm", "\n".join([
        "curio show 101#7", "curio show 999#1", "curio history 999", "curio games zed", "curio show 101#two",
        f"$${PW['bob']}$$"])))
    assert "board 101 has no move #7; 3 moves have been played: #0 (the start) to #3" in reply, reply
    assert "there is no curio board 999 (boards here: 101)" in reply, reply
    assert "there is no account named zed" in reply, reply
    assert "write the board number, and #n for the position after move n" in reply, reply
    assert reply.count("REFUSED") == 5, reply
    assert "Position after move" not in reply
    assert moves_of(pbm) == ["a1-a2", "e5-e4", "c2xc3"]
    assert pbm.state("curio") == before


def test_games_ratings_and_both_ratings_on_the_board_mail(pbm):
    addr = setup(pbm)
    listed = pbm.text(pbm.mail(addr["carol"], "pbm", "curio games alice"))
    assert "101  against bob, alice plays Light: move 4, bob to move" in listed, listed
    assert "Curio boards of alice: 1 running (alice to move on 0), 0 over. Rating: 1500" in " ".join(listed.split()), listed

    pbm.mail(addr["bob"], "pbm", f"curio move 101 bob {PW['bob']} resign")
    told = pbm.wait_for(addr["alice"], 1)[-1]
    assert "bob resigned" in pbm.flat(told)
    line = "Ratings: alice 1516 (1 rated board), bob 1484 (1 rated board)."
    assert line in pbm.flat(told), pbm.flat(told)
    assert line in (pbm.html(told) or ""), pbm.html(told)

    table = pbm.text(pbm.mail(addr["carol"], "curio", "curio ratings"))
    assert "Elo ratings over 1 finished board (everyone starts at 1500, K=32, a draw counts half)." in " ".join(table.split())
    assert "  1  alice     1516       1    1      0     0" in table, table
    assert "  2  bob       1484       1    0      0     1" in table, table

    listed = pbm.text(pbm.mail(addr["carol"], "pbm", "curio games bob"))
    assert "101  against alice, bob plays Dark: over after 3 moves, alice won" in listed, listed
    assert "Rating: 1484 (1 rated board)" in " ".join(listed.split()), listed

    # a new board between them shows both ratings from its first mail
    challenge = pbm.flat(pbm.mail(addr["bob"], "pbm", f"curio challenge bob alice $${PW['bob']}$$"))
    assert "Ratings: bob 1484 (1 rated board), alice 1516 (1 rated board)." in challenge, challenge


def test_help_curio_lists_the_new_commands(pbm):
    addr = pbm.register("carol", PW["carol"])
    text = pbm.flat(pbm.mail(addr, "pbm", "help curio"))
    for usage in ("curio history <board>", "curio show <board>[#<n>]", "curio games <userid>", "curio ratings"):
        assert usage in text, text
