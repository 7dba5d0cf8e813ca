"""Running the HTTP side (pbm_server/web/app.py) under uvicorn, in a thread
of its own process.

The socket is bound by `pbm serve` itself before anything starts
(:func:`bind`), so a port in use is one clear line at start, and it is handed
to the HTTP side's process as an open file descriptor.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
import time

import uvicorn

from pbm_server.base.settings import Settings
from pbm_server.store.db import Database
from pbm_server.web.app import make_app

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
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise CannotListen(setting, f"{host}:{port}", exc.strerror or str(exc)) from exc
    family, kind, proto, _, addr = infos[0]
    deadline = time.monotonic() + BIND_PATIENCE_SECONDS
    while True:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(512)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise CannotListen(setting, f"{host}:{port}", exc.strerror or str(exc)) from exc
        sock.set_inheritable(True)
        return sock


class HttpSide:
    """uvicorn serving the app on a socket already listening, in a thread."""

    def __init__(self, db: Database, settings: Settings, sock: socket.socket):
        self.sock = sock
        self.app = make_app(db, settings)
        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="off",
                                timeout_keep_alive=5, limit_concurrency=200, timeout_graceful_shutdown=5)
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
