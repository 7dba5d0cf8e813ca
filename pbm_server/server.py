"""`pbm serve`: the listener, the worker, outbound delivery and the scheduler,
each on its own thread, until SIGINT or SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading

from pbm_server.compose import Composer
from pbm_server.db import Database
from pbm_server.inbound import GameNames, InboundHandler, IntakeWriter, make_controller
from pbm_server.outbound import Outbound
from pbm_server.processing import Worker
from pbm_server.scheduler import Scheduler
from pbm_server.settings import Settings

log = logging.getLogger(__name__)

PARTS = ("listener", "worker", "outbound", "scheduler")


class Server:
    def __init__(self, settings: Settings, parts: tuple[str, ...] = PARTS):
        self.settings = settings
        self.parts = parts
        self.db = Database(settings.database_url)
        self.composer = Composer(settings)
        self.worker = Worker(self.db, settings, self.composer)
        self.outbound = Outbound(self.db, settings, on_failed=self._delivery_failed)
        self.scheduler = Scheduler(self.db, settings, self.worker.mailer, on_mail=self.outbound.wake.set)
        self.worker.on_processed = self.outbound.wake.set
        self.writer = None
        self.controller = None
        self.threads: list[threading.Thread] = []
        self.stopped = threading.Event()

    def _delivery_failed(self, session, row) -> None:
        if row.kind == "gm":
            return  # never tell the GM about a mail to the GM: that could loop
        self.worker.tell_gm(
            session,
            f"A mail to {row.to_addr} could not be delivered and was given up.",
            [("outbox id", str(row.id)), ("attempts", str(row.attempts)), ("last error", row.last_error or "")],
            row.sent_at or row.next_attempt_at,
        )

    def start(self) -> None:
        self.db.upgrade()
        for name, target in (("worker", self.worker.run), ("outbound", self.outbound.run), ("scheduler", self.scheduler.run)):
            if name in self.parts:
                t = threading.Thread(target=target, name=name, daemon=True)
                t.start()
                self.threads.append(t)
        if "listener" in self.parts:
            self.writer = IntakeWriter(self.db, on_commit=self.worker.wake.set)
            handler = InboundHandler(self.settings, self.writer, GameNames(self.db))
            self.controller = make_controller(self.settings, handler)
            self.controller.start()
        log.info("pbm serve: %s on %s, domain %s", ", ".join(self.parts), self.settings.listen, self.settings.domain)

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        if self.writer is not None:
            self.writer.close()
        self.worker.stop()
        self.outbound.stop()
        self.scheduler.stop()
        for t in self.threads:
            t.join(timeout=30)
        self.db.dispose()
        self.stopped.set()

    def serve_forever(self) -> None:
        done = threading.Event()

        def _signal(signum, frame):
            done.set()

        signal.signal(signal.SIGINT, _signal)
        signal.signal(signal.SIGTERM, _signal)
        self.start()
        print(f"pbm-server listening on {self.settings.listen} for @{self.settings.domain}; outbound to "
              f"{self.settings.relay or 'Maildir ' + self.settings.maildir}", flush=True)
        while not done.wait(0.5):
            pass
        self.stop()
