"""Receiving mail: the aiosmtpd listener and ``pbm mail inject``.

The listener refuses at RCPT every address that is not ours (550: never an open
relay) and answers 250 to DATA only after the message is committed.  Commits
are grouped: a single writer thread takes every message waiting at that moment
and stores them in one transaction, so many concurrent senders share one fsync
without any of them getting a 250 early.  Database work never runs on the event
loop.  Any fault of ours answers 451 (try again later), never a 5xx.

A mail to several of our addresses is stored as one inbox row per recipient
(:func:`one_row_each`), all in the same commit: the worker handles each row
on its own, so no recipient is left unread, also across a crash.  The mail's
bytes are stored once, in an ``inbox_bodies`` row that all of them point at
(issue 41: with a copy in each row, one 1 MB mail to 100 addresses wrote
100 MB, and the database and its WAL grew by 150-250 MB per such mail).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, AnyStr, Concatenate, cast

from sqlalchemy import CursorResult, Table, insert, select, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import PoolProxiedConnection

from pbm_server.base import clock, logs
from pbm_server.base.printable import printable
from pbm_server.base.settings import Settings
from pbm_server.base.sockets import listening_socket
from pbm_server.mail import bounces
from pbm_server.mail.headers import ATEXT
from pbm_server.store.db import Database
from pbm_server.store.models import Game, InboundBody, InboundMail

if TYPE_CHECKING:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import SMTP, Envelope
    from aiosmtpd.smtp import Session as SMTPSession

log = logging.getLogger(__name__)

TEMPFAIL = "451 4.3.0 Temporary local problem, please try again later"

#: recipients of ours in one transaction (each is an inbox row; the mail's
#: bytes are stored once for all); RFC 5321 4.5.3.1.8 asks a server to take
#: at least 100
MAX_RECIPIENTS = 100

#: a message waiting for the intake writer: envelope sender, recipients, raw
#: bytes, the future its inbox ids go to, and that future's event loop
_Waiting = tuple[str, list[str], bytes, "asyncio.Future[list[int] | None]", asyncio.AbstractEventLoop]

#: a message to store: envelope sender, envelope recipients, raw bytes
Message = tuple[str, list[str], bytes]

#: a path as nearly every MTA writes it after MAIL FROM: and RCPT TO: --
#: <dot-atom@dot-atom>, in ASCII -- read without the email package's full
#: RFC 5322 parser, which aiosmtpd runs on every address (0.1 ms each, a
#: tenth of a session's CPU); every other form still goes through it
_PLAIN_PATH = re.compile(rf"<({ATEXT}(?:\.{ATEXT})*@{ATEXT}(?:\.{ATEXT})*)>")


def one_row_each(rcpts: Sequence[str]) -> list[list[str]]:
    """The recipients of each inbox row an envelope makes: one row per
    recipient, naming that recipient only.  An address given twice (in any
    case) is one recipient; an envelope without recipients makes one row
    without any (the worker takes it as mail to pbm@)."""
    seen: set[str] = set()
    rows: list[list[str]] = []
    for rcpt in rcpts:
        if rcpt.lower() not in seen:
            seen.add(rcpt.lower())
            rows.append([rcpt])
    return rows or [[]]


#: an inbox row to store: envelope sender, its recipients, the index of its
#: mail's body among the bodies stored with it
_Row = tuple[str, list[str], int]


def _rows_of(items: Sequence[Message]) -> tuple[list[tuple[bytes, list[str] | None]], list[_Row], list[int]]:
    """The bodies of ``items`` (one per item: its bytes and the recipients of
    its rows, None for a mail of one row, nearly every mail), their inbox
    rows (one per recipient, in order, each naming its item's body by index)
    and how many rows each item made."""
    bodies: list[tuple[bytes, list[str] | None]] = []
    rows: list[_Row] = []
    made: list[int] = []
    for n, (mail_from, rcpts, raw) in enumerate(items):
        each = one_row_each(rcpts)
        bodies.append((raw, [r for row in each for r in row] if len(each) > 1 else None))
        rows.extend((mail_from, r, n) for r in each)
        made.append(len(each))
    return bodies, rows, made


def _per_item(ids: Sequence[int], made: Sequence[int]) -> list[list[int]]:
    """The row ids in order, handed back to the items that made them."""
    out: list[list[int]] = []
    at = 0
    for n in made:
        out.append(list(ids[at:at + n]))
        at += n
    return out


def store_messages(db: Database, items: list[Message]) -> list[int]:
    """Store (envelope sender, recipients, raw bytes) in one transaction; return
    the inbox id of each item's first row, in the order of ``items`` (see
    :func:`store_mails` for all of them)."""
    return [ids[0] for ids in store_mails(db, items)]


def store_mails(db: Database, items: list[Message]) -> list[list[int]]:
    """Store (envelope sender, recipients, raw bytes) in one transaction, one
    body per item and one row per recipient (:func:`one_row_each`) pointing
    at it; return each item's inbox ids.

    One multi-row INSERT (executemany) for the bodies and one for the rows,
    not one ORM object per message.  On SQLite the writing transaction holds
    the database's write lock from its BEGIN IMMEDIATE, so the new rows of a
    table get consecutive ids ending at last_insert_rowid(); elsewhere
    RETURNING gives them in order."""
    bodies, flat, made = _rows_of(items)
    if not items:
        return []
    now = clock.now()
    with db.write() as s:
        body_ids = _insert(s, db, InboundBody, [dict(raw=raw, rcpt_tos=r) for raw, r in bodies])
        rows = [dict(received_at=now, mail_from=f, rcpt_tos=list(r), body_id=body_ids[n], status="new")
                for f, r, n in flat]
        return _per_item(_insert(s, db, InboundMail, rows), made)


def _insert(s: Session, db: Database, model: type[InboundBody] | type[InboundMail], rows: list[dict[str, Any]]) -> list[int]:
    """The rows inserted into ``model``'s table; their ids, in order."""
    if db.is_sqlite:
        s.execute(insert(model), rows)
        last = s.execute(text("SELECT last_insert_rowid()")).scalar_one()
        return list(range(last - len(rows) + 1, last + 1))
    if len(rows) == 1:
        inserted = cast(CursorResult[Any], s.execute(insert(model).values(**rows[0])))
        key = inserted.inserted_primary_key
        assert key is not None
        return [key[0]]
    result = s.execute(insert(model).returning(model.id, sort_by_parameter_order=True), rows)
    return list(result.scalars())


