"""Several hosts, one PostgreSQL: end-to-end order mails per second through
(a) one host pinned to one core and (b) two hosts, each pinned to a core of
its own, sharing one PostgreSQL.

Each host is a network namespace with its own address (benchmarks/netns.py)
running a complete `pbm serve` (listener, back ends as many as its one core
gives by default: one; delivery; scheduler; no HTTP side) under ``taskset -c
CORE``.  In the root namespace, unpinned: PostgreSQL (reached through a TCP
forwarder, socat or Python, since it listens on 127.0.0.1 only), the relay
sink (records when it accepted each reply) and the load client
(benchmarks/smtpload.py, two processes of 10 sessions each, in both
configurations; in (b) one for each host).

The mail is bench_e2e's "today" mix (bench_e2e.prepare): order mails with
their ``$$password$$`` (``GIVE n TO handle``) into 20 giveaway games of 10
(200 memberships of 10 accounts), the games in turn.  Every round (a or b)
starts on a fresh database with fresh hosts; a warm-up of three mails from
every membership (so each back end has verified each password once, as a
running server has) comes before the burst.  Rate = replies / (last reply accepted by the sink -
first SMTP byte of the burst).  CPU is read from /proc for each host's
processes (listener, back ends), the PostgreSQL back ends serving the
round's database (pg_stat_activity), the forwarder, the sink and the load
client; a share is CPU seconds over the burst's wall time (2.0 = both cores).

The sides alternate a b, b a, a b, ... (benchmarks/servers.py alternate);
each round gives a ratio b/a, reported as their median and range
(paired_ratio).

    .venv/bin/python benchmarks/bench_hosts.py --postgres postgresql://postgres@127.0.0.1:5432/test \\
        [--rounds 3] [--burst 2000] [--warm 3] [--forwarder auto|socat|python|unix]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import netns  # noqa: E402
from benchmarks.bench_e2e import _replies, prepare  # noqa: E402
from benchmarks.servers import PostfixSink, alternate, cpu_seconds, fresh_database, paired_ratio, py_spy  # noqa: E402
from benchmarks.smtpload import LoadProcess, LoadSpec  # noqa: E402

DOMAIN = "pbm.localhost"
CONCURRENCY = 10  # sessions of each of the two load processes


def _pg_backends(db_url: str) -> list[int]:
    """The pids of PostgreSQL's back ends connected to the database of ``db_url``."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    admin = create_engine(url.set(drivername="postgresql+psycopg", database="postgres"))
    try:
        with admin.connect() as c:
            return [r[0] for r in c.execute(text("SELECT pid FROM pg_stat_activity WHERE datname = :d"),
                                            {"d": url.database}).all()]
    finally:
        admin.dispose()


