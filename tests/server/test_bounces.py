"""Bounces come back to a return path of our own (VERP) and are handled
(issue 16.7): the outbox row becomes `bounced`, the GM hears in a summary,
repeated bounces put the address on hold, mail from it lifts the hold.
Everything over SMTP to a real `pbm serve`; the DSNs are what an MTA sends
(RFC 3464), built with the email package."""

from __future__ import annotations

import re
import smtplib
import time
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.mime.text import MIMEText

import pytest

from tests.harness import PbmServer, wait_until

VERP = re.compile(r"^bounces\+(\d+)-([0-9a-f]{12})@pbm\.test$")


def dsn(original: EmailMessage, recipient: str, to: str = "", status: str = "5.1.1", action: str = "failed",
        diagnostic: str = "smtp; 550 5.1.1 <{rcpt}>: Recipient address rejected: User unknown") -> bytes:
    """A delivery status notification laid out as Postfix writes one (RFC 3464)."""
    headers = "".join(f"{k}: {v}\r\n" for k, v in original.items() if k in ("From", "To", "Subject", "Message-ID"))
    text = f"""From: MAILER-DAEMON@relay.example (Mail Delivery System)
To: {to or "postmaster"}
Subject: Undelivered Mail Returned to Sender
Auto-Submitted: auto-replied
Message-ID: <dsn.{time.monotonic_ns()}@relay.example>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/plain; charset=us-ascii

I'm sorry to have to inform you that your message could not
be delivered to {recipient}.

--BOUNDARY
Content-Type: message/delivery-status

Reporting-MTA: dns; relay.example
Arrival-Date: Mon, 23 Nov 2026 10:00:00 +0000

Final-Recipient: rfc822; {recipient}
Original-Recipient: rfc822;{recipient}
Action: {action}
Status: {status}
Remote-MTA: dns; mx.players.example
Diagnostic-Code: {diagnostic.format(rcpt=recipient)}

--BOUNDARY
Content-Type: text/rfc822-headers

{headers}
--BOUNDARY--
"""
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode()


def send_raw(pbm: PbmServer, mail_from: str, rcpt: str, raw: bytes) -> None:
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
        smtp.sendmail(mail_from, [rcpt], raw)


def bounce_reply(pbm: PbmServer, reply: EmailMessage, **kw) -> str:
    """Send back a DSN for ``reply`` to the return path it went out with; that path."""
    path = pbm.sink.return_path(reply["Message-ID"])
    send_raw(pbm, "", path, dsn(reply, str(reply["To"]), path, **kw))
    return path


def outbox_status(pbm: PbmServer, message_id: str) -> str:
    return pbm.sql("SELECT status FROM outbox WHERE message_id = :m", m=message_id)[0][0]


def test_every_mail_has_its_own_return_path_and_a_dsn_marks_it_bounced(pbm: PbmServer):
    first = pbm.mail("ann@players.example", "pbm", "help")
    second = pbm.mail("ann@players.example", "pbm", "games")
    paths = [pbm.sink.return_path(m["Message-ID"]) for m in (first, second)]
    assert all(VERP.match(p) for p in paths), paths
    assert paths[0] != paths[1]  # one per mail: the bounce names the mail
    assert first["Auto-Submitted"] == "auto-replied"

    bounce_reply(pbm, second)
    wait_until(lambda: outbox_status(pbm, second["Message-ID"]) == "bounced", what="the reply marked bounced")
    assert outbox_status(pbm, first["Message-ID"]) == "sent"
    gm = pbm.wait_for(pbm.gm_address, 1)
    pbm.settle()
    summary = pbm.flat(gm[0])
    assert "bounced" in gm[0]["Subject"] and "ann@players.example" in gm[0]["Subject"]
    assert "5.1.1" in summary and "User unknown" in summary
    assert len(pbm.inbox("ann@players.example")) == 2  # the bounce itself is never answered
    status, note = pbm.sql("SELECT status, note FROM inbox ORDER BY id DESC LIMIT 1")[0]
    assert status == "done" and "bounce for outbox" in note and "not answered" in note
    status_out = pbm.cli("mail", "status").stdout
    assert "bounced outbox" in status_out and "ann@players.example" in status_out


def test_a_forged_bounce_address_is_refused_at_rcpt(pbm: PbmServer):
    reply = pbm.mail("ann@players.example", "pbm", "help")
    path = pbm.sink.return_path(reply["Message-ID"])
    row_id, good = VERP.match(path).groups()
    forged = [f"bounces+{row_id}-{'0' * 12}@pbm.test", f"bounces+{int(row_id) + 1}-{good}@pbm.test",
              "bounces+ann@pbm.test"]
    for address in forged:
        with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
            with pytest.raises(smtplib.SMTPRecipientsRefused) as err:
                smtp.sendmail("", [address], dsn(reply, "ann@players.example"))
        code, text = err.value.recipients[address]
        assert code == 550 and b"Not a return path" in text
    pbm.settle()
    assert outbox_status(pbm, reply["Message-ID"]) == "sent"


