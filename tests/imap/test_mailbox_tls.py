"""The mailbox over TLS (issue 43): the certificate is verified against the
trust store, and SSL_CERT_FILE (a private CA) is honoured, as for the relay.
In the test's process: OpenSSL reads SSL_CERT_FILE from the environment each
time the server makes its TLS context, so monkeypatch's setenv reaches it."""

from __future__ import annotations

import pytest

from tests.harness import PbmServer, wait_until
from tests.imap.conftest import Players, mailbox_env
from tests.imap.dovecot import Dovecot, installed

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def test_the_certificate_is_verified_and_ssl_cert_file_honoured(tmp_path, monkeypatch):
    """imaps:// to a Dovecot whose certificate comes from a private CA: without
    SSL_CERT_FILE the server starts but reads nothing and says why (log,
    `pbm mail status`); with it the mailbox is read over TLS and a mail answered."""
    if not installed():
        pytest.skip("Debian's dovecot-imapd is not installed (.ci/dovecot-install)")
    box = Dovecot(tmp_path, tls=True).start()
    env = {**mailbox_env(box), "PBM_IMAP_URL": f"imaps://games@localhost:{box.tls_port}/INBOX"}
    pbm = PbmServer(tmp_path, extra_env=env)
    try:
        players = Players(pbm, box)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        pbm.start()
        first = players.send("ann@example.org", "pbm", "help", subject="help")
        wait_until(lambda: "FAILING" in pbm.cli("mail", "status").stdout, what="the mailbox failing")
        assert "certificate was not accepted" in pbm.serve_log()
        assert box.count("INBOX") == 1  # nothing read, nothing moved
        pbm.stop()
        assert box.ca_file is not None
        monkeypatch.setenv("SSL_CERT_FILE", str(box.ca_file))
        pbm.start()
        assert "help" in pbm.text(pbm.reply_to(first))
        assert box.count("pbm-done") == 1 and "FAILING" not in pbm.cli("mail", "status").stdout
    finally:
        pbm.close()
        box.remove()
