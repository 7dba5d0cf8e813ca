"""Intake: messages per second that `pbm serve` takes durably, against a bare
aiosmtpd listener that discards every message, measured the same way in one run.

Both servers get the same load from the same client, a process of its own:
Postfix's ``smtp-source`` (a C program from the Debian package postfix, the
default when it is installed: it costs a small fraction of a CPU, so the
servers, not the client, set the rate) or ``--client python``
(benchmarks/smtpload.py, which saturates its own CPU first).  Each sends
``count`` command mails (``size`` bytes of payload), one SMTP session each,
``concurrency`` sessions at a time.  `pbm serve` runs complete (listener,
worker, outbound to a relay sink, scheduler) on a fresh database; each of its
250 replies comes after the message is committed (SQLite: WAL,
synchronous=FULL).  The worker processes the mails while they arrive.

The two servers are measured in alternation (bare, pbm; pbm, bare; bare,
pbm; ...: servers.alternate); the ratio is the median over the rounds of
(pbm rate / bare rate of the same round), with each round's ratio and their
range (servers.paired_ratio).  Also reported: the ratio of the median rates,
and the CPU time per message of the bare listener's process and of `pbm
serve`'s listener process (the part of the work that decides how fast mail
is taken in on an otherwise idle machine), paired the same way.

Also the MTA-pipe model: one `pbm mail inject` process per mail (how older
servers receive mail from their MTA), ``pipe_concurrency`` at a time,
``pipe_count / rounds`` mails in every round right after `pbm serve`'s
turn, paired with that round's bare rate.

With smtp-source every mail is ``help`` in the Subject to pbm@DOMAIN from one
sender, each with its own Message-ID; the worker answers the first of them and
records the rest as over that sender's hourly reply limit, so the back end
competes less for the CPUs than with the Python client's 2,000 senders (whose
figures stay comparable with older runs).  Beside every rate the client's
CPU share is reported.

    .venv/bin/python benchmarks/bench_intake.py [--count 2000] [--concurrency 50] [--size 1] [--rounds 7] [--client smtp-source|python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.servers import (  # noqa: E402
    BareListener,
    PbmServe,
    RelaySink,
    alternate,
    cpu_seconds,
    fresh_database,
    paired_ratio,
    with_goal,
)
from benchmarks.smtpload import LoadSpec, message_bytes, run_load_process  # noqa: E402

SMTP_SOURCE = shutil.which("smtp-source") or ("/usr/sbin/smtp-source" if os.path.exists("/usr/sbin/smtp-source") else None)


def smtp_source(port: int, count: int, concurrency: int, domain: str = "pbm.localhost", to: str = "pbm",
                size: int = 1, recipients: int = 1) -> tuple[int, float, float]:
    """Postfix's smtp-source: ``count`` mails of ``size`` bytes of payload
    (its ``-l``, headers not counted), ``concurrency`` sessions at a time, one
    mail per session, each to ``recipients`` addresses (``-r``: the first is
    ``-t``'s, then 2LOCAL, 3LOCAL, ...).  Returns (mails accepted, seconds, the
    client's CPU seconds).  smtp-source stops at the first reply that is not
    the expected one, so a run that exits 0 had every mail accepted."""
    cmd = [SMTP_SOURCE or "smtp-source", "-s", str(concurrency), "-m", str(count), "-l", str(size), "-r", str(recipients), "-S", "help",
           "-f", "bench@load.example", "-t", f"{to}@{domain}", "-M", "load.example", f"127.0.0.1:{port}"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"smtp-source exited {proc.returncode}: {err.strip()[-300:]}")
    return count, elapsed, usage.ru_utime + usage.ru_stime


def padded_body(size: int) -> str:
    """The Python client's body of about ``size`` bytes: ``help`` and lines
    of filler (smtp-source's own payload is lines of X)."""
    if size <= 6:
        return "help"
    filler = size - 6
    return "help\n" + "\n".join("X" * min(78, filler - k) for k in range(0, filler, 79))


def _measure(port: int, count: int, concurrency: int, start: int, pids: list[int], client: str = "python",
             size: int = 1, recipients: int = 1, to: str = "pbm") -> dict:
    c0 = [cpu_seconds(p) for p in pids]
    if client == "smtp-source":
        accepted, elapsed, client_cpu = smtp_source(port, count, concurrency, size=size, recipients=recipients,
                                                      to=to)
        sent = count
    else:
        res = run_load_process(LoadSpec("127.0.0.1", port, count, concurrency=concurrency, start=start, tag="intake",
                                        body=padded_body(size)))
        accepted, sent, elapsed, client_cpu = len(res.accepted), len(res.sent), res.elapsed, res.cpu
    c1 = [cpu_seconds(p) for p in pids]
    return {
        "accepted": accepted,
        "sent": sent,
        "seconds": round(elapsed, 3),
        "per_second": round(accepted / elapsed, 1) if elapsed else 0,
        "client_cpu_share": round(client_cpu / elapsed, 2) if elapsed else 0,
        "server_cpu_share": round((sum(c1) - sum(c0)) / elapsed, 2) if elapsed else 0,
        "server_cpu_us_per_message": round((sum(c1) - sum(c0)) / max(1, sent) * 1e6),
        # the process that holds the listener (the first pid)
        "listener_cpu_us_per_message": round((c1[0] - c0[0]) / max(1, sent) * 1e6),
    }


def _wait_processed(serve: PbmServe, total: int, timeout: float = 600) -> float:
    from sqlalchemy import create_engine, text

    eng = create_engine(serve.db_url.replace("postgresql://", "postgresql+psycopg://"))
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < timeout:
            with eng.connect() as c:
                left = c.execute(text("SELECT count(*) FROM inbox WHERE status = 'new'")).scalar()
                stored = c.execute(text("SELECT count(*) FROM inbox")).scalar()
            if stored >= total and not left:
                return time.monotonic() - t0
            time.sleep(0.2)
        raise RuntimeError("the worker did not catch up")
    finally:
        eng.dispose()


def pipe_rate(serve: PbmServe, count: int, concurrency: int) -> dict:
    """`pbm mail inject` once per mail, ``concurrency`` processes at a time."""
    spec = LoadSpec("", 0, count, domain=serve.domain, tag="pipe")

    def one(n: int) -> int:
        _, _, raw = message_bytes(spec, 10_000_000 + n)
        p = subprocess.run([sys.executable, "-m", "pbm_server.running.cli", "mail", "inject"], input=raw, env=serve.env,
                           cwd=serve.tmp, capture_output=True)
        return p.returncode

    t0 = time.monotonic()
    with ThreadPoolExecutor(concurrency) as ex:
        codes = list(ex.map(one, range(count)))
    elapsed = time.monotonic() - t0
    ok = sum(1 for c in codes if c == 0)
    return {"accepted": ok, "seconds": round(elapsed, 3), "per_second": round(ok / elapsed, 1), "concurrency": concurrency}


def run(count: int = 2000, concurrency: int = 50, rounds: int = 7, pipe_count: int = 100, pipe_concurrency: int = 2,
        pg: str | None = None, extra_env: dict | None = None, client: str | None = None, size: int = 1,
        goal: str | None = None) -> dict:
    """``size``: payload bytes of each mail (1: smtp-source's smallest);
    ``goal``: the goal of the pbm/bare ratio (servers.with_goal), if any."""
    client = client or ("smtp-source" if SMTP_SOURCE else "python")
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-intake-"))
    db_url, drop = fresh_database(tmp, pg)
    sink = RelaySink()
    bare = BareListener()
    serve = PbmServe(tmp, sink.port, db_url, extra_env).start()
    try:
        # warm up both (imports, first connections, the game-name cache)
        _measure(bare.port, 200, concurrency, 0, [bare.pid], client, size)
        _measure(serve.port, 200, concurrency, 0, serve.pids(), client, size)
        runs: dict[str, list[dict]] = {"bare": [], "pbm_serve": []}
        pipes = []
        targets = {"bare": (bare.port, lambda: [bare.pid]), "pbm_serve": (serve.port, serve.pids)}
        for r, side in alternate(["bare", "pbm_serve"], rounds):
            port, pids = targets[side]
            runs[side].append(_measure(port, count, concurrency, 1_000_000 * (r + 1), pids(), client, size))
            if side == "pbm_serve" and pipe_count:  # the MTA pipe too, a share of its mails each round
                pipes.append(pipe_rate(serve, max(2, pipe_count // rounds), pipe_concurrency))
        catch_up = _wait_processed(serve, 200 + rounds * count + sum(x["accepted"] for x in pipes))
        bare_runs, pbm_runs = runs["bare"], runs["pbm_serve"]
        bare_rate = statistics.median(x["per_second"] for x in bare_runs)
        pbm_rate = statistics.median(x["per_second"] for x in pbm_runs)
        bytes_ = f"{size} byte{'s' if size != 1 else ''}"
        ratio = paired_ratio(f"mails/s, pbm serve / bare listener ({concurrency} sessions, {bytes_})",
                             [x["per_second"] for x in pbm_runs], [x["per_second"] for x in bare_runs])
        cpu_bare = statistics.median(x["server_cpu_us_per_message"] for x in bare_runs)
        cpu_listener = statistics.median(x["listener_cpu_us_per_message"] for x in pbm_runs)
        return {
            "database": "postgresql" if pg else "sqlite",
            "client": client,
            "client_cpu_share": {"bare": round(statistics.median(x["client_cpu_share"] for x in bare_runs), 2),
                                 "pbm_serve": round(statistics.median(x["client_cpu_share"] for x in pbm_runs), 2)},
            "messages_per_run": count,
            "concurrency": concurrency,
            "message_bytes": size,
            "rounds": rounds,
            "bare_per_second": bare_rate,
            "pbm_serve_per_second": pbm_rate,
            # each pbm round against the bare round beside it: robust to a
            # machine whose other load drifts during the benchmark
            "ratio": with_goal(ratio, goal) if goal else ratio,
            "ratio_of_medians": round(pbm_rate / bare_rate, 3),
            "listener_cpu_us_per_message": {"bare": cpu_bare, "pbm_serve_listener": cpu_listener},
            "listener_cpu_ratio": paired_ratio("CPU per mail, bare listener / pbm serve's listener process",
                                               [x["server_cpu_us_per_message"] for x in bare_runs],
                                               [x["listener_cpu_us_per_message"] for x in pbm_runs]),
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "mta_pipe_per_second": round(statistics.median(x["per_second"] for x in pipes), 1) if pipes else None,
            "mta_pipe_ratio": paired_ratio("mails/s, pbm mail inject per mail / bare listener",
                                           [x["per_second"] for x in pipes], [x["per_second"] for x in bare_runs], 4)
            if pipes else None,
            "mta_pipe": pipes,
            "worker_catch_up_seconds_after_last_run": round(catch_up, 1),
            "runs": {"bare": bare_runs, "pbm_serve": pbm_runs},
        }
    finally:
        serve.stop()
        bare.stop()
        sink.stop()
        drop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--size", type=int, default=1, help="payload bytes of each mail (smtp-source -l)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pipe-count", type=int, default=100)
    ap.add_argument("--postgres", default=None, help="a PostgreSQL URL (a fresh database is made beside it)")
    ap.add_argument("--client", choices=["smtp-source", "python"], default=None,
                    help="the load generator (default: smtp-source when installed)")
    a = ap.parse_args()
    print(json.dumps(run(a.count, a.concurrency, a.rounds, a.pipe_count, pg=a.postgres, client=a.client,
                         size=a.size), indent=2))
