"""postmaster@DOMAIN exists (RFC 5321 4.5.1) and reaches the GM; abuse
reports (ARF, RFC 5965) are recorded and never answered (issue 16.9).
Everything over SMTP to a real `pbm serve`."""

from __future__ import annotations

import smtplib
import time
from email.message import EmailMessage
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

from tests.harness import PbmServer


def test_mail_to_postmaster_goes_to_the_gm_and_is_never_answered(pbm: PbmServer):
    mid = pbm.send("stranger@example.org", "postmaster", "Your server keeps mailing me.\nhelp\n", subject="complaint")
    gm_mail = pbm.wait_for(pbm.gm_address, 1)[0]
    pbm.settle()
    assert "postmaster@pbm.test" in gm_mail["Subject"] and "stranger@example.org" in gm_mail["Subject"]
    attached = [p for p in gm_mail.walk() if p.get_content_type() == "message/rfc822"]
    assert len(attached) == 1
    original = attached[0].get_payload()[0]
    assert original["Message-ID"] == mid and original["Subject"] == "complaint"
    assert "Your server keeps mailing me." in original.get_content()
    assert pbm.inbox("stranger@example.org") == []  # never answered, "help" not run
    status, note = pbm.sql("SELECT status, note FROM inbox")[0]
    assert status == "done" and "forwarded to the GM" in note and "not answered" in note


def test_postmaster_without_a_domain_and_in_capitals_is_accepted(pbm: PbmServer):
    msg = pbm.build("someone@example.org", "pbm", "a bounce question", subject="hello postmaster")
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
        refused = smtp.send_message(msg, from_addr="someone@example.org",
                                    to_addrs=["Postmaster", f"POSTMASTER@{pbm.domain.upper()}"])
    assert refused == {}
    pbm.wait_for(pbm.gm_address, 1)
    pbm.settle()
    assert pbm.inbox("someone@example.org") == []


def arf_report(to: str) -> EmailMessage | MIMEMultipart:
    report = MIMEMultipart("report", report_type="feedback-report")
    report["From"] = "Abuse Desk <abuse@isp.example>"
    report["To"] = to
    report["Subject"] = "FW: Abuse report"
    report["Message-ID"] = "<arf-1@isp.example>"
    report["Date"] = "Mon, 23 Nov 2026 10:00:00 +0000"
    report.attach(MIMEText("This is an email abuse report for an email message received from IP 192.0.2.1.\n"
                           "help\n"))
    fields = MIMEBase("message", "feedback-report")
    fields.set_payload("Feedback-Type: abuse\nUser-Agent: SomeGenerator/1.0\nVersion: 1\n"
                       "Original-Mail-From: <pbm@pbm.test>\nOriginal-Rcpt-To: <victim@isp.example>\n"
                       "Source-IP: 192.0.2.1\n")
    report.attach(fields)
    original = MIMEText("Hello victim,\nyour turn.\n")
    original["From"] = "pbm@pbm.test"
    original["Subject"] = "giveaway: turn 3"
    wrapped = MIMEBase("text", "rfc822-headers")
    wrapped.set_payload(f"From: pbm@pbm.test\nTo: victim@isp.example\nSubject: {original['Subject']}\n")
    report.attach(wrapped)
    return report


def test_an_abuse_report_is_recorded_and_never_answered(pbm: PbmServer):
    report = arf_report(f"pbm@{pbm.domain}")
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
        smtp.sendmail("abuse@isp.example", [f"pbm@{pbm.domain}"], report.as_bytes())
    pbm.settle()
    time.sleep(0.5)  # a reply would be in the outbox by now
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM outbox")[0][0] == 0
    status, note = pbm.sql("SELECT status, note FROM inbox")[0]
    assert status == "dropped" and "abuse report (ARF)" in note and "not answered" in note
    assert "feedback-type=abuse" in note and "original-rcpt-to=<victim@isp.example>" in note
    audit = pbm.sql("SELECT actor, action, detail FROM audit_log WHERE action = 'abuse report'")
    assert len(audit) == 1 and "source-ip=192.0.2.1" in audit[0][2] and "from=abuse@isp.example" in audit[0][2]


def test_an_abuse_report_to_postmaster_reaches_the_gm_with_its_summary(pbm: PbmServer):
    report = arf_report(f"postmaster@{pbm.domain}")
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
        smtp.sendmail("abuse@isp.example", [f"postmaster@{pbm.domain}"], report.as_bytes())
    gm_mail = pbm.wait_for(pbm.gm_address, 1)[0]
    pbm.settle()
    assert "feedback-type=abuse" in pbm.text(gm_mail)
    assert pbm.inbox("abuse@isp.example") == []
    assert len(pbm.sql("SELECT id FROM audit_log WHERE action = 'abuse report'")) == 1
