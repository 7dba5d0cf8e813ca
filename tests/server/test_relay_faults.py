"""When the relay itself fails -- an untrusted certificate, its policy on our
session (530 to MAIL FROM, 504 to EHLO) -- every mail waits, none is given
up, the GM is told once without the relay, and each mail goes out exactly
once when the relay works again.  A relay's verdict on one recipient still
fails that mail, and `pbm mail retry --outbox` queues failed mails again
(issue 27, items 2, 3 and 6)."""

from __future__ import annotations

import mailbox
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest
import trustme
from aiosmtpd.controller import Controller

from tests.harness import PbmServer, SinkHandler, wait_until
from tests.server.test_relay import SubmissionRelay, start_pbm

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

STARTTLS_FIRST = "530 5.7.0 Must issue a STARTTLS command first"
NOT_FQDN = "504 5.5.2 <pbm.test>: Helo command rejected: need fully-qualified hostname"


class PolicySink(SinkHandler):
    """The harness's relay, with the answers of a relay's policy: to EHLO
    (and HELO), to MAIL FROM, and to RCPT TO for some addresses."""

    def __init__(self) -> None:
        super().__init__()
        self.ehlo_answer: str | None = None
        self.mail_answer: str | None = None
        self.rcpt_answers: dict[str, str] = {}

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        if self.ehlo_answer:
            return [self.ehlo_answer]
        session.host_name = hostname
        return responses

    async def handle_HELO(self, server, session, envelope, hostname):
        if self.ehlo_answer:
            return self.ehlo_answer
        session.host_name = hostname
        return "250 relay.test"

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if self.mail_answer:
            return self.mail_answer
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        answer = self.rcpt_answers.get(address.lower())
        if answer:
            return answer
        envelope.rcpt_tos.append(address)
        return "250 OK"


@pytest.fixture
def pbm_policy(tmp_path):
    """A server (not started) whose relay is a PolicySink; the retry period
    is one second, so a mail given up for the relay's fault would be failed
    long before the test looks."""
    server = PbmServer(tmp_path, extra_env={"PBM_RETRY_PERIOD_SECONDS": "1"})
    server.sink.stop()
    server.sink.handler = PolicySink()
    server.sink.start()
    try:
        yield server
    finally:
        server.close()


def notices(tmp: Path) -> list:
    """The GM's notices about the relay in the local Maildir (PBM_MAILDIR)."""
    box = tmp / "maildir"
    if not box.exists():
        return []
    parser = BytesParser(policy=policy.default)
    found = [parser.parsebytes(m.as_bytes()) for m in mailbox.Maildir(box, create=False)]
    return [m for m in found if m["Subject"] == "pbm-server: the relay fails"]


def send_mix(pbm: PbmServer, tag: str) -> list[str]:
    """Replies to two players and the GM's own mail (a forwarded postmaster
    mail): (Message-IDs of the mails sent in)."""
    return [pbm.send(f"{tag}1@example.org", "pbm", "help"), pbm.send(f"{tag}2@example.org", "pbm", "games"),
            pbm.send(f"{tag}3@example.org", "postmaster", "hello postmaster")]


def every_row_tried(pbm: PbmServer, times: int, rows: int) -> None:
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE attempts >= :n", n=times)[0][0] >= rows,
               timeout=60, what=f"{rows} outbox rows tried {times} times")


def assert_all_waiting(pbm: PbmServer, rows: int, words: str) -> None:
    got = pbm.sql("SELECT status, last_error FROM outbox")
    assert len(got) == rows
    assert {status for status, _ in got} == {"pending"}, got  # none given up
    assert all(words in (error or "") for _, error in got), got


def outage(pbm: PbmServer, tag: str, tries: int, words: str) -> list[str]:
    """Start the server, send the mix in and wait until each row was tried
    ``tries`` times: all still waiting, each with ``words`` in its error."""
    pbm.start()
    sent = send_mix(pbm, tag)
    every_row_tried(pbm, tries, 3)
    assert_all_waiting(pbm, 3, words)
    return sent


