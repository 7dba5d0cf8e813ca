"""The Agora RPG engine, rule by rule, with scripted dice."""

from __future__ import annotations

import random

import pytest

from games.agora_rpg import RULES
from games.agora_rpg.engine import ENCOUNTERS, encounter_for
from games.base import ALL_PLAYERS, Context

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def joined(table, *names):
    for n in names:
        table.ok(n, "JOIN")


# -- joining and leaving (rules 3, 10-16, 19, 39) -----------------------------------
def test_join_sets_every_attribute_and_gives_five_tokens(table):
    (msg,) = table.ok("alice", "JOIN")
    assert msg == "accepted: alice joins at the Town Square with 5 movement tokens"
    a = table.char("alice")
    assert (a["location"], a["level"], a["experience"]) == ("Town Square", 1, 0)
    assert (a["health"], a["max_health"], a["vitality"], a["max_vitality"]) == (5, 5, 10, 10)
    assert a["tokens"] == 5 and a["stairways"] == [] and a["holdings"]["gold"] == 0
    assert table.last.joined == ["alice"]
    assert RULES.players(table.state) == ["alice"]


def test_join_twice_is_refused(table):
    joined(table, "alice")
    assert table.refused("alice", "JOIN") == "alice is already a party to this game"


def test_rejoining_within_seven_days_gives_no_tokens(table):
    joined(table, "alice")
    table.set("alice", gold=7)
    (msg,) = table.ok("alice", "LEAVE")
    assert msg == "accepted: alice leaves the game; everything alice held is gone"
    assert table.last.left == ["alice"]
    assert RULES.players(table.state) == []
    table.later(days=6, hours=23)
    (msg,) = table.ok("alice", "join")
    assert "joins at the Town Square with no movement tokens" in msg and "(rule 39)" in msg
    a = table.char("alice")
    assert a["tokens"] == 0 and a["holdings"]["gold"] == 0


def test_rejoining_after_seven_days_gives_five_tokens(table):
    joined(table, "alice")
    table.ok("alice", "LEAVE")
    table.later(days=7)
    table.ok("alice", "JOIN")
    assert table.char("alice")["tokens"] == 5


def test_commands_need_a_registered_authenticated_party(table):
    assert "has no account" in table.refused(None, "JOIN")
    assert "register HANDLE PASSWORD" in table.refused(None, "JOIN")
    assert "this needs your password" in table.refused("alice", "JOIN", authenticated=False)
    assert table.refused("bob", "EXPLORE") == "bob is not a party to this game: send JOIN first"
    assert table.refused("bob", "GM NPC Merchant") == "only the Game Master can use GM commands"


# -- moves (rules 25, 26) -------------------------------------------------------------
def test_a_move_costs_a_token_and_a_vitality(table):
    joined(table, "alice")
    (msg,) = table.ok("alice", "MOVE Town Square -> Healer")
    assert msg == "accepted: moved from Town Square to Healer (4 movement tokens left); vitality 9 of 10"
    a = table.char("alice")
    assert (a["location"], a["tokens"], a["vitality"], a["health"]) == ("Healer", 4, 9, 5)


def test_move_spellings(table):
    joined(table, "alice")
    table.ok("alice", "move town square -> gold exchanger")
    assert table.char("alice")["location"] == "Gold Exchanger"
    table.ok("alice", "MOVE from Gold Exchanger to Town Square")
    assert table.char("alice")["location"] == "Town Square"


def test_a_move_at_zero_vitality_costs_health_and_gives_vitality(table):
    joined(table, "alice")
    table.set("alice", level=2, vitality=0)
    a = table.char("alice")
    assert (a["max_health"], a["health"], a["max_vitality"]) == (5, 5, 10)
    (msg,) = table.ok("alice", "MOVE Town Square -> Healer")
    a = table.char("alice")
    assert (a["health"], a["vitality"], a["tokens"]) == (4, 4, 4)
    assert "with no vitality left the move costs 1 health: health 4 of 5, vitality 4 of 10" in msg


