"""The other processes of a benchmark: the bare listener (the baseline), the
relay sink, and `pbm serve` itself.

* ``BareListener``: aiosmtpd with the same Controller settings as pbm-server's
  listener, whose handler answers 250 to every message and keeps nothing.
  It is what the durable listener is measured against.
* ``RelaySink``: the relay pbm-server delivers to; records the In-Reply-To of
  every message it accepts and the monotonic time it accepted it.
  ``PostfixSink``: the same record from Postfix's smtp-sink (C, Debian
  package postfix), which costs the machine a fraction of the CPU.
* ``PbmServe``: `pbm serve` as a subprocess (all its processes), on a fresh
  SQLite file or PostgreSQL database, with its relay pointed at a sink.

Each runs in a process of its own (``spawn``), so none shares a GIL with
another or with the load client.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc=None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and getattr(proc, "poll", lambda: None)() is not None:
            raise RuntimeError("the server exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {port}")


# -- the bare listener -------------------------------------------------------------
class _Discard:
    async def handle_DATA(self, server, session, envelope):
        return "250 OK"


def _bare_main(port: int, ready) -> None:
    from aiosmtpd.controller import Controller

    c = Controller(_Discard(), hostname="127.0.0.1", port=port, ready_timeout=10.0, data_size_limit=1_048_576,
                   decode_data=False, server_hostname="pbm.localhost", ident="bare")
    c.start()
    ready.set()
    signal.sigwait({signal.SIGTERM})
    c.stop()


class BareListener:
    def __init__(self):
        ctx = mp.get_context("spawn")
        self.port = free_port()
        ready = ctx.Event()
        self.proc = ctx.Process(target=_bare_main, args=(self.port, ready), daemon=True)
        self.proc.start()
        if not ready.wait(30):
            raise RuntimeError("the bare listener did not start")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.join(10)


# -- the relay sink --------------------------------------------------------------------
_IRT = re.compile(rb"^In-Reply-To:\s*(\S+)", re.I | re.M)
_MID = re.compile(rb"^Message-ID:\s*(\S+)", re.I | re.M)
_HEAD_END = re.compile(rb"\r?\n\r?\n")


class _Record:
    def __init__(self):
        self.got: list[tuple[str, str, float]] = []

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        head = raw.split(b"\r\n\r\n", 1)[0]
        irt = _IRT.search(head)
        mid = _MID.search(head)
        self.got.append(((irt.group(1) if irt else b"").decode(), (mid.group(1) if mid else b"").decode(), time.monotonic()))
        return "250 OK"


def _sink_main(host: str, port: int, conn) -> None:
    from aiosmtpd.controller import Controller

    handler = _Record()
    c = Controller(handler, hostname=host, port=port, ready_timeout=10.0, decode_data=False)
    c.start()
    conn.send("ready")
    while True:
        cmd = conn.recv()
        if cmd == "dump":
            conn.send(list(handler.got))
        elif cmd == "stop":
            c.stop()
            conn.send("stopped")
            return


class RelaySink:
    """``host``: the address it listens on (the namespaced hosts' gateway in
    benchmarks/netns.py; loopback otherwise)."""

    def __init__(self, host: str = "127.0.0.1"):
        ctx = mp.get_context("spawn")
        with socket.socket() as s:
            s.bind((host, 0))
            self.port = s.getsockname()[1]
        self.host = host
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_sink_main, args=(host, self.port, child), daemon=True)
        self.proc.start()
        if self._conn.recv() != "ready":
            raise RuntimeError("the sink did not start")

    def received(self) -> list[tuple[str, str, float]]:
        """(In-Reply-To, Message-ID, monotonic time accepted) per message."""
        self._conn.send("dump")
        return self._conn.recv()

    def stop(self) -> None:
        self._conn.send("stop")
        self._conn.recv()
        self.proc.join(10)


def py_spy(pids: dict[str, int], folder: Path) -> list:
    """py-spy (if installed) sampling each of ``pids`` (name -> pid), idle threads too, into
    FOLDER/NAME.txt (collapsed stacks) until the returned processes get SIGINT."""
    import shutil
    import subprocess

    here = Path(sys.executable).parent / "py-spy"
    spy = shutil.which("py-spy") or (str(here) if here.exists() else None)
    if spy is None:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    # PBM_SPY_IDLE=0: CPU samples only (where the time is spent, not where threads wait)
    idle = ["--idle"] if os.environ.get("PBM_SPY_IDLE", "1") != "0" else []
    return [subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--nonblocking", *idle,
                              "--output", str(folder / f"{name}.txt")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pid in pids.items()]


SMTP_SINK = "/usr/sbin/smtp-sink"


class PostfixSink:
    """Postfix's ``smtp-sink`` as the relay: it answers 250 to every message
    and dumps each to a file of its own (``-d``) in a directory in /dev/shm.
    A message's time is its file's modification time (the end of its DATA),
    moved onto CLOCK_MONOTONIC by the offset read at the start; the kernel
    stamps files to its tick (4 ms at most).  Same interface as RelaySink;
    its process (``proc``) is what the benchmarks charge to the relay."""

    def __init__(self, host: str = "127.0.0.1"):
        import tempfile

        shm = Path("/dev/shm")
        self.dir = Path(tempfile.mkdtemp(prefix="pbm-sink-", dir=shm if shm.is_dir() else None))
        self.dir.chmod(0o777)  # smtp-sink run as root must drop to another user (-u)
        self.host = host
        self.port = free_port()
        user = ["-u", "nobody"] if os.geteuid() == 0 else []
        self.proc = subprocess.Popen([SMTP_SINK, *user, "-d", f"{self.dir}/m.", f"{host}:{self.port}", "256"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._offset = time.time() - time.monotonic()
        self._got: dict[str, tuple[str, str, float]] = {}
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((host, self.port), 1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("smtp-sink did not start") from None
                time.sleep(0.05)

    @staticmethod
    def available() -> bool:
        return os.access(SMTP_SINK, os.X_OK)

    def received(self) -> list[tuple[str, str, float]]:
        """(In-Reply-To, Message-ID, monotonic time accepted) per message."""
        for entry in os.scandir(self.dir):
            if entry.name in self._got:
                continue
            try:
                data = Path(entry.path).read_bytes()
                mtime = entry.stat().st_mtime
            except OSError:
                continue
            # the dump: smtp-sink's X- lines and Received, then the message
            end = _HEAD_END.search(data)
            head = data[:end.start()] if end else b""
            mid = _MID.search(head)
            if mid is None:
                continue  # still being written
            irt = _IRT.search(head)
            self._got[entry.name] = ((irt.group(1) if irt else b"").decode(), (mid.group(1) if mid else b"").decode(),
                                     mtime - self._offset)
        return list(self._got.values())

    def stop(self) -> None:
        import shutil

        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


# -- pbm serve ---------------------------------------------------------------------------
def fresh_database(tmp: Path, pg_base: str | None) -> tuple[str, callable]:
    if not pg_base:
        return f"sqlite:///{tmp / 'pbm.db'}", lambda: None
    return _pg_database(pg_base, pg_base.rsplit("/", 1)[0])


def _pg_database(admin_url: str, base: str, template: str | None = None) -> tuple[str, callable]:
    """A new PostgreSQL database beside ``base`` (empty, or a copy of
    ``template``), made through ``admin_url``; its URL and what drops it."""
    from sqlalchemy import create_engine, text

    name = "pbm_bench_" + uuid.uuid4().hex[:10]
    admin = create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))

    def drop():
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return f"{base}/{name}", drop


class PbmServe:
    def __init__(self, tmp: Path, relay_port: int | None, db_url: str, extra_env: dict | None = None,
                 args: tuple[str, ...] = ()):
        """``args``: more arguments of `pbm serve` (``--without worker``, ...)."""
        self.tmp = tmp
        self.args = args
        self.port = free_port()
        #: the HTTP side on a free port of its own, so that servers started
        #: side by side (or beside another program on 8080) do not clash;
        #: ``extra_env`` may set PBM_HTTP_LISTEN (empty: off)
        self.http_port = free_port()
        self.domain = "pbm.localhost"
        self.db_url = db_url
        self.env = dict(os.environ)
        self.env.update(
            {
                "PBM_DATABASE_URL": db_url,
                "PBM_LISTEN": f"127.0.0.1:{self.port}",
                "PBM_DOMAIN": self.domain,
                "PBM_HTTP_LISTEN": f"127.0.0.1:{self.http_port}",
                "PBM_RELAY": f"127.0.0.1:{relay_port}" if relay_port else "",
                "PBM_MAILDIR": str(tmp / "maildir"),
                # thousands of mails from a few thousand senders: no hourly cap
                "PBM_REPLY_LIMIT_PER_HOUR": "1000000",
                # ... all at example.org and without a password (help): no budget
                # for unproven mail either, per domain or in all (pipeline/reply.py)
                "PBM_UNAUTHENTICATED_REPLIES_PER_DOMAIN_PER_HOUR": "1000000",
                "PBM_UNAUTHENTICATED_REPLIES_PER_HOUR": "1000000",
                # the load comes from one address (127.0.0.1) with more
                # sessions at once than the default per-client cap of 20
                "PBM_SMTP_MAX_SESSIONS_PER_CLIENT": "1000",
                "PBM_SMTP_MAX_SESSIONS": "2000",
                # ... and page loaders (bench_web.py) with more HTTP connections than the default 32
                "PBM_HTTP_MAX_CONNECTIONS_PER_CLIENT": "1000",
                "PYTHONPATH": str(ROOT),
            }
        )
        self.env.update(extra_env or {})
        self.proc: subprocess.Popen | None = None

    def start(self) -> "PbmServe":
        self.log = open(self.tmp / "serve.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "pbm_server.running.cli", "serve", *self.args], env=self.env,
                                     cwd=self.tmp, stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)
        return self

    def pids(self) -> list[int]:
        """`pbm serve` and its processes (back ends, HTTP side), itself first."""
        return descendants(self.proc.pid)

    def groups(self) -> dict[str, list[int]]:
        """The processes of `pbm serve` by part: ``listener`` (the process
        started), ``back_ends`` (worker, delivery, scheduler) and ``http``
        (the HTTP side, a child started ``--without worker``)."""
        out: dict[str, list[int]] = {"listener": [self.proc.pid], "back_ends": [], "http": []}
        for pid in self.pids()[1:]:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            out["http" if b"worker" in argv and b"http" not in argv else "back_ends"].append(pid)
        return out

    def cli(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pbm_server.running.cli", *args], env=self.env, cwd=self.tmp, input=input,
                              capture_output=True, check=True)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the peak resident set size of a process, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# -- a database made once, copied for every measurement ---------------------------------
def clone_database(template_url: str, tmp: Path) -> tuple[str, callable]:
    """A copy of a set-up database, so each measurement of a run starts from
    the same rows without paying for the set-up again (and without the
    previous measurement's mail in it).  SQLite: the file is copied with the
    backup API (consistent, WAL included); PostgreSQL: ``CREATE DATABASE ..
    TEMPLATE``, which needs no session on the template.  Returns the copy's URL
    and a function that removes it."""
    if template_url.startswith("sqlite:///"):
        import sqlite3

        src_path = template_url[len("sqlite:///"):]
        path = tmp / f"copy-{uuid.uuid4().hex[:8]}.db"
        src, dst = sqlite3.connect(src_path), sqlite3.connect(path)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()

        def remove():
            for suffix in ("", "-wal", "-shm", "-write", "-routes"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

        return f"sqlite:///{path}", remove
    base, template = template_url.rsplit("/", 1)
    return _pg_database(f"{base}/postgres", base, template)


# -- ratios from one run, both sides measured in turn ------------------------------------
def paired_ratio(of: str, numerators: list[float], denominators: list[float], digits: int = 3) -> dict:
    """The ratio of two sides measured alternately in one run: one ratio per
    round (numerator / denominator of that round), their median and their
    range.  Every ratio a benchmark reports has this shape, so that
    benchmarks/run.py can list them all in its summary."""
    pairs = [n / d for n, d in zip(numerators, denominators, strict=True) if d]
    if not pairs:
        return {"of": of, "median": None, "min": None, "max": None, "pairs": [], "rounds": 0}
    return {"of": of, "median": round(statistics.median(pairs), digits), "min": round(min(pairs), digits),
            "max": round(max(pairs), digits), "pairs": [round(x, digits) for x in pairs], "rounds": len(pairs)}


def with_goal(ratio: dict, goal: str) -> dict:
    """``ratio`` (from :func:`paired_ratio`) with its goal, a comparison and a
    number such as ``">= 0.9"``, and whether the median meets it (``met``;
    None without rounds).  benchmarks/run.py lists every goal in its summary."""
    op, _, number = goal.partition(" ")
    value = ratio.get("median")
    checks = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}
    if op not in checks:
        raise ValueError(f"a goal is '>= N', '> N', '<= N' or '< N', not {goal!r}")
    ratio["goal"] = goal
    ratio["met"] = None if value is None else checks[op](value, float(number))
    return ratio


def alternate(sides: list[str], rounds: int) -> list[tuple[int, str]]:
    """The order in which to measure ``sides`` (two of them) over ``rounds``
    rounds: A B, B A, A B, ... so that a machine whose other load drifts
    during the run favours neither side; (round, side) pairs."""
    out = []
    for r in range(rounds):
        order = sides if r % 2 == 0 else list(reversed(sides))
        out += [(r, s) for s in order]
    return out


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