class _SqliteInbox:
    """The listener's hot path on SQLite: one connection kept by the writer
    thread, and per group ``BEGIN IMMEDIATE; INSERT ... (executemany)`` of
    the bodies, then of the inbox rows, ``COMMIT`` on the DB-API connection,
    which costs a quarter of the CPU of an ORM session per group (the CPU the
    event loop would miss).  The columns are encoded by SQLAlchemy's own bind
    processors, so the rows are exactly what :func:`store_messages` writes;
    the connection comes from the engine, so it has the same pragmas (WAL,
    synchronous=FULL, busy_timeout)."""

    COLUMNS = ("received_at", "mail_from", "rcpt_tos", "body_id", "status")
    BODY_COLUMNS = ("raw", "rcpt_tos")

    def __init__(self, db: Database):
        self.db = db
        dialect = db.engine.dialect

        def statement(model: type[InboundBody] | type[InboundMail], columns: tuple[str, ...]) -> tuple[str, list[Callable[[Any], Any]]]:
            table = cast(Table, model.__table__)
            sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            return sql, [table.c[c].type.bind_processor(dialect) or (lambda v: v) for c in columns]

        self.sql, self.procs = statement(InboundMail, self.COLUMNS)
        self.body_sql, self.body_procs = statement(InboundBody, self.BODY_COLUMNS)
        self._conn: PoolProxiedConnection | None = None

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self.db.engine.raw_connection()
        return self._conn.driver_connection

    def store(self, items: list[Message]) -> list[list[int]]:
        """Like :func:`store_mails`: one row per recipient, each item's ids."""
        p_at, p_from, p_rcpt, _, p_status = self.procs
        b_raw, b_rcpt = self.body_procs
        at = p_at(clock.now())
        new = p_status("new")
        bodies, flat, made = _rows_of(items)
        body_rows = [(b_raw(raw), None if r is None else b_rcpt(r)) for raw, r in bodies]
        rows = [(at, p_from(f), p_rcpt(list(r)), n, new) for f, r, n in flat]
        con = self._connection()
        try:
            with self.db.writer_turn():
                last = self._insert(con, body_rows, rows)
        except BaseException:
            # a fault of the connection itself: start afresh with the next group
            try:
                if self._conn is not None:
                    self._conn.invalidate()
            except Exception:
                pass
            self._conn = None
            raise
        return _per_item(range(last - len(rows) + 1, last + 1), made)

    def _insert(self, con: Any, bodies: list[tuple[Any, ...]], rows: list[tuple[Any, ...]]) -> int:
        """The bodies and the rows (each naming its body by index among
        ``bodies``) in one transaction; the id of the last row."""
        con.execute("BEGIN IMMEDIATE")
        try:
            con.executemany(self.body_sql, bodies)
            first_body: int = con.execute("SELECT last_insert_rowid()").fetchone()[0] - len(bodies) + 1
            rows = [(at, f, r, first_body + n, st) for at, f, r, n, st in rows]
            con.executemany(self.sql, rows)
            last: int = con.execute("SELECT last_insert_rowid()").fetchone()[0]
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return last


