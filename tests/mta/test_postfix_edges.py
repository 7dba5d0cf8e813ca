"""Postfix as pbm's relay, at the edges (issue 27, items 2-4; item 1 is
tests/mta/test_postfix_recipients.py).

* The relay's certificate is not trusted (STARTTLS with a certificate of a CA
  pbm does not know): every reply waits, none is given up, the GM is told once
  (in the local Maildir: the relay is what fails); after the operator gives the
  relay a certificate pbm trusts, every reply is delivered, each once.
* The relay requires STARTTLS and pbm is set to plain SMTP: Postfix's "530
  Must issue a STARTTLS command first" is the relay's policy, not a verdict on
  the mail: every reply waits until the setting is fixed.
* A player's vacation program answers the server's replies with "Out of
  office" from the null sender, to the reply's return path: that is no bounce,
  so the player is never put on hold.

The Postfix instance and the server are those of tests/mta/test_postfix.py
(its fixtures and helpers, used from there); skipped without the postfix binary."""

from __future__ import annotations

import mailbox
import os
import shutil
import smtplib
from collections import Counter
from email.message import EmailMessage
from pathlib import Path

import pytest
import trustme

from tests.harness import wait_until
from tests.mta import test_postfix as mta

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

# the fixtures of test_postfix.py, used here by name
base = mta.base
smtp_path = mta.smtp_path

ANN = f"ann@{mta.PLAYERS}"
BOB = f"bob@{mta.PLAYERS}"


def write_chain(cert: trustme.LeafCert, path: Path) -> None:
    """The key and the certificate chain in one file, as smtpd_tls_chain_files takes them."""
    cert.private_key_and_cert_chain_pem.write_to_path(str(path))
    os.chmod(path, 0o644)  # smtpd reads it as the postfix user (a test key only)
    shutil.chown(path, "postfix")


def relay_with_tls(base: Path, level: str, trusted_cert: bool, relay_tls: str):
    """Postfix whose submission service offers STARTTLS (``level``: may, or
    encrypt: STARTTLS required) with a certificate from the CA pbm trusts
    (SSL_CERT_FILE) or from one it does not; pbm relays with
    PBM_RELAY_TLS=``relay_tls``.  `pbm serve` runs as a subprocess: OpenSSL
    reads SSL_CERT_FILE in the server's own process."""
    trusted, stranger = trustme.CA(), trustme.CA()
    ca_file = base / "trusted-ca.pem"
    trusted.cert_pem.write_to_path(str(ca_file))
    chain = base / "relay-chain.pem"
    write_chain((trusted if trusted_cert else stranger).issue_cert("127.0.0.1"), chain)
    options = (f"  -o smtpd_tls_security_level={level}\n  -o smtpd_tls_chain_files={chain}\n"
               "  -o smtpd_tls_loglevel=1\n")
    pbm, postfix = mta.start_both(base, "smtp", process=True, submit_options=options)
    pbm.env.update({"PBM_RELAY_TLS": relay_tls, "SSL_CERT_FILE": str(ca_file)})
    return pbm, postfix, trusted, chain


@pytest.fixture
def tls_relay(base):
    """A relay with a certificate pbm does not trust."""
    pbm, postfix, trusted, chain = relay_with_tls(base, "may", trusted_cert=False, relay_tls="starttls")
    with mta.running(pbm, postfix):
        yield pbm, postfix, trusted, chain


@pytest.fixture
def tls_required_relay(base):
    """A relay that requires STARTTLS, and pbm set to plain SMTP."""
    pbm, postfix, _, _ = relay_with_tls(base, "encrypt", trusted_cert=True, relay_tls="none")
    with mta.running(pbm, postfix) as both:
        yield both


@pytest.mark.process
def test_an_untrusted_relay_certificate_keeps_every_mail_until_it_is_fixed(tls_relay):
    pbm, postfix, trusted, chain = tls_relay
    sent = []
    for sender in (ANN, BOB, ANN):
        msg = mta.message(sender, f"pbm@{mta.DOMAIN}", "help")
        postfix.send(sender, f"pbm@{mta.DOMAIN}", msg)
        sent.append(msg["Message-ID"])
    wait_until(lambda: pbm.sql("SELECT count(*) FROM audit_log WHERE action = 'relay fails'")[0][0] == 1,
               timeout=60, what="the relay fault to be recorded; serve.log:\n" + pbm.serve_log()[-3000:])
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE kind LIKE 'reply%' AND attempts > 0")[0][0] == 3,
               timeout=60, what="each reply tried; inbox: " + repr(pbm.sql("SELECT status, note FROM inbox")))
    # nothing given up, nothing delivered: the replies wait
    statuses = pbm.sql("SELECT status FROM outbox WHERE kind LIKE 'reply%'")
    assert len(statuses) == 3 and {s for (s,) in statuses} == {"pending"}, statuses
    assert postfix.maildir("ann") == [] and postfix.maildir("bob") == []
    error = pbm.sql("SELECT detail FROM audit_log WHERE action = 'relay fails'")[0][0]
    assert "certificate" in error.lower(), error
    status = pbm.cli("mail", "status").stdout
    assert "FAILING NOW, mail is kept" in status and "certificate" in status.lower(), status
    # the GM is told once, without the relay: a notice in the local Maildir
    notices = list(mailbox.Maildir(pbm.tmp / "maildir", create=False))
    assert len(notices) == 1 and "the relay fails" in str(notices[0]["Subject"])
    # the operator gives the relay a certificate of the CA pbm trusts
    write_chain(trusted.issue_cert("127.0.0.1"), chain)
    assert postfix.run("reload").returncode == 0
    replies = postfix.wait_mail("ann", 2, timeout=90) + postfix.wait_mail("bob", 1, timeout=90)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE status != 'sent'")[0][0] == 0, timeout=60,
               what="every outbox row sent")
    # each reply delivered exactly once, each answering its own mail
    assert sorted(str(m["In-Reply-To"]) for m in replies) == sorted(sent)
    assert all(n == 1 for n in Counter(str(m["Message-ID"]) for m in replies).values())
    assert len(postfix.maildir("ann")) == 2 and len(postfix.maildir("bob")) == 1
    assert len(list(mailbox.Maildir(pbm.tmp / "maildir", create=False))) == 1  # told once only
    assert "FAILING" not in pbm.cli("mail", "status").stdout


