"""Every game's fixture scenario for the contract suite, in one table.

A scenario is a function that plays a short game on a
:class:`tests.games.driver.Table` (mails and turns; every line it sends must
be accepted) and returns a :class:`Probe`: mails that must be refused in the
position reached, sample lines to mutate for fuzzing, and whether something
is hidden from someone on the way.  Adding a game: write one function here
and add it to ``SCENARIOS`` (docs/architecture-games.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from games import KINDS, get_rules
from games.base import Rules
from tests.games.driver import Table, password


@dataclass
class Refusal:
    """A mail every line of which must be refused."""

    sender: str | None
    lines: list[str]
    options: dict[str, Any] = field(default_factory=dict)  # authenticated=..., gm=...


@dataclass
class Probe:
    refusals: list[Refusal]
    #: lines the game reads (for mutation); may contain {pw:handle} placeholders
    samples: list[str]
    #: the position the refusals are made in
    at: dict[str, Any]
    #: the scenario reaches a position where someone may not see something
    hides: bool = False


def accepted(table: Table, sender: str | None, *texts: str, **kw: Any) -> None:
    out = table.send(sender, *texts, **kw)
    bad = [(r.text, r.message) for r in out.results if not r.ok]
    assert not bad, f"{table.rules.kind} scenario: refused {bad}"


def giveaway(t: Table) -> Probe:
    for h in ("alice", "bob", "carol", "dave"):
        accepted(t, h, "JOIN")
    accepted(t, "alice", "GIVE 2 TO bob", "GIVE 1 TO carol")
    accepted(t, "bob", "GIVE 3 TO carol")
    probe = Probe(
        refusals=[
            Refusal("alice", ["GIVE 5 TO bob"]),
            Refusal("alice", ["GIVE 3 TO alice"]),
            Refusal("alice", ["JOIN"]),
            Refusal("erin", ["GIVE 3 TO bob"]),
            Refusal("erin", ["LEAVE"]),
            Refusal(None, ["JOIN"]),
            Refusal("carol", ["GIVE 3 TO dave"], {"authenticated": False}),
        ],
        samples=["JOIN", "GIVE 2 TO alice", "GIVE 1 TO bob", "GIVE 3 TO carol", "LEAVE"],
        at=t.state,
        hides=True,
    )
    accepted(t, "carol", "GIVE 1 TO alice", "GIVE 1 TO bob", "GIVE 1 TO dave")
    accepted(t, "dave", "GIVE 3 TO alice")
    t.run()
    accepted(t, "alice", "GIVE " + str(t.state["players"][0]["holding"]) + " TO dave")
    return probe


def rmpm(t: Table) -> Probe:
    accepted(t, "alice", "JOIN bd 01-05 25-10 blue dragon")
    accepted(t, "bob", "JOIN ob 01-09 25-14 orange bear")
    t.run()
    accepted(t, "alice", "01-05 -> 02-05", "25-10 -> 24-10")
    accepted(t, "gm", "GM KIOSK 100", gm=True)
    probe = Probe(
        refusals=[
            Refusal("alice", ["JOIN cc 01-11 25-16 copper cat"]),
            Refusal("bob", ["01-09 -> 02-09"]),
            Refusal("carol", ["01-05 -> 02-05", "25-10 -> 24-10"]),
            Refusal("alice", ["GM KIOSK 100"]),
            Refusal("bob", ["01-09 -> 02-09", "25-14 -> 24-14"], {"authenticated": False}),
            Refusal(None, ["JOIN cc 01-11 25-16 copper cat"]),
        ],
        samples=["JOIN bd 01-05 25-10 blue dragon", "01-05 -> 02-05", "25-10 -> 24-10", "F 15-04 u -> l",
                 "E 16-03 <-> 16-05", "BUY", "BUY 12-12", "USE MT", "LEAVE", "CANCEL", "GM KIOSK 5"],
        at=t.state,
        hides=True,
    )
    t.run()
    return probe


def curio(t: Table) -> Probe:
    from games.curio.state import load

    accepted(t, "alice", "curio challenge alice bob")
    for _ in range(3):
        board = load(t.state).boards[101]
        who = board.handle(board.position.to_move)
        move = next(m for m in board.position.legal_moves() if not m.capture)
        accepted(t, who, f"curio move 101 {who} {password(who)} {move.plain}")
    board = load(t.state).boards[101]
    waiting = board.handle(board.position.to_move)
    other = "bob" if waiting == "alice" else "alice"
    accepted(t, "carol", "curio subscribe 101")
    return Probe(
        refusals=[
            Refusal(other, [f"curio move 101 {other} {password(other)} a1-a2"]),
            Refusal(waiting, [f"curio move 101 {waiting} wrong-password a1-a2"]),
            Refusal("carol", [f"curio resign 101 carol {password('carol')}"]),
            Refusal("alice", ["curio show 999"]),
            Refusal("carol", ["curio subscribe 101"]),
            Refusal("alice", ["curio challenge alice"]),
        ],
        samples=["curio challenge -base=3 alice bob", "curio move 101 alice {pw:alice} a1-b3",
                 "move 101 bob {pw:bob} a4-a3", "curio resign 101 alice {pw:alice}", "curio show 101",
                 "curio showas alice {pw:alice} 101", "curio draw 101 bob {pw:bob}", "curio boards",
                 "challenge alice bob"],
        at=t.state,
        hides=True,
    )


def agora_rpg(t: Table) -> Probe:
    accepted(t, "alice", "JOIN")
    accepted(t, "bob", "JOIN")
    accepted(t, "alice", "MOVE Town Square -> Gold Exchanger")
    accepted(t, "gm", "GM NPC Merchant", gm=True)
    t.run()
    return Probe(
        refusals=[
            Refusal("carol", ["EXPLORE"]),
            Refusal("alice", ["GM NPC Trader"]),
            Refusal("alice", ["JOIN"]),
            Refusal("alice", ["DRINK HEALTH POTION 3"]),
            Refusal("bob", ["MOVE Healer -> Town Square"]),
            Refusal(None, ["JOIN"]),
            Refusal("bob", ["HEAL"], {"authenticated": False}),
        ],
        samples=["JOIN", "MOVE Town Square -> Healer", "EXPLORE", "DRINK HEALTH POTION 2", "HEAL", "EXCHANGE 10 GOLD",
                 "TRANSFER 5 gold TO bob", "ATTACK", "FLEE", "LEAVE", "GM SET alice TOKENS = 5", "GM FIGHT bob WON"],
        at=t.state,
    )


def sequence(t: Table) -> Probe:
    accepted(t, "alice", "JOIN")
    accepted(t, "bob", "JOIN")
    for handle, number in (("alice", 1), ("bob", 1), ("alice", 2)):
        value, multiplier = t.state["players"][handle]["pieces"][number - 1]
        accepted(t, handle, f"Piece {number}: {value}, {multiplier}")
    accepted(t, "bob", "MAIL EACH")
    used = t.state["players"]["alice"]["pieces"][0]
    probe = Probe(
        refusals=[
            Refusal("alice", [f"Piece 1: {used[0]}, {used[1]}"]),
            Refusal("alice", ["Piece 3: 999, 9"]),
            Refusal("carol", ["PIECES"]),
            Refusal("alice", ["JOIN"]),
            Refusal("alice", ["SET PIECES bob 4,1 11,2 12,3 5,4 9,5 6,0 6,0 6,0 6,0 6,0"]),
            Refusal(None, ["JOIN"]),
        ],
        samples=["JOIN", "Piece 1: +5, 2", "Piece 10: -3, 1", "PIECES", "MAIL EACH", "MAIL DIGEST", "MAIL NONE",
                 "SET PIECES bob 4,1 11,2 12,3 5,4 9,5 6,0 6,0 6,0 6,0 6,0"],
        at=t.state,
        hides=True,
    )
    t.run()
    return probe


def tally(t: Table) -> Probe:
    accepted(t, "alice", "JOIN", "ADD 3", "SECRET marigold")
    accepted(t, "bob", "JOIN", "SECRET tamarind")
    probe = Probe(
        refusals=[Refusal("carol", ["ADD 2"]), Refusal("alice", ["JOIN"]), Refusal(None, ["JOIN"])],
        samples=["JOIN", "ADD 4", "SECRET word"],
        at=t.state,
        hides=True,
    )
    t.run()
    return probe


#: kind -> its scenario; every kind in games.KINDS must have one
SCENARIOS: dict[str, Callable[[Table], Probe]] = {
    "giveaway": giveaway,
    "rmpm": rmpm,
    "curio": curio,
    "agora_rpg": agora_rpg,
    "sequence": sequence,
    "tally": tally,
}

#: games that exist only in the tests (never in games.KINDS)
TEST_ONLY: dict[str, str] = {"tally": "tests.contract.toygame"}

#: every game the contract suite runs: the server's games, then the test-only ones
CONTRACT_KINDS: list[str] = [*KINDS, *TEST_ONLY]


def rules_of(kind: str) -> Rules[Any]:
    """The rules of a registered kind (its import error propagates) or of a test-only game."""
    if kind in TEST_ONLY:
        rules: Rules[Any] = importlib.import_module(TEST_ONLY[kind]).RULES
        return rules
    return get_rules(kind)


def play(kind: str, seed: int = 1) -> tuple[Table, Probe]:
    table = Table(rules_of(kind), seed=seed)
    return table, SCENARIOS[kind](table)