class IntakeWriter:
    """One thread that commits waiting messages in groups.

    ``submit`` is called on the event loop and returns an asyncio future; the
    thread takes everything waiting at that moment (up to ``max_batch``),
    commits it in one transaction (one fsync for the group), and resolves the
    group's futures with ONE call into the loop (each with the inbox ids of
    its message: one per recipient).  Nobody gets a 250 before the commit of
    their message returned.  ``on_commit(n)`` is called after each
    commit of ``n`` inbox rows."""

    def __init__(self, db: Database, max_batch: int = 256, on_commit: Callable[[int], None] | None = None):
        self.db = db
        self.max_batch = max_batch
        self.on_commit = on_commit
        self.batches = 0  # commits so far (for the benchmarks)
        self.stored = 0
        self._fast = _SqliteInbox(db) if db.is_sqlite else None
        self._queue: queue.SimpleQueue[_Waiting | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="intake-writer", daemon=True)
        self._thread.start()

    def submit(self, mail_from: str, rcpts: list[str], raw: bytes) -> asyncio.Future[list[int] | None]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.put((mail_from, rcpts, raw, fut, loop))
        return fut

    @staticmethod
    def _resolve(batch: list[_Waiting], ids: Sequence[list[int]] | None, exc: Exception | None) -> None:
        for i, item in enumerate(batch):
            fut = item[3]
            if fut.done():  # the session went away meanwhile
                continue
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(ids[i] if ids is not None and i < len(ids) else None)

    def _run(self) -> None:
        """Take what waits, store it in one commit, answer each sender, tell
        the back end, log each mail; until told to stop."""
        while True:
            batch, stop = self._take_batch()
            if not batch:
                return
            started = time.monotonic()
            ids, error = self._store(batch)
            self._hand_back(batch, ids, error)
            if ids is not None and self.on_commit:
                try:
                    self.on_commit(sum(map(len, ids)))  # the inbox rows the worker now has
                except Exception:
                    log.exception("on_commit failed")
            if ids is not None:  # after the 250s went out: the log never delays them
                self._log_stored(batch, ids, (time.monotonic() - started) * 1000)
            if stop:
                return

    def _take_batch(self) -> tuple[list[_Waiting], bool]:
        """Everything waiting now (up to max_batch, waiting for the first),
        and whether the writer was told to stop after it."""
        first = self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _store(self, batch: list[_Waiting]) -> tuple[list[list[int]] | None, Exception | None]:
        """The batch in one commit: each mail's inbox ids, or the error."""
        try:
            items = [(f, r, raw) for f, r, raw, _, _ in batch]
            ids = self._fast.store(items) if self._fast is not None else store_mails(self.db, items)
        except Exception as exc:
            log.exception("could not store %d message(s)", len(batch))
            return None, exc
        self.batches += 1
        self.stored += len(batch)
        return ids, None

    def _hand_back(self, batch: list[_Waiting], ids: list[list[int]] | None, error: Exception | None) -> None:
        """Each waiting session's answer, with one call into each event loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[int]] = {}
        for i, item in enumerate(batch):
            by_loop.setdefault(item[4], []).append(i)
        for loop, idx in by_loop.items():
            part = [batch[i] for i in idx]
            part_ids = [ids[i] for i in idx] if ids is not None else None
            try:
                loop.call_soon_threadsafe(self._resolve, part, part_ids, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    @staticmethod
    def _log_stored(batch: list[_Waiting], ids: Sequence[list[int]], ms: float) -> None:
        """One line per mail stored: its inbox rows, sender, recipients, size, the commit's time."""
        for (mail_from, rcpts, raw, _, _), rows in zip(batch, ids, strict=False):
            log.info("mail in: inbox %s from %s to %s, %d bytes, stored in %.1f ms (a commit of %d)",
                     " ".join(map(str, rows)), mail_from or "<>", ", ".join(rcpts), len(raw), ms, len(batch),
                     extra=logs.facts(event="mail in", inbox=rows, sender=mail_from or "<>", recipients=list(rcpts),
                                      bytes=len(raw), ms=round(ms, 1), batch=len(batch)))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
        log.info("intake: %d message(s) stored in %d commit(s)", self.stored, self.batches)


