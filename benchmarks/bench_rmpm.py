"""Benchmark: the rmpm weekly update with its report, for 50 and for 500 players.

Each run builds a position (players spread over the board, at most two per
field, random capitals, AN and PN, every player with a move order), then
times ``run_turn`` plus rendering the report text from ``templates/rmpm`` with
a plain Jinja environment.  Times are CPU seconds of this process
(``time.process_time``), the best of several runs, so other work on the
machine disturbs the ratio as little as possible.  The goal: 500 players take no more than 12 times
as long as 50 (near-linear).  ``run()`` returns the figures; run this file to
print them:

    .venv/bin/python benchmarks/bench_rmpm.py
"""

from __future__ import annotations

import copy
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import jinja2

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from games.base import Context  # noqa: E402
from games.rmpm import RULES  # noqa: E402

DIRS = {"u": (-1, 0), "r": (0, 1), "d": (1, 0), "l": (0, -1)}


def f(r: int, c: int) -> str:
    return f"{r:02d}-{c:02d}"


def position(n: int, seed: int = 7) -> dict:
    """A state with n players, every one with an order for this week."""
    rng = random.Random(seed)
    count: dict[tuple[int, int], int] = {}
    players = {}
    orders = {}
    for i in range(1, n + 1):
        chips = []
        while len(chips) < 2:
            cell = (rng.randint(1, 25), rng.randint(1, 25))
            if cell in chips or count.get(cell, 0) >= 2:
                continue
            chips.append(cell)
            count[cell] = count.get(cell, 0) + 1
        handle = f"p{i:04d}"
        abbr = f"{chr(97 + i // 36 % 26)}{'0123456789abcdefghijklmnopqrstuvwxyz'[i % 36]}"
        players[handle] = {
            "number": i, "abbr": abbr, "alias": f"player {i}", "chips": [f(*c) for c in chips],
            "an": rng.randint(1, 100), "pn": rng.randint(1, 100), "capital": rng.randint(0, 20000),
            "cards": {"MT": 1} if i % 10 == 0 else {},
        }
        a, b = chips
        while True:
            d = rng.choice("urdl")
            t = (a[0] + DIRS[d][0], a[1] + DIRS[d][1])
            if 1 <= t[0] <= 25 and 1 <= t[1] <= 25:
                break
        d2 = rng.choice("urdl")
        t2 = (b[0] + DIRS[d2][0], b[1] + DIRS[d2][1])
        lines = [f"{f(*a)} -> {f(*t)}", f"{f(*b)} -> {f(*t2)}"]
        if i % 3 == 0:
            lines.append("BUY")
        orders[handle] = lines
    owners = {}
    for _ in range(60):
        h = f"p{rng.randint(1, n):04d}"
        owners[f(rng.randint(1, 25), rng.randint(1, 12))] = h
    owners.pop("13-13", None)
    return RULES.import_state({"players": players, "orders": orders, "owners": owners,
                               "bank": 50000, "kiosk": 3000})


def one_week(state: dict, env: jinja2.Environment) -> float:
    ctx = Context(now=datetime(2026, 1, 3, 3, 0, tzinfo=timezone.utc), rng=random.Random(1), game_name="bench")
    template = env.get_template("report.txt")
    start = time.process_time()
    out = RULES.run_turn(state, ctx)
    text = template.render(**out.notices[0].data)
    elapsed = time.process_time() - start
    assert "CHAMPION" in text and out.turn_done
    return elapsed


def timed(n: int, env: jinja2.Environment, repeat: int) -> float:
    base = position(n)
    return min(one_week(copy.deepcopy(base), env) for _ in range(repeat))


def run() -> dict:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "templates" / "rmpm")))
    timed(50, env, repeat=1)  # warm up imports and the template cache
    t50 = timed(50, env, repeat=30)
    t500 = timed(500, env, repeat=8)
    ratio = t500 / t50
    return {"players_50_seconds": round(t50, 5), "players_500_seconds": round(t500, 5),
            "ratio": round(ratio, 2), "limit": 12, "within_limit": ratio <= 12}


if __name__ == "__main__":
    res = run()
    print(f"rmpm weekly update + report,  50 players: {res['players_50_seconds']:.4f} s")
    print(f"rmpm weekly update + report, 500 players: {res['players_500_seconds']:.4f} s")
    print(f"ratio 500/50: {res['ratio']} (limit {res['limit']})")
