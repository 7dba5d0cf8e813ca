"""The SMTP load client used by every benchmark and by the reliability tests.

It speaks raw SMTP over asyncio sockets (no smtplib: the client must cost far
less per message than the servers it measures) and runs in its own process, so
it never shares a GIL with the server under test.

One *message* is one whole SMTP session, as an MTA delivers a queued mail:
connect, banner, EHLO, MAIL FROM, RCPT TO, DATA, the message, QUIT.
``concurrency`` sessions run at once.  Each message is a small command mail
(``help`` to pbm@DOMAIN) from one of ``senders`` addresses, with a unique
Message-ID.

For every message the result records the Message-ID, the SMTP reply to DATA
(only ``250`` means "accepted") and the monotonic time of the first byte sent
(the connect) and of the DATA reply.  ``time.monotonic`` is the system-wide
CLOCK_MONOTONIC on Linux, so these times compare with the relay sink's.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from email.utils import formatdate


@dataclass
class LoadSpec:
    host: str
    port: int
    count: int
    concurrency: int = 50
    domain: str = "pbm.localhost"
    to_local: str = "pbm"
    senders: int = 2000
    body: str = "help"
    #: messages per second (a steady load); 0: as fast as the server takes them
    rate: float = 0.0
    #: first message number (several runs against one server use distinct ids)
    start: int = 0
    tag: str = "load"
    #: stop early (and return what happened) once this monotonic time has passed
    until: float | None = None
    #: (sender, recipient, body) of the mails to send, used in turn (message n
    #: is mails[n % len(mails)], with a Message-ID of its own); None: ``body``
    #: to ``to_local`` from one of ``senders``
    mails: list[tuple[str, str, str]] | None = None


@dataclass
class Sent:
    message_id: str
    code: int  # reply code to the end of DATA; 0 = connection lost / no reply
    t_start: float
    t_done: float


@dataclass
class LoadResult:
    sent: list[Sent] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: float = 0.0  # the client's own CPU seconds

    @property
    def accepted(self) -> list[Sent]:
        return [s for s in self.sent if s.code == 250]

    @property
    def rate(self) -> float:
        return len(self.accepted) / self.elapsed if self.elapsed else 0.0


def envelope(spec: LoadSpec, n: int) -> tuple[str, str, str]:
    """Sender, recipient and body of message n."""
    if spec.mails:
        return spec.mails[n % len(spec.mails)]
    return f"player{n % spec.senders}@example.org", f"{spec.to_local}@{spec.domain}", spec.body


def message_bytes(spec: LoadSpec, n: int) -> tuple[str, str, bytes]:
    sender, rcpt, body = envelope(spec, n)
    mid = f"<{spec.tag}.{n}.{os.getpid()}@example.org>"
    body = body.replace("\r\n", "\n").rstrip("\n").replace("\n", "\r\n")
    raw = (
        f"From: {sender if spec.mails else f'Player {n % spec.senders} <{sender}>'}\r\n"
        f"To: {rcpt}\r\n"
        f"Subject: orders {n}\r\n"
        f"Date: {formatdate()}\r\n"
        f"Message-ID: {mid}\r\n"
        "MIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "\r\n"
        f"{body}\r\n"
    ).encode()
    return sender, mid, raw


async def _reply(reader: asyncio.StreamReader) -> int:
    """Read one (possibly multi-line) SMTP reply; return its code."""
    while True:
        line = await reader.readline()
        if not line:
            raise ConnectionError("connection closed")
        if len(line) < 4 or line[3:4] != b"-":
            return int(line[:3])


async def _one(spec: LoadSpec, n: int) -> Sent:
    sender, mid, raw = message_bytes(spec, n)
    t0 = time.monotonic()
    code = 0
    writer = None
    try:
        reader, writer = await asyncio.open_connection(spec.host, spec.port)
        if await _reply(reader) != 220:
            raise ConnectionError("no banner")
        writer.write(b"EHLO load.example.org\r\n")
        await _reply(reader)
        writer.write(f"MAIL FROM:<{sender}>\r\n".encode())
        if await _reply(reader) != 250:
            raise ConnectionError("MAIL refused")
        writer.write(f"RCPT TO:<{envelope(spec, n)[1]}>\r\n".encode())
        if await _reply(reader) != 250:
            raise ConnectionError("RCPT refused")
        writer.write(b"DATA\r\n")
        if await _reply(reader) != 354:
            raise ConnectionError("DATA refused")
        writer.write(raw + b".\r\n")
        code = await _reply(reader)
        t1 = time.monotonic()
        writer.write(b"QUIT\r\n")
        try:
            await _reply(reader)
        except (ConnectionError, OSError):
            pass
        return Sent(mid, code, t0, t1)
    except (ConnectionError, OSError, ValueError):
        return Sent(mid, code, t0, time.monotonic())
    finally:
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass


async def _run(spec: LoadSpec) -> LoadResult:
    result = LoadResult()
    numbers = iter(range(spec.start, spec.start + spec.count))
    t_begin = time.monotonic()

    async def session_loop(slot: int):
        for n in numbers:
            if spec.until is not None and time.monotonic() > spec.until:
                return
            if spec.rate:
                due = t_begin + (n - spec.start) / spec.rate
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            result.sent.append(await _one(spec, n))

    await asyncio.gather(*(session_loop(i) for i in range(spec.concurrency)))
    result.elapsed = time.monotonic() - t_begin
    return result


def run_load(spec: LoadSpec) -> LoadResult:
    """Run the load in this process (use :func:`run_load_process` from a benchmark)."""
    c0 = time.process_time()
    result = asyncio.run(_run(spec))
    result.cpu = time.process_time() - c0
    return result


def _child(spec: LoadSpec, conn) -> None:
    try:
        conn.send(run_load(spec))
    finally:
        conn.close()


def run_load_process(spec: LoadSpec) -> LoadResult:
    """Run the load in a separate process and return its result."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(spec, child), daemon=True)
    proc.start()
    child.close()
    result = parent.recv()
    proc.join()
    return result


class LoadProcess:
    """A load running in the background (kill tests, steady loads)."""

    def __init__(self, spec: LoadSpec):
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child, args=(spec, child), daemon=True)
        self.proc.start()
        child.close()

    def result(self, timeout: float | None = None) -> LoadResult:
        if timeout is not None and not self._conn.poll(timeout):
            raise TimeoutError("the load did not finish")
        result = self._conn.recv()
        self.proc.join()
        return result