class GameNames:
    """Which local parts exist; a miss is checked against the database (off the loop)."""

    def __init__(self, db: Database, ttl: float = 5.0):
        self.db = db
        self.ttl = ttl
        self._names: set[str] = set()
        self._loaded = 0.0

    def _load(self) -> set[str]:
        with self.db.read() as s:
            return set(s.scalars(select(Game.name)).all())

    async def exists(self, local: str) -> bool:
        if local in self._names and time.monotonic() - self._loaded < self.ttl:
            return True
        loop = asyncio.get_running_loop()
        self._names = await loop.run_in_executor(None, self._load)
        self._loaded = time.monotonic()
        return local in self._names


class BounceAddresses:
    """Checks the token of a bounce address (bounces.py) with the key read
    once from the database (off the loop)."""

    def __init__(self, db: Database):
        self.db = db
        self._key: bytes | None = None

    def _load(self) -> bytes:
        with self.db.read() as s:
            return bounces.read_key(s)

    async def valid(self, local: str) -> bool:
        if self._key is None:
            loop = asyncio.get_running_loop()
            self._key = await loop.run_in_executor(None, self._load)
        return bounces.outbox_id_of(self._key, local) is not None


class InboundHandler:
    """aiosmtpd handler: small hooks, each returning an SMTP status line."""

    def __init__(self, settings: Settings, writer: IntakeWriter, names: GameNames,
                 bounce_addresses: BounceAddresses | None = None):
        self.domain = settings.domain.lower()
        self.writer = writer
        self.names = names
        self.bounce_addresses = bounce_addresses or BounceAddresses(names.db)

    async def handle_RCPT(self, server: SMTP, session: SMTPSession, envelope: Envelope, address: str,
                          rcpt_options: list[str]) -> str:
        if address.lower() == "postmaster":  # RFC 5321 4.5.1: <Postmaster> without a domain too
            address = f"postmaster@{self.domain}"
        local, _, domain = address.rpartition("@")
        local = local.lower()
        if domain.lower() != self.domain or not local:
            return "550 5.1.1 Not a local address; this server relays nothing"
        if bounces.is_bounce_local(local):  # the return path of one of our mails (VERP)
            try:
                if not await self.bounce_addresses.valid(local):
                    return "550 5.1.1 Not a return path of this server"
            except Exception:
                log.exception("bounce key lookup failed")
                return TEMPFAIL
        elif local not in ("pbm", "postmaster"):  # postmaster: RFC 5321 requires it; forwarded to the GM
            try:
                if not await self.names.exists(local):
                    return f"550 5.1.1 No game named {local} here; mail pbm@{self.domain} with 'games' for the list"
            except Exception:
                log.exception("game lookup failed")
                return TEMPFAIL
        if address.lower() not in {r.lower() for r in envelope.rcpt_tos} and len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            # each recipient is an inbox row of its own (the mail's bytes stored once):
            # RFC 5321 4.5.3.1.10's answer
            # to a limit; the client sends the rest in another transaction
            return f"452 4.5.3 Too many recipients: at most {MAX_RECIPIENTS} per mail here; send the rest in another mail"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: SMTPSession, envelope: Envelope) -> str:
        raw = envelope.original_content if envelope.original_content is not None else envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        try:
            # with decode_data=False aiosmtpd always has the content (bytes) at DATA
            inbox_ids = await self.writer.submit(envelope.mail_from or "", list(envelope.rcpt_tos), cast(bytes, raw))
        except Exception:
            return TEMPFAIL
        return f"250 OK queued as {' '.join(map(str, inbox_ids or []))}"

    async def handle_exception(self, error: Exception) -> str:
        log.exception("SMTP session error", exc_info=error)
        return TEMPFAIL


