"""The Fourth Game's scenario for the contract tests (games/scenario.py)."""

from __future__ import annotations

from games.scenario import Probe, Refusal, Scenario, Table, accepted


def play(t: Table) -> Probe:
    accepted(t, "alice", "JOIN")
    accepted(t, "bob", "JOIN")
    for handle, number in (("alice", 1), ("bob", 1), ("alice", 2)):
        value, multiplier = t.state["players"][handle]["pieces"][number - 1]
        accepted(t, handle, f"Piece {number}: {value}, {multiplier}")
    accepted(t, "bob", "MAIL EACH")
    used = t.state["players"]["alice"]["pieces"][0]
    probe = Probe(
        refusals=(
            Refusal("alice", (f"Piece 1: {used[0]}, {used[1]}",)),
            Refusal("alice", ("Piece 3: 999, 9",)),
            Refusal("carol", ("PIECES",)),
            Refusal("alice", ("JOIN",)),
            Refusal("alice", ("SET PIECES bob 4,1 11,2 12,3 5,4 9,5 6,0 6,0 6,0 6,0 6,0",)),
            Refusal(None, ("JOIN",)),
        ),
        at=t.state,
        hides=True,
    )
    t.run()
    return probe


SCENARIO = Scenario(
    play,
    samples=("JOIN", "Piece 1: +5, 2", "Piece 10: -3, 1", "PIECES", "MAIL EACH", "MAIL DIGEST", "MAIL NONE",
             "SET PIECES bob 4,1 11,2 12,3 5,4 9,5 6,0 6,0 6,0 6,0 6,0"),
    parser_lines=("JOIN", "Piece 1: +5, 2", "Piece 10: -3, 1", "Piece 3: 7, 3"),
)
