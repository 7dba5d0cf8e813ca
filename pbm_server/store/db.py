"""Database connection: SQLite in WAL mode with full durability (or PostgreSQL),
Alembic upgrades, and the two kinds of transaction the server uses.

On SQLite every writing transaction starts with ``BEGIN IMMEDIATE``, so two
writers (two threads, or two ``pbm serve`` processes) queue for the lock
instead of failing half-way; readers use a plain deferred ``BEGIN``.

On PostgreSQL writers that must not run side by side take advisory locks
(:meth:`Database.write`), always in this order, so that no two can wait for
each other:

1. the keys of what the transaction changes, sorted: ``game:NAME`` for one
   game, ``server`` for the commands to pbm@DOMAIN (a worker holds its mail's
   key from picking the mail until it is done: :class:`RouteLocks`);
2. the *world* lock, shared by everything that names its keys, exclusive for
   work that may touch anything (the GM's mails and the CLI);
3. one lock of a kind of work (the scheduler's, the outbox's, the throttle's).

So mails of different games are processed side by side, by several worker
threads or several ``pbm serve`` processes on one database
(docs/scaling.md), while the mails of one game are processed one at a time
in the order they arrived.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.pool import ConnectionPoolEntry

#: advisory lock ids (PostgreSQL) for work that must not run twice at once
LOCK_WORLD = 7301
LOCK_SCHEDULER = 7302
LOCK_OUTBOUND = 7303

SHARED, EXCLUSIVE = "shared", "exclusive"


def lock_id(key: str) -> int:
    """The advisory lock id of a key such as ``game:g1`` (64-bit, signed)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8, person=b"pbm-lock").digest(), "big", signed=True)


def game_key(name: str) -> str:
    return "game:" + name.lower()


SERVER_KEY = "server"


class DriverMissing(NoSuchModuleError):
    """The database URL names a driver that cannot be imported (a package
    installed without its ``[postgres]`` extra); the text says what to
    install.  A SQLAlchemy error like any other fault of opening the
    database, so whoever reports those (the CLI's ``Env.open_db``: one line,
    exit 2) reports this one too."""


#: how to get the driver of a ``postgresql://`` URL
POSTGRES_EXTRA = "pip install 'pbm-server[postgres]'"


def _driver_missing(u: URL, exc: ImportError) -> DriverMissing:
    """The error for a driver of ``u`` that failed to import with ``exc``."""
    module = exc.name or u.get_driver_name()
    missing = "not installed" if isinstance(exc, ModuleNotFoundError) else f"not usable ({str(exc).strip()})"
    if u.get_backend_name() == "postgresql" and u.get_driver_name() == "psycopg":
        return DriverMissing(f"the PostgreSQL driver ({module}) is {missing}: {POSTGRES_EXTRA}")
    return DriverMissing(f"the database driver {module} (for {u.drivername}://) is {missing}")


def make_engine(url: str, max_pages: int = 0) -> Engine:
    """``max_pages`` (SQLite; setting ``sqlite_max_page_count``): fault injection,
    the file cannot grow past this many pages; 0: no cap.  A driver that
    cannot be imported raises :class:`DriverMissing`."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": 60, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA foreign_keys=ON")
            if max_pages:
                # fault injection and quota: SQLite answers "database or disk is
                # full" (SQLITE_FULL) when the file would grow past this
                cur.execute(f"PRAGMA max_page_count={max_pages}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # straight to the driver: through exec_driver_sql a BEGIN took a
            # statement's whole execution path, a third of an idle poll's read
            # (a fault still reaches is_transient, as sqlite3's OperationalError)
            raw = conn.connection.driver_connection
            assert raw is not None
            raw.execute("BEGIN" if conn.get_execution_options().get("pbm_read") else "BEGIN IMMEDIATE")

        return engine
    if u.get_backend_name() == "postgresql" and u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")
    try:
        return create_engine(u, pool_pre_ping=True)  # imports the driver
    except ImportError as exc:
        raise _driver_missing(u, exc) from exc


def is_transient(first: BaseException) -> bool:
    """A fault of the database, not of the work: disk full, database locked,
    connection lost.  Such work is left queued and tried again later."""
    from sqlalchemy import exc as sa_exc

    exc: BaseException | None = first
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError, sa_exc.DisconnectionError)):
            return True
        if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
            return True
        if type(exc).__name__ in ("OperationalError", "InterfaceError") and type(exc).__module__ in ("sqlite3", "psycopg", "psycopg.errors"):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    cfg = Config()
    # the repository's top-level migrations/, installed as a package (setup.py)
    cfg.set_main_option("script_location", str(files("pbm_server.migrations")))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    cfg.attributes["engine"] = engine
    return cfg


@functools.cache
def head_revision() -> str | None:
    """The newest migration's revision (the scripts are read once a process)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(files("pbm_server.migrations")))
    return ScriptDirectory.from_config(cfg).get_current_head()


