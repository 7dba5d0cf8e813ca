"""The curio engine: layout, what each side sees, movement, capture, turning, end."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from games.curio.model import (
    DARK,
    LIGHT,
    IllegalMove,
    Move,
    Piece,
    Position,
    Setup,
    SetupError,
    Square,
    layout,
    replay,
)
from games.curio.view import ascii_board, parse_ascii_board

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def sq(name: str) -> Square:
    return Square.parse(name)


def position(pieces: dict[str, tuple[str, int, int] | tuple[str, int, int, bool]], to_move=LIGHT,
             **options) -> Position:
    """A position from {"d2": ("light", own, other[, revealed])}."""
    setup = Setup(**options).validate()
    return Position(setup, {sq(k): Piece(*v) for k, v in pieces.items()}, to_move)


def expected_token(piece: Piece | None, viewer: str | None) -> str:
    """What a square must show to ``viewer``, worked out from the rules
    independently of games.curio.view."""
    if piece is None:
        return "."
    if viewer is None:
        faces = f"{piece.own}{piece.other}" if piece.revealed else "?"
        return f"[{faces}]" if piece.side == LIGHT else f"({faces})"
    if piece.side == viewer:
        near, far = piece.own, piece.other
    else:
        near, far = piece.other, piece.own
    faces = f"{near}{far}" if piece.revealed else f"{near}"
    return f"[{faces}]" if piece.side == viewer else f"({faces})"


# -- setup and layout ------------------------------------------------------------------

def test_default_layout_has_every_pair_on_the_two_home_rows():
    setup = Setup()
    pieces = layout(setup, 12345)
    for side, ranks in ((LIGHT, {0, 1}), (DARK, {3, 4})):
        mine = {s: p for s, p in pieces.items() if p.side == side}
        assert len(mine) == 10
        assert {s.rank for s in mine} == ranks
        pairs = sorted((min(p.own, p.other), max(p.own, p.other)) for p in mine.values())
        assert pairs == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 2), (2, 3), (2, 4), (3, 3), (3, 4), (4, 4)]
        assert all(p.own >= p.other for p in mine.values())  # -face_large
        assert not any(p.revealed for p in mine.values())


def test_layout_comes_only_from_the_seed():
    setup = Setup()
    assert layout(setup, 7) == layout(setup, 7)
    assert layout(setup, 7) != layout(setup, 8)


def test_each_player_sees_own_large_faces_and_enemy_small_faces_at_the_start():
    start = Position.initial(Setup(), 99)
    for viewer in (LIGHT, DARK):
        shown = parse_ascii_board(ascii_board(start, viewer))
        assert len(shown) == 25
        own_faces, enemy_faces = Counter(), Counter()
        for name, token in shown.items():
            piece = start.pieces.get(sq(name))
            if piece is None:
                assert token == "."
                continue
            value = int(token[1:-1])
            if piece.side == viewer:
                assert token == f"[{max(piece.own, piece.other)}]"
                own_faces[value] += 1
            else:
                assert token == f"({min(piece.own, piece.other)})"
                enemy_faces[value] += 1
        # larger faces of 11..44: one 1, two 2s, three 3s, four 4s; smaller: the reverse
        assert own_faces == Counter({1: 1, 2: 2, 3: 3, 4: 4})
        assert enemy_faces == Counter({1: 4, 2: 3, 3: 2, 4: 1})


def test_observer_sees_no_face_before_a_capture():
    start = Position.initial(Setup(), 3)
    shown = parse_ascii_board(ascii_board(start, None))
    assert Counter(shown.values()) == Counter({"[?]": 10, "(?)": 10, ".": 5})


def test_dark_sees_the_board_turned_round():
    start = Position.initial(Setup(), 5)
    light_rows = ascii_board(start, LIGHT).splitlines()
    dark_rows = ascii_board(start, DARK).splitlines()
    assert light_rows[0].split() == list("abcde") and dark_rows[0].split() == list("edcba")
    assert light_rows[1].split()[0] == "5" and dark_rows[1].split()[0] == "1"
    # Dark's own pieces ([n]) are on the two bottom rows of Dark's drawing
    assert "[" in dark_rows[5] and "[" in dark_rows[4] and "[" not in dark_rows[1]


def test_face_small_puts_the_smaller_face_toward_the_owner():
    pieces = layout(Setup(face="small"), 4)
    assert all(p.own <= p.other for p in pieces.values())
    start = Position(Setup(face="small"), pieces)
    shown = parse_ascii_board(ascii_board(start, LIGHT))
    own = Counter(int(t[1]) for t in shown.values() if t.startswith("["))
    assert own == Counter({1: 4, 2: 3, 3: 2, 4: 1})


def test_face_random_mixes_orientations_and_repeats_per_seed():
    setup = Setup(face="random")
    pieces = layout(setup, 11)
    assert layout(setup, 11) == pieces
    mixed = [p for p in pieces.values() if p.own != p.other]
    assert any(p.own > p.other for p in mixed) and any(p.own < p.other for p in mixed)


def test_base_rows_cols_and_num_pieces_change_the_layout():
    pieces = layout(Setup(base=3, rows=6, cols=3), 1)
    assert Counter(p.side for p in pieces.values()) == {LIGHT: 6, DARK: 6}
    assert {s.rank for s, p in pieces.items() if p.side == DARK} == {4, 5}
    assert max(max(p.own, p.other) for p in pieces.values()) == 3
    doubled = layout(Setup(base=3, num_pieces=12, cols=6), 1)
    assert Counter(p.side for p in doubled.values()) == {LIGHT: 12, DARK: 12}
    assert {s.file for s in doubled} == set(range(6))
    # fewer pieces than squares: the home row fills first
    few = layout(Setup(base=2, cols=4), 2)
    assert {s.rank for s, p in few.items() if p.side == LIGHT} == {0}
    assert {s.rank for s, p in few.items() if p.side == DARK} == {4}
    five = layout(Setup(base=2, cols=4, num_pieces=6), 2)
    assert Counter(s.rank for s, p in five.items() if p.side == LIGHT) == {0: 4, 1: 2}


@pytest.mark.parametrize("options, message", [
    ({"num_pieces": 20}, "cannot lay out 20 pieces per side on two rows of 5 squares (at most 10 fit)"),
    ({"base": 5}, "cannot lay out 15 pieces per side on two rows of 5 squares"),
    ({"num_pieces": 12}, "-num_pieces must be a multiple of 10"),
    ({"rows": 3}, "-rows must be 4 to 26"),
    ({"base": 0}, "-base must be 1 to 9"),
    ({"cols": 27}, "-cols must be 1 to 26"),
    ({"draw_moves": -1}, "-draw_moves must be 0"),
])
def test_setups_that_cannot_be_laid_out_are_refused(options, message):
    with pytest.raises(SetupError) as err:
        Setup(**options).validate()
    assert message in str(err.value)


def test_larger_base_fits_with_more_columns():
    assert Setup(base=5, cols=8).validate().pieces_per_side == 15


# -- movement ----------------------------------------------------------------------------

def test_range_is_the_face_the_owner_sees():
    pos = position({"c1": (LIGHT, 2, 4), "e5": (DARK, 4, 4)})
    assert pos.play(Move.parse("c1-c3")).pieces[sq("c3")] == Piece(LIGHT, 2, 4)
    assert pos.play(Move.parse("c1-a3")).pieces[sq("a3")] == Piece(LIGHT, 2, 4)  # diagonal
    with pytest.raises(IllegalMove, match="shows you 2, so it moves at most 2 squares; c4 is 3 away"):
        pos.check(LIGHT, Move.parse("c1-c4"))


def test_no_limit_lets_a_piece_cross_the_board():
    pos = position({"a1": (LIGHT, 1, 4), "e5": (DARK, 4, 4)}, limit=False)
    assert pos.check(LIGHT, Move.parse("a1-a5")) == Move(sq("a1"), sq("a5"))
    limited = position({"a1": (LIGHT, 1, 4), "e5": (DARK, 4, 4)})
    with pytest.raises(IllegalMove):
        limited.check(LIGHT, Move.parse("a1-a3"))


@pytest.mark.parametrize("move, reason", [
    ("c1-d3", "c1 to d3 is not a straight line"),
    ("c1-c1", "at least one square"),
    ("c1-c4", "blocked on c2"),
    ("b1-b2", "there is no piece on b1"),
    ("d4-d3", "the piece on d4 is not yours"),
    ("c1-c2", "c2 holds one of your own pieces"),
    ("c1-c9", "c9 is off the board (a1 to e5)"),
])
def test_illegal_moves_say_why(move, reason):
    pos = position({"c1": (LIGHT, 4, 1), "c2": (LIGHT, 1, 1), "d4": (DARK, 2, 1)})
    with pytest.raises(IllegalMove, match=re.escape(reason)):
        pos.check(LIGHT, Move.parse(move))


def test_legal_moves_of_a_lone_piece_in_the_corner():
    pos = position({"a1": (LIGHT, 1, 4), "e5": (DARK, 4, 4)})
    assert sorted(m.plain for m in pos.legal_moves()) == ["a1-a2", "a1-b1", "a1-b2"]


# -- capture ---------------------------------------------------------------------------

def test_capture_compares_the_faces_the_mover_sees():
    # the target's owner sees 1 on it, but Light sees 3: a 2 may not take it
    pos = position({"c1": (LIGHT, 2, 4), "c3": (DARK, 1, 3), "a5": (DARK, 4, 4)})
    with pytest.raises(IllegalMove, match=r"showing you 2\) may capture only pieces of lesser or "
                                          r"equal value; the piece on c3 shows you 3"):
        pos.check(LIGHT, Move.parse("c1-c3"))
    # and the other way round: Dark's 4 looks like a 2 to Light, so a 2 may take it
    pos = position({"c1": (LIGHT, 2, 4), "c3": (DARK, 4, 2), "a5": (DARK, 4, 4)})
    assert pos.check(LIGHT, Move.parse("c1-c3")).capture


def test_capture_turns_the_piece_and_reveals_both_faces():
    pos = position({"c1": (LIGHT, 2, 3), "c3": (DARK, 4, 2), "a5": (DARK, 4, 4)})
    after = pos.play(Move.parse("c1-c3"))
    assert sq("c1") not in after.pieces
    assert after.pieces[sq("c3")] == Piece(LIGHT, 3, 2, True)
    assert after.count(DARK) == 1 and after.quiet == 0 and after.to_move == DARK
    assert parse_ascii_board(ascii_board(after, LIGHT))["c3"] == "[32]"
    assert parse_ascii_board(ascii_board(after, DARK))["c3"] == "(23)"
    assert parse_ascii_board(ascii_board(after, None))["c3"] == "[32]"
    # its range is now the new face toward its owner: 3
    light_again = Position(after.setup, after.pieces, LIGHT)
    assert light_again.check(LIGHT, Move.parse("c3-c5")) == Move(sq("c3"), sq("c5"))
    # and it turns again on the next capture
    pos2 = Position(after.setup, {**after.pieces, sq("c5"): Piece(DARK, 1, 1)}, LIGHT)
    again = pos2.play(Move.parse("c3-c5"))
    assert again.pieces[sq("c5")] == Piece(LIGHT, 2, 3, True)


def test_no_turn_keeps_faces_hidden_after_a_capture():
    pos = position({"c1": (LIGHT, 2, 3), "c3": (DARK, 4, 2), "a5": (DARK, 4, 4)}, turn=False)
    after = pos.play(Move.parse("c1-c3"))
    assert after.pieces[sq("c3")] == Piece(LIGHT, 2, 3, False)
    assert parse_ascii_board(ascii_board(after, DARK))["c3"] == "(3)"


# (rule, attacker own/other, target own/other, may capture)
CAPTURES = [
    ("lt", (3, 1), (4, 2), True), ("lt", (3, 1), (4, 3), False),
    ("le", (3, 1), (1, 3), True), ("le", (3, 1), (1, 4), False),
    ("gt", (2, 1), (1, 3), True), ("gt", (2, 1), (1, 2), False),
    ("ge", (2, 1), (1, 2), True), ("ge", (2, 1), (4, 1), False),
    ("lt_total", (3, 1), (1, 2), True), ("lt_total", (3, 1), (2, 2), False),
    ("le_total", (3, 1), (2, 2), True), ("le_total", (3, 1), (4, 1), False),
    ("gt_total", (1, 1), (1, 2), True), ("gt_total", (2, 1), (1, 2), False),
    ("ge_total", (2, 1), (1, 2), True), ("ge_total", (2, 2), (1, 2), False),
    ("any", (1, 1), (4, 4), True),
]


@pytest.mark.parametrize("rule, attacker, target, allowed", CAPTURES)
def test_every_capture_rule(rule, attacker, target, allowed):
    pos = position({"b2": (LIGHT, *attacker), "b3": (DARK, *target), "e5": (DARK, 4, 4)},
                   capture=rule)
    if allowed:
        assert pos.check(LIGHT, Move.parse("b2-b3")).capture
    else:
        with pytest.raises(IllegalMove, match="may not capture|may capture only"):
            pos.check(LIGHT, Move.parse("b2-b3"))


def test_total_rules_do_not_name_the_hidden_totals():
    pos = position({"b2": (LIGHT, 2, 1), "b3": (DARK, 1, 3), "e5": (DARK, 4, 4)}, capture="lt_total")
    with pytest.raises(IllegalMove) as err:
        pos.check(LIGHT, Move.parse("b2-b3"))
    assert str(err.value) == ("the piece on b2 may not capture the piece on b3: "
                              "with -capture_lt_total the totals of both faces decide")


# -- end of the game ---------------------------------------------------------------------

def test_capturing_the_last_royal_piece_wins():
    pos = position({"a1": (LIGHT, 4, 1), "b1": (LIGHT, 2, 2), "a3": (DARK, 4, 1),
                    "e5": (DARK, 3, 4), "d5": (DARK, 1, 1)})
    after = pos.play(Move.parse("a1-a3"))
    assert after.result() is None  # e5 (a 34) is still royal
    pos = position({"a1": (LIGHT, 4, 1), "b1": (LIGHT, 2, 2), "a3": (DARK, 4, 1),
                    "e5": (DARK, 3, 3), "d5": (DARK, 1, 1)})
    after = pos.play(Move.parse("a1-a3"))
    assert after.result() == (LIGHT, "Light captured all royal pieces")


def test_one_piece_each_is_a_draw():
    pos = position({"a1": (LIGHT, 4, 4), "b1": (LIGHT, 1, 1), "b2": (DARK, 4, 1)}, to_move=DARK)
    assert pos.result() is None
    after = pos.play(Move.parse("b2-b1"))
    assert after.result() == (None, "each side has only one piece left")


def test_no_capture_possible_is_a_draw():
    # -capture_gt: a piece may only take one showing more than itself
    pos = position({"a1": (LIGHT, 4, 4), "b1": (LIGHT, 2, 4), "c3": (DARK, 4, 4), "e5": (DARK, 4, 4),
                    "d4": (DARK, 2, 1)}, capture="gt")
    assert pos.result() is None
    after = pos.play(Move.parse("b1-b2"))
    assert after.result() is None  # Light's 2 could still take a 4
    pos = position({"a1": (LIGHT, 4, 4), "b1": (LIGHT, 2, 4), "c3": (DARK, 4, 4), "e5": (DARK, 4, 4),
                    "d4": (DARK, 2, 1)}, capture="gt")
    after = pos.play(Move.parse("b1-c2"))
    assert after.result() is None
    # only 4s left on both sides: nothing is ever greater
    pos = position({"a1": (LIGHT, 4, 4), "b1": (LIGHT, 4, 4), "c3": (DARK, 4, 4), "e5": (DARK, 4, 4)},
                   capture="gt")
    assert pos.result() == (None, "no capture is possible any more")


def test_the_move_limit_draws():
    pos = position({"a1": (LIGHT, 4, 4), "b1": (LIGHT, 1, 1), "e5": (DARK, 4, 4), "d5": (DARK, 1, 1)},
                   draw_moves=3)
    for i, move in enumerate(["a1-a2", "e5-e4", "a2-a1"]):
        pos = pos.play(Move.parse(move))
        assert pos.quiet == i + 1
    assert pos.result() == (None, "3 moves in a row without a capture")
    unlimited = position({"a1": (LIGHT, 4, 4), "b1": (LIGHT, 1, 1), "e5": (DARK, 4, 4),
                          "d5": (DARK, 1, 1)}, draw_moves=0)
    for move in ["a1-a2", "e5-e4", "a2-a1", "e4-e5"] * 30:
        unlimited = unlimited.play(Move.parse(move))
    assert unlimited.quiet == 120 and unlimited.result() is None


def test_a_side_without_a_legal_move_draws():
    # Light's only piece, a 1 in the corner, is boxed in by pieces that show it 4s
    pos = position({"a1": (LIGHT, 1, 4), "a2": (DARK, 1, 4), "b1": (DARK, 1, 4), "b2": (DARK, 1, 4),
                    "e5": (DARK, 4, 4)}, to_move=LIGHT)
    assert pos.legal_moves() == []
    assert pos.result() == (None, "Light has no legal move")


# -- replay ---------------------------------------------------------------------------------

def random_game(setup: Setup, seed: int, chooser: random.Random, limit: int = 300) -> list[str]:
    pos = Position.initial(setup, seed)
    moves = []
    while pos.result() is None and len(moves) < limit:
        legal = pos.legal_moves()
        captures = [m for m in legal if m.capture]
        move = chooser.choice(captures if captures and chooser.randrange(3) else legal)
        pos = pos.play(move)
        moves.append(str(move))
    return moves


@pytest.mark.parametrize("options", [{}, {"face": "random", "capture": "any"},
                                     {"limit": False, "turn": False}, {"base": 3, "rows": 6}])
def test_replay_rebuilds_every_position_from_seed_and_moves(options):
    setup = Setup(**options).validate()
    moves = random_game(setup, 2024, random.Random(5))
    assert len(moves) > 4
    positions = replay(setup, 2024, moves)
    assert len(positions) == len(moves) + 1
    assert positions == replay(setup, 2024, moves)  # pure: same input, same output
    pos = Position.initial(setup, 2024)
    for i, text in enumerate(moves):
        assert positions[i].to_json() == pos.to_json()
        pos = pos.play(Move.parse(text))
    assert positions[-1].to_json() == pos.to_json()
    assert positions[-1].ply == len(moves)


def test_replay_refuses_a_history_that_does_not_fit():
    with pytest.raises(IllegalMove, match=r"move 1 \(a3-a4\): there is no piece on a3"):
        replay(Setup(), 1, ["a3-a4"])


def test_views_match_the_rules_through_whole_games():
    """In every position of several games, every viewer sees exactly what the
    rules allow: own faces, the opponent's far faces, both faces once turned."""
    for seed in range(6):
        setup = Setup(face=["large", "small", "random"][seed % 3])
        moves = random_game(setup, seed, random.Random(seed))
        for pos in replay(setup, seed, moves):
            for viewer in (LIGHT, DARK, None):
                shown = parse_ascii_board(ascii_board(pos, viewer))
                for name, token in shown.items():
                    assert token == expected_token(pos.pieces.get(sq(name)), viewer), (seed, name)