def assert_each_delivered_once(pbm: PbmServer, rows: int) -> None:
    pbm.settle(timeout=60)
    got = pbm.all_sent()
    ids = [m["Message-ID"] for m in got]
    assert len(ids) == len(set(ids)) == rows, "a mail was lost or sent twice"
    assert pbm.sql("SELECT status, count(*) FROM outbox GROUP BY status") == [("sent", rows)]


def test_a_relay_answering_530_to_mail_from_keeps_every_mail_and_tells_the_gm_once(pbm_policy, tmp_path):
    pbm = pbm_policy
    pbm.sink.handler.mail_answer = STARTTLS_FIRST
    outage(pbm, "early", 3, STARTTLS_FIRST)
    assert pbm.all_sent() == []
    [told] = notices(tmp_path)
    assert told["To"] == "gm@example.org"
    assert STARTTLS_FIRST in pbm.flat(told) and "none is lost" in pbm.flat(told)
    assert pbm.serve_log().count(f"ERROR pbm_server.mail.outbound: the relay 127.0.0.1:{pbm.sink.port} fails") == 1
    # the relay is fixed: each mail goes out once
    pbm.sink.handler.mail_answer = None
    assert_each_delivered_once(pbm, 3)
    assert len(notices(tmp_path)) == 1
    # a new outage after mail went out is told again
    pbm.sink.handler.mail_answer = STARTTLS_FIRST
    pbm.send("late@example.org", "pbm", "help")
    wait_until(lambda: len(notices(tmp_path)) == 2, timeout=30, what="the notice of the second outage")


def test_a_relay_answering_504_to_ehlo_keeps_every_mail_across_a_restart(pbm_policy, tmp_path):
    pbm = pbm_policy
    pbm.sink.handler.ehlo_answer = NOT_FQDN
    outage(pbm, "ehlo", 2, "refused our greeting (EHLO) with " + NOT_FQDN)
    assert "PBM_RELAY_EHLO_NAME" in pbm.sql("SELECT last_error FROM outbox")[0][0]
    # a restart during the outage does not tell the GM again
    pbm.stop()
    pbm.start()
    every_row_tried(pbm, 4, 3)
    assert_all_waiting(pbm, 3, NOT_FQDN)
    assert len(notices(tmp_path)) == 1
    pbm.sink.handler.ehlo_answer = None
    assert_each_delivered_once(pbm, 3)


def test_a_relay_answering_530_to_a_recipient_is_the_relay_not_the_player(pbm_policy, tmp_path):
    """Postfix checks its restrictions at RCPT TO (smtpd_delay_reject): a
    policy answer there is about our session, not about the player."""
    pbm = pbm_policy
    pbm.sink.handler.rcpt_answers["pat@example.org"] = STARTTLS_FIRST
    pbm.start()
    pbm.send("pat@example.org", "pbm", "help")
    every_row_tried(pbm, 2, 1)
    assert_all_waiting(pbm, 1, STARTTLS_FIRST)
    assert len(notices(tmp_path)) == 1
    del pbm.sink.handler.rcpt_answers["pat@example.org"]
    assert_each_delivered_once(pbm, 1)


def test_an_untrusted_relay_certificate_keeps_the_mail_in_process(tmp_path):
    """The same fault without SSL_CERT_FILE: the relay's CA is simply not
    one this machine trusts (the server in the test process)."""
    relay = SubmissionRelay(tmp_path)
    pw = tmp_path / "relay-password"
    pw.write_text("s3cret-relay-pw\n")
    pbm = PbmServer(tmp_path, extra_env={
        "PBM_RELAY": f"127.0.0.1:{relay.port}", "PBM_RELAY_TLS": "starttls", "PBM_RELAY_USER": "pbm-relay",
        "PBM_RELAY_PASSWORD_FILE": str(pw), "PBM_RETRY_PERIOD_SECONDS": "1"})
    try:
        outage(pbm, "cert", 2, "its TLS certificate was not accepted")
        assert "SSL_CERT_FILE" in pbm.sql("SELECT last_error FROM outbox")[0][0]
        assert relay.handler.got == []
        assert len(notices(tmp_path)) == 1
    finally:
        pbm.close()
        relay.stop()


