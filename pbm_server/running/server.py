"""`pbm serve`: the listener, the worker, outbound delivery and the scheduler,
until SIGINT or SIGTERM.

Several processes.  The process started as `pbm serve` runs the SMTP listener
and its group-commit writer, and nothing else; it starts the back ends (`pbm
serve --without listener`): ``PBM_BACKENDS`` processes (0: one per CPU core, at
most 4), each with its worker threads and outbound delivery (each delivers at
once what its own worker wrote); the first also runs the scheduler.  They share nothing but the database and, each, a pipe on
which the listener says "new mail" after each commit, so the workers start at
once rather than at their next poll.  The point is the GIL: in one process every
mail the worker parses and answers is time the event loop cannot accept mail,
and one back end cannot use more than one core (see docs/benchmarks.md for the
figures).  The back ends divide the mail among themselves by game, as worker
threads do (pbm_server/store/db.py, RouteLocks; docs/scaling.md).

* Each back end dies with the listener: it asks the kernel for SIGKILL when its
  parent dies (PR_SET_PDEATHSIG), and checks its parent besides.  A SIGKILL of
  `pbm serve` thus stops both, and a restart finds the database as the last
  commits left it (each part is crash-safe on its own; see pipeline/worker.py and
  outbound.py).
* A back end that exits while the listener runs is started again (after a
  pause that grows to a minute if it keeps failing).
* SIGTERM/SIGINT: the listener stops taking mail and finishes its commits, then
  the back ends are told to stop and waited for.
* Intake first: while mail streams in faster than the listener commits it one
  by one (a commit of two or more mails in the last 50 ms), the worker rests
  after each mail three times as long as the CPU time the mail took, so it uses
  at most a quarter of a CPU and the listener keeps the rest; outbound
  delivery does the same.  A mail accepted is
  safe on disk; answering it can wait a moment, but a slow listener makes
  senders' MTAs time out and retry.  When the stream stops the worker runs
  flat out again.  ``PBM_INTAKE_FIRST=0`` turns this off.
* ``PBM_SERVE_PROCESSES=1`` keeps everything in one process (threads), as
  before; `--without listener` never starts a second process.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from types import FrameType
from typing import TYPE_CHECKING

from pbm_server.base.settings import Settings
from pbm_server.mail.alerts import AlertDelivery
from pbm_server.mail.compose import Composer
from pbm_server.mail.inbound import GameNames, InboundHandler, IntakeWriter, make_controller
from pbm_server.mail.outbound import Outbound
from pbm_server.pipeline.worker import Worker
from pbm_server.play.notices import tell_gm
from pbm_server.running.httpside import HttpSide, bind
from pbm_server.running.mailbox import MailboxReader
from pbm_server.running.scheduler import Scheduler
from pbm_server.store.db import Database

if TYPE_CHECKING:
    from aiosmtpd.controller import Controller
    from sqlalchemy.orm import Session

    from pbm_server.store.models import OutboundMail

log = logging.getLogger(__name__)

PARTS = ("listener", "worker", "outbound", "scheduler", "http")
BACKEND_PARTS = ("worker", "outbound", "scheduler")

#: environment of the back end: the read end of the wake-up pipe, the parent's pid
ENV_WAKE_FD = "PBM_INTERNAL_WAKE_FD"
ENV_PARENT = "PBM_INTERNAL_PARENT_PID"
#: which back end of its listener a process is (0, 1, ...): part of its outbound identity
ENV_BACKEND = "PBM_INTERNAL_BACKEND_INDEX"
#: environment of the HTTP side's process: its listening socket, bound by `pbm serve`
ENV_HTTP_FD = "PBM_INTERNAL_HTTP_FD"

#: the HTTP side's process runs at this nice increment: mail first
HTTP_NICE = 10

#: back ends when PBM_BACKENDS is 0: one per core, at most this many
AUTO_BACKENDS_MAX = 4
#: the same on SQLite
AUTO_BACKENDS_SQLITE = 2


def usable_cores() -> int:
    """The cores this process may run on (its affinity, e.g. under taskset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def backend_count(settings: Settings) -> int:
    """PBM_BACKENDS, or by default one per core: at most 2 on SQLite, where
    writes go one at a time (the second gives 1.15-1.30x and half the wait
    in a burst, a third nothing: docs/scaling.md), at most 4 on PostgreSQL."""
    if settings.backends:
        return settings.backends
    cores = usable_cores()
    most = AUTO_BACKENDS_SQLITE if settings.database_url.startswith("sqlite") else AUTO_BACKENDS_MAX
    return max(1, min(cores, most))


class Backend:
    """One back-end process as the listener sees it: its parts, the process,
    the write end of its wake-up pipe."""

    def __init__(self, index: int, parts: tuple[str, ...]):
        self.index = index
        self.parts = parts
        self.proc: subprocess.Popen[bytes] | None = None
        self.wake_w: int | None = None

    @property
    def name(self) -> str:
        return "the HTTP side" if self.parts == ("http",) else f"back end {self.index + 1}"


#: the GIL's switch interval in the listener's own process (see Server.start)
LISTENER_SWITCH_SECONDS = 0.0002
#: "streams in": a commit of at least INTAKE_GROUP mails within INTAKE_WINDOW seconds
INTAKE_WINDOW = 0.05
INTAKE_GROUP = 2


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux);
    elsewhere the watcher thread in Server notices within a second."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(1)


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as PBM_* variables: the back end runs with exactly ours."""
    return {"PBM_" + f.name.upper(): str(getattr(settings, f.name)) for f in fields(Settings)}


def _schedule(policy: str) -> None:
    """This thread, and the threads and processes it starts from now on,
    under PBM_CPU_POLICY: ``batch`` (SCHED_BATCH) for mail's processes.  A
    thread of a batch process that wakes (an SMTP command, a commit to
    answer) never preempts the password check running on a core; it runs
    when the check's slice ends, together with whatever else woke meanwhile,
    instead of each wake-up taking the core cold on its own (a rush of first
    mails, docs/benchmarks.md).  The HTTP side, in a process of its own
    (the default), keeps the normal policy; with PBM_SERVE_PROCESSES=1 it
    shares the one process and its policy.
    Where the system has no SCHED_BATCH, nothing changes."""
    wanted = getattr(os, "SCHED_BATCH", None) if policy == "batch" else getattr(os, "SCHED_OTHER", None)
    if wanted is None:
        return
    try:
        if os.sched_getscheduler(0) != wanted:
            os.sched_setscheduler(0, wanted, os.sched_param(0))
    except OSError as exc:  # a container that forbids it: mail goes on under the policy it has
        log.warning("could not set the CPU policy %s (PBM_CPU_POLICY): %s", policy, exc)


#: the collector's first threshold in a serving process: a young generation
#: collected every 7,000 new container objects instead of every 700
GC_YOUNG = 7000


def _settle_garbage_collector() -> None:
    """Once a serving process has started (its modules imported, its
    settings, engine, templates and threads made): those objects are kept
    out of the cyclic garbage collector's sweeps (gc.freeze), after one
    collection so that no garbage is kept with them, and the youngest
    generation is collected ten times less often.  The collector otherwise
    walked every one of the process's objects every few dozen mails:
    0.24 ms of CPU a mail, 0.014 ms after (docs/benchmarks.md, "sixth
    round").  Only `pbm serve`'s own processes: a test that starts a server
    in its process keeps its collector as it was."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, middle, old)


def settings_have_mailbox(settings: Settings) -> bool:
    """Whether `pbm serve` reads an IMAP mailbox (PBM_IMAP_URL)."""
    return bool(settings.imap_url and settings.mailbox_address)


class Server:
    def __init__(self, settings: Settings, parts: tuple[str, ...] = PARTS, processes: int | None = None):
        self.settings = settings
        if not settings.http_listen:
            parts = tuple(p for p in parts if p != "http")
        self.parts = parts
        if processes is None:
            processes = settings.serve_processes
        #: the worker, outbound and scheduler run in a second process (and the HTTP side in one of its own)
        self.split = processes > 1 and "listener" in parts and any(p in parts for p in (*BACKEND_PARTS, "http"))
        self.local_parts = ("listener",) if self.split else parts
        self.db = Database(settings.database_url, settings.sqlite_max_page_count)
        self.composer = Composer(settings)
        #: settings.workers worker threads; they share nothing but the database
        #: (and, on SQLite, the set of routes being worked on: pbm_server/store/db.py)
        self.workers = [Worker(self.db, settings, self.composer) for _ in range(settings.workers)]
        sharers = backend_count(settings) * settings.workers
        # the password checks of all workers together on as many threads as
        # there are cores: more only share a core's caches (docs/scaling.md)
        checkers = max(1, usable_cores() // sharers)
        for w in self.workers:
            w.sharers, w.prepare_threads = sharers, checkers
        self.worker = self.workers[0]
        self.outbound = Outbound(self.db, settings, on_failed=self._delivery_failed)
        self.outbound.batch = self._delivery_batch
        index = os.environ.get(ENV_BACKEND)
        if index and index != "0":
            # the claims of each back end are its own, and stay its own across its restart
            self.outbound.identity = f"{self.outbound.identity[:58]}|{index[:5]}"
        # alerts (mail/alerts.py) are outbox rows too, posted beside the mail, with claims of their own
        self.alerts = AlertDelivery(self.db, settings, f"{self.outbound.identity[:57]}|alerts")
        self.scheduler = Scheduler(self.db, settings, self.worker.mailer, on_mail=self.outbound.wake.set)
        for worker in self.workers:
            worker.on_processed = self.outbound.wake.set
        self.writer: IntakeWriter | None = None
        self.http: HttpSide | None = None
        self.http_sock: socket.socket | None = None
        self.controller: Controller | None = None
        #: the IMAP mailbox read into the inbox beside the listener (PBM_IMAP_URL; running/mailbox.py)
        self.mailbox: MailboxReader | None = None
        self.threads: list[threading.Thread] = []
        self.stopped = threading.Event()
        self._stopping = threading.Event()
        self.backends = self._plan_backends() if self.split else []
        self._backend_lock = threading.Lock()
        self._last_intake = 0.0
        self.intake_first = settings.intake_first

    def _plan_backends(self) -> list[Backend]:
        """The processes the listener starts: the first back end has every
        back-end part of ``parts``; the others the worker and outbound delivery
        (each delivers the replies of its own worker at once), not the
        scheduler; and the HTTP side, in a process of its own."""
        backend_parts = tuple(p for p in BACKEND_PARTS if p in self.parts)
        backends = [Backend(0, backend_parts)]
        if "worker" in backend_parts:
            others = tuple(p for p in ("worker", "outbound") if p in backend_parts)
            backends += [Backend(i, others) for i in range(1, backend_count(self.settings))]
        if "http" in self.parts:
            backends.append(Backend(-1, ("http",)))
        return backends

    def _delivery_failed(self, session: Session, row: OutboundMail) -> None:
        if row.kind.startswith("gm"):
            return  # never tell the GM about a mail to the GM: that could loop
        tell_gm(
            session,
            self.composer,
            self.settings.gm_address,
            f"A mail to {row.to_addr} could not be delivered and was given up.",
            [("outbox id", str(row.id)), ("attempts", str(row.attempts)), ("last error", row.last_error or "")],
            row.sent_at or row.next_attempt_at,
        )

    # -- the back end processes (listener side) ------------------------------------------
    def _start_backend(self, be: Backend) -> None:
        env = dict(os.environ)
        env.update(settings_env(self.settings))
        env[ENV_PARENT] = str(os.getpid())
        args = [sys.executable, "-m", "pbm_server.running.cli", "serve"]
        for part in PARTS:
            if part not in be.parts:
                args += ["--without", part]
        if be.parts == ("http",):
            assert self.http_sock is not None
            env[ENV_HTTP_FD] = str(self.http_sock.fileno())
            be.proc = subprocess.Popen(args, env=env, pass_fds=(self.http_sock.fileno(),))
        else:
            r, w = os.pipe()
            os.set_blocking(w, False)
            env[ENV_WAKE_FD] = str(r)
            env[ENV_BACKEND] = str(be.index)
            be.proc = subprocess.Popen(args, env=env, pass_fds=(r,))
            os.close(r)
            old, be.wake_w = be.wake_w, w
            if old is not None:
                os.close(old)
        log.info("%s (%s) started as process %d", be.name, ", ".join(be.parts), be.proc.pid)

    def _supervise(self, be: Backend) -> None:
        pause = 1.0
        while not self._stopping.is_set():
            proc = be.proc
            code = proc.wait() if proc is not None else None
            if self._stopping.is_set():
                return
            log.error("%s exited (with %s); starting it again in %.0f s", be.name, code, pause)
            if self._stopping.wait(pause):
                return
            with self._backend_lock:
                if self._stopping.is_set():
                    return
                started = time.monotonic()
                self._start_backend(be)
            pause = 1.0 if time.monotonic() - started > 60 else min(pause * 2, 60.0)

    def _wake_backend(self, n: int = 1) -> None:
        for be in self.backends:
            w = be.wake_w
            if w is None:
                continue
            try:
                os.write(w, bytes((min(n, 255),)))  # one byte per commit: how many mails it stored
            except (BlockingIOError, BrokenPipeError, OSError):
                pass  # the pipe is full (the worker is awake anyway) or the back end is gone

    # -- the back end process (its own side) ----------------------------------------------
    def _listen_for_wakeups(self, fd: int) -> None:
        while not self._stopping.is_set():
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if not data:
                return  # the listener is gone
            if max(data) >= INTAKE_GROUP:
                self._last_intake = time.monotonic()
            self._wake_workers()

    def _watch_parent(self, parent: int) -> None:
        while not self._stopping.wait(1.0):
            if os.getppid() != parent:
                log.error("pbm serve (the listener) is gone; the back end stops")
                os._exit(1)

    def _wake_local(self, n: int = 1) -> None:
        if n >= INTAKE_GROUP:
            self._last_intake = time.monotonic()
        self._wake_workers()

    def _intake_busy(self) -> bool:
        return bool(self.intake_first) and time.monotonic() - self._last_intake < INTAKE_WINDOW

    def _rest(self, cpu_start: float) -> None:
        """Intake first: rest in proportion to the CPU time just used."""
        if self._intake_busy():
            self._stopping.wait(min((time.thread_time() - cpu_start) * self.intake_first, 0.05))

    def _wake_workers(self) -> None:
        for worker in self.workers:
            worker.wake.set()

    def _run_worker(self, worker: Worker) -> None:
        try:
            worker.run(after_busy=self._rest)
        finally:
            worker.close()

    def _delivery_batch(self) -> int:
        """Twenty mails a pass while mail streams in (a claim and a mark commit
        for each twenty: Outbound.MARK_BATCH), a hundred otherwise."""
        return self.outbound.MARK_BATCH if self._intake_busy() else 100

    def _run_outbound(self) -> None:
        """Delivery, resting after each pass as the workers do, so intake goes first."""
        self.outbound.run(after_busy=self._rest)

    # -- start / stop ---------------------------------------------------------------------
    def _open_http(self) -> None:
        """The HTTP side's socket: handed down by `pbm serve`, or bound here
        (a port in use stops the start with :class:`CannotListen`)."""
        if "http" not in self.parts:
            return
        fd = os.environ.pop(ENV_HTTP_FD, None)
        if fd is not None:
            self.http_sock = socket.socket(fileno=int(fd))
        else:
            where = self.settings.http_host_port
            assert where is not None
            self.http_sock = bind(*where)
        if "http" in self.local_parts:
            # an own view's orders form wakes this process's workers (others poll)
            self.http = HttpSide(self.db, self.settings, self.http_sock, on_stored=self._wake_workers)

    def start(self) -> None:
        if settings_have_mailbox(self.settings) and "listener" in self.local_parts:
            # a refused login stops the start here, before anything else started
            # (MailboxRefused: the CLI says it in one line and exits 2)
            self.mailbox = MailboxReader(self.db, self.settings, self.composer, on_mail=self.outbound.wake.set)
            self.mailbox.check()
        self._open_http()
        wake_fd = os.environ.pop(ENV_WAKE_FD, None)
        parent = os.environ.pop(ENV_PARENT, None)
        if parent:
            _die_with_parent(int(parent))
            if self.local_parts == ("http",):
                os.nice(HTTP_NICE)  # a flood of page requests never takes CPU from mail
            elif self.settings.backend_nice:
                os.nice(self.settings.backend_nice)
            threading.Thread(target=self._watch_parent, args=(int(parent),), name="parent-watch", daemon=True).start()
        self.db.upgrade()
        self._start_threads()
        if wake_fd:
            threading.Thread(target=self._listen_for_wakeups, args=(int(wake_fd),), name="wake-pipe", daemon=True).start()
        if self.split:
            self._start_backends()
        if "listener" in self.local_parts:
            on_commit = self._wake_backend if self.split else self._wake_local
            writer = self.writer = IntakeWriter(self.db, on_commit=on_commit)
            handler = InboundHandler(self.settings, writer, GameNames(self.db))
            controller = make_controller(self.settings, handler)
            controller.start()  # a port in use raises here, with nothing of it to stop
            self.controller = controller
            if self.split:
                # the intake writer holds the machine's writer turn (SQLite) while
                # it commits; each step back from SQLite needs the GIL, which the
                # event loop would keep for up to the default 5 ms
                sys.setswitchinterval(LISTENER_SWITCH_SECONDS)
        if self.mailbox is not None:
            self.mailbox.on_commit = self._wake_backend if self.split else self._wake_local
            self.mailbox.start()
        self._log_start()

    def _start_threads(self) -> None:
        """This process's own parts, as threads."""
        targets: list[tuple[str, str, Callable[[], None]]] = [
            ("worker", f"worker-{i + 1}", functools.partial(self._run_worker, w)) for i, w in enumerate(self.workers)
        ]
        targets += [("outbound", "outbound", self._run_outbound), ("outbound", "alerts", self.alerts.run),
                    ("scheduler", "scheduler", self.scheduler.run)]
        for part, name, target in targets:
            if part in self.local_parts:
                t = threading.Thread(target=target, name=name, daemon=True)
                t.start()
                self.threads.append(t)
        if self.http is not None:
            self.http.start()

    def _start_backends(self) -> None:
        with self._backend_lock:
            for be in self.backends:
                self._start_backend(be)
        for be in self.backends:
            threading.Thread(target=self._supervise, args=(be,), name=f"{be.name.replace(' ', '-')}-supervisor",
                             daemon=True).start()

    def _log_start(self) -> None:
        """One line: each part where it runs, and an address only beside the part that listens there."""
        here: list[str] = []
        if "listener" in self.local_parts:
            here.append(f"listener on {self.settings.listen}")
        if self.mailbox is not None:
            here.append(f"mailbox {self.mailbox.where} for {self.settings.mailbox_address}")
        if "http" in self.local_parts:
            here.append(f"HTTP side on {self.settings.http_listen}")
        work = [p for p in BACKEND_PARTS if p in self.local_parts]
        if work:
            here.append(", ".join(work) + (" in this process" if here else ""))
        for be in self.backends:
            pid = be.proc.pid if be.proc is not None else "?"
            what = f"HTTP side on {self.settings.http_listen}" if be.parts == ("http",) else ", ".join(be.parts)
            here.append(f"{what} in process {pid}")
        log.info("pbm serve: %s; domain %s", "; ".join(here), self.settings.domain)

    def stop(self) -> None:
        self._stopping.set()
        if self.controller is not None:
            self.controller.stop()
        if self.writer is not None:
            self.writer.close()
        if self.mailbox is not None:
            self.mailbox.stop()
        with self._backend_lock:
            procs = [be.proc for be in self.backends if be.proc is not None and be.proc.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for be in self.backends:
            if be.wake_w is not None:
                os.close(be.wake_w)
                be.wake_w = None
        if self.http is not None:
            self.http.stop()
        elif self.http_sock is not None:
            self.http_sock.close()
        for worker in self.workers:
            worker.stop()
        self.outbound.stop()
        self.alerts.stop()
        self.scheduler.stop()
        for t in self.threads:
            t.join(timeout=30)
        self.db.dispose()
        self.stopped.set()

    def serve_forever(self) -> None:
        done = threading.Event()

        def _signal(signum: int, frame: FrameType | None) -> None:
            done.set()

        signal.signal(signal.SIGINT, _signal)
        signal.signal(signal.SIGTERM, _signal)
        # before start(): the threads it starts take the policy from this one
        _schedule(self.settings.cpu_policy if self.local_parts != ("http",) else "normal")
        self.start()
        _settle_garbage_collector()
        if "listener" in self.local_parts:
            print(f"pbm-server listening on {self.settings.listen} for @{self.settings.domain}; outbound to "
                  f"{self.settings.relay or 'Maildir ' + self.settings.maildir}", flush=True)
        while not done.wait(0.5):
            pass
        self.stop()
