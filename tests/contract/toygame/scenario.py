"""Tally's scenario for the contract tests (games/scenario.py)."""

from __future__ import annotations

from games.scenario import Probe, Refusal, Scenario, Table, accepted


def play(t: Table) -> Probe:
    accepted(t, "alice", "JOIN", "ADD 3", "SECRET marigold")
    accepted(t, "bob", "JOIN", "SECRET tamarind")
    probe = Probe(
        refusals=(Refusal("carol", ("ADD 2",)), Refusal("alice", ("JOIN",)), Refusal(None, ("JOIN",))),
        at=t.state,
        hides=True,
    )
    t.run()
    return probe


SCENARIO = Scenario(play, samples=("JOIN", "ADD 4", "SECRET word"), parser_lines=("JOIN", "ADD 4", "SECRET word"))
