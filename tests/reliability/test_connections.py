"""Too many connections (issue 14, item 7): SMTP sessions are limited per
client address and in total, silent sessions are closed, and the listener
keeps answering other senders.  All clients are on loopback; a client's
address is chosen by binding to 127.0.0.1, 127.0.0.2, ... (Linux routes all
of 127/8 to loopback)."""

from __future__ import annotations

import os
import resource
import smtplib
import socket
import time
from pathlib import Path

import pytest

from tests.harness import PbmServer

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def idle_session(server: PbmServer, source: str) -> tuple[socket.socket, bytes]:
    """Connect from ``source`` and read the first line the server says."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30, source_address=(source, 0))
    first = b""
    while not first.endswith(b"\n"):
        chunk = sock.recv(1024)
        if not chunk:
            break
        first += chunk
    return sock, first


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server hung up (reads until EOF; the socket has a timeout)."""
    try:
        while sock.recv(1024):
            pass
        return True
    except OSError:
        return False


def mail_from(server: PbmServer, source: str, frm: str, body: str = "games") -> str:
    msg = server.build(frm, "pbm", body)
    with smtplib.SMTP("127.0.0.1", server.port, timeout=30, source_address=(source, 0)) as smtp:
        refused = smtp.send_message(msg)
    assert refused == {}
    return msg["Message-ID"]


@pytest.fixture
def limited(pbm_stopped):
    pbm_stopped.env.update({
        "PBM_SMTP_MAX_SESSIONS_PER_CLIENT": "5",
        "PBM_SMTP_MAX_SESSIONS": "12",
        "PBM_SMTP_IDLE_TIMEOUT_SECONDS": "600",
    })
    return pbm_stopped


def test_one_client_cannot_take_all_sessions(limited):
    pbm = limited.start()
    sessions = [idle_session(pbm, "127.0.0.1") for _ in range(25)]
    greetings = [first for _, first in sessions]
    assert sum(g.startswith(b"220 ") for g in greetings) == 5
    refused = [sock for sock, g in sessions if g.startswith(b"421 4.7.0 too many connections")]
    assert len(refused) == 20
    assert all(closed_by_server(sock) for sock in refused)
    # another sender is still served: 250, and its reply arrives
    mid = mail_from(pbm, "127.0.0.2", "other@example.org")
    pbm.settle()
    assert len(pbm.replies_to(mid)) == 1
    # the flooding client gets a session again once it closes one
    sessions[0][0].close()
    time.sleep(0.5)  # the server sees the close
    mail_from(pbm, "127.0.0.1", "flooder@example.org")
    for sock, _ in sessions:
        sock.close()


def test_total_sessions_are_limited(limited):
    pbm = limited.start()
    held = [idle_session(pbm, src) for src in ["127.0.0.3"] * 5 + ["127.0.0.4"] * 5 + ["127.0.0.5"] * 2]
    assert all(first.startswith(b"220 ") for _, first in held)
    sock, first = idle_session(pbm, "127.0.0.2")
    assert first.startswith(b"421 4.7.0")
    sock.close()
    for s, _ in held[:3]:
        s.close()
    time.sleep(0.5)
    mid = mail_from(pbm, "127.0.0.2", "other@example.org")
    pbm.settle()
    assert len(pbm.replies_to(mid)) == 1
    for s, _ in held:
        s.close()


def test_idle_sessions_are_closed(pbm_stopped):
    pbm_stopped.env["PBM_SMTP_IDLE_TIMEOUT_SECONDS"] = "1"
    pbm_stopped.env["PBM_SMTP_MAX_SESSIONS_PER_CLIENT"] = "3"
    pbm = pbm_stopped.start()
    held = [idle_session(pbm, "127.0.0.1") for _ in range(3)]
    assert all(first.startswith(b"220 ") for _, first in held)
    # silent sessions are hung up on, and their places are free again
    assert all(closed_by_server(sock) for sock, _ in held)
    time.sleep(0.5)
    mid = mail_from(pbm, "127.0.0.1", "later@example.org")
    pbm.settle()
    assert len(pbm.replies_to(mid)) == 1


@pytest.mark.process  # the limit of the server's own process, read from /proc
def test_open_file_limit_is_raised_to_the_hard_limit(pbm_stopped):
    # start the server with a low soft limit (inherited from this process)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # low, but above what this test process holds open already (a long session holds hundreds)
    low = min(hard, max(256, len(os.listdir("/proc/self/fd")) + 128))
    if low == hard:
        pytest.skip("the hard limit leaves no room for a lower soft limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        pbm = pbm_stopped.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    limits = Path(f"/proc/{pbm.proc.pid}/limits")
    if not limits.exists():
        pytest.skip("no /proc")
    (line,) = [ln for ln in limits.read_text().splitlines() if ln.startswith("Max open files")]
    got_soft, got_hard = line.split()[3:5]
    assert got_soft == got_hard and got_soft != str(low)
