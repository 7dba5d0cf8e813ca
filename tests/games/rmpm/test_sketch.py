"""An order mail's pre-analysis runs on a Sketch of the stored state (players
drawn when looked at, money moved among all players kept as one function)
instead of a decoded copy of the whole game.  These tests play the same
orders on both, on crowded boards where encounters, shares among all
players ("victim_shares") and collections ("collect") happen often, and
require the same result to the last WCU of every player."""

from __future__ import annotations

import random
from typing import Any

import pytest

from games.base import Context
from games.rmpm import RULES
from games.rmpm.board import DIRS, fmt, on_board_
from games.rmpm.engine import parse_held, run_slot
from games.rmpm.model import Game, Index, Sketch
from tests.games.rmpm.conftest import Table

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

CAPITALS = (0, 1, 49, 50, 51, 99, 100, 260, 500, 10000)


def crowded(rng: random.Random, n: int) -> dict[str, Any]:
    """n players on the 6x6 corner of the board (two per field at most),
    a few of them still waiting to be placed."""
    cells = [(r, c) for r in range(1, 7) for c in range(1, 7)] * 2
    rng.shuffle(cells)
    players: dict[str, Any] = {}
    for i in range(1, n + 1):
        handle = f"q{i:02d}"
        q: dict[str, Any] = {"number": i, "abbr": f"{chr(97 + i // 26)}{chr(97 + i % 26)}", "alias": f"player {i}",
                             "an": rng.randint(1, 100), "pn": rng.randint(1, 100),
                             "capital": rng.choice(CAPITALS) if rng.random() < 0.7 else rng.randint(0, 3000),
                             "cards": {"MT": rng.randint(1, 2)} if rng.random() < 0.3 else {}}
        if i % 7 == 0:
            q["chips"], q["start"] = None, [fmt((1, 20 + i % 5)), fmt((25, 20 + i % 5))]
        else:
            a = cells.pop()
            b = cells.pop()
            while b == a:
                cells.insert(0, b)
                b = cells.pop()
            q["chips"] = [fmt(a), fmt(b)]
        players[handle] = q
    owners = {fmt((rng.randint(1, 7), rng.randint(1, 7))): f"q{rng.randint(1, n):02d}" for _ in range(rng.randint(0, 8))}
    return RULES.import_state({"players": players, "owners": owners, "bank": rng.randint(-500, 5000),
                               "kiosk": rng.randint(0, 900)})


def some_orders(rng: random.Random, chips: list[str]) -> list[str]:
    """One or two move blocks (the second after USE MT), sometimes a BUY, a
    fence turn or an exchange: lines a player could send."""
    a, b = (tuple(int(x) for x in c.split("-")) for c in chips)

    def move(frm: tuple[int, ...], far: int) -> str:
        while True:
            dr, dc, _ = DIRS[rng.choice("urdl")]
            to = (frm[0] + dr * far, frm[1] + dc * far)
            if on_board_(to):
                return f"{fmt(frm)} -> {fmt(to)}"  # type: ignore[arg-type]

    lines = []
    if rng.random() < 0.15:
        frm, to = rng.sample("urdl", 2)
        lines.append(f"F {fmt(a)} {frm} -> {to}")  # type: ignore[arg-type]
    lines += [move(a, 1), move(b, rng.randint(1, 3))]
    if rng.random() < 0.4:
        lines.append("BUY")
    if rng.random() < 0.4:
        lines += ["USE MT", move(a, 1), move(b, 2)]
        if rng.random() < 0.5:
            lines.append("BUY")
    return lines


def test_a_slot_on_a_sketch_is_the_slot_on_the_decoded_game():
    rng = random.Random(20260115)
    shared = collected = 0
    for trial in range(500):
        state = crowded(rng, rng.randint(3, 30))
        placed = [h for h, p in state["players"].items() if p["chips"]]
        handle = rng.choice(placed)
        lines = some_orders(rng, state["players"][handle]["chips"])
        # the mover's AN lands in the rows that move money among everybody now and then
        game, sketch = Game(state), Sketch(state, {})
        p, q = game.players[handle], sketch.find(handle)
        assert q is not None
        full, drawn = run_slot(game, p, parse_held(lines)), run_slot(sketch, q, parse_held(lines))
        what = f"trial {trial}: {handle} {lines}"
        assert (drawn.notes, drawn.events, drawn.mns, drawn.landed, drawn.new, drawn.interm) == \
               (full.notes, full.events, full.mns, full.landed, full.new, full.interm), what
        assert (sketch.bank, sketch.kiosk, sketch.owners, sketch.board.fences, sketch.board.numbers) == \
               (game.bank, game.kiosk, game.owners, game.board.fences, game.board.numbers), what
        for h, r in game.players.items():
            s = sketch.find(h)
            assert s is not None
            assert (s.capital, s.chips, s.cards, s.an, s.pn) == (r.capital, r.chips, r.cards, r.an, r.pn), f"{what}: {h}"
        for row in range(1, 8):
            for col in range(1, 8):
                assert sketch.occupants((row, col)) == game.occupants((row, col)), what
        text = " ".join(full.events)
        shared += "WCU to each of the" in text
        collected += "other players pays up to" in text
    # the two actions that touch every player did happen, many times
    assert shared >= 10 and collected >= 10, (shared, collected)


