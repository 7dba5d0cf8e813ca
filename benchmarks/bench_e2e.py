"""End to end: commands per second from the first SMTP byte to the reply
accepted by the relay, latency at a steady load below saturation, and the peak
resident memory of `pbm serve` under that load.

`pbm serve` runs complete on a fresh database with its relay pointed at a sink
(an aiosmtpd process that records when it accepted each reply, by In-Reply-To).
The load client (benchmarks/smtpload.py) is a process of its own; its CPU
share is reported beside the rate.  Each mail is one command: ``help`` to
pbm@DOMAIN from one of 2,000 senders, or with ``--orders`` an order mail with
its ``$$password$$`` (``GIVE n TO handle``) from one of 200 players of 20
giveaway games of 10 (the accounts and games are made before the server
starts, as benchmarks/bench_backend.py makes them).

1. Capacity: ``burst`` mails as fast as the listener takes them; commands per
   second = mails / (last reply accepted by the sink - first SMTP byte).
2. Steady load: ``load_share`` of that capacity for ``seconds``; per mail the
   latency is (reply accepted by the sink) - (first SMTP byte of the mail):
   median and 99th percentile.
3. Memory: VmHWM (peak resident set) of each `pbm serve` process.

    .venv/bin/python benchmarks/bench_e2e.py [--burst 1500] [--seconds 20] [--postgres URL] [--orders]
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

from benchmarks.servers import PbmServe, RelaySink, cpu_seconds, fresh_database, peak_rss_mb  # noqa: E402
from benchmarks.smtpload import LoadSpec, run_load_process  # noqa: E402


def _replies(sink: RelaySink, wanted: set[str], timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        got = {irt: t for irt, _, t in sink.received() if irt in wanted}
        if len(got) >= len(wanted) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))
    return values[k]


def run(burst: int = 1500, seconds: float = 20.0, load_share: float = 0.5, concurrency: int = 20,
        pg: str | None = None, extra_env: dict | None = None, orders: bool = False) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-e2e-"))
    db_url, drop = fresh_database(tmp, pg)
    mails = None
    if orders:
        from benchmarks.bench_backend import setup_orders

        mails = setup_orders(db_url, {f"g{i:02d}": 10 for i in range(20)}, 20)
        mails = [mails[(k % 20) * 20 + k // 20] for k in range(len(mails))]  # the games in turn
    sink = RelaySink()
    serve = PbmServe(tmp, sink.port, db_url, extra_env).start()
    try:
        # warm-up
        # (with --orders: one mail from every player, so each password has
        # been verified once, as a running server has seen its players)
        warm = run_load_process(LoadSpec("127.0.0.1", serve.port, len(mails) if mails else 100, concurrency=concurrency,
                                         tag="warm", mails=mails))
        _replies(sink, {s.message_id for s in warm.accepted}, 120)

        # 1. capacity (and the CPU each process spent on it)
        pids = {"listener": [serve.proc.pid], "back_ends": [p for p in serve.pids() if p != serve.proc.pid],
                "relay_sink": [sink.proc.pid]}
        cpu0 = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
        res = run_load_process(LoadSpec("127.0.0.1", serve.port, burst, concurrency=concurrency, start=100_000, tag="burst",
                                        mails=mails))
        acc = {s.message_id: s for s in res.accepted}
        got = _replies(sink, set(acc), 600)
        first = min(s.t_start for s in res.sent)
        span = max(got.values()) - first
        capacity = len(got) / span
        cpu_ms = {k: round((sum(cpu_seconds(p) for p in v) - cpu0[k]) / max(len(got), 1) * 1000, 2)
                  for k, v in pids.items()}
        cpu_ms["load_client"] = round(res.cpu / max(len(got), 1) * 1000, 2)

        # 2. steady load below saturation
        rate = capacity * load_share
        count = int(rate * seconds)
        res2 = run_load_process(LoadSpec("127.0.0.1", serve.port, count, concurrency=concurrency, rate=rate,
                                         start=200_000, tag="steady", mails=mails))
        acc2 = {s.message_id: s for s in res2.accepted}
        got2 = _replies(sink, set(acc2), 300)
        lat = [(got2[m] - s.t_start) * 1000 for m, s in acc2.items() if m in got2]
        rss = {pid: round(peak_rss_mb(pid), 1) for pid in serve.pids()}
        return {
            "database": "postgresql" if pg else "sqlite",
            "mails": "order mails with $$password$$ into 20 giveaway games" if orders else "help to pbm@",
            "back_end_processes": len(serve.pids()) - 1,
            "burst_mails": burst,
            "client_cpu_share_burst": round(res.cpu / res.elapsed, 2) if res.elapsed else None,
            # CPU per mail of the burst, by process (a 2-core machine has 2,000 ms a second)
            "cpu_ms_per_mail_burst": cpu_ms,
            "burst_replied": len(got),
            "commands_per_second": round(capacity, 1),
            "steady_rate_per_second": round(rate, 1),
            "steady_mails": count,
            "steady_replied": len(lat),
            "steady_offered_vs_achieved": round(len(acc2) / res2.elapsed, 1) if res2.elapsed else 0,
            "latency_ms_median": round(statistics.median(lat), 1) if lat else None,
            "latency_ms_p99": round(percentile(lat, 0.99), 1) if lat else None,
            "latency_ms_max": round(max(lat), 1) if lat else None,
            "peak_rss_mb": {"listener": rss.get(serve.proc.pid), "back_end": sum(v for p, v in rss.items() if p != serve.proc.pid),
                            "total": round(sum(rss.values()), 1)},
        }
    finally:
        serve.stop()
        sink.stop()
        drop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burst", type=int, default=1500)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--load-share", type=float, default=0.5)
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--orders", action="store_true", help="order mails with passwords instead of help")
    a = ap.parse_args()
    print(json.dumps(run(a.burst, a.seconds, a.load_share, pg=a.postgres, orders=a.orders), indent=2))
