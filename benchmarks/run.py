"""Every benchmark from one entry point; see docs/benchmarks.md.

    .venv/bin/python benchmarks/run.py                     # everything, SQLite
    .venv/bin/python benchmarks/run.py --postgres postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python benchmarks/run.py --only intake e2e --quick
    .venv/bin/python benchmarks/run.py --list               # the parts
    .venv/bin/python benchmarks/run.py --issue45 [--quick]  # issue 45's figures, each with its goal

Each part is registered in PARTS below (``@part(...)``); a part of the
server's own (``per_database``) runs on SQLite and, with ``--postgres URL``,
again on a fresh PostgreSQL database made beside URL.  Every ratio a part
reports comes from one run in which its two sides were measured in turn,
round after round (benchmarks/servers.py: ``alternate``, ``paired_ratio``):
one ratio per round, their median, their range.  The run ends with a summary
of every such ratio (also the JSON's ``summary``), so the figures are quick
to read.  A ratio may carry a goal (servers.with_goal: ``">= 0.9"``); the
summary lists those too, whether each is met, and ends with ``goals: N of M
met``.

``--issue45`` is the preset of issue 45: the parts intake, sizes, e2e and
features with its settings (durable intake of 600-byte mails at 16 and at 50
sessions; the end-to-end mixes with the default settings only, today's
against the fixed target of 500 mails/s, the rush against the Argon2
ceiling).  About 20 minutes on a 2-core machine, 5 with ``--quick``.

The figures go to standard output as JSON and, with ``--out FILE``, into FILE.
A benchmark that fails is reported with its error; the others still run.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GAMES = ("rmpm", "giveaway", "sequence")
#: the parts of --issue45, in this order
ISSUE45 = ("intake", "sizes", "e2e", "features")


@dataclass(frozen=True)
class Options:
    quick: bool
    rounds: int | None  # None: each part's own default
    #: --postgres, for a part that needs PostgreSQL whatever the database of
    #: the round (a per-database part gets its database as its second argument)
    postgres: str | None = None
    #: --issue45: the parts take issue 45's settings (see the module's text)
    issue45: bool = False

    def r(self, full: int, quick: int = 2) -> int:
        return self.rounds or (quick if self.quick else full)


@dataclass(frozen=True)
class Part:
    name: str
    help: str
    #: (options, PostgreSQL URL or None) -> {result name: result}
    run: Callable[[Options, str | None], dict[str, dict]]
    #: run on SQLite and again on PostgreSQL with --postgres; the database
    #: ("sqlite" or "postgresql") ends each result's name
    per_database: bool = False


PARTS: dict[str, Part] = {}


def part(name: str, help: str, per_database: bool = False):
    """Register a part: ``@part("name", "what it measures")`` over a
    function (options, pg) -> {result name: result}."""
    def register(fn):
        PARTS[name] = Part(name, help, fn, per_database)
        return fn
    return register


# -- the parts ---------------------------------------------------------------------------
@part("intake", "pbm serve vs a bare aiosmtpd listener, alternating rounds; the MTA pipe", per_database=True)
def _intake(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_intake

    if o.issue45:  # 600-byte mails at 16 and at 50 sessions, no MTA pipe; pbm / bare at least 0.9 each
        count = 800 if o.quick else 2000
        return {f"intake_{c}_sessions_600_bytes": _timed(bench_intake.run, pg=pg, rounds=o.r(7), count=count,
                                                          concurrency=c, size=600, pipe_count=0, goal=">= 0.9")
                for c in (16, 50)}
    kw = dict(count=800, pipe_count=8) if o.quick else dict(count=2000, pipe_count=70)
    return {"intake": _timed(bench_intake.run, pg=pg, rounds=o.r(7), **kw)}


@part("e2e", "order mails end to end, two mixes (today, rush), two back ends vs one in turn; the Argon2 "
      "ceiling", per_database=True)
def _e2e(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_e2e

    out = {}
    for mix in ("today", "rush"):
        print(f"end to end, {mix} ...", file=sys.stderr, flush=True)
        kw = dict(burst=400, seconds=3, argon2_checks=20) if o.quick else dict(burst=2000, seconds=10)
        if o.issue45:  # the default settings only: no PBM_BACKENDS or other override
            kw["configs"] = {"default": {}}
        got = out[f"e2e_{mix}"] = _timed(bench_e2e.run, mix=mix, pg=pg, rounds=o.r(3), **kw)
        if o.issue45 and "configurations" in got:
            _issue45_e2e_goals(mix, got)
    return out


#: issue 45: today's mix against this fixed rate (not a measured baseline)
TODAY_TARGET_PER_SECOND = 500


def _issue45_e2e_goals(mix: str, got: dict) -> None:
    """The goals of issue 45 on the end-to-end figures of the default settings."""
    from benchmarks.servers import paired_ratio, with_goal

    conf = got["configurations"]["default"]
    if mix == "today":
        rates = conf["per_second_rounds"]
        conf["rate_to_target"] = with_goal(paired_ratio(
            f"today's mails/s / {TODAY_TARGET_PER_SECOND} mails/s (the fixed target of issue 45, not measured)",
            rates, [TODAY_TARGET_PER_SECOND] * len(rates), 2), ">= 1.0")
    elif mix == "rush" and "rate_to_ceiling" in conf:
        with_goal(conf["rate_to_ceiling"], ">= 0.9")
        got["goal"] = "rate_to_ceiling at least 0.9 (issue 45)"


@part("sizes", "order mails into one giveaway of 10, 600 and 10,000 players through the whole pbm serve, the "
      "sizes in turn; rate ratios against 10 players", per_database=True)
def _sizes(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_sizes

    kw = dict(burst=300) if o.quick else dict(burst=1000)
    return {"sizes": _timed(bench_sizes.run, pg=pg, rounds=o.r(5), **kw)}


@part("features", "the SMTP order-mail rate with a feature on vs off, in turn: the mailbox intake (Dovecot), "
      "player alert channels, the HTTP side; one body for 20 recipients vs one", per_database=True)
def _features(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_features

    kw = dict(burst=300, intake_count=1000) if o.quick else dict(burst=1000, intake_count=3000)
    return {"features": _timed(bench_features.run, pg=pg, rounds=o.r(5), **kw)}


@part("backend", "the back end on mail in the inbox: CPU per mail by game size, one back end vs two",
      per_database=True)
def _backend(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_backend, bench_entries, bench_sequence_orders
    from benchmarks.servers import paired_ratio

    rounds = o.r(3)
    out: dict = {"backend": _timed(bench_backend.run, pg=pg, mails=120 if o.quick else 600, rounds=rounds)}

    def by_size(sides: dict[str, functools.partial]) -> dict:
        """Two sizes of one game, drained in turn; the ratio large/small."""
        runs = bench_backend.alternating_drains(pg, {k: (v, {}) for k, v in sides.items()}, rounds)
        small, large = sides
        return {**{k: bench_backend.side(v) for k, v in runs.items()},
                "ratio_large_to_small": paired_ratio(f"CPU per mail, {large} / {small}",
                                                     [r["cpu_ms_per_mail"] for r in runs[large]],
                                                     [r["cpu_ms_per_mail"] for r in runs[small]], 2),
                "goal": "at most 1.5"}

    print("rmpm orders, giveaway joins, sequence plays by game size ...", file=sys.stderr, flush=True)
    mails = 100 if o.quick else 300
    entries = {}
    for kind, (setup, sizes) in bench_entries.SCENARIOS.items():
        name = f"{kind}_{'orders' if kind == 'rmpm' else 'joins'}"
        entries[name] = _timed(by_size, {f"{n}_players": functools.partial(setup, n=n, mails=mails) for n in sizes})
    out["entries"] = entries
    out["sequence_plays"] = _timed(by_size, {
        f"{label}_{players}_players_{plays}_plays": functools.partial(bench_sequence_orders.setup, name="four",
                                                                      players=players, plays=plays)
        for label, (players, plays) in bench_sequence_orders.SIZES.items()})
    return out


@part("turns", "turn runs at design size (pbm turn run as its own process)")
def _turns(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_turns

    return {"turns": _timed(bench_turns.run, players=100 if o.quick else None)}


@part("scheduler", "a scheduler pass with nothing to do, by number of running games (10 to 10,000)",
      per_database=True)
def _scheduler(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_scheduler

    sizes = [10, 200, 2000] if o.quick else [10, 200, 2000, 10000]
    return {"scheduler": _timed(bench_scheduler.run, sizes=sizes, count=10 if o.quick else 40, pg=pg)}


@part("hosts", "two namespaced hosts, a core each, vs one host on one core, one PostgreSQL (root; --postgres)")
def _hosts(o: Options, pg: str | None) -> dict:
    from benchmarks import bench_hosts

    kw = dict(burst=400, warm=1) if o.quick else {}
    return {"hosts": _timed(bench_hosts.run, pg=o.postgres, rounds=o.r(3), **kw)}


def _game(game: str, o: Options, pg: str | None) -> dict:
    try:
        mod = importlib.import_module(f"benchmarks.bench_{game}")
    except ImportError as exc:
        return {f"game_{game}": {"skipped": f"benchmarks/bench_{game}.py not available: {exc}"}}
    return {f"game_{game}": _timed(mod.run)}


for _g in GAMES:
    part(_g, f"the {_g} rules alone (benchmarks/bench_{_g}.py; CPU time of its own process)")(functools.partial(_game, _g))


# -- running them ------------------------------------------------------------------------
def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _commit() -> str | None:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


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


def ratios(results: dict, path: str = "") -> list[dict]:
    """Every ratio in the results (a dict made by servers.paired_ratio), with
    where it is."""
    out = []
    for key, value in results.items():
        if not isinstance(value, dict):
            continue
        where = f"{path}.{key}" if path else key
        if "of" in value and "pairs" in value and "median" in value:
            out.append({"where": where, **{k: value[k] for k in ("of", "median", "min", "max", "rounds", "goal", "met")
                                           if k in value}})
        else:
            out += ratios(value, where)
    return out


def rates(results: dict) -> list[dict]:
    """The headline rates of the end-to-end parts: each configuration's
    median mails/s, and the rush's Argon2 ceiling."""
    out = []
    for key, value in results.items():
        if not (key.startswith("e2e_") and isinstance(value, dict) and "configurations" in value):
            continue
        for label, conf in value["configurations"].items():
            out.append({"where": f"{key}.{label}", "mails_per_second": conf.get("per_second"),
                        "rounds": conf.get("per_second_rounds"), "cpu_ms_per_mail": conf.get("cpu_ms_per_mail"),
                        "client_cpu_share": conf.get("client_cpu_share")})
        if "argon2" in value:
            out.append({"where": f"{key}.argon2", "ceiling_per_second": value["argon2"]["ceiling_per_second"],
                        "cpu_ms_per_check": value["argon2"]["cpu_ms_per_check"]})
    return out


