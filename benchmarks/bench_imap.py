"""Mails a second through the mailbox path (issue 43) against the SMTP path,
in the same run on the same machine: N mails ("games", each from a sender of
its own) reach an in-process `pbm serve` (one process, SQLite, the harness's
relay sink) either by IMAP APPEND into a real Dovecot the server reads
(running/mailbox.py, IDLE) or over one SMTP connection to its listener.
For each path: the seconds until every mail is stored in the inbox and until
every one is answered at the relay, from the moment the first mail is sent.
A third path, ``backlog``, has the N mails waiting in the mailbox before the
server starts (timed from the start): the reader's own pace, not Dovecot's
APPEND's.

    .venv/bin/python -m benchmarks.bench_imap [N]      (default 200; needs dovecot-imapd)
"""

from __future__ import annotations

import smtplib
import sys
import tempfile
import time
from pathlib import Path

from tests.harness import PbmServer
from tests.imap.conftest import MAILBOX, Players, mailbox_env
from tests.imap.dovecot import Dovecot, installed


def _wait(pbm: PbmServer, n: int, t0: float, timeout: float = 600) -> tuple[float, float]:
    """Seconds from ``t0`` until ``n`` mails are stored, and until ``n`` are answered."""
    stored = answered = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and answered is None:
        if stored is None and pbm.sql("SELECT count(*) FROM inbox")[0][0] >= n:
            stored = time.monotonic() - t0
        if stored is not None and pbm.sink.count() >= n:
            answered = time.monotonic() - t0
        time.sleep(0.005)
    if stored is None or answered is None:
        raise RuntimeError("the mails were not all handled in time")
    return stored, answered


def run_path(path: str, n: int, tmp: Path) -> tuple[float, float, float]:
    """(seconds to hand the mails over, to store them, to answer them) through ``path``."""
    box = Dovecot(tmp).start() if path != "smtp" else None
    pbm = PbmServer(tmp, extra_env={**mailbox_env(box), "PBM_IMAP_POLL_SECONDS": "30"} if box else None)
    try:
        mails = [pbm.build(f"p{i}@d{i % 50}.example", "pbm" if box is None else MAILBOX, "games", f"bench {i}")
                 for i in range(n)]
        if box is not None and path == "backlog":  # the mails wait in the mailbox before the server starts
            box.append(*(m.as_bytes() for m in mails))
            t0 = time.monotonic()
            pbm.start()
            return 0.0, *_wait(pbm, n, t0)
        pbm.start()
        players = Players(pbm, box) if box else None
        t0 = time.monotonic()
        if players is not None:
            players.box.append(*(m.as_bytes() for m in mails))
        else:
            with smtplib.SMTP("127.0.0.1", pbm.port, timeout=60) as smtp:
                for m in mails:
                    smtp.send_message(m)
        handed = time.monotonic() - t0
        stored, answered = _wait(pbm, n, t0)
        return handed, stored, answered
    finally:
        pbm.close()
        if box is not None:
            box.remove()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    if not installed():
        sys.exit("dovecot-imapd is not installed (.ci/dovecot-install)")
    print(f"{n} mails a path, one in-process `pbm serve` (SQLite) each, the same machine, one after the other")
    print(f"{'path':6} {'handed over s':>14} {'stored s':>9} {'stored/s':>9} {'answered s':>11} {'answered/s':>11}")
    for path in ("smtp", "imap", "backlog"):
        with tempfile.TemporaryDirectory() as tmp:
            handed, stored, answered = run_path(path, n, Path(tmp))
        print(f"{path:6} {handed:14.2f} {stored:9.2f} {n / stored:9.1f} {answered:11.2f} {n / answered:11.1f}")


if __name__ == "__main__":
    main()
