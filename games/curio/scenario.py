"""Curio's scenario for the contract tests (games/scenario.py)."""

from __future__ import annotations

from games.curio.state import load
from games.scenario import Probe, Refusal, Scenario, Table, accepted


def play(t: Table) -> Probe:
    accepted(t, "alice", "curio challenge alice bob")
    for _ in range(3):
        board = load(t.state).boards[101]
        who = board.handle(board.position.to_move)
        move = next(m for m in board.position.legal_moves() if not m.capture)
        accepted(t, who, f"curio move 101 {who} {t.password(who)} {move.plain}")
    board = load(t.state).boards[101]
    waiting = board.handle(board.position.to_move)
    other = "bob" if waiting == "alice" else "alice"
    accepted(t, "carol", "curio subscribe 101")
    return Probe(
        refusals=(
            Refusal(other, (f"curio move 101 {other} {t.password(other)} a1-a2",)),
            Refusal(waiting, (f"curio move 101 {waiting} wrong-password a1-a2",)),
            Refusal("carol", (f"curio resign 101 carol {t.password('carol')}",)),
            Refusal("alice", ("curio show 999",)),
            Refusal("carol", ("curio subscribe 101",)),
            Refusal("alice", ("curio challenge alice alice",)),
        ),
        at=t.state,
        hides=True,
    )


SCENARIO = Scenario(
    play,
    samples=("curio challenge -base=3 alice bob", "curio move 101 alice {pw:alice} a1-b3",
             "move 101 bob {pw:bob} a4-a3", "curio resign 101 alice {pw:alice}", "curio show 101",
             "curio showas alice {pw:alice} 101", "curio draw 101 bob {pw:bob}", "curio boards",
             "challenge alice bob"),
    parser_lines=("curio challenge -base=3 alice bob", "curio move 101 alice pw a1-b3", "move 101 bob pw a4-a3",
                  "curio resign 101 alice pw", "curio show 101", "curio showas alice pw 101", "challenge alice bob"),
)