def out_of_office(return_path: str) -> EmailMessage:
    """What a vacation program sends: from the player, to the envelope sender
    of the mail it answers, marked auto-replied."""
    msg = mta.message(ANN, return_path, "I am away until Monday and will read your mail then.",
                      subject="Out of office: pbm-server: help",
                      headers={"Auto-Submitted": "auto-replied", "Precedence": "bulk",
                               "X-Autoreply": "yes"})
    return msg


def test_a_vacation_auto_reply_through_postfix_is_no_bounce(smtp_path):
    pbm, postfix = smtp_path
    for _ in range(3):
        postfix.send(ANN, f"pbm@{mta.DOMAIN}", mta.message(ANN, f"pbm@{mta.DOMAIN}", "help"))
    paths = [str(reply["Return-Path"]).strip("<>") for reply in postfix.wait_mail("ann", 3)]
    assert len(set(paths)) == 3 and all(p.startswith("bounces+") for p in paths)
    # ann's vacation program answers each reply, from the null sender, through Postfix
    for path in paths:
        with smtplib.SMTP("127.0.0.1", postfix.mx, timeout=60) as smtp:
            assert smtp.sendmail("", [path], out_of_office(path).as_bytes()) == {}
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE mail_from IN ('', '<>')")[0][0] == 3, timeout=90,
               what="the three auto-replies stored; maillog: " + "\n".join(
                   ln for ln in postfix.log().splitlines() if "bounces+2" in ln or "reject" in ln))
    pbm.settle()
    # none counted as a bounce: no hold, no reply marked bounced, ann still gets her mail
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM bounces")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM outbox WHERE status = 'bounced'")[0][0] == 0
    notes = [n for (n,) in pbm.sql("SELECT note FROM inbox WHERE mail_from IN ('', '<>')")]
    assert all("bounce for outbox" not in (n or "") for n in notes), notes
    postfix.send(ANN, f"pbm@{mta.DOMAIN}", mta.message(ANN, f"pbm@{mta.DOMAIN}", "help"))
    assert len(postfix.wait_mail("ann", 4)) == 4
    assert "on hold" not in pbm.cli("mail", "status").stdout


@pytest.mark.process
def test_a_relay_that_requires_starttls_keeps_every_mail_until_the_setting_is_fixed(tls_required_relay):
    """Postfix answers "530 Must issue a STARTTLS command first": the relay's
    policy, not a verdict on the mail.  Every reply waits (none fails), the GM
    is told once in the Maildir; with PBM_RELAY_TLS=starttls and a restart,
    each goes out once."""
    pbm, postfix = tls_required_relay
    for sender in (ANN, BOB):
        postfix.send(sender, f"pbm@{mta.DOMAIN}", mta.message(sender, f"pbm@{mta.DOMAIN}", "help"))
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE kind LIKE 'reply%' AND attempts > 0")[0][0] == 2,
               timeout=60, what="each reply tried")
    assert {s for (s,) in pbm.sql("SELECT status FROM outbox")} == {"pending"}
    error = pbm.sql("SELECT detail FROM audit_log WHERE action = 'relay fails'")[0][0]
    assert "530" in error and "STARTTLS" in error, error
    assert len(list(mailbox.Maildir(pbm.tmp / "maildir", create=False))) == 1
    pbm.stop()
    pbm.env["PBM_RELAY_TLS"] = "starttls"
    pbm.start()
    replies = postfix.wait_mail("ann", 1, timeout=90) + postfix.wait_mail("bob", 1, timeout=90)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE status != 'sent'")[0][0] == 0, timeout=60,
               what="every outbox row sent")
    assert len(postfix.maildir("ann")) == 1 and len(postfix.maildir("bob")) == 1 and len(replies) == 2
    # and they went over TLS
    assert any("TLS connection established from" in ln for ln in postfix.log().splitlines())