def upgrade(engine: Engine) -> tuple[str | None, str | None] | None:
    """Create or upgrade the schema to the newest migration; (from, to) if
    it was not there already (from: None for an empty database).  A
    database already at the newest one is left alone without Alembic
    (every CLI command and back end opens the database: :func:`is_current`)."""
    if is_current(engine):
        return None
    from alembic import command

    before = current_revision(engine)
    if before == head_revision():
        return None
    command.upgrade(alembic_config(engine), "head")
    return before, current_revision(engine)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema back to ``revision`` (the migrations' downgrade steps)."""
    from alembic import command

    command.downgrade(alembic_config(engine), revision)


def alembic_errors() -> type[Exception]:
    """What Alembic raises when a migration command fails (imported only
    when asked: an ``except`` clause evaluates it only for an exception)."""
    from alembic.util.exc import CommandError

    return CommandError


_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*['\"]?(\w+)", re.M)


@functools.cache
def newest_revision() -> str | None:
    """The newest migration, read from the scripts' ``revision`` and
    ``down_revision`` lines without importing Alembic, which costs a
    command a fifth of a second of CPU (and ``pbm mail inject`` is one
    command for each mail an MTA pipes in): the one revision no script
    names as the one before it; None unless there is exactly one
    (tests/server/test_db_commands.py checks it is Alembic's head)."""
    revisions: set[str] = set()
    before: set[str] = set()
    for script in (files("pbm_server.migrations") / "versions").iterdir():
        if script.name.endswith(".py"):
            lines = {m.group(1): m.group(2) for m in _REVISION_LINE.finditer(script.read_text(encoding="utf-8"))}
            if "revision" in lines:
                revisions.add(lines["revision"])
                before.add(lines.get("down_revision", "None"))
    heads = revisions - before
    return heads.pop() if len(heads) == 1 else None


def is_current(engine: Engine) -> bool:
    """The schema is at the newest migration (:func:`newest_revision`), as
    one SELECT of Alembic's ``alembic_version`` row says; False also when
    it cannot tell (no such table yet, no connection: Alembic then looks)."""
    newest = newest_revision()
    if newest is None:
        return False
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [newest])
    except SQLAlchemyError:
        return False


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


class _BesideFile:
    """A file beside a SQLite database that this process locks byte ranges
    of: one instance (one open descriptor, never closed: closing any
    descriptor of a file drops every lock the process holds on it) per
    file and process."""

    SUFFIX = ""
    _made: dict[str, "_BesideFile"] = {}
    _made_guard = threading.Lock()

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    @classmethod
    def beside(cls, database: str) -> Any:
        path = database + cls.SUFFIX
        with cls._made_guard:
            found = cls._made.get(path)
            if found is None:
                found = cls._made[path] = cls(path)
            return found


class _WriterTurn(_BesideFile):
    """Whose turn it is to write a SQLite file, among the threads and
    processes of this machine: a mutex per process and an exclusive
    ``lockf`` of ``<file>-write``.  SQLite's own lock lets a waiting writer
    poll with growing sleeps (up to 100 ms each), so two busy processes hand
    the file over slowly; the kernel wakes a ``lockf`` waiter as soon as the
    lock is let go.  SQLite's lock still guards everything: a writer that
    does not get its turn within ``WAIT`` seconds (a write transaction
    opened inside another in the same thread) goes ahead without it."""

    SUFFIX = "-write"
    WAIT = 60.0

    def __init__(self, path: str):
        super().__init__(path)
        self.mutex = threading.Lock()

    @contextmanager
    def turn(self) -> Iterator[None]:
        if not self.mutex.acquire(timeout=self.WAIT):
            yield
            return
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self.fd, fcntl.LOCK_UN)
        finally:
            self.mutex.release()

    def wait_idle(self) -> None:
        """Return once no thread of this process holds the turn (or after
        ``WAIT`` seconds, as a writer that does not get its turn goes on)."""
        if self.mutex.acquire(timeout=self.WAIT):
            self.mutex.release()


