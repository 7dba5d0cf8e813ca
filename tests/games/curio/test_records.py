"""Curio as pbmserv players knew it (issue 18.5), through CurioRules: the
history of a board, the position after move n as the requester saw it then,
a player's boards, and Elo ratings derived from the finished boards."""

from __future__ import annotations

import copy

import pytest

from games.curio.boards import Board, CurioState
from games.curio.model import DARK, Position, Setup, Square
from games.curio.ratings import START, K, Ratings, expected
from games.curio.state import check as check_state
from games.curio.view import parse_ascii_board
from tests.games.curio.oracle import expected_token
from tests.games.curio.test_rules import PASSWORDS, Table, everything

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

#: A small start: Light's c2 (4 toward Light, 1 toward Dark) can take Dark's c3
#: (3 toward Dark, 2 toward Light) on move 3; Dark's e5 (4/4) keeps Dark in the game.
START_POSITION = {
    "to_move": "light", "ply": 0, "quiet": 0,
    "pieces": {
        "a1": {"side": "light", "own": 2, "other": 1, "revealed": False},
        "c2": {"side": "light", "own": 4, "other": 1, "revealed": False},
        "c3": {"side": "dark", "own": 3, "other": 2, "revealed": False},
        "e5": {"side": "dark", "own": 4, "other": 4, "revealed": False},
    },
}
MOVES = ["a1-a2", "e5-e4", "c2-c3"]  # the last one captures


def table_with_board(**board: object) -> Table:
    """A Table whose game holds board 101 (alice Light, bob Dark) from START_POSITION."""
    t = Table()
    setup = Setup()
    start = copy.deepcopy(START_POSITION)
    b = Board(number=101, light="alice", dark="bob", setup=setup, seed=0,
              position=Position.from_json(setup, start), start=start, started="2026-11-20T10:00:00+00:00")
    for key, value in board.items():
        setattr(b, key, value)
    t.state = CurioState(boards={101: b}, next_board=102).to_state()
    return t


def played() -> Table:
    t = table_with_board()
    for i, move in enumerate(MOVES):
        who = "alice" if i % 2 == 0 else "bob"
        out = t.move(who, move)
        assert out.results[0].ok, out.results[0].message
    assert t.board().moves == ["a1-a2", "e5-e4", "c2xc3"]
    return t


def cells(section) -> dict[str, str]:
    return parse_ascii_board(section.data["grid"])


# -- the record ------------------------------------------------------------------------------

def test_every_earlier_position_is_replayed_from_the_record():
    t = played()
    board = t.board()
    assert board.position_after(0).to_json() == START_POSITION
    assert Square.parse("c2") in board.position_after(2).pieces
    assert board.position_after(3).to_json() == board.position.to_json()
    with pytest.raises(ValueError, match="moves 0 to 3"):
        board.position_after(4)


def test_a_state_stored_before_ended_existed_still_loads():
    t = played()
    old = copy.deepcopy(t.state)
    for b in old["boards"].values():
        del b["ended"]
    state = check_state(old)
    assert state.boards[101].ended == "" and state.boards[101].moves == ["a1-a2", "e5-e4", "c2xc3"]


# -- history -------------------------------------------------------------------------------

def test_history_lists_every_move_with_who_and_the_captures():
    t = played()
    out = t.send("carol", "curio history 101")
    assert out.results[0].ok and out.results[0].message == "accepted: the 3 moves of board 101 follow"
    [section] = out.sections
    assert section.title == "Curio board 101: every move"
    lines = section.text.splitlines()
    assert lines[0] == "Curio board 101: alice (Light) vs bob (Dark), started 2026-11-20."
    assert "   1. alice (Light) a1-a2" in lines
    assert "   2. bob (Dark)    e5-e4" in lines
    assert "   3. alice (Light) c2xc3  capture" in lines
    assert "3 moves, 1 capture." in lines
    assert "Still running: move 4, bob (Dark) to move." in lines
    assert "curio show 101#<n> (n from 0, the start, to 3)" in section.text
    assert out.state == t.history[-2]  # asking changes nothing


def test_history_of_a_finished_board_says_how_it_ended():
    t = played()
    t.send("bob", f"curio resign 101 bob {PASSWORDS['bob']}")
    text = t.send("carol", "curio history 101").sections[0].text
    assert "Game over: alice won, bob resigned." in text


def test_history_refuses_an_unknown_board_and_a_bad_line():
    t = played()
    out = t.send("carol", "curio history 999", "curio history", "curio history 101 102")
    assert [r.ok for r in out.results] == [False, False, False]
    assert out.results[0].message == "there is no curio board 999 (boards here: 101)"
    assert "expected curio history <board>" in out.results[1].message
    assert not out.sections


# -- the position after move n -----------------------------------------------------------------

