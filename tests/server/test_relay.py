"""The outbound relay as a submission service: STARTTLS, AUTH, a fully
qualified EHLO name, SMTPUTF8 (issue 16.8).  The relay is a real aiosmtpd
server with a certificate made for the test; `pbm serve` trusts it through
SSL_CERT_FILE, as an operator with a private CA would."""

from __future__ import annotations

import ssl
import threading
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.harness import PbmServer, free_port, wait_until

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

USER, PASSWORD = "pbm-relay", "s3cret-relay-pw"


def make_certificate(tmp: Path) -> tuple[Path, Path, Path]:
    """A test CA (trustme: no openssl binary needed) and the relay's
    certificate for localhost and 127.0.0.1 -> (cert, key, CA file)."""
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    cert, key, ca_file = tmp / "relay-cert.pem", tmp / "relay-key.pem", tmp / "relay-ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    return cert, key, ca_file


class SubmissionHandler:
    """Keeps each mail with what the session looked like; refuses, like
    Postfix's reject_non_fqdn_helo_hostname, a greeting name without a dot."""

    def __init__(self):
        self.lock = threading.Lock()
        self.got: list[dict] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if "." not in (session.host_name or ""):
            return f"504 5.5.2 <{session.host_name}>: Helo command rejected: need fully-qualified hostname"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.got.append({
                "ehlo": session.host_name,
                "tls": server.transport.get_extra_info("ssl_object") is not None,
                "user": session.auth_data.decode() if session.authenticated else None,
                "rcpts": list(envelope.rcpt_tos),
                "mail_options": list(envelope.mail_options),
                "msg": BytesParser(policy=policy.default).parsebytes(envelope.original_content or envelope.content),
            })
        return "250 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == USER.encode() and auth_data.password == PASSWORD.encode()
    return AuthResult(success=ok, handled=False, auth_data=auth_data.login if ok else None)


class SubmissionRelay:
    def __init__(self, tmp: Path, *, secure: bool = True, implicit_tls: bool = False):
        cert, key, ca_file = make_certificate(tmp)
        self.cert = cert
        self.ca_file = ca_file
        self.port = free_port()
        self.handler = SubmissionHandler()
        kwargs: dict = {"enable_SMTPUTF8": True}
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        if implicit_tls:  # port 465: TLS from the first byte, then AUTH
            kwargs.update(ssl_context=ctx, auth_required=True, auth_require_tls=False, authenticator=authenticator)
        elif secure:
            kwargs.update(tls_context=ctx, require_starttls=True, auth_required=True, auth_require_tls=True,
                          authenticator=authenticator)
        else:
            kwargs.update(auth_require_tls=False)
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port, server_hostname="relay.test",
                                     **kwargs)
        self.controller.start()

    def stop(self):
        self.controller.stop()


@pytest.fixture
def relay(tmp_path):
    r = SubmissionRelay(tmp_path)
    yield r
    r.stop()


def start_pbm(tmp: Path, relay: SubmissionRelay, **env: str) -> PbmServer:
    pw = tmp / "relay-password"
    pw.write_text(PASSWORD + "\n")
    pw.chmod(0o600)
    settings = {
        "PBM_RELAY": f"127.0.0.1:{relay.port}",
        "PBM_RELAY_TLS": "starttls",
        "PBM_RELAY_USER": USER,
        "PBM_RELAY_PASSWORD_FILE": str(pw),
        "SSL_CERT_FILE": str(relay.ca_file),  # the private CA of this relay
    }
    settings.update(env)
    # SSL_CERT_FILE is read by OpenSSL in the server's own process
    server = PbmServer(tmp, extra_env={k: v for k, v in settings.items() if v is not None}, process=True)
    server.start()
    return server


def test_a_starttls_and_auth_relay_gets_the_reply_from_the_domain_name(tmp_path, relay):
    pbm = start_pbm(tmp_path, relay)
    try:
        mid = pbm.send("alice@example.org", "pbm", "help")
        wait_until(lambda: relay.handler.got, timeout=30, what="the reply at the relay")
        got = relay.handler.got[0]
        assert got["msg"]["In-Reply-To"] == mid
        assert got["rcpts"] == ["alice@example.org"]
        assert got["ehlo"] == "pbm.test"  # PBM_DOMAIN, fully qualified
        assert got["tls"] and got["user"] == USER
        pbm.settle()
        assert pbm.sql("SELECT status FROM outbox") == [("sent",)]
        shown = pbm.cli("config", "show").stdout
        assert "relay_password_file = \"(hidden)\"" in shown
        assert PASSWORD not in shown
        pbm.stop()
        assert PASSWORD not in pbm.serve_log()
    finally:
        pbm.close()


def test_the_ehlo_name_setting_is_what_the_relay_sees(tmp_path, relay):
    pbm = start_pbm(tmp_path, relay, PBM_RELAY_EHLO_NAME="mail.example.org")
    try:
        pbm.send("bob@example.org", "pbm", "help")
        wait_until(lambda: relay.handler.got, timeout=30, what="the reply at the relay")
        assert relay.handler.got[0]["ehlo"] == "mail.example.org"
    finally:
        pbm.close()


def test_a_refused_password_is_retried_and_never_written_down(tmp_path, relay):
    pw = tmp_path / "wrong-password"
    pw.write_text("not-the-password\n")
    pbm = start_pbm(tmp_path, relay, PBM_RELAY_PASSWORD_FILE=str(pw))
    try:
        pbm.send("carol@example.org", "pbm", "help")
        wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE attempts >= 2")[0][0] == 1, timeout=30,
                   what="two attempts")
        status, error = pbm.sql("SELECT status, last_error FROM outbox")[0]
        assert status == "pending"  # the operator can still fix the password
        assert "refused AUTH" in error and "not-the-password" not in error
        assert relay.handler.got == []
        # the right password, read at the next connection: the reply goes out
        pw.write_text(PASSWORD + "\n")
        wait_until(lambda: relay.handler.got, timeout=30, what="the reply after the fix")
        pbm.stop()
        assert "not-the-password" not in pbm.serve_log()
    finally:
        pbm.close()


def test_a_non_ascii_address_goes_with_smtputf8(tmp_path):
    relay = SubmissionRelay(tmp_path, secure=False)
    pbm = start_pbm(tmp_path, relay, PBM_RELAY_TLS="none", PBM_RELAY_USER="", PBM_RELAY_PASSWORD_FILE="")
    try:
        msg = pbm.build("jörg@example.org", "pbm", "help")
        pbm.send_message(msg, mail_from="jorg@example.org")
        wait_until(lambda: relay.handler.got, timeout=30, what="the reply at the relay")
        got = relay.handler.got[0]
        assert got["rcpts"] == ["jörg@example.org"]
        assert "SMTPUTF8" in got["mail_options"]
    finally:
        pbm.close()
        relay.stop()


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # it is TLS: from the first byte
def test_a_relay_with_tls_from_the_start_gets_the_reply(tmp_path):
    relay = SubmissionRelay(tmp_path, implicit_tls=True)
    pbm = start_pbm(tmp_path, relay, PBM_RELAY_TLS="tls")
    try:
        pbm.send("dora@example.org", "pbm", "help")
        wait_until(lambda: relay.handler.got, timeout=30, what="the reply at the relay")
        got = relay.handler.got[0]
        assert got["tls"] and got["user"] == USER and got["ehlo"] == "pbm.test"
    finally:
        pbm.close()
        relay.stop()