def _sqlite_file(url: str) -> str | None:
    path = make_url(url).database
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return os.path.abspath(path)


class _Session(Session):
    """A Session whose ``connection()`` is remembered for its transaction:
    the worker's plain statements ask for it a dozen times a mail, and each
    ask walks the ORM's transaction machinery (4 % of the worker's CPU).
    A transaction (a savepoint included) keeps its connection to its end,
    so the one remembered is the one the ORM would give."""

    _pbm_conn: tuple[object, Connection] | None = None

    def connection(self, bind_arguments: Any = None, execution_options: Any = None) -> Connection:
        if bind_arguments is not None or execution_options is not None:
            return super().connection(bind_arguments, execution_options)
        current = self._transaction
        cached = self._pbm_conn
        if current is not None and cached is not None and cached[0] is current:
            return cached[1]
        conn = super().connection()
        if self._transaction is not None:
            self._pbm_conn = (self._transaction, conn)
        return conn


class Database:
    def __init__(self, url: str, max_pages: int = 0):
        self.url = url
        self.engine = make_engine(url, max_pages)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._writer = sessionmaker(self.engine, class_=_Session, expire_on_commit=False)
        self._reader = sessionmaker(self.engine.execution_options(pbm_read=True), class_=_Session,
                                    expire_on_commit=False)
        path = _sqlite_file(url) if self.is_sqlite else None
        self._turn = _WriterTurn.beside(path) if path else None
        self._path = path
        #: each thread's connection that only asks SQLite's data_version (change_mark)
        self._marks = threading.local()
        self._mark_conns: list[sqlite3.Connection] = []

    def change_mark(self) -> int | None:
        """A number that changes whenever any other connection, of this
        process or another, commits to the database: SQLite's ``PRAGMA
        data_version`` on a connection of this thread's that never writes
        (a few microseconds, where a read transaction with one SELECT costs
        0.2 ms).  An idle poll that found nothing asks it first and skips
        its statements while it has not changed.  None where there is none
        (PostgreSQL, an in-memory SQLite): always look."""
        if self._path is None:
            return None
        conn: sqlite3.Connection | None = getattr(self._marks, "conn", None)
        try:
            if conn is None:
                conn = self._marks.conn = sqlite3.connect(self._path, timeout=60, isolation_level=None,
                                                          check_same_thread=False)
                self._mark_conns.append(conn)
            row = conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            self._marks.conn = None  # look the long way; a new connection next time
            return None
        return int(row[0])

    def upgrade(self) -> tuple[str | None, str | None] | None:
        return upgrade(self.engine)

    @contextmanager
    def write(self, lock: int | None = None, *, keys: Iterable[str] = (), world: str | None = None) -> Iterator[Session]:
        """One writing transaction: committed on success, rolled back on error.
        On PostgreSQL it first takes, for the transaction, the advisory locks
        of ``keys`` (sorted), then the world lock (``world``: SHARED or
        EXCLUSIVE), then ``lock``; see the module's docstring.  SQLite's
        BEGIN IMMEDIATE already serializes every writer; the writers of this
        machine first wait for their turn (:class:`_WriterTurn`)."""
        if self._turn is not None:
            with self._turn.turn():
                with self._write(lock, keys=keys, world=world) as session:
                    yield session
            return
        with self._write(lock, keys=keys, world=world) as session:
            yield session

    def writer_turn(self) -> AbstractContextManager[None]:
        """This machine's turn to write the SQLite file (:class:`_WriterTurn`), for a
        writer that begins its own transactions on a DB-API connection (the
        listener's inbox); on PostgreSQL nothing."""
        return self._turn.turn() if self._turn is not None else nullcontext()

    def writer_idle(self) -> None:
        """Wait while a thread of this process writes (SQLite): work that can
        wait (writing out a reply, relaying it) lets the writer have the GIL,
        for every writer of the machine waits for that one."""
        if self._turn is not None:
            self._turn.wait_idle()

    @contextmanager
    def _write(self, lock: int | None = None, *, keys: Iterable[str] = (), world: str | None = None) -> Iterator[Session]:
        with self._writer() as session:
            with session.begin():
                if not self.is_sqlite:
                    for key in sorted(set(keys)):
                        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_id(key)})
                    if world == SHARED:
                        session.execute(text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": LOCK_WORLD})
                    elif world == EXCLUSIVE:
                        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_WORLD})
                    if lock is not None:
                        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock})
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reader() as session:
            with session.begin():
                yield session

    def dispose(self) -> None:
        self.engine.dispose()
        for conn in self._mark_conns:
            conn.close()
        self._mark_conns.clear()
        self._marks = threading.local()


