"""Real parts for tests: `pbm serve` on a temporary database, and an aiosmtpd
sink standing in for the outbound relay.  Nothing here is a mock: mail goes
over loopback sockets, the database is a real SQLite file (or a fresh
PostgreSQL database when PBM_TEST_DATABASE_URL is set), and the schema comes
from the real Alembic migrations.

By default the server runs inside the test process: the real ``Server`` with
its listener, worker, outbound delivery and scheduler as threads (the layout
``PBM_SERVE_PROCESSES=1`` gives), and ``cli`` runs the real click commands
through click's ``CliRunner``.  That spares each test two interpreter starts
and each CLI call one.  ``PbmServer(..., process=True)`` (the ``pbm_process``
fixture) runs `pbm serve` and the CLI as subprocesses, for what only they can
show: signals, kills, the supervisor, several processes, exit codes and the
interpreter's own start.

The schema is migrated once per test session; each test gets a copy (a file
copy on SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL)."""

from __future__ import annotations

import binascii
import errno
import io
import logging
import os
import random
import re
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, make_msgid
from pathlib import Path

from aiosmtpd.controller import Controller
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent

#: the migrated template of this test session: a SQLite file, or a PostgreSQL database name
_template: dict[str, str] = {}
_template_lock = threading.Lock()
#: the CLI in-process changes the working directory and os.environ: one call at a time
_cli_lock = threading.RLock()
#: the test running now when it is marked ``nodb`` (it may make no test database)
nodb_test: str | None = None


def _pg(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://")


def _sqlite_template() -> str:
    """A SQLite file migrated once per test session."""
    with _template_lock:
        if "sqlite" not in _template:
            import tempfile

            from pbm_server.store.db import Database

            folder = tempfile.mkdtemp(prefix="pbm-template-")
            path = os.path.join(folder, "template.db")
            db = Database(f"sqlite:///{path}")
            db.upgrade()
            db.dispose()
            _template["sqlite"] = path
        return _template["sqlite"]


def _pg_template(base: str) -> str:
    """A PostgreSQL database migrated once per test session, to copy with TEMPLATE."""
    with _template_lock:
        if "postgresql" not in _template:
            from pbm_server.store.db import Database

            name = f"pbm_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
            admin = create_engine(_pg(base), isolation_level="AUTOCOMMIT")
            with admin.connect() as c:
                c.execute(text(f'CREATE DATABASE "{name}"'))
            db = Database(base.rsplit("/", 1)[0] + "/" + name)
            db.upgrade()
            db.dispose()

            def drop() -> None:
                with admin.connect() as c:
                    c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                admin.dispose()

            import atexit

            atexit.register(drop)
            _template["postgresql"] = name
        return _template["postgresql"]


class _LogFile(logging.Handler):
    """serve.log of an in-process server: what its threads log, as the
    subprocess writes it."""

    def __init__(self, path: Path):
        super().__init__(logging.INFO)
        self.stream = open(path, "a", encoding="utf-8")
        from pbm_server.base.logs import TextLines

        self.setFormatter(TextLines())  # the text format of `pbm serve`, hidden characters escaped

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + "\n")
            self.stream.flush()
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        self.stream.close()
        super().close()


