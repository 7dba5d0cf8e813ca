"""The HTTP side while slow clients hold connections (issue 41, item 2): how
/healthz and a game page answer while ``slow`` connections send half a
request line and never finish it.

`pbm serve` (all its processes, SQLite, the default settings) with one
giveaway; an attacker keeps ``slow`` connections open all the time, from
``addresses`` loopback addresses (127.0.0.11 and up, so that the bound per
address is not what stops it; --addresses 1 shows that bound instead), each
sending ``GET /games/g1 HT`` and nothing more, and opening a new one for each
the server closes.  Meanwhile a monitor asks /healthz and /games/g1 in turn,
one request at a time from 127.0.0.1, for ``seconds``.  Reported: the
statuses and times of the monitor's answers, how many slow connections the
server closed and how long each had been open.

    .venv/bin/python benchmarks/bench_slow_http.py [--slow 300] [--addresses 10] [--seconds 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.servers import PbmServe, free_port  # noqa: E402

HALF_REQUEST = b"GET /games/g1 HT"


def attacker(port: int, slow: int, addresses: int, stop: threading.Event, closed: list[float]) -> None:
    """Keeps ``slow`` half-requests open; each the server closes is replaced
    (its lifetime appended to ``closed``)."""
    sel = selectors.DefaultSelector()
    per_address = -(-slow // addresses)

    def open_one(i: int) -> None:
        sock = socket.socket()
        sock.bind((f"127.0.0.{11 + i // per_address}", 0))
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(HALF_REQUEST)
        except OSError:
            sock.close()
            return
        sel.register(sock, selectors.EVENT_READ, (i, time.monotonic()))

    for i in range(slow):
        open_one(i)
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.1):
            i, opened = key.data
            sock = key.fileobj
            try:
                data = sock.recv(4096)  # type: ignore[union-attr]
            except OSError:
                data = b""
            if not data:
                closed.append(time.monotonic() - opened)
                sel.unregister(sock)
                sock.close()  # type: ignore[union-attr]
                open_one(i)
    for key in list(sel.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


def ask(port: int, path: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - t0
    except OSError:
        return 0, time.perf_counter() - t0
    finally:
        conn.close()


def summary(answers: list[tuple[int, float]]) -> dict:
    times = sorted(t for _, t in answers)
    statuses: dict[str, int] = {}
    for status, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"requests": len(answers), "statuses": statuses,
            "median_ms": round(statistics.median(times) * 1000, 1),
            "p95_ms": round(times[int(len(times) * 0.95) - 1] * 1000, 1), "max_ms": round(times[-1] * 1000, 1)}


def run(slow: int = 300, addresses: int = 10, seconds: float = 20.0) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-slow-"))
    http_port = free_port()
    serve = PbmServe(tmp, None, f"sqlite:///{tmp}/pbm.db", {"PBM_HTTP_LISTEN": f"127.0.0.1:{http_port}"})
    # the benchmarks' servers raise the bound for their loaders; this one measures the default
    serve.env.pop("PBM_HTTP_MAX_CONNECTIONS_PER_CLIENT", None)
    pbm = [sys.executable, "-m", "pbm_server.running.cli"]
    subprocess.run([*pbm, "db", "upgrade"], env=serve.env, cwd=tmp, check=True, capture_output=True)
    subprocess.run([*pbm, "game", "new", "giveaway", "g1"], env=serve.env, cwd=tmp, check=True, capture_output=True)
    serve.start()
    try:
        deadline = time.monotonic() + 30
        while ask(http_port, "/healthz")[0] != 200:
            assert time.monotonic() < deadline, "the HTTP side did not come up"
            time.sleep(0.2)
        quiet = {"healthz": summary([ask(http_port, "/healthz") for _ in range(20)]),
                 "game_page": summary([ask(http_port, "/games/g1") for _ in range(20)])}
        stop, closed = threading.Event(), []
        flood = threading.Thread(target=attacker, args=(http_port, slow, addresses, stop, closed), daemon=True)
        flood.start()
        time.sleep(1.0)  # all of them connected
        health, pages = [], []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            health.append(ask(http_port, "/healthz"))
            pages.append(ask(http_port, "/games/g1"))
            time.sleep(0.1)
        stop.set()
        flood.join(30)
        lifetimes = sorted(closed)
        return {"slow_connections": slow, "addresses": addresses, "seconds": seconds, "without_them": quiet,
                "healthz": summary(health), "game_page": summary(pages), "closed_by_server": len(lifetimes),
                "closed_after_median_s": round(statistics.median(lifetimes), 2) if lifetimes else None,
                "closed_after_max_s": round(lifetimes[-1], 2) if lifetimes else None}
    finally:
        serve.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--addresses", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    print(json.dumps(run(args.slow, args.addresses, args.seconds), indent=2))


if __name__ == "__main__":
    main()