class IdleMark:
    """What lets an idle poll skip its statements: the database's change mark
    (:meth:`Database.change_mark`) as it stood when a look found nothing to
    do.  While the mark stands nothing has been committed since, so a look
    would find nothing again; at least every ``LOOK_ANYWAY_SECONDS`` the poll
    looks all the same (a database file replaced under a running server keeps
    the old file's mark)."""

    LOOK_ANYWAY_SECONDS = 5.0

    def __init__(self, db: Database):
        self.db = db
        self._mark: int | None = None
        self._until = 0.0
        self._seen: int | None = None

    def unchanged(self) -> bool:
        """True if nothing was committed since the last look found nothing;
        else the mark is read for :meth:`found_nothing` (before the look)."""
        self._seen = mark = self.db.change_mark()
        if mark is not None and mark == self._mark and time.monotonic() < self._until:
            return True
        self._mark = None
        return False

    def found_nothing(self) -> None:
        """The look after :meth:`unchanged` found nothing to do."""
        self._mark = self._seen
        self._until = time.monotonic() + self.LOOK_ANYWAY_SECONDS


class _LockFile(_BesideFile):
    """Byte-range locks (POSIX ``lockf``) on one file beside a SQLite
    database: one byte per route key, so every process on that database sees
    who works on which game, and the kernel lets go of a process's locks when
    it dies.  POSIX locks belong to the process, not the thread, so the threads
    of one process count their holds here (two keys may hash to one byte)."""

    SUFFIX = "-routes"
    #: bytes of the file a key may hash to (collisions only serialize two games)
    SPAN = 1 << 24

    def __init__(self, path: str):
        super().__init__(path)
        self.holds: dict[int, int] = {}
        self.lock = threading.Lock()

    @classmethod
    def offset(cls, key: str) -> int:
        return lock_id(key) % cls.SPAN

    def take(self, key: str) -> bool:
        at = self.offset(key)
        with self.lock:
            if self.holds.get(at):
                self.holds[at] += 1
                return True
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, at)
            except OSError:
                return False  # another process works on this route
            self.holds[at] = 1
            return True

    def release(self, key: str) -> None:
        at = self.offset(key)
        with self.lock:
            left = self.holds.get(at, 0) - 1
            if left > 0:
                self.holds[at] = left
                return
            self.holds.pop(at, None)
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, at)


class RouteLocks:
    """The keys one worker holds from picking a mail until it is done with it.

    PostgreSQL: session-level advisory locks on a connection of the worker's
    own, so they hold across the mail's transactions, are seen by every
    process on the database, and go away with the connection if the process
    dies.  SQLite: a set shared by the worker threads of this process, and a
    byte-range lock of a file beside the database (``<file>-routes``) for
    the other processes on the same file, which the kernel drops when a
    process dies."""

    _taken: dict[str, set[str]] = {}
    _guard = threading.Lock()

    def __init__(self, db: Database):
        self.db = db
        self._conn: Connection | None = None
        self._file: _LockFile | None = None
        if db.is_sqlite:
            path = _sqlite_file(db.url)
            if path:
                self._file = _LockFile.beside(path)

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._conn

    def take(self, key: str) -> bool:
        """Take ``key`` if nobody holds it; False otherwise."""
        if self.db.is_sqlite:
            with self._guard:
                taken = self._taken.setdefault(self.db.url, set())
                if key in taken:
                    return False
                if self._file is not None and not self._file.take(key):
                    return False
                taken.add(key)
                return True
        try:
            return bool(self._connection().execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_id(key)}).scalar())
        except Exception:
            self.close()  # a broken connection holds nothing any more
            raise

    def release(self, key: str) -> None:
        if self.db.is_sqlite:
            with self._guard:
                taken = self._taken.get(self.db.url, set())
                if key in taken:
                    taken.discard(key)
                    if self._file is not None:
                        self._file.release(key)
            return
        try:
            self._connection().execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_id(key)})
        except Exception:
            self.close()  # closing the connection releases its locks

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None
