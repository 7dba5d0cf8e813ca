"""Receiving mail: the aiosmtpd listener and ``pbm mail inject``.

The listener refuses at RCPT every address that is not ours (550: never an open
relay) and answers 250 to DATA only after the message is committed.  Commits
are grouped: a single writer thread takes every message waiting at that moment
and stores them in one transaction, so many concurrent senders share one fsync
without any of them getting a 250 early.  Database work never runs on the event
loop.  Any fault of ours answers 451 (try again later), never a 5xx.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from concurrent.futures import Future

from sqlalchemy import insert, select

from pbm_server import clock
from pbm_server.db import Database
from pbm_server.models import Game, InboundMail
from pbm_server.settings import Settings

log = logging.getLogger(__name__)

TEMPFAIL = "451 4.3.0 Temporary local problem, please try again later"


def store_messages(db: Database, items: list[tuple[str, list[str], bytes]]) -> list[int]:
    """Store (envelope sender, recipients, raw bytes) in one transaction."""
    now = clock.now()
    ids = []
    with db.write() as s:
        for mail_from, rcpts, raw in items:
            result = s.execute(
                insert(InboundMail).values(received_at=now, mail_from=mail_from, rcpt_tos=list(rcpts), raw=raw, status="new")
            )
            ids.append(result.inserted_primary_key[0])
    return ids


class IntakeWriter:
    """One thread that commits waiting messages in groups."""

    def __init__(self, db: Database, max_batch: int = 256, on_commit=None):
        self.db = db
        self.max_batch = max_batch
        self.on_commit = on_commit
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="intake-writer", daemon=True)
        self._thread.start()

    def submit(self, mail_from: str, rcpts: list[str], raw: bytes) -> Future:
        fut: Future = Future()
        self._queue.put((mail_from, rcpts, raw, fut))
        return fut

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)
                    break
                batch.append(item)
            try:
                ids = store_messages(self.db, [(f, r, raw) for f, r, raw, _ in batch])
            except Exception as exc:
                log.exception("could not store %d message(s)", len(batch))
                for *_, fut in batch:
                    fut.set_exception(exc)
                continue
            for (*_, fut), new_id in zip(batch, ids):
                fut.set_result(new_id)
            if self.on_commit:
                self.on_commit()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)


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


class InboundHandler:
    """aiosmtpd handler: small hooks, each returning an SMTP status line."""

    def __init__(self, settings: Settings, writer: IntakeWriter, names: GameNames):
        self.domain = settings.domain.lower()
        self.writer = writer
        self.names = names

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local, _, domain = address.rpartition("@")
        local = local.lower()
        if domain.lower() != self.domain or not local:
            return "550 5.1.1 Not a local address; this server relays nothing"
        if local != "pbm":
            try:
                if not await self.names.exists(local):
                    return f"550 5.1.1 No game named {local} here; mail pbm@{self.domain} with 'games' for the list"
            except Exception:
                log.exception("game lookup failed")
                return TEMPFAIL
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content if envelope.original_content is not None else envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        fut = self.writer.submit(envelope.mail_from or "", list(envelope.rcpt_tos), raw)
        try:
            inbox_id = await asyncio.wrap_future(fut)
        except Exception:
            return TEMPFAIL
        return f"250 OK queued as {inbox_id}"

    async def handle_exception(self, error):
        log.exception("SMTP session error", exc_info=error)
        return TEMPFAIL


def make_controller(settings: Settings, handler: InboundHandler):
    from aiosmtpd.controller import Controller

    return Controller(
        handler,
        hostname=settings.listen_host,
        port=settings.listen_port,
        ready_timeout=10.0,
        data_size_limit=settings.max_message_bytes,
        decode_data=False,
        server_hostname=settings.domain,
        ident="pbm-server",
    )