TOO_MANY = "421 4.7.0 too many connections, try again later"


def raise_open_file_limit() -> int:
    """Raise the soft limit of open files to the hard limit (each SMTP
    session is a socket); returns the new soft limit."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        if soft == resource.RLIM_INFINITY or soft >= target:
            return soft
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    except (ImportError, ValueError, OSError):
        log.warning("could not raise the open-file limit", exc_info=True)
        return -1


class SessionLimits:
    """Open SMTP sessions per client address and in total (all on the loop thread)."""

    def __init__(self, per_client: int, total: int):
        self.per_client = per_client
        self.total = total
        self.by_client: dict[str, int] = {}
        self.open = 0

    def take(self, client: str) -> bool:
        if self.open >= self.total or self.by_client.get(client, 0) >= self.per_client:
            return False
        self.open += 1
        self.by_client[client] = self.by_client.get(client, 0) + 1
        return True

    def give_back(self, client: str) -> None:
        self.open -= 1
        left = self.by_client.get(client, 1) - 1
        if left > 0:
            self.by_client[client] = left
        else:
            self.by_client.pop(client, None)


def _limited_smtp_class() -> Callable[Concatenate[InboundHandler, SessionLimits, ...], SMTP]:
    from aiosmtpd.smtp import SMTP

    class LimitedSMTP(SMTP):
        """An SMTP session that counts against :class:`SessionLimits`: over
        the limit it answers 421 instead of the greeting and closes."""

        #: the names aiosmtpd looks for (commands, AUTH mechanisms) -- see __dir__
        _looked_up: list[str] | None = None

        def __dir__(self) -> list[str]:
            """Only the names aiosmtpd looks up on a session (``smtp_*``,
            ``auth_*``), listed once per class: it builds every session's
            tables of commands and AUTH mechanisms from dir() and
            inspect.getmembers(), which reads every attribute -- a sixth of
            the listener's CPU a mail before."""
            cls = type(self)
            if cls._looked_up is None:
                cls._looked_up = [n for n in object.__dir__(self) if n.startswith(("smtp_", "auth_"))]
            return list(cls._looked_up)

        def __init__(self, handler: InboundHandler, limits: SessionLimits, **kwargs: Any) -> None:
            super().__init__(handler, **kwargs)
            self.limits = limits
            self.client: str | None = None
            self.admitted = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            peer = transport.get_extra_info("peername")
            self.client = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
            self.admitted = self.limits.take(self.client)
            super().connection_made(transport)

        def connection_lost(self, error: Exception | None) -> None:
            if self.admitted and self.client is not None:
                self.admitted = False
                self.limits.give_back(self.client)
            super().connection_lost(error)

        async def push(self, status: AnyStr) -> None:
            """Every reply line goes out here: ours, which echo a client's
            local part (``No game named ...``), and aiosmtpd's, which echo a
            command word.  A control or format character in it is written as
            its escape (printable.py: a raw CR in a reply line is a line the
            client's log never got from us); and every character beyond
            ASCII too unless the client asked for SMTPUTF8 in this
            transaction's MAIL FROM (RFC 6531 3.7.4: a client that did not
            gets ASCII replies)."""
            if isinstance(status, str):
                # aiosmtpd's 552 does not say the limit: ours does
                if status.startswith("552 ") and self.data_size_limit:
                    status = too_large(self.data_size_limit)
                utf8 = self.enable_SMTPUTF8 and self.envelope is not None and self.envelope.smtp_utf8
                status = printable(status, ascii_only=not utf8)
            await super().push(status)

        def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
            plain = _PLAIN_PATH.match(arg)
            rest = arg[plain.end():] if plain is not None else ""
            if rest[:1] in (" ", "\t"):
                rest = rest.lstrip()  # the parser drops the blanks (and comments) after the path
            if plain is None or rest.startswith("(") or "=?" in plain.group(1):  # a comment; an encoded word
                return super()._getaddr(arg)
            address = plain.group(1)
            if self.local_part_limit and len(address.rpartition("@")[0]) > self.local_part_limit:
                return None, None
            return address, rest

        async def _handle_client(self) -> None:
            if not self.admitted:
                log.warning("refused an SMTP session from %s: too many connections", self.client)
                await self.push(TOO_MANY)
                if self.transport is not None:
                    self.transport.close()
                return
            await super()._handle_client()

    return LimitedSMTP


