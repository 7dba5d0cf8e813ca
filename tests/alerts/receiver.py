"""A real HTTP receiver on loopback for the alert tests: it records every
request (path, headers, body, when) and answers each path with the statuses a
test scripts for it (the last one again and again), with optional headers."""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    #: path -> [(status, headers), ...] answered in turn, the last one from then on
    script: dict[str, list[tuple[int, dict[str, str]]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.changed:
                    answers = receiver.script.get(self.path, [(200, {})])
                    seen = sum(1 for r in receiver.requests if r.path == self.path)
                    status, headers = answers[min(seen, len(answers) - 1)]
                    receiver.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                     body, status, time.monotonic()))
                    receiver.changed.notify_all()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def tls(self, context: ssl.SSLContext) -> None:
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def taken(self, path: str) -> list[Request]:
        """The requests to ``path`` this receiver accepted (2xx)."""
        with self.changed:
            return [r for r in self.requests if r.path == path and 200 <= r.status < 300]

    def wait(self, cond: Any, what: str, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        with self.changed:
            while not cond():
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the receiver did not get {what}; it got: "
                                         + "\n".join(f"{r.status} {r.path} {r.body[:200]!r}" for r in self.requests))
                self.changed.wait(min(left, 0.5))