@pytest.mark.process  # SSL_CERT_FILE is read by OpenSSL in the server's own process
def test_an_untrusted_relay_certificate_keeps_every_mail_until_it_is_trusted(tmp_path):
    relay = SubmissionRelay(tmp_path)  # STARTTLS and AUTH, with a certificate of its own test CA
    trusted = tmp_path / "trusted.pem"
    other_ca = trustme.CA().cert_pem.bytes()
    trusted.write_bytes(other_ca)  # the server trusts some CA, not the relay's
    pbm = start_pbm(tmp_path, relay, SSL_CERT_FILE=str(trusted), PBM_RETRY_PERIOD_SECONDS="1")
    try:
        sent = send_mix(pbm, "tls")
        every_row_tried(pbm, 2, 3)
        assert_all_waiting(pbm, 3, "its TLS certificate was not accepted")
        assert relay.handler.got == []
        assert len(notices(tmp_path)) == 1
        # the operator trusts the relay's CA: read at the next connection
        trusted.write_bytes(relay.ca_file.read_bytes())
        wait_until(lambda: len(relay.handler.got) >= 3, timeout=60, what="the kept mails at the relay")
        pbm.settle(timeout=60)
        got = relay.handler.got
        assert len({g["msg"]["Message-ID"] for g in got}) == len(got) == 3
        assert sorted(str(g["msg"]["In-Reply-To"]) for g in got if g["msg"]["In-Reply-To"]) == sorted(sent[:2])
        assert all(g["tls"] for g in got)
        assert pbm.sql("SELECT status, count(*) FROM outbox GROUP BY status") == [("sent", 3)]
        assert len(notices(tmp_path)) == 1
    finally:
        pbm.close()
        relay.stop()


def test_a_recipient_refused_with_550_fails_that_mail_only(pbm_policy, tmp_path):
    pbm = pbm_policy
    pbm.sink.handler.rcpt_answers["nobody@example.org"] = "550 5.1.1 <nobody@example.org>: Recipient address rejected"
    pbm.start()
    pbm.send("nobody@example.org", "pbm", "help")
    pbm.mail("somebody@example.org", "pbm", "help")
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE status = 'failed'")[0][0] == 1)
    [(error,)] = pbm.sql("SELECT last_error FROM outbox WHERE status = 'failed'")
    assert "refused the recipient: 550 5.1.1" in error
    assert notices(tmp_path) == []  # the relay works: nothing to tell about it


def test_failed_outbox_mails_are_queued_again_by_id_address_or_all(pbm_policy):
    pbm = pbm_policy
    refused = ["ann@example.org", "ben@example.org", "cat@example.org"]
    for addr in refused:
        pbm.sink.handler.rcpt_answers[addr] = f"550 5.1.1 <{addr}>: Recipient address rejected"
    pbm.start()
    for addr in refused:
        pbm.send(addr, "pbm", "help")
    failed = "SELECT id, to_addr FROM outbox WHERE status = 'failed' AND kind LIKE 'reply%' ORDER BY id"
    wait_until(lambda: len(pbm.sql(failed)) == 3, what="three failed replies")
    ids = {addr: row_id for row_id, addr in pbm.sql(failed)}
    pbm.sink.handler.rcpt_answers.clear()  # the addresses work now
    pbm.wait_for("gm@example.org", 3)  # told of each failed reply
    sent_id = pbm.sql("SELECT id FROM outbox WHERE status = 'sent'")[0][0]
    refusal = pbm.cli("mail", "retry", "--outbox", str(sent_id), check=False)
    assert refusal.returncode == 1 and f"outbox {sent_id} is not a failed mail (it is sent)" in refusal.stderr
    out = pbm.cli("mail", "retry", "--outbox", str(ids["ann@example.org"])).stdout
    assert out.strip() == f"1 failed outbox mail queued again: {ids['ann@example.org']}"
    assert len(pbm.wait_for("ann@example.org", 1)) == 1
    out = pbm.cli("mail", "retry", "--outbox", "--address", "BEN@example.org").stdout
    assert out.startswith("1 failed outbox mail queued again")
    assert len(pbm.wait_for("ben@example.org", 1)) == 1
    out = pbm.cli("mail", "retry", "--all-failed").stdout
    assert out.startswith(f"1 failed outbox mail queued again: {ids['cat@example.org']}")
    pbm.settle()
    assert pbm.sql("SELECT attempts, status FROM outbox WHERE id IN (:a, :b, :c)", a=ids["ann@example.org"],
                   b=ids["ben@example.org"], c=ids["cat@example.org"]) == [(1, "sent")] * 3
    assert [len(pbm.inbox(a)) for a in refused] == [1, 1, 1]
    nothing = pbm.cli("mail", "retry", "--outbox", "--all-failed", check=False)
    assert nothing.returncode == 1 and "no failed outbox mail: nothing queued" in nothing.stderr
    both = pbm.cli("mail", "retry", "--outbox", "3", "--all-failed", check=False)
    assert both.returncode == 2 and "--outbox takes one of" in both.stderr
    inbox = pbm.cli("mail", "retry", "999", check=False)  # the inbox form is as it was
    assert inbox.returncode == 1 and "inbox 999 is not a shunted mail" in inbox.stderr