def too_large(limit: int) -> str:
    """The 552 answer to a mail over the size limit: it says the limit."""
    return (f"552 5.3.4 Message too large: this server takes mails of at most {limit:,} bytes "
            f"({limit / 1_048_576:.1f} MiB, attachments included); send a shorter mail")


def make_controller(settings: Settings, handler: InboundHandler) -> Controller:
    from aiosmtpd.controller import Controller

    raise_open_file_limit()
    limits = SessionLimits(settings.smtp_max_sessions_per_client, settings.smtp_max_sessions)
    smtp_class = _limited_smtp_class()

    class LimitedController(Controller):
        _sock: socket.socket | None = None

        def factory(self) -> SMTP:
            return smtp_class(self.handler, limits, **self.SMTP_kwargs)

        def start(self) -> None:
            # bound here, in the caller's thread, so that a port in use is an
            # error at once: aiosmtpd binds in its loop's thread and, when that
            # fails, lets start() wait out its whole ready_timeout first
            self._sock = listening_socket(self.hostname or None, self.port, v6_only=True, backlog=100)
            try:
                super().start()
            except BaseException:
                self._sock.close()
                raise

        def _create_server(self) -> Any:
            assert self._sock is not None
            return self.loop.create_server(self._factory_invoker, sock=self._sock, ssl=self.ssl_context)

    return LimitedController(
        handler,
        hostname=settings.listen_host,
        port=settings.listen_port,
        ready_timeout=10.0,
        data_size_limit=settings.max_message_bytes,
        decode_data=False,
        server_hostname=settings.domain,
        ident="pbm-server",
        # a session silent this long is closed (aiosmtpd answers 421 and hangs up)
        timeout=settings.smtp_idle_timeout_seconds,
    )
