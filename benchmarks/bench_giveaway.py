"""Giveaway round resolution at scale: 1,000 and 10,000 players.

Each player holds 3 to 12 points and gives them away in one to four random
gifts to random players; a fifth of the players instead sit in planted rings
(sizes 2 to 8, all passing the same amount, nothing else between them), and a
few hundred of the random givers are linked into rings that share gifts.
The figure is the time of ``RULES.run_turn`` (ring detection, scores, next
holdings, report data), best of three runs on the same state.

Goal (shared/rulings.md section 3, issue 5): 10,000 players well under a
second, and the 10,000 case no more than 15 times the 1,000 case.
"""

from __future__ import annotations

import random
import time
from datetime import datetime, timezone

from games.base import Context
from games.giveaway import RULES
from games.giveaway.model import Game, Gift, Player, PLAYING

RUNS = 3


def make_state(n: int, seed: int = 7) -> tuple[dict, int]:
    """A started game of n players with orders held for everybody; returns
    (state, number of planted rings)."""
    rng = random.Random(seed)
    handles = [f"p{i:05d}" for i in range(n)]
    holding = [rng.randint(3, 12) for _ in range(n)]
    orders: dict[int, dict[int, int]] = {}
    planted = 0
    i = 0
    ring_zone = n // 5
    while i < ring_zone:  # planted rings: k players each passing their whole holding x
        k = min(rng.randint(2, 8), ring_zone - i)
        if k < 2:
            break
        x = rng.randint(3, 12)
        for j in range(k):
            holding[i + j] = x
            orders[i + j] = {i + (j + 1) % k: x}
        planted += 1
        i += k
    for u in range(ring_zone, n):  # random givers
        parts = rng.randint(1, min(4, holding[u]))
        cuts = sorted(rng.sample(range(1, holding[u]), parts - 1)) if parts > 1 else []
        amounts = [b - a for a, b in zip([0] + cuts, cuts + [holding[u]])]
        gifts: dict[int, int] = {}
        for a in amounts:
            v = rng.randrange(n)
            while v == u:
                v = rng.randrange(n)
            gifts[v] = gifts.get(v, 0) + a
        orders[u] = gifts
    game = Game(
        round=5,
        status=PLAYING,
        players=[Player(handles[i], holding[i]) for i in range(n)],
        orders={handles[u].casefold(): [Gift(a, handles[v]) for v, a in g.items()] for u, g in orders.items()},
    )
    return game.to_state(), planted


def time_round(n: int) -> tuple[float, int, int]:
    state, planted = make_state(n)
    ctx = Context(now=datetime(2026, 11, 21, 12, tzinfo=timezone.utc), rng=random.Random(1), game_name="bench")
    best = float("inf")
    rings = 0
    for _ in range(RUNS):
        start = time.perf_counter()
        out = RULES.run_turn(state, ctx)
        best = min(best, time.perf_counter() - start)
        rings = len([line for line in out.notices[0].data["rings"] if not line.startswith(" ")])
    return best, planted, rings


def run() -> dict:
    small, small_planted, small_rings = time_round(1_000)
    large, large_planted, large_rings = time_round(10_000)
    return {
        "seconds_1000": round(small, 4),
        "seconds_10000": round(large, 4),
        "ratio": round(large / small, 2),
        "ratio_limit": 15,
        "rings_1000": small_rings,
        "planted_1000": small_planted,
        "rings_10000": large_rings,
        "planted_10000": large_planted,
    }


if __name__ == "__main__":
    figures = run()
    for k, v in figures.items():
        print(f"{k:>15}: {v}")
