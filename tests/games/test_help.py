"""``help KIND`` is the rule book: every kind's text carries the values of
the tables its engine plays by, so changing a table changes the help, and
no line of it is wider than a terminal."""

from __future__ import annotations

import pytest

from games import KINDS, get_rules
from games.agora_rpg import engine as agora_engine
from games.agora_rpg.model import BASE_HEALTH, BASE_VITALITY, JOIN_TOKENS, REJOIN_DAYS, TOKEN_FACTOR_BONUS
from games.curio.model import CAPTURE_RULES, DEFAULT_SETUP
from games.giveaway.model import ROUND_BONUS, START_HOLDING, WINNING_SCORE
from games.helptext import MAX_LINE, WIDTH, commands, long_lines, para, table
from games.rmpm import engine as rmpm_engine
from games.rmpm.board import DIRS, RING
from games.rmpm.engine import ActionRow
from games.sequence.model import (
    FINISHER_BONUS,
    LAST_SCORER_BONUS,
    SEVEN,
    SEVEN_POINTS,
    TWENTY_FOUR,
    TWENTY_FOUR_POINTS,
    pieces_from_email,
)

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("kind", KINDS)
def test_no_line_of_a_rule_book_is_wider_than_78(kind: str) -> None:
    text = get_rules(kind).help_text()
    assert long_lines(text) == []
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_book_says_what_leaving_does(kind: str) -> None:
    text = get_rules(kind).help_text()
    assert "Leaving the game\n----------------" in text
    section = flat(text.split("Leaving the game\n----------------", 1)[1].split("\n\n", 2)[1])
    assert "LEAVE" in section


def test_rmpm_help_prints_the_action_table_the_engine_plays_by() -> None:
    text = get_rules("rmpm").help_text()
    lines = text.splitlines()
    for row in rmpm_engine.ACTION_TABLE:
        rng = str(row.low) if row.low == row.high else f"{row.low}-{row.high}"
        line = next((ln for ln in lines if ln.startswith(f"  {rng} ")), None)
        assert line is not None, f"no row for AN {rng}"
        if row.amount:
            assert str(row.amount) in line
    # the MN formula and the direction codes come from the board's table
    assert f"MN = (fields moved - 1) x {rmpm_engine.MN_PER_FIELD} + the direction's code" in flat(text)
    for name, code in (("up", DIRS["u"][2]), ("right", DIRS["r"][2]), ("down", DIRS["d"][2]), ("left", DIRS["l"][2])):
        assert f"  {name:<9}  {code}" in lines
    # the rules' own sample comes out of the same numbers: MN 13, AN 62
    assert "MN = 13, AN = 49 + 13 = 62" in flat(text)
    assert ", ".join(map(str, RING)) in flat(text)
    assert f"for {rmpm_engine.FIELD_PRICE} WCU" in text


def test_changing_the_action_table_changes_the_game_and_its_help(monkeypatch: pytest.MonkeyPatch) -> None:
    table_ = tuple(ActionRow(r.low, r.high, r.code, 777) if r.code == "victim_pays" else r
                   for r in rmpm_engine.ACTION_TABLE)
    monkeypatch.setattr(rmpm_engine, "ACTION_TABLE", table_)
    text = get_rules("rmpm").help_text()
    assert "  1-10    V pays 777 WCU to A." in text.splitlines()
    assert "V pays 500 WCU to A" not in text


def test_agora_help_prints_the_encounter_table() -> None:
    text = get_rules("agora_rpg").help_text()
    lines = text.splitlines()
    for low, high, kind, offset in agora_engine.ENCOUNTERS:
        rng = str(low) if low == high else f"{low}-{high}"
        line = next((ln for ln in lines if ln.startswith(f"  {rng} ")), None)
        assert line is not None, f"no row for the roll {rng}"
        words = kind.replace("stairway", "stairway down")
        assert words in line
        if kind != "stairway":
            assert line.endswith("level N" if offset == 0 else f"level N{offset:+d}")
    body = flat(text)
    assert f"1d{agora_engine.ENCOUNTER_DIE}" in body and f"1d{agora_engine.COMBAT_DIE}" in body
    assert f"health {BASE_HEALTH} of {BASE_HEALTH}, vitality {BASE_VITALITY} of {BASE_VITALITY}" in body
    assert f"level + {TOKEN_FACTOR_BONUS} tokens" in body
    assert f"Joining gives {JOIN_TOKENS} tokens, unless you left this game less than {REJOIN_DAYS} days ago" in body
    assert f"HEAL costs {agora_engine.HEAL_COST_PER_LEVEL} x your level in gold" in body
    gain, rise = agora_engine.POTIONS["vitality potion"]
    assert f"gives {gain} x N vitality, or raises the maximum by {rise} x N" in body
    assert f"your defense level - {agora_engine.STRIKE_OFFSET})" in body