def test_show_n_hides_a_face_the_requester_could_not_see_then():
    """After move 3 bob knows both faces of alice's c2 piece (it captured and
    turned); after move 2 he saw only its 1, and `show 101#2` shows him only that."""
    t = played()
    board = t.board()
    now = t.send("bob", "curio show 101#3", authenticated=True)
    assert cells(now.sections[0])["c3"] == "(41)"  # known to bob now
    out = t.send("bob", "curio show 101#2", authenticated=True)
    assert out.results[0].message == "accepted: board 101 after move 2, as bob saw it"
    [section] = out.sections
    assert section.title == "Curio board 101 after move 2" and section.template == "board.txt"
    shown = cells(section)
    assert shown["c2"] == "(1)" and shown["c3"] == "[3]" and shown["a2"] == "(1)"
    then = board.position_after(2)
    for name, token in shown.items():  # everything else as bob saw it then, too
        assert token == expected_token(then.pieces.get(Square.parse(name)), DARK), name
    assert "(41)" not in everything(out) and "(14)" not in everything(out)
    assert section.data["after_move"] == 2 and section.data["side"] == "Dark"
    assert section.data["status"].startswith("The board as it stood after move 2 (Light to move then)")
    assert section.data["last_moves"] == ["  1. Light a1-a2", "  2. Dark  e5-e4"]
    assert not section.data["hint"] and not section.data["your_turn"]


def test_show_n_from_lights_side_never_shows_the_captured_pieces_own_face():
    t = played()
    shown = cells(t.send("alice", "curio show 101#0", authenticated=True).sections[0])
    assert shown == {**{k: v for k, v in shown.items() if v == "."},
                     "a1": "[2]", "c2": "[4]", "c3": "(2)", "e5": "(4)"}


def test_show_n_without_a_password_or_to_a_stranger_is_the_observers_view():
    t = played()
    # a From alone is not proof: alice's own faces stay hidden
    out = t.send("alice", "curio show 101#2")
    shown = cells(out.sections[0])
    assert shown["c2"] == "[?]" and shown["c3"] == "(?)"
    assert out.sections[0].data["observer"]
    assert "put your $$password$$ in the mail" in out.sections[0].data["headlines"][0]
    assert out.results[0].message == "accepted: board 101 after move 2, as an observer could see it"
    # an observer after move 3 sees the turned piece's two faces (both players know them)
    shown = cells(t.send("carol", "curio show 101#3", authenticated=True).sections[0])
    assert shown["c3"] == "[14]" and shown["e4"] == "(?)"


def test_showas_takes_a_move_number_too():
    t = played()
    out = t.send("bob", f"curio showas bob {PASSWORDS['bob']} 101#2")
    assert out.results[0].ok and out.results[0].text == "curio showas bob **** 101#2"
    assert cells(out.sections[0])["c2"] == "(1)"


def test_show_n_refuses_a_move_out_of_range_naming_the_range():
    t = played()
    out = t.send("bob", "curio show 101#4", "curio show 101#x", "curio show 999#1", authenticated=True)
    assert [r.ok for r in out.results] == [False, False, False]
    assert out.results[0].message == ("board 101 has no move #4; 3 moves have been played: "
                                      "#0 (the start) to #3")
    assert "write the board number, and #n for the position after move n" in out.results[1].message
    assert out.results[2].message.startswith("there is no curio board 999")
    assert not out.sections
    fresh = table_with_board()
    out = fresh.send("alice", "curio show 101#1", authenticated=True)
    assert out.results[0].message == ("board 101 has no move #1; no move has been played yet, "
                                      "so only #0 (the start)")


# -- a player's boards ---------------------------------------------------------------------------

def test_games_lists_a_players_boards_opponent_and_whose_move():
    t = played()
    t.send("carol", "curio challenge carol alice", authenticated=True)  # board 102
    t.send("alice", "curio challenge alice carol", authenticated=True)  # board 103
    t.send("carol", f"curio resign 103 carol {PASSWORDS['carol']}")  # declined
    out = t.send("bob", "curio games alice")
    assert out.results[0].message == "accepted: 3 boards of alice listed"
    lines = out.sections[0].text.splitlines()
    assert lines[0] == ("Curio boards of alice: 2 running (alice to move on 0), 1 over. "
                        "Rating: 1500 (no rated boards yet).")
    assert "101  against bob, alice plays Light: move 4, bob to move" in lines
    assert "102  against carol, alice plays Dark: move 1, carol to move" in lines
    assert "103  against carol, alice plays Light: declined" in lines
    assert lines.index("103  against carol, alice plays Light: declined") == len(lines) - 1


