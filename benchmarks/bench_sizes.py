"""Per-mail cost by game size, through the whole `pbm serve` (issue 45).

Order mails (a `$$password$$` and ``GIVE n TO handle``) go into ONE giveaway
game of 10, of 600 or of 10,000 players, over SMTP (benchmarks/smtpload.py,
a process of its own) to a complete `pbm serve` (listener, back ends,
delivery to a relay sink, scheduler; default settings).  What grows with the
game's size -- its state, its rows, its players' lookups -- shows as a lower
rate at the larger sizes; the goal is that it barely shows: rate(600) /
rate(10) and rate(10,000) / rate(10) at least 0.8 each.

Each size's database is made once (bench_backend.setup_orders: the game,
an account and a membership per player, all with one stored hash) and every
measurement runs on a fresh copy of it (servers.clone_database).  20 players
of the game write (the 10-player game: all 10), again and again; before the
burst one mail from each of them warms the verified-password cache of every
back end, so Argon2 checks stay out of the figure (a running server knows
its active players).  The measurement is bench_e2e.measure's: the burst as
fast as the listener takes it, rate = replies / (last reply accepted by the
sink - first SMTP byte), with the CPU per mail of each process group.

The sizes are measured in turn (10, 600, 10,000; 10,000, 600, 10; ...:
servers.alternate), so each ratio comes from the rounds of one run: one ratio
per round, their median and range (servers.paired_ratio).

    .venv/bin/python -m benchmarks.bench_sizes [--burst 1000] [--rounds 3] [--sizes 10 600 10000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.servers import PostfixSink, alternate, fresh_database, paired_ratio, with_goal  # noqa: E402

SIZES = (10, 600, 10_000)
GOAL = ">= 0.8"
#: distinct order mails per game (20 writers, each several times); the burst cycles through them
MAILS_PER_GAME = 60


def prepare(home: Path, size: int, pg: str | None) -> tuple[str, callable, list, list]:
    """The database of one size, made once: its URL, what drops it, the
    burst's mails and the warm-up's (one from each writer)."""
    from benchmarks.bench_backend import setup_orders

    home.mkdir(parents=True, exist_ok=True)
    url, drop = fresh_database(home, pg)
    mails = setup_orders(url, {f"size{size}": size}, MAILS_PER_GAME)
    writers: dict[str, tuple] = {}
    for m in mails:
        writers.setdefault(m[0], m)
    return url, drop, mails, list(writers.values())


def run(sizes: tuple[int, ...] = SIZES, burst: int = 1000, rounds: int = 3, concurrency: int = 20,
        pg: str | None = None, relay: str | None = None) -> dict:
    from benchmarks.bench_e2e import measure

    relay = relay or ("postfix" if PostfixSink.available() else "python")
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-sizes-"))
    made: dict[int, tuple] = {}
    setup_seconds: dict[str, float] = {}
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    try:
        for n in sizes:
            print(f"  sizes: setting up a game of {n} players ...", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            made[n] = prepare(tmp / f"template-{n}", n, pg)
            setup_seconds[f"{n}_players"] = round(time.monotonic() - t0, 1)
        for r, n in alternate(list(sizes), rounds):
            print(f"  sizes: round {r + 1}/{rounds}, {n} players ...", file=sys.stderr, flush=True)
            url, _, mails, warm = made[n]
            runs[n].append(measure(tmp / f"{n}-{r}", url, "today", mails, warm, {}, burst, 0, 0.5, concurrency,
                                   relay=relay))
    finally:
        for url, drop, _, _ in made.values():
            drop()
            if url.startswith("sqlite:///"):
                for suffix in ("", "-wal", "-shm", "-write", "-routes"):
                    Path(f"{url[len('sqlite:///'):]}{suffix}").unlink(missing_ok=True)
    small = sizes[0]
    out: dict = {
        "what": "order mails ($$password$$, GIVE n TO handle) into one giveaway game of each size, through the "
                "whole pbm serve, default settings, passwords warmed",
        "database": "postgresql" if pg else "sqlite",
        "relay_sink": relay,
        "burst_mails": burst,
        "concurrency": concurrency,
        "rounds": rounds,
        "setup_seconds": setup_seconds,
        "sizes": {f"{n}_players": {
            "per_second": round(statistics.median(x["per_second"] for x in runs[n]), 1),
            "per_second_rounds": [x["per_second"] for x in runs[n]],
            "cpu_ms_per_mail": {k: round(statistics.median(x["cpu_ms_per_mail"][k] for x in runs[n]), 2)
                                for k in runs[n][0]["cpu_ms_per_mail"]},
            "all_replied": all(x["replied"] == x["mails"] for x in runs[n]),
            "runs": runs[n]} for n in sizes},
    }
    for n in sizes[1:]:
        out[f"ratio_{n}_to_{small}"] = with_goal(paired_ratio(
            f"mails/s, one game of {n:,} players / of {small:,} (whole pbm serve)",
            [x["per_second"] for x in runs[n]], [x["per_second"] for x in runs[small]]), GOAL)
        out[f"cpu_ratio_{n}_to_{small}"] = paired_ratio(
            f"back ends' CPU per mail, {n:,} players / {small:,} (no goal: what the rate ratio comes from)",
            [x["cpu_ms_per_mail"]["back_ends"] for x in runs[n]],
            [x["cpu_ms_per_mail"]["back_ends"] for x in runs[small]])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=list(SIZES), help="players of each game (the first is the base)")
    ap.add_argument("--burst", type=int, default=1000, help="mails of each measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="a smoke run: --burst 300 --rounds 2")
    ap.add_argument("--postgres", default=None)
    a = ap.parse_args()
    burst, rounds = (300, 2) if a.quick else (a.burst, a.rounds)
    print(json.dumps(run(tuple(a.sizes), burst, rounds, a.concurrency, a.postgres), indent=2))


if __name__ == "__main__":
    main()