def _pg_transactions(db_url: str) -> int:
    """Transactions committed and rolled back in the database of ``db_url``
    (pg_stat_database; a statement in autocommit counts one, as a read
    transaction rolled back does)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    admin = create_engine(url.set(drivername="postgresql+psycopg", database="postgres"))
    try:
        with admin.connect() as c:
            return int(c.execute(text("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = :d"),
                                 {"d": url.database}).scalar() or 0)
    finally:
        admin.dispose()


def _load(targets: list[netns.HostServe], mails: list, count: int, start: int, tag: str) -> tuple[list, float, float]:
    """``count`` mails over two load processes, each to its target (one host
    twice, or one each); returns (every Sent, the client's CPU seconds, its wall time)."""
    per = [count // 2, count - count // 2]
    loads = [LoadProcess(LoadSpec(t.address, t.port, n, concurrency=CONCURRENCY, domain=DOMAIN, mails=mails,
                                  start=start + k * per[0], tag=f"{tag}{k}"))
             for k, (t, n) in enumerate(zip(targets, per, strict=True))]
    results = [load.result(timeout=900) for load in loads]
    return [s for r in results for s in r.sent], sum(r.cpu for r in results), max(r.elapsed for r in results)


class _Forwarder(netns.Forwarder):
    def url(self, db_url: str) -> str:
        return netns.via(db_url, self.host, self.port)


class _UnixSocket:
    """No forwarder: the hosts reach PostgreSQL through its Unix socket (a
    file, seen from every network namespace), to show what the forwarder costs."""

    kind = "unix socket"

    def __init__(self, directory: str):
        self.directory = directory

    def url(self, db_url: str) -> str:
        from sqlalchemy.engine import make_url

        u = make_url(db_url)
        return u.set(host=None, port=None, query={**u.query, "host": self.directory}).render_as_string(hide_password=False)

    def cpu(self) -> float:
        return 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def one_round(config: str, pg: str, hosts: netns.Hosts, fwd, sink: netns.AddressedSink | PostfixSink,
              burst: int, warm: int, tmp: Path, profile: Path | None = None, workers: int = 1,
              extra_env: dict | None = None) -> dict:
    db_url, drop = fresh_database(tmp, pg)
    serves: list[netns.HostServe] = []
    try:
        mails, _ = prepare("today", db_url, burst)
        env = {
            "PBM_DATABASE_URL": fwd.url(db_url),
            "PBM_DOMAIN": DOMAIN,
            "PBM_RELAY": f"{sink.host}:{sink.port}",
            "PBM_GM_ADDRESS": "gm@example.org",
            # as benchmarks/servers.py PbmServe: no hourly caps, many sessions from one client address
            "PBM_REPLY_LIMIT_PER_HOUR": "1000000",
            "PBM_UNAUTHENTICATED_REPLIES_PER_DOMAIN_PER_HOUR": "1000000",
            "PBM_UNAUTHENTICATED_REPLIES_PER_HOUR": "1000000",
            "PBM_SMTP_MAX_SESSIONS_PER_CLIENT": "1000",
            "PBM_SMTP_MAX_SESSIONS": "2000",
            "PBM_WORKERS": str(workers),
            **(extra_env or {}),
        }
        count = 1 if config == "a" else 2
        for i in range(count):
            serves.append(netns.HostServe(hosts, i, dict(env, PBM_MAILDIR=str(tmp / f"h{i}" / "maildir")),
                                          tmp / f"{config}-h{i}", core=i))
        for s in serves:
            s.launch()
        for s in serves:
            s.wait()
        targets = [serves[0], serves[0]] if config == "a" else serves

        # warm-up: every player's mail ``warm`` times, so each back end has
        # verified each password once (a back end takes any host's mail)
        sent, _, _ = _load(targets, mails, warm * len(mails), 0, f"warm{config}")
        _replies(sink, {s.message_id for s in sent if s.code == 250}, 300)

        host_pids = {s.index: (s.proc.pid, [p for p in s.pids() if p != s.proc.pid]) for s in serves}
        pg_pids = _pg_backends(db_url)
        time.sleep(1.2)  # PostgreSQL's back ends report their counts at most once a second
        xacts0 = _pg_transactions(db_url)
        cpu0 = {
            "hosts": {i: (cpu_seconds(lp), sum(cpu_seconds(p) for p in bps)) for i, (lp, bps) in host_pids.items()},
            "postgresql": {p: cpu_seconds(p) for p in pg_pids},
            "forwarder": fwd.cpu(),
            "sink": netns.tree_cpu(sink.proc.pid),
        }
        spies = []
        if profile is not None:
            named = {}
            for i, (lp, bps) in host_pids.items():
                named[f"host{i}-listener"] = lp
                named.update({f"host{i}-back-end{k}": p for k, p in enumerate(bps)})
            spies = py_spy(named, profile)
        load_before = os.getloadavg()[0]
        sent, client_cpu, _ = _load(targets, mails, burst, 1_000_000, f"burst{config}")
        acc = {s.message_id: s for s in sent if s.code == 250}
        got = _replies(sink, set(acc), 900)
        for spy in spies:
            spy.send_signal(2)
        for spy in spies:
            spy.wait(60)
        first = min(s.t_start for s in sent)
        span = max(got.values()) - first
        # the CPU of the burst, read once its last reply is in
        hosts_cpu = {}
        for i, (lp, bps) in host_pids.items():
            l0, b0 = cpu0["hosts"][i]
            hosts_cpu[i] = (cpu_seconds(lp) - l0, sum(cpu_seconds(p) for p in bps) - b0)
        pg_now = _pg_backends(db_url)
        pg_cpu = sum(cpu_seconds(p) - cpu0["postgresql"].get(p, 0.0) for p in set(pg_pids) | set(pg_now))
        fwd_cpu = fwd.cpu() - cpu0["forwarder"]
        sink_cpu = netns.tree_cpu(sink.proc.pid) - cpu0["sink"]
        time.sleep(1.2)
        xacts = _pg_transactions(db_url) - xacts0
        n = max(len(got), 1)

        def ms(sec: float) -> float:
            return round(sec / n * 1000, 2)

        def share(sec: float) -> float:
            return round(sec / span, 2)

        return {
            "config": config,
            "load_average_before": round(load_before, 2),
            "hosts": count,
            "back_ends_per_host": [len(bps) for _, bps in host_pids.values()],
            "burst_mails": burst,
            "acknowledged": len(acc),
            "replied": len(got),
            "mails_per_second": round(len(got) / span, 1),
            "seconds": round(span, 2),
            "postgresql_transactions_per_mail": round(xacts / max(len(got), 1), 1),
            "cpu_ms_per_mail": {
                **{f"host{i}": {"listener": ms(lc), "back_ends": ms(bc), "total": ms(lc + bc)} for i, (lc, bc) in hosts_cpu.items()},
                "hosts": ms(sum(lc + bc for lc, bc in hosts_cpu.values())),
                "postgresql": ms(pg_cpu), "forwarder": ms(fwd_cpu), "sink": ms(sink_cpu), "load_client": ms(client_cpu),
                "all": ms(sum(lc + bc for lc, bc in hosts_cpu.values()) + pg_cpu + fwd_cpu + sink_cpu + client_cpu),
            },
            "cpu_share": {
                **{f"host{i}": share(lc + bc) for i, (lc, bc) in hosts_cpu.items()},
                "postgresql": share(pg_cpu), "forwarder": share(fwd_cpu), "sink": share(sink_cpu),
                "load_client": share(client_cpu),
            },
        }
    finally:
        for s in serves:
            s.stop()
        drop()


def run(pg: str, rounds: int = 3, burst: int = 2000, warm: int = 3, forwarder: str = "auto",
        socket_dir: str = "/var/run/postgresql", profile: str | None = None, workers: int = 1,
        extra_env: dict | None = None) -> dict:
    why = netns.missing()
    if why:
        return {"skipped": why}
    if not pg:
        return {"skipped": "the hosts share one PostgreSQL: give --postgres URL"}
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-hosts-"))
    out: list[dict] = []
    with netns.Hosts(2, tag="bench", net=2) as hosts, (
            _UnixSocket(socket_dir) if forwarder == "unix"
            else _Forwarder(hosts.gateway, use_socat=None if forwarder == "auto" else forwarder == "socat")) as fwd:
        # the relay: Postfix's smtp-sink where installed (C: the two cores go to the hosts)
        sink = PostfixSink(hosts.gateway) if PostfixSink.available() else netns.AddressedSink(hosts.gateway)
        try:
            for r, config in alternate(["a", "b"], rounds):  # a b, b a, a b, ...
                print(f"hosts: round {r + 1}, {config} ...", file=sys.stderr, flush=True)
                prof = Path(profile) / f"r{r + 1}{config}" if profile else None
                out.append(dict(one_round(config, pg, hosts, fwd, sink, burst, warm, tmp / f"r{r}{config}", prof,
                                          workers, extra_env),
                                round=r + 1))
        finally:
            sink.stop()
    a = [x["mails_per_second"] for x in out if x["config"] == "a"]
    b = [x["mails_per_second"] for x in out if x["config"] == "b"]

    return {
        "database": "postgresql",
        "mails": "order mails with $$password$$ into 20 giveaway games of 10 (the today mix)",
        "forwarder": fwd.kind,
        "relay_sink": "postfix smtp-sink" if isinstance(sink, PostfixSink) else "aiosmtpd",
        "workers_per_back_end": workers,
        "settings": extra_env or {},
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "a_one_host_one_core_mails_per_second": a,
        "b_two_hosts_two_cores_mails_per_second": b,
        "ratio_b_to_a": paired_ratio("mails/s, two hosts on a core each / one host on one core", b, a, 2),
        "goal": "b/a at least 1.4",
        "rounds": out,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres", required=True, help="a PostgreSQL URL; fresh databases are made beside it")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of rounds (a then b)")
    ap.add_argument("--burst", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=3, help="warm-up: mails from every player, this many each")
    ap.add_argument("--forwarder", choices=("auto", "socat", "python", "unix"), default="auto",
                    help="how the hosts reach PostgreSQL: a TCP forwarder (auto: socat if installed, else Python), "
                         "or its Unix socket (no forwarder, to see what one costs)")
    ap.add_argument("--socket-dir", default="/var/run/postgresql", help="PostgreSQL's socket directory (--forwarder unix)")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="sample each host's processes with py-spy during the burst (collapsed stacks in DIR; "
                         "the sampling costs CPU: not for figures)")
    ap.add_argument("--workers", type=int, default=1, help="PBM_WORKERS: worker threads in each back end (default 1)")
    ap.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE", help="more settings for every host's pbm serve")
    a = ap.parse_args()
    env = dict(pair.split("=", 1) for pair in a.env)
    print(json.dumps(run(a.postgres, a.rounds, a.burst, a.warm, a.forwarder, a.socket_dir, a.profile, a.workers, env),
                     indent=2))
