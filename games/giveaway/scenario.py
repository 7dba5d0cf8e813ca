"""Giveaway's scenario for the contract tests (games/scenario.py)."""

from __future__ import annotations

from games.scenario import Probe, Refusal, Scenario, Table, accepted


def play(t: Table) -> Probe:
    for h in ("alice", "bob", "carol", "dave"):
        accepted(t, h, "JOIN")
    accepted(t, "alice", "GIVE 2 TO bob", "GIVE 1 TO carol")
    accepted(t, "bob", "GIVE 3 TO carol")
    probe = Probe(
        refusals=(
            Refusal("alice", ("GIVE 5 TO bob",)),
            Refusal("alice", ("GIVE 3 TO alice",)),
            Refusal("alice", ("JOIN",)),
            Refusal("erin", ("GIVE 3 TO bob",)),
            Refusal("erin", ("LEAVE",)),
            Refusal(None, ("JOIN",)),
            Refusal("carol", ("GIVE 3 TO dave",), authenticated=False),
        ),
        at=t.state,
        hides=True,
    )
    accepted(t, "carol", "GIVE 1 TO alice", "GIVE 1 TO bob", "GIVE 1 TO dave")
    accepted(t, "dave", "GIVE 3 TO alice")
    t.run()
    accepted(t, "alice", "GIVE " + str(t.state["players"][0]["holding"]) + " TO dave")
    return probe


SCENARIO = Scenario(
    play,
    samples=("JOIN", "GIVE 2 TO alice", "GIVE 1 TO bob", "GIVE 3 TO carol", "LEAVE"),
    parser_lines=("JOIN", "GIVE 2 TO alice", "GIVE 1 TO bob", "LEAVE"),
)
