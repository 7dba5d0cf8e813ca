"""A mailbox that cannot be used as set stops `pbm serve` at its start with
one line and exit code 2 (issue 43): a wrong password, and plain imap://
to a host that is not this machine's loopback when it offers no STARTTLS.
(Plain imap:// to loopback is what every other test of tests/imap uses.)"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

from tests.harness import _sqlite_template, free_port
from tests.imap.conftest import mailbox_env
from tests.imap.dovecot import Dovecot

# subprocesses of their own, on a SQLite file of their own whatever the pass (the start is refused
# before the database matters): the SQLite pass runs them
pytestmark = [pytest.mark.process, pytest.mark.nodb]


def serve(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    """`pbm serve` on a SQLite file of its own, migrated (a copy of the session's template)."""
    if not (tmp_path / "pbm.db").exists():
        shutil.copyfile(_sqlite_template(), tmp_path / "pbm.db")
    base = dict(os.environ, PBM_DATABASE_URL=f"sqlite:///{tmp_path}/pbm.db", PBM_LISTEN=f"127.0.0.1:{free_port()}",
                PBM_HTTP_LISTEN=f"127.0.0.1:{free_port()}", PBM_MAILDIR=str(tmp_path / "maildir"))
    return subprocess.run([sys.executable, "-m", "pbm_server.running.cli", "serve"], env={**base, **env},
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _own_address() -> str | None:
    """An address of this machine that is not loopback (the one its default route leaves from)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            address = str(s.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_a_wrong_password_or_plain_imap_beyond_loopback_stop_serve_with_one_line(tmp_path, dovecot: Dovecot):
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n")
    done = serve(tmp_path, **{**mailbox_env(dovecot), "PBM_IMAP_PASSWORD_FILE": str(wrong)})
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "refused the login of 'games'" in lines[0] and "PBM_IMAP_PASSWORD_FILE" in lines[0]
    assert "not-the-password" not in done.stderr + done.stdout

    address = _own_address()
    if address is None:
        pytest.skip("no address of this machine that is not loopback")
    (tmp_path / "lan").mkdir()
    box = Dovecot(tmp_path / "lan", address=address).start()  # ssl = no: it offers no STARTTLS
    try:
        done = serve(tmp_path, **mailbox_env(box))
    finally:
        box.remove()
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "offers no STARTTLS" in lines[0] and "imaps://" in lines[0], done.stderr