def wait_until(cond, timeout: float = 30.0, what: str = "the condition") -> None:
    """Poll ``cond`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class _PortTaken(Exception):
    """A port picked for the server was taken before the server bound it."""


_ports = random.Random()  # seeded from the OS: each xdist worker picks its own


def free_port() -> int:
    """A port to listen on, free now, picked at random below the kernel's
    ephemeral range: a port from that range (bind to 0) can be taken as the
    local port of an outgoing connection -- to PostgreSQL, to a relay, of
    the other suite running beside this one -- before the test binds it."""
    high = _ephemeral_low()
    for _ in range(100):
        port = _ports.randrange(max(1024, high - 12000), high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SinkHandler:
    def __init__(self):
        self.messages: list[tuple[list[str], bytes]] = []
        #: the envelope sender (MAIL FROM) of each of ``messages``
        self.senders: list[str] = []
        self.lock = threading.Lock()
        #: notified with ``lock`` held whenever a mail arrives (waiting tests wake at once)
        self.arrived = threading.Condition(self.lock)
        #: None: accept; otherwise the status line to answer DATA with
        self.refuse_with: str | None = None
        #: the recipients whose mail ``refuse_with`` refuses (empty: every mail)
        self.refuse_only: set[str] = set()

    async def handle_DATA(self, server, session, envelope):
        if self.refuse_with and (not self.refuse_only or
                                 any(r.lower() in self.refuse_only for r in envelope.rcpt_tos)):
            return self.refuse_with
        with self.lock:
            self.messages.append(([r.lower() for r in envelope.rcpt_tos], envelope.original_content or envelope.content))
            self.senders.append(envelope.mail_from or "")
            self.arrived.notify_all()
        return "250 OK"


def _parse(raw: bytes) -> EmailMessage:
    return BytesParser(policy=policy.default).parsebytes(raw)


#: what the fast search of a mail cannot read: encoded words, RFC 2231
#: parameters, base64, a charset that is not ASCII's or UTF-8's
_UNREAD = re.compile(rb"=\?|\*=|content-transfer-encoding:[ \t]*base64|charset=(?!\"?(?:utf-8|us-ascii))", re.I)


def _reads_as_written(raw: bytes, secrets: list[str]) -> bool:
    """Whether the mail ``raw`` can be searched for these secrets without
    parsing it: ASCII, nothing in it encoded but by quoted-printable, and no
    secret holding a space (a folded header line reads unfolded) or a
    character outside ASCII."""
    return raw.isascii() and not _UNREAD.search(raw) and not any(
        not sec.isascii() or any(c.isspace() for c in sec) for sec in secrets)


def secrets_in(raw: bytes, secrets: list[str]) -> list[str]:
    """Those of ``secrets`` that a reader of the mail ``raw`` would find in
    any header or decoded text part.  A mail that :func:`_reads_as_written`
    is searched as its bytes and as their quoted-printable decoding (the
    reports of a 10,000-player turn are checked in a second, not in
    fifteen); any other is parsed and each text part decoded."""
    if _reads_as_written(raw, secrets):
        blob = raw + b"\n" + binascii.a2b_qp(raw)
        return [sec for sec in secrets if sec.encode() in blob]
    msg = _parse(raw)
    texts = [str(v) for v in msg.values()]
    for part in msg.walk():
        if part.get_content_maintype() == "text":
            try:
                texts.append(part.get_content())
            except Exception:
                texts.append(str(part.get_payload(decode=True)))
    blob = "\n".join(texts)
    return [sec for sec in secrets if sec in blob]


def _message_id(raw: bytes) -> str | None:
    value = BytesParser(policy=policy.default).parsebytes(raw, headersonly=True)["Message-ID"]
    return None if value is None else str(value)


class Sink:
    """The relay: a real SMTP server that keeps what it receives.  Each call
    gives freshly parsed messages (a test may change what it gets); what
    only filters (recipients, In-Reply-To) reads the raw mail, once."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.handler = SinkHandler()
        self.controller = None
        #: the In-Reply-To of each mail received so far, by its place in handler.messages
        self._in_reply_to: list[str | None] = []
        self._indexed: SinkHandler | None = None
        self._index_lock = threading.Lock()

    def start(self):
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self):
        if self.controller:
            self.controller.stop()
            self.controller = None

    def raw(self) -> list[tuple[list[str], bytes]]:
        with self.handler.lock:
            return list(self.handler.messages)

    def all(self) -> list[tuple[list[str], EmailMessage]]:
        return [(rcpts, _parse(raw)) for rcpts, raw in self.raw()]

    def to(self, addr: str) -> list[EmailMessage]:
        """The mails ``addr`` is a recipient of, in the order they came."""
        addr = addr.lower()
        return [_parse(raw) for rcpts, raw in self.raw() if addr in rcpts]

    def replies_to(self, message_id: str) -> list[EmailMessage]:
        """The mails whose In-Reply-To is ``message_id``."""
        items = self.raw()
        with self._index_lock:
            if self._indexed is not self.handler:  # a test gave the sink another handler
                self._indexed, self._in_reply_to = self.handler, []
            for _, raw in items[len(self._in_reply_to):]:
                value = BytesParser(policy=policy.default).parsebytes(raw, headersonly=True).get("In-Reply-To")
                self._in_reply_to.append(None if value is None else str(value))
            found = [i for i, value in enumerate(self._in_reply_to[: len(items)]) if value == message_id]
        return [_parse(items[i][1]) for i in found]

    def wait(self, seen: int, timeout: float) -> None:
        """Until more than ``seen`` mails have come, or ``timeout`` seconds."""
        with self.handler.lock:
            if len(self.handler.messages) <= seen:
                self.handler.arrived.wait(timeout)

    def count(self) -> int:
        with self.handler.lock:
            return len(self.handler.messages)

    def return_path(self, message_id: str) -> str:
        """The envelope sender the relay was given for the mail ``message_id``."""
        with self.handler.lock:
            items = list(zip(self.handler.senders, self.handler.messages, strict=True))
        for sender, (_, raw) in items:
            if BytesParser(policy=policy.default).parsebytes(raw, headersonly=True)["Message-ID"] == message_id:
                return sender
        raise AssertionError(f"the relay got no mail {message_id}")


