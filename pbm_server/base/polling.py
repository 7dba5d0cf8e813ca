"""The loop the worker and outbound delivery share: do a pass of work; when
there was none, sleep until woken or until the poll interval is over."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Poller:
    def __init__(self, poll_seconds: float):
        self.poll_seconds = poll_seconds
        self.wake = threading.Event()
        self._stop = threading.Event()
        #: a shorter wait after the next idle pass (look_again_in)
        self._next_wait: float | None = None
        #: what :meth:`run` was given to do after a busy pass, and the CPU time
        #: (thread_time) the pass began at: a pass that goes on with more of the
        #: same work (Worker.run_once) rests between its parts as between passes
        self.after_busy: Callable[[float], None] | None = None
        self.pass_started = 0.0

    def look_again_in(self, seconds: float) -> None:
        """After this idle pass, wait at most ``seconds`` (not the whole poll
        interval): there is work, only not for us yet."""
        self._next_wait = seconds

    def step(self) -> bool | int:
        """One pass; truthy when it did work."""
        raise NotImplementedError

    def run(self, after_busy: Callable[[float], None] | None = None) -> None:
        """Pass after pass until stopped.  ``after_busy(cpu_start)`` runs after
        each pass that did work (``pbm serve`` uses it to let intake go first)."""
        self.after_busy = after_busy
        while not self._stop.is_set():
            self.pass_started = time.thread_time()
            try:
                busy = self.step()
            except Exception:
                log.exception("%s pass failed", type(self).__name__)
                busy = False
            if not busy:
                wait, self._next_wait = self._next_wait, None
                self.wake.wait(self.poll_seconds if wait is None else min(wait, self.poll_seconds))
                self.wake.clear()
            elif after_busy is not None:
                after_busy(self.pass_started)

    def rest_between(self) -> None:
        """Within a pass that goes on with more work: rest as :meth:`run`
        rests after a busy pass, for the CPU used since the pass (or the last
        rest) began."""
        if self.after_busy is not None:
            self.after_busy(self.pass_started)
        self.pass_started = time.thread_time()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()
