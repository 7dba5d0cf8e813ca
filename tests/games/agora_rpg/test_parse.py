"""Reading Agora RPG command lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.agora_rpg import RULES
from games.base import Line
from tests.games.driver import check_commands

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def one(text):
    (cmd,) = RULES.parse([Line(1, text)])
    return cmd


@pytest.mark.parametrize(
    "text, name, args",
    [
        ("JOIN", "join", {}),
        ("leave", "leave", {}),
        ("Explore", "explore", {}),
        ("MOVE Town Square -> Dungeon Level 1", "move", {"from": "Town Square", "to": "Dungeon Level 1"}),
        ("move  dungeon level 3->dungeon level 4", "move", {"from": "dungeon level 3", "to": "dungeon level 4"}),
        ("MOVE from Town Square to Merchant.", "move", {"from": "Town Square", "to": "Merchant"}),
        ("DRINK HEALTH POTION 2", "drink", {"kind": "health potion", "level": 2}),
        ("drink vitality potion level 1", "drink", {"kind": "vitality potion", "level": 1}),
        ("EXCHANGE 5 GOLD", "exchange", {"amount": 5}),
        ("TRANSFER 3 GOLD TO bob", "transfer", {"qty": 3, "currency": "gold", "level": 0, "to": "bob"}),
        ("transfer 1 armour level 2 to bob", "transfer", {"qty": 1, "currency": "armor", "level": 2, "to": "bob"}),
        ("TRANSFER 2 HEALTH POTIONS 1 TO bob", "transfer",
         {"qty": 2, "currency": "health potion", "level": 1, "to": "bob"}),
        ("GM NPC Merchant", "gm_npc", {"name": "Merchant"}),
        ("gm set alice max health = 7", "gm_set", {"name": "alice", "attribute": "max_health", "level": 0, "value": "7"}),
        ("GM SET alice HEALTH POTION 2 = 3", "gm_set",
         {"name": "alice", "attribute": "health potion", "level": 2, "value": "3"}),
        ("GM SET alice location = Dungeon Level 2", "gm_set",
         {"name": "alice", "attribute": "location", "level": 0, "value": "Dungeon Level 2"}),
        ("GM FIGHT alice WON DAMAGE 2", "gm_fight", {"name": "alice", "won": True, "damage": 2}),
        ("GM FIGHT alice lost", "gm_fight", {"name": "alice", "won": False, "damage": 0}),
        ("GM AS Merchant TRANSFER 1 WEAPON 2 TO alice", "gm_as",
         {"npc": "Merchant", "qty": 1, "currency": "weapon", "level": 2, "to": "alice"}),
    ],
)
def test_commands_read(text, name, args):
    cmd = one(text)
    assert cmd.error is None, cmd.error
    assert (cmd.name, cmd.args) == (name, args)


@pytest.mark.parametrize(
    "text, error",
    [
        ("JOIN now", "JOIN takes nothing after it; write just JOIN"),
        ("MOVE Town Square", "expected MOVE <from> -> <to>, e.g. MOVE Town Square -> Dungeon Level 1"),
        ("MOVE Town Square -> Dungeon Level 0", "'Dungeon Level 0' is not a location"),
        ("MOVE the big hall -> Healer", "'the big hall' is not a location"),
        ("DRINK HEALTH POTION", "expected DRINK HEALTH POTION <N> or DRINK VITALITY POTION <N>"),
        ("DRINK MANA POTION 2", "expected DRINK HEALTH POTION <N>"),
        ("DRINK HEALTH POTION 0", "expected DRINK HEALTH POTION <N>"),
        ("EXCHANGE all GOLD", "expected EXCHANGE <n> GOLD"),
        ("TRANSFER 0 GOLD TO bob", "the quantity must be a whole number above 0, not '0'"),
        ("TRANSFER 1 SWORD TO bob", "'SWORD' is not a currency"),
        ("TRANSFER 1 WEAPON TO bob", "'WEAPON' is not a currency"),
        ("TRANSFER 1 WEAPON 0 TO bob", "the level of weapon must be a whole number above 0"),
        ("TRANSFER 2 MOVEMENT TOKENS TO bob", "movement tokens cannot be transferred (rule 18)"),
        ("GIVE 2 TO bob", "unknown command 'GIVE'; expected one of JOIN"),
        ("GM NPC Town", "'Town' cannot be a non-player character's name"),
        ("GM SET alice mana = 3", "unknown attribute 'mana'"),
        ("GM SET alice weapon = 3", "weapon needs a level above 0"),
        ("GM SET alice health 2 = 3", "health has no level"),
        ("GM FIGHT alice maybe", "expected GM FIGHT <name> WON|LOST [DAMAGE <n>]"),
        ("GM DANCE", "unknown GM command 'GM DANCE'"),
    ],
)
def test_bad_lines_say_what_is_wrong(text, error):
    cmd = one(text)
    assert cmd.error is not None and error in cmd.error


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=6))
def test_parse_never_raises(texts):
    lines = [Line(i + 1, t) for i, t in enumerate(texts)]
    commands = RULES.parse(lines)
    assert len(commands) == len(lines)
    assert [c.line for c in commands] == lines


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["MOVE", "TRANSFER", "GM SET", "DRINK", "EXCHANGE", "GM FIGHT", "->", "TO", "=",
                                 "1", "²", "0", "gold", "weapon", "Dungeon", "Level", "x"]), max_size=8))
def test_parse_never_raises_on_near_misses(words):
    given = [Line(1, " ".join(words))]
    check_commands(RULES, given, RULES.parse(given))
