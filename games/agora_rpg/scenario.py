"""Agora's scenario for the contract tests (games/scenario.py)."""

from __future__ import annotations

from games.scenario import Probe, Refusal, Scenario, Table, accepted


def play(t: Table) -> Probe:
    accepted(t, "alice", "JOIN")
    accepted(t, "bob", "JOIN")
    accepted(t, "alice", "MOVE Town Square -> Gold Exchanger")
    accepted(t, "gm", "GM NPC Merchant", gm=True)
    t.run()
    return Probe(
        refusals=(
            Refusal("carol", ("EXPLORE",)),
            Refusal("alice", ("GM NPC Trader",)),
            Refusal("alice", ("JOIN",)),
            Refusal("alice", ("DRINK HEALTH POTION 3",)),
            Refusal("bob", ("MOVE Healer -> Town Square",)),
            Refusal(None, ("JOIN",)),
            Refusal("bob", ("HEAL",), authenticated=False),
        ),
        at=t.state,
    )


SCENARIO = Scenario(
    play,
    samples=("JOIN", "MOVE Town Square -> Healer", "EXPLORE", "DRINK HEALTH POTION 2", "HEAL", "EXCHANGE 10 GOLD",
             "TRANSFER 5 gold TO bob", "ATTACK", "FLEE", "LEAVE", "GM SET alice TOKENS = 5", "GM FIGHT bob WON"),
    parser_lines=("JOIN", "MOVE Town Square -> Healer", "EXPLORE", "DRINK HEALTH POTION 2", "DRINK VITALITY POTION 1",
                  "HEAL", "EXCHANGE 10 GOLD", "TRANSFER 5 gold TO bob", "ATTACK", "FLEE", "LEAVE",
                  "MOVE Healer -> Dungeon Level 2"),
)
