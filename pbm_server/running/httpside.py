"""Running the HTTP side (pbm_server/web/app.py) under uvicorn, in a thread
of its own process.

The socket is bound by `pbm serve` itself before anything starts
(:func:`bind`), so a port in use is one clear line at start, and it is handed
to the HTTP side's process as an open file descriptor.

uvicorn speaks HTTP/1.1 through h11 (:class:`GuardedH11`, a subclass of its
h11 protocol), which adds what uvicorn lacks against slow and greedy clients
(issue 41): a request must be all in within PBM_HTTP_HEADER_TIMEOUT_SECONDS,
and one client address holds at most PBM_HTTP_MAX_CONNECTIONS_PER_CLIENT
connections.  uvicorn's own ``limit_concurrency`` is not used: it counts every
open connection, finished request or not, so 200 clients that never finish a
request line made every page and /healthz answer 503; the app bounds the
requests it works on instead (web/app.py, ``Guard``), with /healthz outside
that bound.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from pbm_server.base.settings import Settings
from pbm_server.base.sockets import listening_socket
from pbm_server.store.db import Database
from pbm_server.web.app import SECURITY_HEADERS, Guard, make_app

log = logging.getLogger(__name__)


class CannotListen(Exception):
    """A socket the settings ask for cannot be opened."""

    def __init__(self, setting: str, address: str, reason: str):
        super().__init__(f"{setting}: cannot listen on {address}: {reason}")


#: a port in use is tried again for this long: after a SIGKILL of `pbm serve`
#: its HTTP side's process (killed by the kernel with it) may hold the socket
#: for a moment while the server is started again
BIND_PATIENCE_SECONDS = 5.0


def bind(host: str, port: int, setting: str = "PBM_HTTP_LISTEN") -> socket.socket:
    """A listening TCP socket on host:port, inheritable by a child process."""
    deadline = time.monotonic() + BIND_PATIENCE_SECONDS
    while True:
        try:
            sock = listening_socket(host, port)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise CannotListen(setting, f"{host}:{port}", exc.strerror or str(exc)) from exc
        sock.set_inheritable(True)
        return sock


def client_key(host: str) -> str:
    """What connections are counted by: an IPv4 address, or an IPv6 address's
    /64 (one subscriber's network: a client there has its 2**64 addresses)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with two guards, for one server (see
    :func:`guarded_protocol`, which makes a subclass with its own limits and
    counts):

    - a request must be all in (request line, headers and any body) within
      ``header_timeout`` seconds of its connection opening or of the answer
      to the request before it; else the connection is closed unanswered.  A
      connection that sends nothing is closed after as long.  (uvicorn's
      keep-alive timer is dropped at the first byte of a request and nothing
      times a request out after that: 300 clients sending half a request
      line stayed connected for good.)  A request that is in and waits for
      its page (the pacing, web/app.py) is not timed out.
    - one client address (:func:`client_key`) holds at most ``per_client``
      connections; the next is closed at once, before anything is read.
    """

    header_timeout: ClassVar[float] = 5.0
    per_client: ClassVar[int] = 32
    #: open connections by client key (of this subclass's server only)
    open_by_client: ClassVar[dict[str, int]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client_key: str | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        key = client_key(self.client[0]) if self.client is not None else ""
        held = self.open_by_client.get(key, 0)
        if held >= self.per_client:
            transport.close()
            return
        self.open_by_client[key] = held + 1
        self._client_key = key
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        key, self._client_key = self._client_key, None
        if key is not None:
            left = self.open_by_client.get(key, 1) - 1
            if left > 0:
                self.open_by_client[key] = left
            else:
                self.open_by_client.pop(key, None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._unfinished():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # the next request on this connection (a pipelined one may be in already) gets its own time
        self._disarm()
        if not self.transport.is_closing() and self._unfinished():
            self._arm()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot read, with nosniff as every answer has."""
        body = f"{msg}\n".encode("ascii", "replace")
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
                   (b"x-content-type-options", SECURITY_HEADERS["X-Content-Type-Options"].encode("ascii"))]
        for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"), h11.Data(data=body),
                      h11.EndOfMessage()):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def _unfinished(self) -> bool:
        """Whether the client still owes us (part of) a request."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self._unfinished() and not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(settings: Settings) -> type[GuardedH11]:
    """A :class:`GuardedH11` with the settings' limits and counts of its own."""
    return type("GuardedH11Server", (GuardedH11,), {
        "header_timeout": settings.http_header_timeout_seconds,
        "per_client": settings.http_max_connections_per_client,
        "open_by_client": {},
    })


class HttpSide:
    """uvicorn serving the app on a socket already listening, in a thread."""

    def __init__(self, db: Database, settings: Settings, sock: socket.socket,
                 on_stored: Callable[[], None] | None = None):
        self.sock = sock
        self.app = make_app(db, settings, on_stored)
        # no limit_concurrency: it counted unfinished requests (see above); the app bounds its requests itself
        config = uvicorn.Config(Guard(self.app), log_config=None, access_log=False, lifespan="off", ws="none",
                                http=guarded_protocol(settings), timeout_keep_alive=5,
                                timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="http", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
        except Exception:
            log.exception("the HTTP side stopped")

    def start(self) -> None:
        try:  # the counters start here, not at the first scrape
            self.app.state.metrics.refresh()
        except Exception as exc:
            log.warning("the HTTP side could not read the queues at its start: %s", exc)
        self.thread.start()
        host, port = self.sock.getsockname()[:2]
        log.info("HTTP side (game pages, /healthz, /metrics) on %s:%s", host, port)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
