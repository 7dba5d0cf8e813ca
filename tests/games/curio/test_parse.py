"""Curio's line syntax."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.base import Line
from games.curio import RULES
from tests.games.driver import check_commands

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def one(text: str):
    [cmd] = RULES.parse([Line(1, text)])
    return cmd


def test_move_with_credentials_and_move_number():
    cmd = one("curio move 101 alice s3cret d2-b4#7")
    assert cmd.ok and cmd.name == "move"
    assert cmd.args == {"board": 101, "move": "d2-b4", "number": 7}
    assert cmd.credentials == ("alice", "s3cret")
    assert cmd.text == "curio move 101 alice **** d2-b4#7"


@pytest.mark.parametrize("text, move, number", [
    ("CURIO MOVE 101 alice pw D2-B4", "d2-b4", None),
    ("curio move 101 alice pw d2xb4", "d2-b4", None),
    ("curio move 101 alice pw d2 b4 #3", "d2-b4", 3),
    ("move 101 alice pw d2b4", "d2-b4", None),
    ("curio move #101 alice pw a10-a12", "a10-a12", None),
])
def test_move_spellings(text, move, number):
    cmd = one(text)
    assert cmd.ok, cmd.error
    assert (cmd.args["move"], cmd.args["number"]) == (move, number)
    assert "pw" not in cmd.text.split()


@pytest.mark.parametrize("text, error", [
    ("curio move 101 alice pw", ("incomplete move; expected curio move <board> <userid> <password> "
                                 "<from>-<to>[#<move number>] (or resign, propose, accept, reject in place of "
                                 "the move), e.g. curio move 101 alice PASSWORD d2-d4#1")),
    ("curio move 101 alice pw d2-z", "the last word is not a move like d2-d4"),
    ("curio move x alice pw d2-d4", "the word after move must be the board number"),
    ("curio resign 101 alice", "expected curio resign <board> <userid> <password>"),
    ("curio showas alice pw", "expected curio showas <userid> <password> <board>"),
    ("curio draw 101 alice pw maybe", "'maybe' is not propose, accept or reject"),
    ("curio show", "expected curio show <board>"),
    ("curio boards now", "boards takes nothing after it"),
    ("curio", "expected a curio command: challenge, move, resign, draw, show, showas"),
    ("curio dance 101", "unknown curio command 'dance'; expected one of challenge, move"),
    ("curio challenge -rows alice bob", "-rows needs a whole number, e.g. -rows=5"),
])
def test_bad_lines_say_what_was_wrong_and_what_is_accepted(text, error):
    cmd = one(text)
    assert not cmd.ok
    assert error in cmd.error
    assert cmd.credentials is None


def test_a_bad_credential_line_hides_every_word_after_the_board():
    assert one("curio move alice pw d2-d4").text == "curio move **** **** ****"
    assert one("curio move 101 alice pw d2-zz").text == "curio move 101 **** **** ****"
    assert one("curio move pw").text == "curio move ****"
    assert one("curio showas 101 alice pw").text == "curio showas **** **** ****"
    assert one("curio accept pw").text == "curio accept ****"
    assert one("curio frob 101 alice pw").text == "curio frob ..."


def test_challenge_with_options():
    cmd = one("curio challenge -base=3 -rows 6 -COLS=4 -no_turn -no_limit -face_random "
              "-capture_ge_total -draw_moves=0 Alice Bob")
    assert cmd.ok, cmd.error
    assert cmd.args == {"players": ["Alice", "Bob"], "options": {
        "base": 3, "rows": 6, "cols": 4, "turn": False, "limit": False, "face": "random",
        "capture": "ge_total", "draw_moves": 0}}
    assert cmd.accounts == ["Alice", "Bob"] and cmd.credentials is None


@pytest.mark.parametrize("text, args", [
    ("curio draw 101 bob pw", {"board": 101, "action": "propose", "explicit": False}),
    ("curio draw 101 bob pw ACCEPT", {"board": 101, "action": "accept", "explicit": True}),
    ("curio draw 101 bob pw decline", {"board": 101, "action": "reject", "explicit": True}),
    ("curio accept 101 bob pw", {"board": 101, "action": "accept", "explicit": True}),
    ("curio propose 101 bob pw", {"board": 101, "action": "propose", "explicit": True}),
])
def test_draw_forms(text, args):
    cmd = one(text)
    assert cmd.ok and cmd.name == "draw" and cmd.args == args
    assert cmd.credentials == ("bob", "pw")
    assert "pw" not in cmd.text.split()


def test_show_subscribe_and_boards():
    assert one("curio show 102").args == {"board": 102}
    assert one("curio subscribe 102").name == "subscribe"
    assert one("curio watch 102").name == "subscribe"
    assert one("curio unsubscribe 102").name == "unsubscribe"
    assert one("curio boards").name == "boards"
    cmd = one("curio showas bob pw 102")
    assert cmd.args == {"board": 102} and cmd.credentials == ("bob", "pw")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=5))
def test_parse_never_raises_and_answers_every_line(texts):
    lines = [Line(i + 1, t) for i, t in enumerate(texts)]
    commands = RULES.parse(lines)
    assert len(commands) == len(lines)
    assert all(c.line is line for c, line in zip(commands, lines, strict=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["curio", "move", "draw", "showas", "challenge", "101", "alice",
                                 "pw", "d2-d4", "#3", "-rows=5", "-capture_lt", "accept", "x"]),
                max_size=7))
def test_parse_never_raises_on_near_misses(words):
    given = [Line(1, " ".join(words))]
    [cmd] = RULES.parse(given)
    check_commands(RULES, given, [cmd])
    if cmd.credentials:  # the password's place is masked
        assert "****" in cmd.text.split()