def test_changing_the_encounter_table_changes_the_help(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = ((1, 50, "stairway", 0), (51, 100, "monster", 2))
    monkeypatch.setattr(agora_engine, "ENCOUNTERS", rows)
    text = get_rules("agora_rpg").help_text()
    assert "  51-100  a monster, level N+2" in text.splitlines()
    assert agora_engine.encounter_for(75, 3) == ("monster", 5)


def test_curio_help_prints_the_capture_rules_and_the_standard_setup() -> None:
    text = get_rules("curio").help_text()
    body = flat(text)
    for code, rule in CAPTURE_RULES.items():
        assert f"-capture_{code}" in text
        assert rule.words in body
    kinds = " ".join(f"{a}{b}" for a, b in DEFAULT_SETUP.piece_kinds())
    assert kinds == "11 12 13 14 22 23 24 33 34 44"
    assert kinds in body
    assert f"after {DEFAULT_SETUP.draw_moves} moves in a row without a capture" in body
    assert f"-capture_{DEFAULT_SETUP.capture} (default)" in text
    assert "the capturing piece turns round" in body and "turns again on every capture" in body
    assert "curio move <board> <userid> <password> <from>-<to>[#<move number>]" in text


def test_giveaway_help_works_out_the_rings_of_the_rules() -> None:
    body = flat(get_rules("giveaway").help_text())
    assert f"Everybody holds {START_HOLDING} points in round 1" in body
    assert f"that score + {ROUND_BONUS}" in body
    assert f"some player scores {WINNING_SCORE} or more" in body
    # rule 5's examples and rule 6's, as the ring finder resolves them
    assert "A gives B 1, B gives A 1: ring A > B > A (1 each): its 2 members receive 1 x 2 = 2" in body
    assert "ring A > B > C > A (1 each): its 3 members receive 1 x 3 = 3" in body
    assert ("A gives B 1, B gives A 1, B gives C 1, C gives A 1: ring A > B > A (1 each): its 2 members "
            "receive 1 x 2 = 2 for that gift; no ring A > B > C > A: rule 6, B gives A 1") in body


def test_sequence_help_prints_the_scoring() -> None:
    text = get_rules("sequence").help_text()
    body = flat(text)
    assert f"A play scores {SEVEN_POINTS} x its multiplier if the new total is a multiple of {SEVEN}" in body
    assert f"{TWENTY_FOUR_POINTS} x its multiplier if it is a multiple of {TWENTY_FOUR}" in body
    assert f"gets {FINISHER_BONUS} more points" in body and f"gets {LAST_SCORER_BONUS} more" in body
    assert "total 42 = 6 x 7 multiplier 3 scores 15" in body
    assert "total 168 = 24 x 7 = 7 x 24 multiplier 1 scores 15" in body
    for n, piece in enumerate(pieces_from_email("dklein00@gmail.com"), start=1):
        assert f"Piece {n} value {piece.value} multiplier {piece.multiplier}" in body
    assert "no LEAVE, by design" in body


def test_the_formatting_helpers_keep_to_the_widths() -> None:
    prose = para("word " * 100)
    assert max(len(line) for line in prose.splitlines()) <= WIDTH
    rows = table([("1-10", "x " * 80)], header=("AN", "action"))
    assert long_lines(rows) == [] and rows.splitlines()[1] == "  ----  ------"
    cmds = commands([("A-VERY-LONG-SYNTAX " * 3, "what it does " * 10), ("short", "")])
    assert long_lines(cmds) == []