def test_games_refuses_an_unknown_userid_and_says_when_a_player_has_none():
    t = played()
    out = t.send("bob", "curio games zed", "curio games carol", "curio games alice bob")
    assert [r.ok for r in out.results] == [False, True, False]
    assert out.results[0].message.startswith("there is no account zed; expected curio games <userid>")
    assert "carol has no curio boards here." in out.sections[0].text
    assert "name one player" in out.results[2].message
    assert out.results[2].text == "curio games **** ****"  # either word might be a password


def test_games_without_a_userid_is_still_the_list_of_boards():
    t = played()
    out = t.send("carol", "curio games")
    assert out.results[0].ok and out.sections[0].title == "Curio boards"


# -- ratings ---------------------------------------------------------------------------------------

def finished(number: int, light: str, dark: str, winner: str | None, ended: str) -> Board:
    setup = Setup()
    start = copy.deepcopy(START_POSITION)
    return Board(number=number, light=light, dark=dark, setup=setup, seed=0,
                 position=Position.from_json(setup, start), start=start, status="finished",
                 winner=winner, reason="test", ended=ended)


def test_elo_start_k_and_draws_counting_half():
    assert (START, K) == (1500, 32)
    first = Ratings([finished(101, "alice", "bob", "alice", "2026-11-01T00:00:00+00:00")])
    assert (first.of("alice").value, first.of("bob").value) == (1516.0, 1484.0)
    # a draw against a weaker player costs the stronger one
    both = Ratings([finished(101, "alice", "bob", "alice", "2026-11-01T00:00:00+00:00"),
                    finished(102, "bob", "Alice", None, "2026-11-02T00:00:00+00:00")])
    change = K * (0.5 - expected(1516.0, 1484.0))
    assert both.of("ALICE").value == pytest.approx(1516.0 + change)
    assert (both.of("alice").shown, both.of("bob").shown) == (1515, 1485)
    assert (both.of("alice").wins, both.of("alice").draws, both.of("bob").losses) == (1, 1, 1)
    assert both.of("nobody").shown == 1500 and both.of("nobody").games == 0


def test_boards_are_rated_in_the_order_they_ended_and_only_finished_ones():
    # 102 ended first: bob beats carol, then alice beats bob (a 1516 player)
    boards = [finished(101, "alice", "bob", "alice", "2026-11-05T00:00:00+00:00"),
              finished(102, "bob", "carol", "bob", "2026-11-01T00:00:00+00:00")]
    declined = finished(103, "alice", "carol", None, "2026-11-02T00:00:00+00:00")
    declined.status = "declined"
    running = finished(104, "carol", "alice", None, "")
    running.status = "active"
    r = Ratings([*boards, declined, running])
    assert [b.number for b in r.boards] == [102, 101]
    assert r.of("alice").value == pytest.approx(1500 + K * (1 - expected(1500, 1516)))
    assert r.of("carol").value == 1484.0 and r.of("carol").games == 1
    table = r.text().splitlines()
    assert table[0] == "Elo ratings over 2 finished boards (everyone starts at 1500, K=32, a draw counts half)."
    assert [line.split()[1] for line in table[3:]] == ["alice", "bob", "carol"]


def test_ratings_are_derived_from_the_record_and_shown_on_the_board_mail():
    t = played()
    out = t.send("bob", f"curio resign 101 bob {PASSWORDS['bob']}")
    line = "Ratings: alice 1516 (1 rated board), bob 1484 (1 rated board)."
    assert out.sections[0].data["ratings"] == line
    assert out.notices[0].data["ratings"] == line
    assert t.board().ended == t.now.isoformat()
    table = t.send("carol", "curio ratings")
    assert table.results[0].message == "accepted: 2 rated players listed"
    text = table.sections[0].text
    assert "  1  alice     1516       1    1      0     0" in text, text
    assert "  2  bob       1484       1    0      0     1" in text, text
    # recomputed from the stored record alone: nothing about ratings is stored
    assert "rating" not in repr(t.state).lower()
    again = Ratings(CurioState.from_state(copy.deepcopy(t.state)).boards.values())
    assert again.text() == text
    # a new board between them shows both ratings from the start
    out = t.send("bob", "curio challenge bob alice", authenticated=True)
    assert out.sections[0].data["ratings"] == "Ratings: bob 1484 (1 rated board), alice 1516 (1 rated board)."


def test_ratings_with_no_finished_board_and_a_bad_line():
    t = table_with_board()
    out = t.send("carol", "curio ratings", "curio ratings alice")
    assert out.results[0].ok and "No board has finished yet: every player stands at 1500." in out.sections[0].text
    assert not out.results[1].ok and "ratings takes nothing after it" in out.results[1].message


def test_help_lists_the_new_commands():
    from games.curio import RULES

    text = RULES.help_text()
    for usage in ("curio history <board>", "curio show <board>[#<n>]", "curio games <userid>", "curio ratings"):
        assert usage in text, usage
