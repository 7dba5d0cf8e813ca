"""Every benchmark from one entry point; see docs/benchmarks.md.

    .venv/bin/python benchmarks/run.py                     # everything, SQLite
    .venv/bin/python benchmarks/run.py --postgres postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python benchmarks/run.py --only intake e2e --quick

Parts: ``intake`` (pbm serve vs a bare aiosmtpd listener, and the MTA pipe),
``e2e`` (order mails with passwords per second, latency, peak memory; with
two back ends and with one, in the same run), ``backend`` (CPU per
order mail into a 10- and a 10,000-player game; one back end vs two on mail
already in the inbox: benchmarks/bench_backend.py; rmpm orders, giveaway
joins and sequence plays in a small and a large game: bench_entries.py,
bench_sequence_orders.py), ``turns`` (turn runs at
design size: benchmarks/bench_turns.py), and each game's engine benchmark
(``rmpm``, ``giveaway``, ``sequence``: benchmarks/bench_<game>.py, the rules
alone).  With ``--postgres URL`` intake, e2e and backend run on SQLite and
again on a fresh PostgreSQL database made beside URL.

The figures go to standard output as JSON and, with ``--out FILE``, into FILE.
A benchmark that fails is reported with its error; the others still run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GAMES = ("rmpm", "giveaway", "sequence")


def machine() -> dict:
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in load],
    }


def _timed(fn, *args, **kw) -> dict:
    t0 = time.monotonic()
    try:
        out = fn(*args, **kw)
    except Exception as exc:  # one broken benchmark does not stop the others
        traceback.print_exc()
        out = {"error": f"{type(exc).__name__}: {exc}"}
    if isinstance(out, dict):
        out.setdefault("wall_seconds", round(time.monotonic() - t0, 1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="pbm-server benchmarks")
    ap.add_argument("--only", nargs="*", default=None, help="intake e2e backend turns rmpm giveaway sequence")
    ap.add_argument("--postgres", default=os.environ.get("PBM_BENCH_POSTGRES"), help="also run intake and e2e on PostgreSQL")
    ap.add_argument("--quick", action="store_true", help="smaller loads (a smoke run, not for the README)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args(argv)
    want = set(a.only or ["intake", "e2e", "backend", "turns", *GAMES])
    results: dict = {"machine": machine()}
    dbs = [None] + ([a.postgres] if a.postgres else [])

    from benchmarks import bench_backend, bench_e2e, bench_entries, bench_intake, bench_sequence_orders, bench_turns

    for pg in dbs:
        tag = "postgresql" if pg else "sqlite"
        if "intake" in want:
            kw = dict(count=800, rounds=2, pipe_count=20) if a.quick else dict(count=2000, rounds=7, pipe_count=100)
            print(f"intake ({tag}) ...", file=sys.stderr, flush=True)
            results[f"intake_{tag}"] = _timed(bench_intake.run, pg=pg, **kw)
        if "e2e" in want:
            kw = dict(burst=400, seconds=8) if a.quick else dict(burst=2000, seconds=30)
            print(f"end to end ({tag}) ...", file=sys.stderr, flush=True)
            # two back ends (the default on PostgreSQL of a 2-core machine), then one
            results[f"e2e_{tag}"] = _timed(bench_e2e.run, pg=pg, orders=True, extra_env={"PBM_BACKENDS": "2"}, **kw)
            print(f"end to end, one back end ({tag}) ...", file=sys.stderr, flush=True)
            one = results[f"e2e_{tag}_one_back_end"] = _timed(bench_e2e.run, pg=pg, orders=True,
                                                              extra_env={"PBM_BACKENDS": "1"}, **kw)
            many = results[f"e2e_{tag}"].get("commands_per_second")
            if many and one.get("commands_per_second"):
                results[f"e2e_{tag}"]["ratio_to_one_back_end"] = round(many / one["commands_per_second"], 2)
        if "backend" in want:
            print(f"back end ({tag}) ...", file=sys.stderr, flush=True)
            results[f"backend_{tag}"] = _timed(bench_backend.run, pg=pg, mails=120 if a.quick else 600)
            print(f"rmpm orders, giveaway joins, sequence plays by game size ({tag}) ...", file=sys.stderr, flush=True)
            results[f"entries_{tag}"] = _timed(bench_entries.run, pg=pg, mails=100 if a.quick else 300)
            results[f"sequence_plays_{tag}"] = _timed(bench_sequence_orders.run, pg=pg, repeats=1 if a.quick else 3)

    if "turns" in want:
        print("turn runs at design size ...", file=sys.stderr, flush=True)
        results["turns"] = _timed(bench_turns.run, players=100 if a.quick else None)

    for game in GAMES:
        if game not in want:
            continue
        try:
            mod = importlib.import_module(f"benchmarks.bench_{game}")
        except ImportError as exc:
            results[f"game_{game}"] = {"skipped": f"benchmarks/bench_{game}.py not available: {exc}"}
            continue
        print(f"game {game} ...", file=sys.stderr, flush=True)
        results[f"game_{game}"] = _timed(mod.run)

    text = json.dumps(results, indent=2, default=str)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
