"""The relay refuses or drops connections for a while: nothing is lost,
nothing is sent twice."""

from __future__ import annotations

import socket
import threading
import time

from tests.harness import Sink, wait_until


class Dropper(threading.Thread):
    """A 'relay' that accepts each connection and closes it at once."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(50)
        self.sock.settimeout(0.1)
        self.dropped = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.close()
            self.dropped += 1
        self.sock.close()


def outbox(pbm, status: str) -> int:
    return pbm.sql("SELECT count(*) FROM outbox WHERE status = :s", s=status)[0][0]




def test_relay_refuses_then_vanishes_then_drops_then_returns(pbm):
    port = pbm.sink.port
    sent: list[str] = []

    def send_some(n: int, tag: str):
        for i in range(n):
            sent.append(pbm.send(f"{tag}{i}@example.org", "pbm", "help"))

    # 1. the relay answers 451 to every mail
    pbm.sink.handler.refuse_with = "451 4.3.0 Try again later"
    send_some(5, "refused")
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE attempts >= 2")[0][0] >= 1, timeout=60)
    # 2. nobody listens on the relay's port
    pbm.sink.stop()
    send_some(5, "gone")
    time.sleep(1.5)
    # 3. the relay accepts connections and drops them at once
    dropper = Dropper(port)
    dropper.start()
    send_some(5, "dropped")
    wait_until(lambda: outbox(pbm, "pending") == 15, timeout=60)
    wait_until(lambda: dropper.dropped >= 3, timeout=60)
    dropper.stop.set()
    dropper.join(5)
    assert pbm.sink.handler.messages == []  # nothing went through
    assert outbox(pbm, "sent") == 0 and outbox(pbm, "pending") == 15
    # (the server stops a delivery pass at the first failure while the relay is
    # down, so not every row need have had its first attempt yet)
    assert pbm.sql("SELECT max(attempts) FROM outbox")[0][0] >= 2
    # 4. the relay is back
    pbm.sink = Sink(port)
    pbm.sink.start()
    pbm.settle(timeout=60)
    got = pbm.sink.all()
    ids = [m["Message-ID"] for _, m in got]
    assert len(ids) == len(set(ids)) == 15, "a mail was delivered twice or lost"
    assert sorted(m["In-Reply-To"] for _, m in got) == sorted(sent)
    assert outbox(pbm, "sent") == 15 and outbox(pbm, "failed") == 0


def test_a_relay_restarted_between_mails_costs_no_retry(pbm):
    """Delivery keeps its relay session between passes; when the relay has
    gone away since (restarted, or dropped an idle client), the next reply
    goes out on a new session at once -- the first attempt, not a retry."""
    first = pbm.mail("ann@example.org", "pbm", "help")
    assert first["In-Reply-To"]
    port = pbm.sink.port
    pbm.sink.stop()
    pbm.sink = Sink(port)
    pbm.sink.start()
    time.sleep(1.0)  # a kept session idle this long is checked before use
    second = pbm.mail("bob@example.org", "pbm", "help", timeout=20)
    assert "help" in pbm.text(second).lower()
    pbm.settle()  # the relay's 250 comes before the server records the delivery
    assert pbm.sql("SELECT status, attempts FROM outbox ORDER BY id") == [("sent", 1), ("sent", 1)]
