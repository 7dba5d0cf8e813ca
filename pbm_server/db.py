"""Database connection: SQLite in WAL mode with full durability (or PostgreSQL),
Alembic upgrades, and the two kinds of transaction the server uses.

On SQLite every writing transaction starts with ``BEGIN IMMEDIATE``, so two
writers (two threads, or two ``pbm serve`` processes) queue for the lock
instead of failing half-way; readers use a plain deferred ``BEGIN``.  On
PostgreSQL writers that must not run side by side take an advisory lock
(:func:`serialize`).
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Iterator

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

#: advisory lock ids (PostgreSQL) for work that must not run twice at once
LOCK_PROCESSING = 7301
LOCK_SCHEDULER = 7302
LOCK_OUTBOUND = 7303


def make_engine(url: str, max_pages: int = 0) -> Engine:
    """``max_pages`` (SQLite; setting ``sqlite_max_page_count``): fault injection,
    the file cannot grow past this many pages; 0: no cap."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": 60, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):
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
        def _on_begin(conn):
            if conn.get_execution_options().get("pbm_read"):
                conn.exec_driver_sql("BEGIN")
            else:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if u.get_backend_name() == "postgresql" and u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")
    return create_engine(u, pool_pre_ping=True)


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
    cfg = Config()
    # the repository's top-level migrations/, installed as a package (setup.py)
    cfg.set_main_option("script_location", str(files("pbm_server.migrations")))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine) -> None:
    """Create or upgrade the schema to the newest migration."""
    command.upgrade(alembic_config(engine), "head")


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema back to ``revision`` (the migrations' downgrade steps)."""
    command.downgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


class Database:
    def __init__(self, url: str, max_pages: int = 0):
        self.url = url
        self.engine = make_engine(url, max_pages)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._writer = sessionmaker(self.engine, expire_on_commit=False)
        self._reader = sessionmaker(self.engine.execution_options(pbm_read=True), expire_on_commit=False)

    def upgrade(self) -> None:
        upgrade(self.engine)

    @contextmanager
    def write(self, lock: int | None = None) -> Iterator[Session]:
        """One writing transaction: committed on success, rolled back on error.
        ``lock``: on PostgreSQL also take that advisory lock for the transaction
        (SQLite's BEGIN IMMEDIATE already serializes every writer)."""
        with self._writer() as session:
            with session.begin():
                if lock is not None and not self.is_sqlite:
                    session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock})
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reader() as session:
            with session.begin():
                yield session

    def dispose(self) -> None:
        self.engine.dispose()