def test_only_a_failure_counts(pbm: PbmServer):
    """A 'delayed' report and a vacation auto-reply to the return path change nothing."""
    reply = pbm.mail("ann@players.example", "pbm", "help")
    path = pbm.sink.return_path(reply["Message-ID"])
    send_raw(pbm, "", path, dsn(reply, "ann@players.example", status="4.4.1", action="delayed",
                                diagnostic="smtp; 421 try later"))
    vacation = pbm.build("ann@players.example", path, "I am away until Monday.", subject="Out of office",
                         headers={"Auto-Submitted": "auto-replied"})
    send_raw(pbm, "ann@players.example", path, vacation.as_bytes())
    pbm.settle()
    time.sleep(0.3)
    pbm.settle()
    assert outbox_status(pbm, reply["Message-ID"]) == "sent"
    notes = [n for (n,) in pbm.sql("SELECT note FROM inbox ORDER BY id")][-2:]
    assert "delayed" in notes[0] and "not an answer" not in notes[0]
    assert "not a bounce" in notes[1]
    assert pbm.sql("SELECT count(*) FROM bounces")[0][0] == 0
    assert pbm.inbox(pbm.gm_address) == [] and len(pbm.inbox("ann@players.example")) == 1


def test_an_mtas_own_bounce_format_with_a_null_sender_counts(pbm: PbmServer):
    reply = pbm.mail("ann@players.example", "pbm", "help")
    path = pbm.sink.return_path(reply["Message-ID"])
    plain = MIMEText("Your message to ann@players.example could not be delivered.\nUser unknown.\n")
    plain["From"] = "Mail Administrator <postmaster@old.example>"
    plain["Subject"] = "Mail System Error - Returned Mail"
    send_raw(pbm, "", path, plain.as_bytes())
    wait_until(lambda: outbox_status(pbm, reply["Message-ID"]) == "bounced", what="the reply marked bounced")
    assert "Returned Mail" in pbm.sql("SELECT diagnostic FROM bounces")[0][0]


def test_repeated_bounces_hold_the_address_until_it_writes_again(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    start = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)
    pbm.set_clock(start)
    pbm.start()
    ann = pbm.register("ann", "ann-secret-1", "ann@players.example")
    pbm.register("bob", "bob-secret-1")
    pbm.new_game("giveaway", "ring")
    pbm.mail(ann, "ring", "JOIN\n$$ann-secret-1$$")
    pbm.mail("bob@example.org", "ring", "JOIN\n$$bob-secret-1$$")
    replies = [pbm.mail(ann, "pbm", "games\n$$ann-secret-1$$", subject=f"try {i}") for i in range(3)]
    for i, reply in enumerate(replies):
        bounce_reply(pbm, reply)
        wait_until(lambda r=reply: outbox_status(pbm, r["Message-ID"]) == "bounced", what=f"bounce {i + 1} handled")
    pbm.settle()
    gm = pbm.inbox(pbm.gm_address)
    # one summary (the first bounce, at once), the others wait for the next; and the hold notice
    summaries = [m for m in gm if m["Subject"].endswith("bounced.")]
    holds = [m for m in gm if "is on hold" in m["Subject"]]
    assert len(summaries) == 1 and len(holds) == 1, [m["Subject"] for m in gm]
    hold = pbm.flat(holds[0])
    assert "ann <ann@players.example>" in hold and "ring" in hold and "pbm mail unhold ann@players.example" in hold
    assert pbm.sql("SELECT address FROM mail_holds") == [("ann@players.example",)]

    # while held, nothing is sent to ann: bob's mail makes a notice for the ring's players
    before = len(pbm.inbox(ann))
    pbm.run_turn("ring")
    held = pbm.sql("SELECT count(*) FROM outbox WHERE to_addr = :a AND status = 'held'", a=ann)[0][0]
    assert held >= 1
    assert len(pbm.inbox(ann)) == before
    assert len(pbm.inbox("bob@example.org")) > 2  # the others still get theirs
    assert "on hold ann@players.example" in pbm.cli("mail", "status").stdout

    # an hour later the idle worker sends the second summary: bounces 2 and 3
    pbm.set_clock(start + timedelta(hours=1, minutes=1))
    gm = pbm.wait_for(pbm.gm_address, len(gm) + 1, timeout=30)
    second = pbm.flat(gm[-1])
    assert "2 mails bounced" in second and "address on hold" in second

    # ann writes: the hold is lifted, her reply is sent and says so
    back = pbm.mail(ann, "pbm", "games\n$$ann-secret-1$$", subject="I am back")
    assert "you get the server's mail again" in pbm.flat(back)
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0
    assert pbm.sql("SELECT actor, action FROM audit_log WHERE action = 'unhold'") == [("system", "unhold")]


def test_pbm_mail_unhold_lifts_a_hold(pbm: PbmServer):
    replies = [pbm.mail("ann@players.example", "pbm", "help", subject=f"help {i}") for i in range(3)]
    for reply in replies:
        bounce_reply(pbm, reply)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 1, what="the hold")
    refused = pbm.cli("mail", "unhold", "bob@players.example", check=False)
    assert refused.returncode == 1 and "bob@players.example is not on hold" in refused.stderr
    out = pbm.cli("mail", "unhold", "Ann@Players.example").stdout
    assert "ann@players.example is no longer on hold" in out
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0
    assert pbm.sql("SELECT actor, action FROM audit_log WHERE action = 'unhold'") == [("cli", "unhold")]


def test_bounces_of_mail_to_the_gm_are_never_reported_to_the_gm(pbm: PbmServer):
    reply = pbm.mail("ann@players.example", "pbm", "help")
    bounce_reply(pbm, reply)
    summary = pbm.wait_for(pbm.gm_address, 1)[0]
    pbm.settle()
    path = pbm.sink.return_path(summary["Message-ID"])
    send_raw(pbm, "", path, dsn(summary, pbm.gm_address))
    wait_until(lambda: outbox_status(pbm, summary["Message-ID"]) == "bounced", what="the summary marked bounced")
    pbm.settle()
    time.sleep(0.3)
    pbm.settle()
    assert len(pbm.inbox(pbm.gm_address)) == 1
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0
