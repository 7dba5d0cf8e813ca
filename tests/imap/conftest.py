"""Fixtures of the mailbox tests: a real Dovecot (skipped without it) and a
server that reads its mailbox (running/mailbox.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.conftest import served
from tests.harness import PbmServer
from tests.imap.dovecot import Dovecot, installed

#: the mailbox's own address; the server's inner domain stays pbm.test
MAILBOX = "games@mail.test"


@pytest.fixture
def dovecot(tmp_path) -> Iterator[Dovecot]:
    if not installed():
        pytest.skip("Debian's dovecot-imapd is not installed (.ci/dovecot-install)")
    box = Dovecot(tmp_path).start()
    try:
        yield box
    finally:
        box.remove()


def mailbox_env(box: Dovecot, **extra: str) -> dict[str, str]:
    return {"PBM_IMAP_URL": box.url, "PBM_IMAP_PASSWORD_FILE": str(box.password_file),
            "PBM_MAILBOX_ADDRESS": MAILBOX, "PBM_IMAP_POLL_SECONDS": "5", **extra}


@pytest.fixture
def pbm_mailbox_stopped(tmp_path, request, dovecot) -> Iterator[PbmServer]:
    with served(tmp_path, request, start=False, extra_env=mailbox_env(dovecot)) as server:
        yield server


@pytest.fixture
def pbm_mailbox(pbm_mailbox_stopped) -> PbmServer:
    return pbm_mailbox_stopped.start()


class Players:
    """Players mailing the server's mailbox: each mail is put in with IMAP
    APPEND (as the provider's delivery would), the replies come out through
    the relay (the harness's sink)."""

    def __init__(self, pbm: PbmServer, box: Dovecot):
        self.pbm = pbm
        self.box = box

    @staticmethod
    def address(to: str) -> str:
        """``pbm`` -> the mailbox's address, NAME -> its plus address, an address as it is."""
        if "@" in to:
            return to
        local, _, domain = MAILBOX.partition("@")
        return MAILBOX if to == "pbm" else f"{local}+{to}@{domain}"

    def build(self, frm: str, to: str, body: str, subject: str = "orders", headers: dict | None = None):
        msg = self.pbm.build(frm, self.address(to), body, subject, headers)
        self.pbm.secrets.update(p for p in re.findall(r"\$\$(.+?)\$\$", body) if len(p) >= 6)
        return msg

    def send(self, frm: str, to: str, body: str, subject: str = "orders", headers: dict | None = None) -> str:
        msg = self.build(frm, to, body, subject, headers)
        self.box.append(msg.as_bytes())
        return str(msg["Message-ID"])

    def mail(self, frm: str, to: str, body: str, subject: str = "orders", timeout: float = 30):
        return self.pbm.reply_to(self.send(frm, to, body, subject), timeout)

    def register(self, handle: str, password: str) -> str:
        email = f"{handle}@example.org"
        self.pbm.secrets.add(password)
        reply = self.mail(email, "pbm", f"register {handle} {password}", subject="register")
        confirmed = self.mail(email, "pbm", f"confirm {self.pbm.code_in(reply)}", subject="confirm")
        assert "registered as" in self.pbm.text(confirmed), self.pbm.text(confirmed)
        return email


@pytest.fixture
def players(pbm_mailbox, dovecot) -> Players:
    return Players(pbm_mailbox, dovecot)