def test_a_move_at_zero_vitality_is_capped_at_the_maximum(table):
    joined(table, "alice")
    table.set("alice", level=6, vitality=0)  # 2 * 6 = 12 > maximum 10
    table.ok("alice", "MOVE Town Square -> Healer")
    assert table.char("alice")["vitality"] == 10


def test_a_move_that_takes_the_last_health_kills_without_an_encounter(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1", vitality=0, health=1, gold=9, tokens=4)
    (msg,) = table.ok("alice", "EXPLORE", rolls=[])  # no roll may be made
    assert "dies and starts again at the Town Square" in msg and "rule 42" in msg
    a = table.char("alice")
    assert (a["location"], a["health"], a["vitality"], a["tokens"], a["holdings"]["gold"]) == (
        "Town Square", 5, 10, 0, 0)
    assert table.state["rolls"] == []


@pytest.mark.parametrize(
    "at, line, why",
    [
        ("Town Square", "MOVE Healer -> Town Square", "alice is at Town Square, not at Healer"),
        ("Town Square", "MOVE Town Square -> Dungeon Level 2", "there is no move from Town Square to Dungeon Level 2"),
        ("Town Square", "MOVE Town Square -> Town Square", "there is no move from Town Square to Town Square"),
        ("Healer", "MOVE Healer -> Dungeon Level 1", "there is no move from Healer to Dungeon Level 1"),
        ("Healer", "MOVE Healer -> Gold Exchanger", "there is no move from Healer to Gold Exchanger"),
        ("Dungeon Level 2", "MOVE Dungeon Level 2 -> Town Square", "there is no move from Dungeon Level 2 to Town Square"),
        ("Dungeon Level 3", "MOVE Dungeon Level 3 -> Dungeon Level 1", "there is no move from Dungeon Level 3"),
        ("Town Square", "MOVE Town Square -> Castle", "there is no location called 'Castle'"),
        ("Town Square", "EXPLORE", "EXPLORE works only in the dungeon"),
    ],
)
def test_moves_that_are_not_defined_are_refused(table, at, line, why):
    joined(table, "alice")
    table.set("alice", location=at)
    assert why in table.refused("alice", line)


def test_moves_the_contract_defines(table):
    joined(table, "alice")
    table.set("alice", stairway_1="true", tokens=20)
    for line in [
        "MOVE Town Square -> Healer", "MOVE Healer -> Town Square",
        "MOVE Town Square -> Gold Exchanger", "MOVE Gold Exchanger -> Town Square",
        "MOVE Town Square -> Dungeon Level 1", "MOVE Dungeon Level 1 -> Dungeon Level 2",
        "MOVE Dungeon Level 2 -> Dungeon Level 1", "MOVE Dungeon Level 1 -> Town Square",
    ]:
        table.ok("alice", line)
    a = table.char("alice")
    assert (a["location"], a["tokens"], a["vitality"]) == ("Town Square", 12, 2)


def test_no_tokens_no_move(table):
    joined(table, "alice")
    table.set("alice", tokens=0)
    assert "has no movement tokens left" in table.refused("alice", "MOVE Town Square -> Healer")


def test_the_stairway_down_must_be_known(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1")
    why = table.refused("alice", "MOVE Dungeon Level 1 -> Dungeon Level 2")
    assert "does not know the stairway down from Dungeon Level 1" in why
    (msg,) = table.ok("alice", "EXPLORE", rolls=[7])
    assert "rolled 1d100 = 7 for the encounter on Dungeon Level 1" in msg
    assert "finds the stairway down from Dungeon Level 1" in msg
    assert table.char("alice")["stairways"] == [1]
    table.ok("alice", "MOVE Dungeon Level 1 -> Dungeon Level 2")
    why = table.refused("alice", "MOVE Dungeon Level 2 -> Dungeon Level 3")
    assert "stairway down from Dungeon Level 2" in why
    table.ok("alice", "MOVE Dungeon Level 2 -> Dungeon Level 1")
    assert table.char("alice")["location"] == "Dungeon Level 1"


# -- the encounter table (rule 27) ---------------------------------------------------
@pytest.mark.parametrize(
    "roll, found",
    [
        (1, ("stairway", 3)), (10, ("stairway", 3)),
        (11, ("weapon", 2)), (12, ("weapon", 3)), (14, ("weapon", 3)), (15, ("weapon", 4)),
        (16, ("armor", 2)), (17, ("armor", 3)), (19, ("armor", 3)), (20, ("armor", 4)),
        (21, ("health potion", 2)), (23, ("health potion", 2)), (24, ("health potion", 3)),
        (31, ("health potion", 3)), (32, ("health potion", 4)), (35, ("health potion", 4)),
        (36, ("vitality potion", 2)), (38, ("vitality potion", 2)), (39, ("vitality potion", 3)),
        (47, ("vitality potion", 3)), (48, ("vitality potion", 4)), (50, ("vitality potion", 4)),
        (51, ("monster", 2)), (60, ("monster", 2)), (61, ("monster", 3)), (90, ("monster", 3)),
        (91, ("monster", 4)), (100, ("monster", 4)),
    ],
)
def test_encounter_table_on_level_3(roll, found):
    assert encounter_for(roll, 3) == found


def test_encounter_table_covers_every_roll_once():
    covered = [n for low, high, _, _ in ENCOUNTERS for n in range(low, high + 1)]
    assert covered == list(range(1, 101))


@pytest.mark.parametrize(
    "roll, item, level",
    [(12, "weapon", 2), (15, "weapon", 3), (11, "weapon", 1), (17, "armor", 2), (20, "armor", 3),
     (16, "armor", 1), (24, "health potion", 2), (21, "health potion", 1), (32, "health potion", 3),
     (39, "vitality potion", 2), (36, "vitality potion", 1), (48, "vitality potion", 3)],
)
def test_exploring_finds_items(table, roll, item, level):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 2")
    (msg,) = table.ok("alice", "EXPLORE", rolls=[roll])
    article = "" if item == "armor" else "a "
    assert f"alice finds {article}{item} level {level} (now holds 1)" in msg
    assert table.char("alice")["holdings"]["items"][item] == {str(level): 1}
    assert table.char("alice")["tokens"] == 4


@pytest.mark.parametrize("roll, what", [(11, "weapon"), (16, "armor"), (21, "health potion"),
                                        (36, "vitality potion"), (51, "monster"), (60, "monster")])
def test_a_level_0_find_on_level_1_is_a_piece_of_gold(table, roll, what):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1", gold=2)
    (msg,) = table.ok("alice", "EXPLORE", rolls=[roll])
    assert f"a level 0 {what} is a piece of gold: alice now has 3 gold" in msg
    a = table.char("alice")
    assert a["holdings"]["gold"] == 3 and a["monster"] is None
    assert all(v == {} for v in a["holdings"]["items"].values())


@pytest.mark.parametrize("roll, level", [(51, 1), (61, 2), (91, 3)])
def test_exploring_meets_monsters(table, roll, level):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 2")
    (msg,) = table.ok("alice", "EXPLORE", rolls=[roll])
    assert f"alice meets a level {level} monster (health {5 * level} of {5 * level}); ATTACK or FLEE" in msg
    assert table.char("alice")["monster"] == {"level": level, "health": 5 * level}
    why = table.refused("alice", "MOVE Dungeon Level 2 -> Dungeon Level 1")
    assert "cannot move until it is over: ATTACK or FLEE" in why
    assert "cannot move" in table.refused("alice", "EXPLORE")


def test_rolls_are_recorded_with_purpose_and_week(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1")
    table.ok("alice", "EXPLORE", rolls=[42])
    assert table.state["rolls"] == [{
        "week": 1, "at": "2026-11-16T09:00:00+00:00", "character": "alice",
        "purpose": "encounter on Dungeon Level 1", "dice": "1d100", "result": 42,
    }]


# -- combat (the house rule) ------------------------------------------------------
def test_a_fight_won(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 2", weapon_1=1, weapon_2=1, armor_1=1, gold=1)
    table.ok("alice", "EXPLORE", rolls=[70])  # a level 2 monster, health 10
    (msg,) = table.ok("alice", "ATTACK", rolls=[3, 6])
    assert "rolled 1d6 = 3 to attack; with attack level 2 the monster loses 5 health and has 5 of 10 left" in msg
    # 6 + 2 - 1 - 3 = 4
    assert "the monster rolls 1d6 = 6 and strikes for 4" in msg and "health 1 of 5" in msg
    (msg,) = table.ok("alice", "ATTACK", rolls=[4])
    assert "the monster is slain: alice gains 10 experience and 2 gold" in msg
    assert "alice gains a level and is now level 2" in msg
    a = table.char("alice")
    assert a["monster"] is None and a["holdings"]["gold"] == 3
    assert (a["level"], a["experience"], a["health"], a["max_health"]) == (2, 0, 6, 10)
    assert (a["vitality"], a["max_vitality"]) == (19, 20)
    assert [r["purpose"] for r in table.state["rolls"]] == [
        "encounter on Dungeon Level 2", "attack on a level 2 monster",
        "the level 2 monster strikes", "attack on a level 2 monster"]


def test_a_weak_strike_does_no_harm(table):
    joined(table, "alice")
    table.set("alice", monster=1, location="Dungeon Level 1")
    (msg,) = table.ok("alice", "ATTACK", rolls=[1, 2])  # 2 + 1 - 0 - 3 = 0
    assert "strikes for 0" in msg
    assert table.char("alice")["health"] == 5
    assert table.char("alice")["monster"] == {"level": 1, "health": 4}


def test_a_fight_lost(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 3", stairway_1="true", stairway_2="true", gold=12,
              weapon_1=2, experience=7, points=4)
    table.set("alice", monster=3)
    (msg,) = table.ok("alice", "ATTACK", rolls=[2, 6])  # monster hits 6 + 3 - 0 - 3 = 6 > 5 health
    assert "the monster rolls 1d6 = 6 and strikes for 6" in msg
    assert "alice's health is 0: alice dies" in msg
    a = table.char("alice")
    assert a["location"] == "Town Square" and a["monster"] is None
    assert (a["level"], a["experience"], a["health"], a["max_health"], a["vitality"], a["max_vitality"]) == (
        1, 0, 5, 5, 10, 10)
    assert a["stairways"] == [] and a["tokens"] == 0 and a["holdings"]["gold"] == 0
    assert all(v == {} for v in a["holdings"]["items"].values())
    assert table.state["points"]["alice"] == 4  # points are not a currency of the contract


def test_flee_takes_one_strike_and_ends_the_fight(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1", monster=1)
    (msg,) = table.ok("alice", "FLEE", rolls=[5])  # 5 + 1 - 3 = 3
    assert "flees from the level 1 monster" in msg and "strikes for 3" in msg and "encounter is over" in msg
    a = table.char("alice")
    assert a["health"] == 2 and a["monster"] is None and a["experience"] == 0
    table.ok("alice", "MOVE Dungeon Level 1 -> Town Square")


def test_attack_without_a_monster_is_refused(table):
    joined(table, "alice")
    assert table.refused("alice", "ATTACK") == "alice is not fighting anything; there is nothing to attack"
    assert "nothing to flee from" in table.refused("alice", "FLEE")


def test_gm_decided_combat(make_table):
    table = make_table(combat="gm")
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1")
    table.ok("alice", "EXPLORE", rolls=[75])
    assert "the Game Master decides every fight" in table.refused("alice", "ATTACK")
    assert "the Game Master decides every fight" in table.refused("alice", "FLEE")
    (msg,) = table.gm("GM FIGHT alice WON DAMAGE 2")
    assert "alice loses 2 health: health 3 of 5" in msg
    assert "alice gains 5 experience and 1 gold" in msg
    assert table.last.audit and "GM FIGHT alice WON DAMAGE 2" in table.last.audit[0]
    a = table.char("alice")
    assert (a["health"], a["experience"], a["holdings"]["gold"], a["monster"]) == (3, 5, 1, None)
    table.set("alice", monster=2)
    (msg,) = table.gm("GM FIGHT alice LOST")
    assert "without reward" in msg
    assert table.char("alice")["monster"] is None and table.char("alice")["experience"] == 5
    table.set("alice", monster=2)
    (msg,) = table.gm("GM FIGHT alice LOST DAMAGE 9")
    assert "dies" in msg and table.char("alice")["location"] == "Town Square"


# -- potions (rules 35, 36) and the Healer (rule 37) ----------------------------------
def test_health_potion_below_and_at_the_maximum(table):
    joined(table, "alice")
    table.set("alice", health_potion_1=2, health_potion_2=1, health=2)
    (msg,) = table.ok("alice", "DRINK HEALTH POTION 1")
    assert msg == "accepted: alice drinks a health potion level 1: health 4 of 5"
    table.ok("alice", "drink health potion 2")  # 4 + 4 is capped at 5
    assert table.char("alice")["health"] == 5
    (msg,) = table.ok("alice", "DRINK HEALTH POTION 1")
    assert msg == "accepted: alice drinks a health potion level 1 at full health: maximum health rises to 6"
    a = table.char("alice")
    assert (a["health"], a["max_health"], a["holdings"]["items"]["health potion"]) == (5, 6, {})
    assert "has no health potion level 1" in table.refused("alice", "DRINK HEALTH POTION 1")


def test_vitality_potion_below_and_at_the_maximum(table):
    joined(table, "alice")
    table.set("alice", vitality_potion_2=2, vitality=1)
    table.ok("alice", "DRINK VITALITY POTION 2")  # 1 + 8
    assert table.char("alice")["vitality"] == 9
    table.ok("alice", "DRINK VITALITY POTION 2")  # 9 + 8, capped at 10
    assert table.char("alice")["vitality"] == 10
    table.set("alice", vitality_potion_3=1)
    (msg,) = table.ok("alice", "DRINK VITALITY POTION 3")
    assert "at full vitality: maximum vitality rises to 16" in msg
    assert table.char("alice")["vitality"] == 10


def test_healing_costs_twice_the_level_in_gold(table):
    joined(table, "alice")
    table.set("alice", level=3, location="Healer", gold=7, health=2, vitality=1)
    a = table.char("alice")
    assert (a["max_health"], a["max_vitality"]) == (5, 10)
    (msg,) = table.ok("alice", "HEAL")
    assert msg == "accepted: alice pays 6 gold to the Healer: health 5 of 5, vitality 10 of 10; 1 gold left"
    why = table.refused("alice", "HEAL")
    assert why == "healing a level 3 character costs 6 gold and alice has 1"
    table.set("alice", location="Town Square", gold=10)
    assert "healing happens at the Healer" in table.refused("alice", "HEAL")


# -- levels (rule 41) -----------------------------------------------------------------
def test_level_ups_repeat_while_experience_suffices(table):
    joined(table, "alice")
    table.set("alice", location="Dungeon Level 7", weapon_40=1, monster=7)  # 35 experience
    (msg,) = table.ok("alice", "ATTACK", rolls=[1])
    assert "alice gains 35 experience and 7 gold; alice gains 2 levels and is now level 3" in msg
    a = table.char("alice")
    # 35 - 10 (level 1) - 20 (level 2) = 5
    assert (a["level"], a["experience"]) == (3, 5)
    assert (a["health"], a["max_health"], a["vitality"], a["max_vitality"]) == (15, 15, 30, 30)


# -- the Gold Exchanger and the weekly award (rule 38) -----------------------------------
def test_exchange_and_award(table):
    joined(table, "alice", "bob")
    table.set("alice", location="Gold Exchanger", gold=10)
    table.set("bob", location="Gold Exchanger", gold=3)
    (msg,) = table.ok("alice", "EXCHANGE 4 GOLD")
    assert "alice exchanges 4 gold (6 left); 4 gold exchanged this week" in msg
    table.ok("bob", "exchange 3 gold")
    table.ok("alice", "EXCHANGE 2 GOLD")
    assert table.refused("bob", "EXCHANGE 1 GOLD") == "bob has only 0 gold"
    out = table.week()
    assert table.state["points"] == {"alice": 6, "bob": 3}
    assert table.state["exchanges"] == []
    assert out.notices[0].data["award"] == [
        "alice: 4 gold exchanged, 4 points awarded",
        "bob: 3 gold exchanged, 3 points awarded",
        "alice: 2 gold exchanged, 2 points awarded",
    ]
    assert table.char("alice")["holdings"]["gold"] == 4


def test_award_beyond_the_budget_comes_back_as_gold_first_come_first_served(make_table):
    table = make_table(points_budget=5)
    joined(table, "alice", "bob")
    table.set("alice", location="Gold Exchanger", gold=4)
    table.set("bob", location="Gold Exchanger", gold=4)
    table.ok("bob", "EXCHANGE 3 GOLD")
    table.ok("alice", "EXCHANGE 4 GOLD")
    table.week()
    assert table.state["points"] == {"bob": 3, "alice": 2}
    assert table.char("alice")["holdings"]["gold"] == 2  # 0 left + 2 returned
    assert table.char("bob")["holdings"]["gold"] == 1


def test_exchange_refusals(table):
    joined(table, "alice")
    table.set("alice", gold=5)
    assert "gold is exchanged at the Gold Exchanger" in table.refused("alice", "EXCHANGE 1 GOLD")
    table.set("alice", location="Gold Exchanger")
    assert table.refused("alice", "EXCHANGE 6 GOLD") == "alice has only 5 gold"
    assert "may not exchange gold (rule 38)" in table.refused("alice", "EXCHANGE 1 GOLD", gm=True)


# -- the weekly tick (rule 40) ------------------------------------------------------
def test_weekly_tick_as_written(table):
    joined(table, "alice", "bob", "carol")
    table.set("alice", tokens=3)  # 3 + 5 = 8: kept
    table.set("bob", tokens=6)  # 6 + 5 = 11 > 10: cut to 5
    table.set("carol", tokens=5, level=2)  # 5 + 6 = 11 <= 12: kept
    out = table.week()
    assert [table.char(n)["tokens"] for n in ("alice", "bob", "carol")] == [8, 5, 11]
    assert "bob: +5 movement tokens, more than 10 so cut to 5 (now 5)" in out.notices[0].data["tick"]


def test_weekly_tick_capped_at_twice_the_factor(make_table):
    table = make_table(token_cap="double")
    joined(table, "alice", "bob")
    table.set("alice", tokens=3)
    table.set("bob", tokens=6)
    table.week()
    assert [table.char(n)["tokens"] for n in ("alice", "bob")] == [8, 10]


# -- transfers (rules 17, 18) -------------------------------------------------------
def test_transfers_between_player_characters_at_one_location(table):
    joined(table, "alice", "bob")
    table.set("alice", gold=5, weapon_2=2, health_potion_1=1)
    (msg,) = table.ok("alice", "TRANSFER 3 GOLD TO bob")
    assert msg == "accepted: alice gives 3 gold to bob"
    table.ok("alice", "transfer 1 weapon 2 to Bob")
    table.ok("alice", "TRANSFER 1 HEALTH POTION LEVEL 1 TO bob")
    b = table.char("bob")["holdings"]
    assert b["gold"] == 3 and b["items"]["weapon"] == {"2": 1} and b["items"]["health potion"] == {"1": 1}
    assert table.char("alice")["holdings"]["items"]["weapon"] == {"2": 1}
    assert table.refused("alice", "TRANSFER 9 GOLD TO bob") == "alice has only 2 gold"
    table.set("bob", location="Healer")
    assert "trade only at the same location (rule 17)" in table.refused("alice", "TRANSFER 1 GOLD TO bob")
    assert "no character called 'zed'" in table.refused("alice", "TRANSFER 1 GOLD TO zed")
    assert "cannot transfer to itself" in table.refused("alice", "TRANSFER 1 GOLD TO alice")
    assert "movement tokens cannot be transferred (rule 18)" in table.refused("alice", "TRANSFER 1 MOVEMENT TOKEN TO bob")


def test_transfers_with_non_player_characters(table):
    joined(table, "alice")
    (msg,) = table.gm("GM NPC Merchant")
    assert "Merchant is now a non-player character" in msg
    table.gm("GM NPC Smith")
    table.set("alice", gold=5)
    table.set("Merchant", armor_2=1)
    assert "alice must be at Merchant" in table.refused("alice", "TRANSFER 2 GOLD TO Merchant")
    assert "alice must be at Merchant for Merchant" in table.refused(
        "gm", "GM AS Merchant TRANSFER 1 ARMOR 2 TO alice", gm=True)
    table.ok("alice", "MOVE Town Square -> Merchant")
    table.ok("alice", "TRANSFER 2 GOLD TO merchant")
    table.gm("GM AS Merchant TRANSFER 1 ARMOR 2 TO alice")
    assert table.char("alice")["holdings"]["items"]["armor"] == {"2": 1}
    table.gm("GM AS Merchant TRANSFER 2 GOLD TO Smith")  # between NPCs: anywhere
    npcs = table.state["npcs"]
    assert npcs["Merchant"]["holdings"]["gold"] == 0 and npcs["Smith"]["holdings"]["gold"] == 2
    assert "Merchant is a non-player character" in table.refused("gm", "GM SET Merchant level = 2", gm=True)


def test_removing_an_npc_sends_its_visitors_to_the_town_square(table):
    joined(table, "alice")
    table.gm("GM NPC Merchant")
    table.ok("alice", "MOVE Town Square -> Merchant")
    (msg,) = table.gm("GM REMOVE merchant")
    assert msg == "accepted: Merchant is no longer a party to the game; back at the Town Square (rule 10): alice"
    assert table.char("alice")["location"] == "Town Square" and table.state["npcs"] == {}
    assert "no location called 'Merchant'" in table.refused("alice", "MOVE Town Square -> Merchant")


def test_npc_names_must_not_clash(table):
    joined(table, "alice")
    assert "already taken" in table.refused("gm", "GM NPC Alice", gm=True)
    assert "cannot be a non-player character's name" in table.refused("gm", "GM NPC Healer", gm=True)
    table.gm("GM NPC Merchant")
    assert "already taken" in table.refused("gm", "GM NPC merchant", gm=True)
    assert "belongs to a non-player character" in table.refused("Merchant", "JOIN")


# -- the Game Master's tools ---------------------------------------------------------
def test_gm_set_keeps_the_rules(table):
    joined(table, "alice")
    (msg,) = table.gm("GM SET alice health = 9")
    assert msg == "accepted: alice's health is now 5"  # never above the maximum (rule 14)
    (msg,) = table.gm("GM SET alice EXPERIENCE = 12")
    assert "alice gains a level and is now level 2" in msg
    (msg,) = table.gm("GM SET alice location = dungeon level 4")
    assert msg == "accepted: alice is now at Dungeon Level 4"
    assert table.last.audit == ["agora_rpg GM: GM SET alice location = dungeon level 4 -> alice is now at Dungeon Level 4"]
    assert "expected a whole number" in table.refused("gm", "GM SET alice tokens = lots", gm=True)
    (msg,) = table.gm("GM SET alice health = 0")
    assert "dies" in msg and table.char("alice")["level"] == 1
    (msg,) = table.gm("GM LIST rpg@lists.example.org")
    assert table.state["mailing_list"] == "rpg@lists.example.org"


def test_a_refused_line_in_a_mail_does_not_stop_the_others(table):
    joined(table, "alice")
    results = table.mail("alice", "MOVE Town Square -> Dungeon Level 2\nfly away\nMOVE Town Square -> Healer")
    assert [r.ok for r in results] == [False, False, True]
    assert results[1].message.startswith("unknown command 'fly'")
    assert table.char("alice")["location"] == "Healer"
    assert table.last.sections[0].title == "Your character now"
    assert "Location: Healer" in table.last.sections[0].text


# -- randomness: the record replays ---------------------------------------------
def play_session(make_table, seed):
    table = make_table()
    table.ok("alice", "JOIN")
    table.set("alice", tokens=40, weapon_3=1, armor_2=1, health_potion_5=10)
    table.ok("alice", "MOVE Town Square -> Dungeon Level 1")
    replies = []
    rng = random.Random(seed)
    for _ in range(30):
        monster = table.char("alice")["monster"]
        here = table.char("alice")["location"]
        line = "ATTACK" if monster else ("EXPLORE" if here.startswith("Dungeon") else f"MOVE {here} -> Dungeon Level 1")
        if table.char("alice")["health"] <= 2:
            line = "DRINK HEALTH POTION 5"
        replies += [r.message for r in table.mail("alice", line, rng=rng)]
    return replies, table.state["rolls"]


def test_same_seed_and_same_actions_give_the_same_rolls(make_table):
    first = play_session(make_table, 20261116)
    second = play_session(make_table, 20261116)
    assert first == second
    assert len(first[1]) >= 30
    other = play_session(make_table, 7)
    assert other[1] != first[1]


# -- the weekly report (rule 2) --------------------------------------------------------
def test_the_week_boundary_reports_to_everyone(table, render):
    joined(table, "alice", "bob")
    table.gm("GM NPC Merchant")
    table.set("alice", location="Dungeon Level 1")
    table.ok("alice", "EXPLORE", rolls=[5])
    out = table.week()
    assert out.turn_done
    (notice,) = out.notices
    assert notice.to == [ALL_PLAYERS] and notice.kind == "report" and notice.template == "report.txt"
    assert notice.subject == "dungeon: report for week 1"  # the game's name, as every game's report
    assert notice.data["rolls"] == ["2026-11-16 09:00  alice: 1d100 = 5 (encounter on Dungeon Level 1)"]
    text = render("report.txt", notice.data)
    assert "Knows the stairway down from dungeon levels: 1" in text
    assert "Merchant (non-player character" in text
    assert "alice: 1d100 = 5 (encounter on Dungeon Level 1)" in text
    assert "public messages" in text
    assert 'The name of this public contract is "Agora: The Role-Playing' in text
    assert "42. When a Player Character's health is 0" in text
    # the next week starts with no rolls and a new number
    assert table.state["week"] == 2 and table.state["rolls"] == []
    table.set("alice", location="Dungeon Level 1")
    table.ok("alice", "EXPLORE", rolls=[6])
    assert table.state["rolls"][0]["week"] == 2
    out = table.week()
    assert out.notices[0].data["rolls"] == ["2026-11-16 09:00  alice: 1d100 = 6 (encounter on Dungeon Level 1)"]
    assert out.notices[0].subject.endswith("week 2")


def test_view_shows_everything_to_everyone(table):
    joined(table, "alice")
    sections = RULES.view(table.state, None)
    assert sections[0].title == "Characters (week 1)"
    assert "alice (player character since 2026-11-16)" in sections[0].text
    assert RULES.view(table.state, "bob")[0].text == sections[0].text


def test_export_and_import_round_trip(table):
    joined(table, "alice")
    table.set("alice", weapon_2=1)
    assert RULES.import_state(RULES.export_state(table.state)) == table.state
    from games.base import GameError
    with pytest.raises(GameError):
        RULES.import_state({"characters": {"x": {"name": "x"}}})
    broken = RULES.export_state(table.state)
    broken["characters"]["alice"]["location"] = "Atlantis"
    with pytest.raises(GameError, match="alice: unknown location 'Atlantis'"):
        RULES.import_state(broken)


def test_apply_leaves_the_given_state_alone(table):
    import copy

    joined(table, "alice")
    table.set("alice", location="Dungeon Level 1")
    before = copy.deepcopy(table.state)
    given = table.state
    table.ok("alice", "EXPLORE", rolls=[70])
    assert given == before and table.state != before


def test_options_are_checked():
    opts = {o.name: o for o in RULES.options}
    assert opts["combat"].parse("GM") == "gm"
    assert opts["points_budget"].parse("none") is None and opts["points_budget"].parse("12") == 12
    with pytest.raises(ValueError):
        opts["combat"].parse("dice")
    with pytest.raises(ValueError):
        opts["token_cap"].parse("triple")
    st = RULES.new_game({}, Context(now=__import__("datetime").datetime(2026, 1, 5), rng=random.Random(0)))
    assert st["options"] == {"combat": "house", "token_cap": "factor", "points_budget": None}
