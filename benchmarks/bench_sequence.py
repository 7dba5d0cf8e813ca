"""Benchmark: the Fourth Game with 250 players playing all ten pieces each.

2,500 plays, each announced to everyone.  What the server does per play mail
is reproduced: load the stored state (json.loads), parse the line, apply it
(which builds the announcement with the new total and every player's score),
store the state again (json.dumps), and about once a minute of game time run
``tick`` (the digests).  Half of the players ask for a mail per play, half for
digests, so both kinds of announcement are built.

The goal: the cost of a play does not grow with the number of plays made
before it.  Each play is timed in CPU time (time.process_time), and the
whole game is played three times, keeping each play's least time, so that
other work on the machine does not count.  ``ratio`` = time of the last 250 plays / time of the first 250
plays must stay at or under 1.5.  The figures are given for the engine alone
(parse + apply + tick, the state kept in memory) and for the engine with the
JSON round trip per play.

    .venv/bin/python benchmarks/bench_sequence.py
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from games.base import Actor, Context, Line  # noqa: E402
from games.sequence import RULES  # noqa: E402

PLAYERS = 250
PIECES = 10
WINDOW = 250
REPEATS = 3
START = datetime(2007, 12, 7, 5, 0, tzinfo=timezone.utc)


def _setup() -> tuple[dict, list[tuple[str, str]]]:
    """A game with 250 players (half MAIL EACH) and the 2,500 play lines in
    the order they will arrive (round after round, a random order in each)."""
    rng = random.Random(4)
    state = RULES.new_game({}, Context(now=START, rng=rng))
    handles = [f"player{i:03d}" for i in range(PLAYERS)]
    for i, handle in enumerate(handles):
        ctx = Context(now=START, rng=rng, game_name="four",
                      actor=Actor(handle, f"{handle}x{i}@example.org", True))
        lines = [Line(1, "JOIN")] + ([Line(2, "MAIL EACH")] if i % 2 == 0 else [])
        out = RULES.apply(state, RULES.parse(lines), ctx)
        assert all(r.ok for r in out.results), out.results
        state = out.state
    plays = []
    for piece in range(1, PIECES + 1):
        order = handles[:]
        rng.shuffle(order)
        for handle in order:
            value, mult = state["players"][handle]["pieces"][piece - 1]
            sign = "-" if rng.random() < 0.4 else ""
            plays.append((handle, f"Piece {piece}: {sign}{value}, {mult}"))
    return state, plays


def _run_once(with_json: bool) -> tuple[list[float], dict]:
    state, plays = _setup()
    stored = json.dumps(state)
    rng = random.Random(1)
    times: list[float] = []
    notices = digests = 0
    for n, (handle, text) in enumerate(plays):
        now = START + timedelta(seconds=30 * n)  # a play every 30 s: a tick every 2 plays
        started = time.process_time()
        if with_json:
            state = json.loads(stored)
        ctx = Context(now=now, rng=rng, game_name="four", actor=Actor(handle, "", True))
        out = RULES.apply(state, RULES.parse([Line(1, text)]), ctx)
        assert out.results[0].ok, out.results[0].message
        notices += len(out.notices)
        state = out.state
        if with_json:
            stored = json.dumps(state)
        if n % 2 == 1:  # the scheduler's tick, about once a minute
            if with_json:
                state = json.loads(stored)
            tick = RULES.tick(state, Context(now=now, rng=rng, game_name="four"))
            if tick is not None:
                digests += len(tick.notices)
                state = tick.state
                if with_json:
                    stored = json.dumps(state)
        times.append(time.process_time() - started)
    return times, {
        "plays": len(plays),
        "play_notices": notices,
        "digests": digests,
        "state_bytes_end": len(json.dumps(state)),
    }


def _run(with_json: bool, repeats: int = REPEATS) -> dict:
    """Per play the least CPU time over ``repeats`` runs: the machine may be
    busy with other work, and the least time is the play's own cost."""
    runs = [_run_once(with_json) for _ in range(repeats)]
    times = [min(column) for column in zip(*(r[0] for r in runs), strict=True)]
    first, last = sum(times[:WINDOW]), sum(times[-WINDOW:])
    return {
        "first_250_s": round(first, 4),
        "last_250_s": round(last, 4),
        "ratio": round(last / first, 3),
        "total_s": round(sum(times), 4),
        **runs[0][1],
    }


def run() -> dict:
    """Figures for the engine alone and for the engine + JSON round trip.
    The headline figures (first 250, last 250, ratio, total) are those with
    the JSON round trip, since that is what the server does per mail."""
    engine = _run(with_json=False)
    full = _run(with_json=True)
    return {
        "first_250_s": full["first_250_s"],
        "last_250_s": full["last_250_s"],
        "ratio": full["ratio"],
        "total_s": full["total_s"],
        "goal_ratio_max": 1.5,
        "ok": full["ratio"] <= 1.5 and engine["ratio"] <= 1.5,
        "engine_only": engine,
        "engine_and_json": full,
    }


if __name__ == "__main__":
    figures = run()
    for key in ("first_250_s", "last_250_s", "ratio", "total_s", "goal_ratio_max", "ok"):
        print(f"{key:16} {figures[key]}")
    for part in ("engine_only", "engine_and_json"):
        print(f"{part}:")
        for key, value in figures[part].items():
            print(f"  {key:16} {value}")