def engine_ratios(results: dict) -> list[dict]:
    """The games' engine ratios: CPU time of the benchmark's own process,
    best of several runs, the sizes one after the other (not paired)."""
    return [{"where": f"{key}.{name}", "value": value[name]}
            for key, value in results.items() if key.startswith("game_") and isinstance(value, dict)
            for name in ("ratio", "ring_detection_ratio") if isinstance(value.get(name), (int, float))]


def print_summary(summary: dict) -> None:
    err = sys.stderr
    print("\nratios (median of the paired rounds [lowest - highest], rounds):", file=err)
    for r in summary["ratios"]:
        print(f"  {r['where']:<58} {r['median']!s:>7} [{r['min']} - {r['max']}] x{r['rounds']}   {r['of']}", file=err)
    if summary["engine_ratios"]:
        print("games' engines (CPU time, best of runs, not paired):", file=err)
        for r in summary["engine_ratios"]:
            print(f"  {r['where']:<58} {r['value']!s:>7}", file=err)
    if summary["rates"]:
        print("rates:", file=err)
        for r in summary["rates"]:
            if "ceiling_per_second" in r:
                print(f"  {r['where']:<58} ceiling {r['ceiling_per_second']}/s "
                      f"({r['cpu_ms_per_check']} ms CPU per Argon2 check)", file=err)
            else:
                print(f"  {r['where']:<58} {r['mails_per_second']} mails/s (rounds {r['rounds']}), "
                      f"CPU ms/mail {r['cpu_ms_per_mail']}, client {r['client_cpu_share']} of a core", file=err)
    print(f"load average at start {summary['load_average_at_start']}, at end {summary['load_average_at_end']}", file=err)
    if summary["goals"]:
        print("goals (median of the paired rounds against its goal):", file=err)
        for g in summary["goals"]:
            state = {True: "met", False: "NOT MET", None: "no figure"}[g["met"]]
            print(f"  {g['where']:<58} {g['median']!s:>7} [{g['min']} - {g['max']}] goal {g['goal']:<7} {state:<9} "
                  f"{g['of']}", file=err)
        met = sum(1 for g in summary["goals"] if g["met"])
        print(f"goals: {met} of {len(summary['goals'])} met", file=err)


