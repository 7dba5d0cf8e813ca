"""Rich Man - Poor Man's scenario for the contract tests (games/scenario.py)."""

from __future__ import annotations

from games.scenario import Probe, Refusal, Scenario, Table, accepted


def play(t: Table) -> Probe:
    accepted(t, "alice", "JOIN bd 01-05 25-10 blue dragon")
    accepted(t, "bob", "JOIN ob 01-09 25-14 orange bear")
    t.run()
    accepted(t, "alice", "01-05 -> 02-05", "25-10 -> 24-10")
    accepted(t, "gm", "GM KIOSK 100", gm=True)
    probe = Probe(
        refusals=(
            Refusal("alice", ("JOIN cc 01-11 25-16 copper cat",)),
            Refusal("bob", ("01-09 -> 02-09",)),
            Refusal("carol", ("01-05 -> 02-05", "25-10 -> 24-10")),
            Refusal("alice", ("GM KIOSK 100",)),
            Refusal("bob", ("01-09 -> 02-09", "25-14 -> 24-14"), authenticated=False),
            Refusal(None, ("JOIN cc 01-11 25-16 copper cat",)),
        ),
        at=t.state,
        hides=True,
    )
    t.run()
    return probe


SCENARIO = Scenario(
    play,
    samples=("JOIN bd 01-05 25-10 blue dragon", "01-05 -> 02-05", "25-10 -> 24-10", "F 15-04 u -> l",
             "E 16-03 <-> 16-05", "BUY", "BUY 12-12", "USE MT", "LEAVE", "CANCEL", "GM KIOSK 5"),
    parser_lines=("JOIN bd 01-05 25-10 blue dragon", "16-04 -> 16-05", "22-07 -> 25-07", "F 15-04 u -> l",
                  "E 16-03 <-> 16-05", "BUY 12-12", "BUY", "USE MT", "LEAVE"),
)
