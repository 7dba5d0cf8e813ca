"""The HTTP side under load (issue 29): how long the page of a 10,000-player
giveaway takes, and how much of its intake the server keeps while 100
clients load pages at once.

* Page time: `pbm serve` (all its processes, SQLite) with a giveaway of
  10,000 players (benchmarks/bench_giveaway.py's state, orders held for
  everybody); GET /games/big and /games/big.json one after another, each
  timed from the request to the last byte: the first (made from the
  database), then the median and 95th percentile of 30 more (the kept page).
* Intake under page load: Postfix's smtp-source sends ``count`` mails
  (``concurrency`` sessions at a time), alternately with no page load and
  with ``loaders`` concurrent clients (threads of a separate process, each
  loading /games/big over and over, at nice 19: they stand for browsers on
  other machines); the ratio is the median over the rounds
  of (rate with the page load / rate without it, the round's pair).  The
  smtp-source and page-loader CPU shares are reported beside the rates.

    .venv/bin/python benchmarks/bench_web.py [--players 10000] [--count 1000] [--rounds 5] [--loaders 100]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_giveaway import make_state  # noqa: E402
from benchmarks.bench_intake import SMTP_SOURCE, smtp_source  # noqa: E402
from benchmarks.servers import PbmServe, cpu_seconds, free_port, wait_port  # noqa: E402

#: the page loaders stand for players' browsers on other machines: on this
#: machine's two cores they run at this nice increment (--loader-nice), so
#: that the load generator does not take the server's CPU (its share is reported)
LOADER_NICE = 19


def fetch(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        resp.read()
    return time.perf_counter() - t0


def page_times(url: str, n: int) -> dict:
    """The first load (the page made from the database) and ``n`` more (the
    page as kept until its game changes), one after another: these include
    the HTTP side's pacing (at most PAGES_PER_SECOND pages, web/app.py)."""
    first = fetch(url)
    times = sorted(fetch(url) for _ in range(n))
    return {"first_ms": round(first * 1000, 1), "median_ms": round(statistics.median(times) * 1000, 1),
            "p95_ms": round(times[int(len(times) * 0.95) - 1] * 1000, 1), "requests": n}


def made_times(db: Path, url: str, n: int) -> dict:
    """The page made from the database with the server warm: each time after
    its game changed (its version bumped), so the kept page cannot serve."""
    import sqlite3

    times = []
    for _ in range(n):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE games SET version = version + 1 WHERE name = 'big'")
        time.sleep(1.1)  # past the second a kept page is served unchecked
        times.append(fetch(url))
    times.sort()
    return {"median_ms": round(statistics.median(times) * 1000, 1), "max_ms": round(times[-1] * 1000, 1),
            "requests": n}


def _loader(url: str, clients: int, stop, counts) -> None:
    """``clients`` threads loading ``url`` until ``stop`` is set."""
    os.nice(LOADER_NICE)
    done = [0] * clients

    def one(i: int) -> None:
        while not stop.is_set():
            try:
                fetch(url)
                done[i] += 1
            except OSError:
                time.sleep(0.05)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    stop.wait()
    counts.value = sum(done)


def intake(serve: PbmServe, count: int, concurrency: int, url: str | None, loaders: int) -> dict:
    spawn = mp.get_context("spawn")
    stop, counts = spawn.Event(), spawn.Value("i", 0)
    proc = None
    if url:
        proc = spawn.Process(target=_loader, args=(url, loaders, stop, counts))
        proc.start()
        time.sleep(1.0)  # the loaders are busy before the mail starts
    pids = serve.pids()
    c0 = sum(cpu_seconds(p) for p in pids)
    load0 = cpu_seconds(proc.pid) if proc else 0.0
    sent, seconds, client_cpu = smtp_source(serve.port, count, concurrency)
    load_cpu = (cpu_seconds(proc.pid) - load0) if proc else 0.0
    server_cpu = sum(cpu_seconds(p) for p in pids) - c0
    if proc:
        stop.set()
        proc.join(30)
    return {"rate": round(sent / seconds, 1), "seconds": round(seconds, 2),
            "smtp_source_cpu_share": round(client_cpu / seconds, 3),
            "page_loader_cpu_share": round(load_cpu / seconds, 3),
            "server_cpu_share": round(server_cpu / seconds, 3), "pages_loaded": counts.value if proc else 0}


def run(players: int = 10_000, count: int = 1000, concurrency: int = 20, rounds: int = 5, loaders: int = 100) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-web-"))
    http_port = free_port()
    serve = PbmServe(tmp, None, f"sqlite:///{tmp}/pbm.db", {"PBM_HTTP_LISTEN": f"127.0.0.1:{http_port}"})
    env = serve.env
    pbm = [sys.executable, "-m", "pbm_server.running.cli"]
    subprocess.run([*pbm, "db", "upgrade"], env=env, cwd=tmp, check=True, capture_output=True)
    subprocess.run([*pbm, "game", "new", "giveaway", "big"], env=env, cwd=tmp, check=True, capture_output=True)
    state, _ = make_state(players)
    (tmp / "state.json").write_text(json.dumps(state))
    import sqlite3

    with sqlite3.connect(tmp / "pbm.db") as db:
        db.execute("UPDATE game_documents SET state = ? WHERE game_id = (SELECT id FROM games WHERE name = 'big')",
                   (json.dumps(state),))
    serve.start()
    try:
        base = f"http://127.0.0.1:{http_port}"
        wait_port(http_port, serve.proc)
        result: dict = {"players": players, "page": page_times(base + "/games/big", 30),
                        "json": page_times(base + "/games/big.json", 30),
                        "page_made": made_times(tmp / "pbm.db", base + "/games/big", 10)}
        pairs = []
        for _ in range(rounds):
            quiet = intake(serve, count, concurrency, None, loaders)
            loaded = intake(serve, count, concurrency, base + "/games/big", loaders)
            pairs.append({"without": quiet, "with": loaded, "ratio": round(loaded["rate"] / quiet["rate"], 3)})
        result["intake"] = {"count": count, "concurrency": concurrency, "loaders": loaders, "rounds": pairs,
                            "median_ratio": statistics.median(p["ratio"] for p in pairs),
                            "client": "smtp-source" if SMTP_SOURCE else "none"}
        return result
    finally:
        serve.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--players", type=int, default=10_000)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loaders", type=int, default=100)
    ap.add_argument("--loader-nice", type=int, default=LOADER_NICE)
    args = ap.parse_args()
    globals()["LOADER_NICE"] = args.loader_nice
    print(json.dumps(run(args.players, args.count, args.concurrency, args.rounds, args.loaders), indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    main()