def test_money_moved_among_all_players_on_a_sketch():
    """Long runs of shares and collections (more than a week's slot can
    make), with the players looked at in between, as a Game does them."""
    rng = random.Random(77)
    for trial in range(300):
        state = crowded(rng, rng.randint(3, 30))
        game, sketch = Game(state), Sketch(state, {})
        placed = [h for h, p in state["players"].items() if p["chips"]]
        for step in range(rng.randint(1, 8)):
            a, v = rng.choice(placed), rng.choice(placed)
            amount = rng.choice((20, 50, 200, 1000))
            ga, sa = game.players[a], sketch.find(a)
            assert sa is not None
            if rng.random() < 0.5:
                gv, sv = game.players[v], sketch.find(v)
                assert sv is not None
                assert sketch.share_out(sv, amount % 100) == game.share_out(gv, amount % 100), (trial, step)
            else:
                assert sketch.collect(sa, amount) == game.collect(ga, amount), (trial, step)
            for h in rng.sample(sorted(state["players"]), 2):  # draw a few more on the way
                s = sketch.find(h)
                assert s is not None and s.capital == game.players[h].capital, (trial, step, h)
        for h, r in game.players.items():
            s = sketch.find(h)
            assert s is not None and s.capital == r.capital, (trial, h)


def mail(t: Table, state: dict[str, Any], handle: str, lines: list[str], memo: dict[str, Any]):
    """One order mail of ``handle`` through the rules, with the worker's memo."""
    commands, emails = t.commands(handle, lines)
    ctx = t.ctx(handle, emails=emails)
    ctx.memo = memo
    return RULES.apply(state, commands, ctx)


def test_order_mails_change_one_entry_and_share_the_rest():
    t = Table()
    state = crowded(random.Random(5), 20)
    memo: dict[str, Any] = {}

    handle, other = [h for h, p in state["players"].items() if p["chips"]][:2]
    a, b = state["players"][handle]["chips"]
    lines = [f"{a} -> {fmt((int(a[:2]) + 1, int(a[3:])))}", f"{b} -> {fmt((int(b[:2]) + 1, int(b[3:])))}"]
    out = mail(t, state, handle, lines, memo)
    assert all(r.ok for r in out.results), [r.message for r in out.results]
    assert out.changed_entries == {"orders": [handle]}
    assert out.state["orders"] == {handle: lines}
    # nothing but the orders is new: the players, the board, the owners are the given objects
    assert all(out.state[k] is state[k] for k in state if k != "orders")
    index = memo[Index.MEMO]
    # the next mail finds the index again; a CANCEL of nothing writes nothing
    again = mail(t, out.state, other, ["CANCEL"], memo)
    assert memo[Index.MEMO] is index
    assert again.results[0].ok and again.changed_entries == {}
    gone = mail(t, out.state, handle, ["CANCEL"], memo)
    assert gone.changed_entries == {"orders": [handle]} and gone.state["orders"] == {}


def test_a_stale_index_is_not_used_after_the_week_ran():
    """The memo kept from last week's mails belongs to last week's players."""
    t = Table()
    state = crowded(random.Random(8), 25)
    memo: dict[str, Any] = {}

    placed = [h for h, p in state["players"].items() if p["chips"]]
    for h in placed[:5]:
        state = mail(t, state, h, some_orders(random.Random(h), state["players"][h]["chips"]), memo).state
    week = RULES.run_turn(state, Context(now=t.now, rng=random.Random(1), game_name="world")).state
    for h in [p for p in week["players"] if week["players"][p]["chips"]][:5]:
        lines = some_orders(random.Random(h + "2"), week["players"][h]["chips"])
        a, b = mail(t, week, h, lines, memo), mail(t, week, h, lines, {})
        assert [r.message for r in a.results] == [r.message for r in b.results]
        assert [s.text for s in a.sections] == [s.text for s in b.sections]
        assert a.state == b.state