def test_a_non_ascii_address_is_written_as_it_is_and_sent_with_smtputf8(tmp_path):
    relay = SubmissionRelay(tmp_path, secure=False)  # offers SMTPUTF8
    pbm = PbmServer(tmp_path, extra_env={"PBM_RELAY": f"127.0.0.1:{relay.port}"})
    try:
        pbm.start()
        pbm.send_message(pbm.build("jürgen@example.org", "pbm", "help"), mail_from="jurgen@example.org")
        wait_until(lambda: relay.handler.got, timeout=30, what="the reply at the relay")
        got = relay.handler.got[0]
        assert got["rcpts"] == ["jürgen@example.org"] and "SMTPUTF8" in got["mail_options"]
        # the To: field as it came over the wire: UTF-8 (RFC 6532), never =?utf-8?q?j=C3=BCrgen?=@...
        raw_to = dict(got["msg"].raw_items())["To"].encode("utf-8", "surrogateescape")
        assert raw_to.strip() == "jürgen@example.org".encode()
    finally:
        pbm.close()
        relay.stop()


def test_a_non_ascii_address_is_refused_clearly_by_a_relay_without_smtputf8(pbm_policy):
    pbm = pbm_policy
    pbm.sink.stop()
    pbm.sink.controller = Controller(pbm.sink.handler, hostname="127.0.0.1", port=pbm.sink.port, enable_SMTPUTF8=False)
    pbm.sink.controller.start()
    pbm.start()
    pbm.send_message(pbm.build("jürgen@example.org", "pbm", "help"), mail_from="jurgen@example.org")
    wait_until(lambda: pbm.sql("SELECT status FROM outbox WHERE to_addr = 'jürgen@example.org'") == [("failed",)])
    [(error,)] = pbm.sql("SELECT last_error FROM outbox WHERE to_addr = 'jürgen@example.org'")
    assert "jürgen@example.org has characters outside ASCII" in error
    assert "does not offer SMTPUTF8" in error


@pytest.mark.parametrize("name", ["mailhost", "10.0.0.7"])
def test_a_bare_ehlo_name_is_refused_by_the_settings_check(pbm_stopped, name):
    """A relay that checks answers 504 to EHLO mailhost; the check says so
    before the server starts (one line, naming the setting)."""
    pbm_stopped.env["PBM_RELAY_EHLO_NAME"] = name
    shown = pbm_stopped.cli("config", "show", check=False)
    assert shown.returncode == 2
    assert shown.stderr.strip().splitlines() == [
        f"pbm: PBM_RELAY_EHLO_NAME: {name!r} is not accepted: expected a fully qualified host name with a dot, "
        "such as mail.example.org: a relay that checks answers 504 to a bare host name or IP address in EHLO, "
        "and no mail goes out"]
    pbm_stopped.env["PBM_RELAY_EHLO_NAME"] = "mail.example.org"
    assert pbm_stopped.cli("config", "show").returncode == 0