def goals(results: dict) -> list[dict]:
    """Every ratio that carries a goal: where, of, goal, median, min, max, met."""
    return [{k: r.get(k) for k in ("where", "of", "goal", "median", "min", "max", "met")}
            for r in ratios(results) if "goal" in r]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="pbm-server benchmarks")
    ap.add_argument("--only", nargs="*", default=None, help=" ".join(PARTS))
    ap.add_argument("--postgres", default=os.environ.get("PBM_BENCH_POSTGRES"),
                    help="also run the server's parts on a fresh PostgreSQL database made beside this URL")
    ap.add_argument("--quick", action="store_true", help="smaller loads, 2 rounds (a smoke run, not for the README)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of every paired measurement (default: each part's)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    ap.add_argument("--list", action="store_true", help="list the parts and stop")
    ap.add_argument("--issue45", action="store_true",
                    help="issue 45's figures, each with its goal: " + " ".join(ISSUE45) + " with the preset's settings "
                    "(docs/benchmarks.md); about 20 minutes, 5 with --quick")
    a = ap.parse_args(argv)
    if a.issue45:
        if a.only is not None:
            ap.error("--issue45 chooses its own parts; leave out --only")
        a.only = list(ISSUE45)
    if a.list:
        for p in PARTS.values():
            print(f"{p.name:<10} {p.help}{' (SQLite, and PostgreSQL with --postgres)' if p.per_database else ''}")
        return 0
    unknown = set(a.only or []) - set(PARTS)
    if unknown:
        ap.error(f"unknown parts: {' '.join(sorted(unknown))} (known: {' '.join(PARTS)})")
    want = ([PARTS[n] for n in ISSUE45] if a.issue45 else
            [p for p in PARTS.values() if a.only is None or p.name in a.only])
    o = Options(quick=a.quick, rounds=a.rounds, postgres=a.postgres, issue45=a.issue45)
    results: dict = {
        "run": {"started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": _commit(),
                "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
                "quick": a.quick, "issue45": a.issue45},
        "machine": machine(),
    }
    for p in want:
        for pg in ([None, a.postgres] if p.per_database and a.postgres else [None]):
            tag = "postgresql" if pg else "sqlite"
            print(f"{p.name}{f' ({tag})' if p.per_database else ''} ...", file=sys.stderr, flush=True)
            got = _timed(p.run, o, pg)
            if "error" in got and len(got) <= 2:  # the part as a whole failed
                got = {p.name: got}
            for key, value in got.items():
                if key == "wall_seconds":
                    continue
                results[f"{key}_{tag}" if p.per_database else key] = value
    summary = {"ratios": ratios(results), "goals": goals(results), "rates": rates(results),
               "engine_ratios": engine_ratios(results),
               "load_average_at_start": results["machine"]["load_average_at_start"],
               "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    results = {"summary": summary, **results}
    text = json.dumps(results, indent=2, default=str)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    print_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