#: where the clock of every test's server starts, running on (set_clock moves it):
#: a Monday morning, days from the default Saturday deadlines and their reminders
START = "2026-11-23T10:00:00+00:00"


class PbmServer:
    def __init__(self, tmp: Path, domain: str = "pbm.test", gm_address: str = "gm@example.org", extra_env: dict | None = None,
                 process: bool = False, fresh: bool = False, http_side: bool = False):
        self.tmp = tmp
        #: `pbm serve` and the CLI as subprocesses (else in this process)
        self.process = process
        #: an empty database (else a copy of the session's migrated template)
        self.fresh = fresh
        self.server = None
        self._log_handler: _LogFile | None = None
        self.domain = domain
        self.gm_address = gm_address
        self.sink = Sink()
        self.sink.start()
        self.port = free_port()
        #: the HTTP side (/healthz, /metrics)
        self.http_port = free_port()
        self.clock_file = tmp / "clock.txt"
        # no test sees the real date: every server starts on a Monday morning
        # with its clock running on (a test that needs another moment sets it)
        self.set_clock(START, tick=True)
        self.db_url, self._drop_db = self._database()
        self.env = dict(os.environ)
        self.env.update(
            {
                "PBM_DATABASE_URL": self.db_url,
                "PBM_LISTEN": f"127.0.0.1:{self.port}",
                "PBM_HTTP_LISTEN": f"127.0.0.1:{self.http_port}",
                "PBM_DOMAIN": domain,
                "PBM_RELAY": f"127.0.0.1:{self.sink.port}",
                "PBM_GM_ADDRESS": gm_address,
                # the in-process server is woken after each in-process CLI
                # command (_cli_here), as its listener wakes it after each mail;
                # the poll is left for what the test writes by other ways
                "PBM_POLL_SECONDS": "0.25",
                # one back end: most tests need no more, and the machine is
                # shared by the suite; tests/reliability start several
                "PBM_BACKENDS": "1",
                "PBM_RETRY_BASE_SECONDS": "0.2",
                "PBM_RETRY_MAX_SECONDS": "1",
                "PBM_TICK_SECONDS": "0.5",
                "PBM_MAILDIR": str(tmp / "maildir"),
                # the server and the CLI read the time from this file from the
                # start: set_clock works before and after the server starts (a
                # server started on the real clock kept it while the CLI moved on)
                "PBM_CLOCK_FILE": str(self.clock_file),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if process and not http_side:
            # `pbm serve` in a process of its own starts its HTTP side as one
            # more process (half a second of CPU to import); only the tests
            # marked http_side look at it there (in this process it is threads)
            self.env["PBM_HTTP_LISTEN"] = ""
        self.env.update(extra_env or {})
        self.proc: subprocess.Popen | None = None
        #: every password a test used; no mail the server sends may contain one
        self.secrets: set[str] = set()
        self._engine = create_engine(_pg(self.db_url))

    # -- database -------------------------------------------------------------
    def _database(self) -> tuple[str, callable]:
        if nodb_test is not None:
            raise AssertionError(f"{nodb_test} is marked nodb (run in the SQLite pass only) but makes a test database")
        base = os.environ.get("PBM_TEST_DATABASE_URL")
        if not base:
            path = self.tmp / "pbm.db"
            if not self.fresh:
                shutil.copyfile(_sqlite_template(), path)
            return f"sqlite:///{path}", lambda: None
        name = "pbm_" + uuid.uuid4().hex[:12]
        template = "" if self.fresh else f' TEMPLATE "{_pg_template(base)}"'
        admin = create_engine(_pg(base), isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"{template}'))
        url = base.rsplit("/", 1)[0] + "/" + name

        def drop():
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()

        return url, drop

    def execute(self, query: str, **params) -> None:
        """A writing statement, committed (tests that damage data on purpose)."""
        with self._engine.begin() as c:
            c.execute(text(query), params)
        self._wake_server()

    def set_state(self, game: str, state: dict) -> None:
        """Overwrite a game's stored state document (SQLite or PostgreSQL)."""
        import json

        cast = "CAST(:s AS JSON)" if self._engine.dialect.name == "postgresql" else ":s"
        self.execute(f"UPDATE game_documents SET state = {cast} WHERE game_id = (SELECT id FROM games WHERE name = :n)",
                     s=json.dumps(state), n=game)
        # the entries written over the old document go with it (pbm_server/play/gamestate.py)
        self.execute("DELETE FROM state_entries WHERE game_id = (SELECT id FROM games WHERE name = :n)", n=game)

    def state(self, game: str) -> dict:
        """A game's state as the server reads it: the stored document with
        its entries (state_entries) laid over it."""
        import json

        from pbm_server.store.models import overlay

        raw = self.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = :n",
                       n=game)[0][0]
        state = raw if isinstance(raw, dict) else json.loads(raw)
        rows = self.sql("SELECT e.field, e.key, e.value, e.seq FROM state_entries e JOIN games g ON g.id = e.game_id "
                        "WHERE g.name = :n", n=game)
        # SQLite gives a JSON column's text, PostgreSQL the decoded value (which may itself be a string)
        text_json = self._engine.dialect.name == "sqlite"
        loaded = [(f, k, json.loads(v) if text_json and isinstance(v, str) else v, q) for f, k, v, q in rows]
        return overlay(state, loaded) if loaded else state

    def sql(self, query: str, **params):
        with self._engine.connect() as c:
            return c.execute(text(query), params).all()

    # -- process ----------------------------------------------------------------
    def start(self, *without: str):
        """Start the server; if a port picked at set-up was taken meanwhile (by
        a server of the suite running beside this one: ports are picked
        free, not held, until the server binds them), again on new ports."""
        for attempt in range(4):
            try:
                return self._start(without)
            except _PortTaken:
                if attempt == 3:
                    raise
                self._new_ports()
        raise AssertionError("unreachable")

    def _new_ports(self) -> None:
        self.port, self.http_port = free_port(), free_port()
        self.env["PBM_LISTEN"] = f"127.0.0.1:{self.port}"
        self.env["PBM_HTTP_LISTEN"] = f"127.0.0.1:{self.http_port}"

    def _start(self, without: tuple[str, ...]):
        if not self.process:
            try:
                return self._start_here(without)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise _PortTaken() from exc
                raise
        args = [sys.executable, "-m", "pbm_server.running.cli", "serve"]
        for part in without:
            args += ["--without", part]
        path = self.tmp / "serve.log"
        begun = path.stat().st_size if path.exists() else 0  # this start's lines come after
        self.log = open(path, "ab")
        self.proc = subprocess.Popen(args, env=self.env, cwd=self.tmp, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        if "listener" in without:
            time.sleep(1.0)
            return self

        def since() -> str:
            with open(path, "rb") as f:
                f.seek(begun)
                return f.read().decode(errors="replace")

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "address already in use" in since().lower():
                    raise _PortTaken()
                raise RuntimeError("pbm serve exited:\n" + path.read_text())
            # its own word that it listens (printed once every port is bound):
            # something else answering on the port proves nothing
            if "pbm-server listening on" in since():
                return self
            time.sleep(0.05)
        raise RuntimeError("pbm serve did not start listening:\n" + path.read_text())

    def _start_here(self, without: tuple[str, ...]):
        """The real Server in this process, its parts as threads."""
        from pbm_server.base import clock
        from pbm_server.base.settings import load_settings
        from pbm_server.running.server import PARTS, Server

        settings = load_settings(self.env)
        clock.use_file(settings.clock_file)
        self._log_handler = _LogFile(self.tmp / "serve.log")
        logging.getLogger("pbm_server").addHandler(self._log_handler)
        logging.getLogger("pbm_server").setLevel(logging.INFO)
        server = Server(settings, tuple(p for p in PARTS if p not in without), processes=1)
        try:
            server.start()
        except BaseException:
            server.stop()
            self._drop_log()
            raise
        self.server = server
        return self

    def _drop_log(self) -> None:
        if self._log_handler is not None:
            logging.getLogger("pbm_server").removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    @property
    def running(self) -> bool:
        """Whether the server runs (in either mode)."""
        if self.server is not None:
            return True
        return self.proc is not None and self.proc.poll() is None

    def stop(self, kill: bool = False):
        if self.server is not None:
            if kill:
                raise AssertionError("a kill needs the server in its own process: use the pbm_process fixture")
            server, self.server = self.server, None
            server.stop()
            self._drop_log()
            from pbm_server.base import clock

            clock.use_file(None)
            return
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def leaked_secrets(self) -> list[tuple[str, str]]:
        """(secret, Message-ID) for every sent mail that contains a password
        in any header or decoded part."""
        secrets = [sec for sec in self.secrets if len(sec) >= 6]
        leaks = []
        for _, raw in self.sink.raw():
            found = secrets_in(raw, secrets)
            if found:
                leaks += [(sec, _message_id(raw)) for sec in found]
        return leaks

    def close(self):
        self.stop()
        self.sink.stop()
        self._engine.dispose()
        self._drop_db()

    def set_clock(self, moment: datetime | str, tick: bool = False):
        """The time of the server and of the CLI from now on, running or not
        (they read PBM_CLOCK_FILE at every call): standing at ``moment``, or
        with ``tick`` running on from it."""
        if isinstance(moment, datetime):
            moment = moment.isoformat()
        # written aside and renamed over: a server thread reading the clock meanwhile sees the old time or
        # the new one, never the empty file write_text leaves for an instant (which reads as the real clock)
        aside = self.clock_file.with_name(self.clock_file.name + ".new")
        aside.write_text(f"{moment} @{time.time()!r}" if tick else moment)
        os.replace(aside, self.clock_file)

    def now(self) -> datetime:
        """The time the server and the CLI see now (for rows a test writes itself)."""
        from pbm_server.base import clock

        kept = clock._file
        clock.use_file(str(self.clock_file))
        try:
            return clock.now()
        finally:
            clock.use_file(kept)

    # -- the CLI -------------------------------------------------------------------
    def cli(self, *args: str, input: str | bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
        if isinstance(input, str):
            input = input.encode()
        if not self.process:
            return self._cli_here(args, input, check)
        proc = subprocess.run([sys.executable, "-m", "pbm_server.running.cli", *args], env=self.env, cwd=self.tmp, input=input, capture_output=True)
        proc.stdout, proc.stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        if check and proc.returncode != 0:
            raise AssertionError(f"pbm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def _cli_here(self, args: tuple[str, ...], input: bytes | None, check: bool) -> subprocess.CompletedProcess:
        """The real click commands in this process (click's CliRunner), with
        this server's environment and working directory.  An exception that
        escapes a command is shown on stderr as a traceback with code 1, as
        the interpreter would."""
        from click.testing import CliRunner

        from pbm_server.base import clock
        from pbm_server.running.cli import main

        env: dict[str, str | None] = {k: None for k in os.environ if k not in self.env}
        env.update(self.env)
        with _cli_lock:
            here = os.getcwd()
            os.chdir(self.tmp)
            try:
                result = CliRunner().invoke(main, list(args), input=input, env=env, catch_exceptions=True)
            finally:
                os.chdir(here)
                # the CLI set the clock of this process from its settings; a running server keeps its own
                clock.use_file(self.server.settings.clock_file if self.server is not None else None)
                self._wake_server()
        stdout, stderr, code = result.stdout, result.stderr, result.exit_code
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            buf = io.StringIO()
            traceback.print_exception(result.exception, file=buf)
            stderr += buf.getvalue()
            code = 1
        proc = subprocess.CompletedProcess(["pbm", *args], code, stdout, stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"pbm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def _wake_server(self) -> None:
        """What an in-process command wrote is looked at now, not at the next
        poll: the server's workers, delivery and alert poller woken."""
        server = self.server
        if server is not None:
            for poller in (*server.workers, server.outbound, server.alerts):
                poller.wake.set()

    def new_game(self, kind: str, name: str, deadline: str | None = None, **options):
        args = ["game", "new", kind, name]
        for k, v in options.items():
            args += ["--option", f"{k}={v}"]
        if deadline:
            args += ["--deadline", deadline]
        return self.cli(*args)

    def game_of_three(self, game: str = "ring1") -> None:
        """A giveaway game that ann, bob and cat have joined by mail, each
        registered by mail with the password ``<handle>-pass-1``."""
        self.cli("game", "new", "giveaway", game)
        for handle in ("ann", "bob", "cat"):
            self.register(handle, f"{handle}-pass-1")
            self.mail(f"{handle}@example.org", game, f"JOIN\n$${handle}-pass-1$$")

    def run_turn(self, name: str, *extra: str):
        proc = self.cli("turn", "run", name, *extra)
        self.settle()
        return proc

    # -- mail ------------------------------------------------------------------------
    def address(self, to: str) -> str:
        return to if "@" in to else f"{to}@{self.domain}"

    def build(self, frm: str, to: str, body: str, subject: str = "orders", headers: dict | None = None) -> EmailMessage:
        msg = EmailMessage()
        msg["From"] = frm
        msg["To"] = self.address(to)
        msg["Subject"] = subject
        msg["Date"] = format_datetime(self.now())
        msg["Message-ID"] = make_msgid(domain="example.org")
        for k, v in (headers or {}).items():
            msg[k] = v
        msg.set_content(body)
        return msg

    def send_message(self, msg: EmailMessage, mail_from: str | None = None, rcpts: list[str] | None = None):
        try:
            body = msg.get_body(preferencelist=("plain", "html"))
            self.secrets.update(p for p in re.findall(r"\$\$(.+?)\$\$", body.get_content() if body else "") if len(p) >= 6)
        except Exception:
            pass
        with smtplib.SMTP("127.0.0.1", self.port, timeout=30) as smtp:
            smtp.send_message(msg, from_addr=mail_from if mail_from is not None else msg["From"], to_addrs=rcpts or [msg["To"]])
        return msg["Message-ID"]

    def send(self, frm: str, to: str, body: str, subject: str = "orders", headers: dict | None = None) -> str:
        return self.send_message(self.build(frm, to, body, subject, headers))

    def replies_to(self, message_id: str) -> list[EmailMessage]:
        return self.sink.replies_to(message_id)

    def reply_to(self, message_id: str, timeout: float = 30) -> EmailMessage:
        """The first reply to the mail ``message_id``, once the relay has it
        (woken by each mail the relay receives)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.sink.count()
            found = self.replies_to(message_id)
            if found:
                return found[0]
            self.sink.wait(seen, min(0.5, max(0.0, deadline - time.monotonic())))
        raise AssertionError(f"no reply to {message_id} within {timeout}s; serve.log:\n" + self.serve_log()[-3000:])

    def mail(self, frm: str, to: str, body: str, subject: str = "orders", timeout: float = 30) -> EmailMessage:
        """Send a mail from ``frm``; its reply."""
        return self.reply_to(self.send(frm, to, body, subject), timeout)

    def register(self, handle: str, password: str, email: str | None = None) -> str:
        """An account as a player makes one: register, then confirm with the
        code from the reply.  At the GM address: `pbm account add --gm`."""
        email = email or f"{handle}@example.org"
        self.secrets.add(password)
        if email.lower() == self.gm_address.lower():
            self.cli("account", "add", "--gm", handle, "--password", password)
            return email
        reply = self.mail(email, "pbm", f"register {handle} {password}", subject="register")
        confirmed = self.confirm(email, reply)
        assert "registered as" in self.text(confirmed), self.text(confirmed)
        return email

    @staticmethod
    def unsubscribe_links(msg: EmailMessage) -> tuple[str | None, str]:
        """The https and mailto links of a mail's List-Unsubscribe, in that
        order; None for the first without an https PBM_PUBLIC_URL (the
        header then holds the mailto link alone)."""
        found = re.findall(r"<([^>]+)>", " ".join(str(msg["List-Unsubscribe"]).split()))
        https = [u for u in found if u.startswith("https://")]
        mailto = [u for u in found if u.startswith("mailto:")]
        assert len(found) == len(https) + len(mailto) and len(https) <= 1 and len(mailto) == 1, found
        return (https[0] if https else None), mailto[0]

    @classmethod
    def stop_link(cls, msg: EmailMessage) -> str:
        """The link under "One click stops these mails" in a mail's text (the
        stream's settings page, http://PBM_HTTP_LISTEN/... without PBM_PUBLIC_URL)."""
        found = re.search(r"One click stops these mails[^\n]*(?:\n[^\n]*)*?\n(https?://\S+/unsubscribe/\S+)",
                          cls.text(msg))
        assert found, cls.text(msg)
        return found.group(1)

    @classmethod
    def code_in(cls, reply: EmailMessage) -> str:
        """The confirmation code a register reply carries."""
        found = re.search(r"^\s*confirm ([0-9A-Z]{5}-[0-9A-Z]{5})\s*$", cls.text(reply), re.M)
        assert found, "no confirmation code in:\n" + cls.text(reply)
        return found.group(1)

    def confirm(self, email: str, reply: EmailMessage) -> EmailMessage:
        return self.mail(email, "pbm", f"confirm {self.code_in(reply)}", subject="confirm")

    def inbox(self, addr: str) -> list[EmailMessage]:
        return self.sink.to(addr)

    def all_sent(self) -> list[EmailMessage]:
        return [m for _, m in self.sink.all()]

    def wait_for(self, addr: str, count: int, timeout: float = 30) -> list[EmailMessage]:
        """At least ``count`` mails to ``addr`` (woken by each mail the relay receives)."""
        deadline = time.monotonic() + timeout
        addr = addr.lower()
        while time.monotonic() < deadline:
            seen = self.sink.count()
            if sum(addr in rcpts for rcpts, _ in self.sink.raw()) >= count:
                return self.inbox(addr)
            self.sink.wait(seen, min(0.5, max(0.0, deadline - time.monotonic())))
        raise AssertionError(f"{addr} has {len(self.inbox(addr))} mails, expected {count}; serve.log:\n" + self.serve_log()[-3000:])

    def settle(self, timeout: float = 30):
        """Wait until every stored mail is processed and every due outbox row delivered."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = self.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0]
            pending = self.sql("SELECT count(*) FROM outbox WHERE status = 'pending'")[0][0]
            if not new and not pending:
                return
            time.sleep(0.01)
        raise AssertionError("the server did not settle; serve.log:\n" + self.serve_log()[-3000:])

    def serve_log(self) -> str:
        p = self.tmp / "serve.log"
        return p.read_text(errors="replace") if p.exists() else ""

    @staticmethod
    def text(msg: EmailMessage) -> str:
        part = msg.get_body(preferencelist=("plain",))
        return part.get_content().replace("\r\n", "\n") if part is not None else ""

    @classmethod
    def flat(cls, msg: EmailMessage) -> str:
        """The text part with all runs of white space made one space (wrapping-proof)."""
        return " ".join(cls.text(msg).split())

    @staticmethod
    def html(msg: EmailMessage) -> str | None:
        part = msg.get_body(preferencelist=("html",))
        return part.get_content().replace("\r\n", "\n") if part is not None else None
