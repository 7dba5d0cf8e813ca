"""A character walks from the Town Square into the dungeon and back, by mail
over SMTP to a running `pbm serve`, and gets the weekly report."""

from __future__ import annotations

import re

from games.agora_rpg.engine import encounter_for

ALICE_PW = "dragon-slayer-7"
GM_PW = "gm-secret-42"


def flat(text: str) -> str:
    """The mail text with line wrapping undone."""
    return " ".join(text.split())


def test_into_the_dungeon_and_back(pbm):
    alice = pbm.register("alice", ALICE_PW)
    gm = pbm.register("keeper", GM_PW, email=pbm.gm_address)
    pbm.new_game("agora_rpg", "crawl")

    def play(body):
        reply = pbm.mail(alice, "crawl", f"$${ALICE_PW}$$\n{body}")
        return flat(pbm.text(reply))

    def as_gm(body):
        text = flat(pbm.text(pbm.mail(gm, "crawl", f"$${GM_PW}$$\n{body}")))
        assert "REFUSED" not in text, text
        return text

    # join and walk down
    text = play("JOIN\nMOVE Town Square -> Dungeon Level 1")
    assert "alice joins at the Town Square with 5 movement tokens" in text
    assert "moved from Town Square to Dungeon Level 1 (4 movement tokens left); vitality 9 of 10" in text
    assert ALICE_PW not in text

    # the GM arms her well enough that no monster can harm her
    text = as_gm("GM SET alice weapon 60 = 1\nGM SET alice armor 60 = 1\nGM NPC Merchant")
    assert "alice now holds 1 weapon level 60" in text
    assert "Merchant is now a non-player character" in text

    # explore three times; every reply names the roll and what it found
    tokens, vitality = 4, 9
    for _ in range(3):
        text = play("EXPLORE")
        tokens, vitality = tokens - 1, vitality - 1
        assert f"moved from Dungeon Level 1 to Dungeon Level 1 ({tokens} movement token" in text
        roll = int(re.search(r"rolled 1d100 = (\d+) for the encounter on Dungeon Level 1", text).group(1))
        kind, level = encounter_for(roll, 1)
        if kind == "stairway":
            assert "alice finds the stairway down from Dungeon Level 1" in text
        elif level == 0:
            assert "is a piece of gold" in text
        elif kind == "monster":
            assert f"alice meets a level {level} monster" in text
            text = play("MOVE Dungeon Level 1 -> Town Square\nATTACK")
            assert "REFUSED" in text and "cannot move until it is over: ATTACK or FLEE" in text
            hit = re.search(r"rolled 1d6 = (\d) to attack; with attack level 60 the monster loses (\d+) health", text)
            assert hit and int(hit.group(2)) == int(hit.group(1)) + 60
            assert f"the monster is slain: alice gains {5 * level} experience and {level} gold" in text
        else:
            assert f"alice finds {'' if kind == 'armor' else 'a '}{kind} level {level}" in text
        assert "Location: Dungeon Level 1" in text

    # a fight for sure: the GM puts a level 2 monster in her way
    as_gm("GM SET alice monster = 2")
    text = play("ATTACK")
    assert re.search(r"rolled 1d6 = [1-6] to attack; with attack level 60 the monster loses 6[1-6] health", text)
    assert "the monster is slain: alice gains 10 experience and 2 gold" in text

    # the stairway: refused until known
    as_gm("GM SET alice stairway 1 = false\nGM SET alice gold = 3\nGM SET alice tokens = 5")
    text = play("MOVE Dungeon Level 1 -> Dungeon Level 2")
    assert "REFUSED" in text and "does not know the stairway down from Dungeon Level 1 yet" in text
    as_gm("GM SET alice stairway 1 = true")
    text = play(
        "MOVE Dungeon Level 1 -> Dungeon Level 2\n"
        "MOVE Dungeon Level 2 -> Dungeon Level 1\n"
        "MOVE Dungeon Level 1 -> Town Square\n"
        "move town square -> merchant\n"
        "TRANSFER 2 GOLD TO Merchant"
    )
    assert "REFUSED" not in text, text
    assert "moved from Dungeon Level 1 to Dungeon Level 2 (4 movement tokens left)" in text
    assert "moved from Dungeon Level 2 to Dungeon Level 1" in text
    assert "moved from Dungeon Level 1 to Town Square" in text
    assert "alice gives 2 gold to Merchant" in text
    assert "Location: Merchant" in text
    assert "Knows the stairway down from dungeon levels: 1" in text

    # the week ends: everyone gets the report with every attribute, the rolls and the contract
    before = len(pbm.inbox(alice))
    pbm.run_turn("crawl")
    mails = pbm.wait_for(alice, before + 1)
    report = mails[-1]
    assert "report for week 1" in report["Subject"]
    body = pbm.text(report)
    text = flat(body)
    assert "alice (player character since" in text
    assert "Location: Merchant" in text
    assert "Merchant (non-player character since" in text and "Gold 2" in text
    # 1 token left after the 4 moves, + level + 4 (the level depends on the fights)
    plus = re.search(r"alice: \+(\d+) movement tokens \(now (\d+)\)", text)
    assert plus and int(plus.group(2)) == 1 + int(plus.group(1)) and int(plus.group(1)) in (5, 6, 7)
    assert text.count("(encounter on Dungeon Level 1)") == 3
    assert "The RPG mailing list is specified as: public messages" in text
    assert '1. The name of this public contract is "Agora: The Role-Playing Game."' in text
    assert "42. When a Player Character's health is 0, the following happen:" in text
    html = pbm.html(report)
    assert html is not None and "&lt;starting location&gt;" in html
