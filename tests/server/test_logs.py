"""One log line per mail in, per mail handled and per mail out (and per bounce
and hold), as text or as JSON lines (PBM_LOG_FORMAT=json)."""

from __future__ import annotations

import json
import smtplib

import pytest

from pbm_server.base.settings import SettingsError, load
from tests.harness import PbmServer, wait_until

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def lines_with(pbm: PbmServer, words: str) -> list[str]:
    return [ln for ln in pbm.serve_log().splitlines() if words in ln]


def test_every_mail_in_handled_and_out_is_a_log_line(pbm):
    pbm.mail("lou@example.org", "pbm", "help")
    pbm.settle()
    (stored,) = pbm.sql("SELECT id FROM inbox")
    (sent,) = pbm.sql("SELECT id FROM outbox")
    wait_until(lambda: lines_with(pbm, f"mail out: outbox {sent[0]} "), what="the delivery's log line")
    [mail_in] = lines_with(pbm, f"mail in: inbox {stored[0]} ")
    assert f"from lou@example.org to pbm@{pbm.domain}" in mail_in and " bytes, stored in " in mail_in
    [handled] = lines_with(pbm, f"mail {stored[0]} (CommandMail) from lou@example.org: done")
    assert " ms" in handled
    [out] = lines_with(pbm, f"mail out: outbox {sent[0]} ")
    assert "to lou@example.org (reply-unproven): sent" in out


def test_a_bounce_and_a_hold_are_log_lines(pbm):
    pbm.mail("gone@example.org", "pbm", "help")
    pbm.settle()
    # three bounces hold an address (bounces.py): one outbox row each
    for _ in range(2):
        pbm.mail("gone@example.org", "pbm", "help")
    pbm.settle()
    for outbox_id, to_addr in pbm.sql("SELECT id, to_addr FROM outbox WHERE to_addr = 'gone@example.org'"):
        path = pbm.sink.return_path(pbm.sql("SELECT message_id FROM outbox WHERE id = :i", i=outbox_id)[0][0])
        dsn = (f"From: MAILER-DAEMON@example.org\r\nTo: {path}\r\nSubject: Undelivered Mail Returned to Sender\r\n"
               "MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n"
               "--b\r\nContent-Type: text/plain\r\n\r\nThe mail could not be delivered.\r\n"
               "--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.org\r\n\r\n"
               f"Final-Recipient: rfc822; {to_addr}\r\nAction: failed\r\nStatus: 5.1.1\r\n"
               "Diagnostic-Code: smtp; 550 5.1.1 no such user\r\n--b--\r\n")
        with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
            smtp.sendmail("", [path], dsn.encode())
    pbm.settle()
    assert len(lines_with(pbm, "bounce: outbox ")) == 3
    assert lines_with(pbm, "hold: gone@example.org ("), pbm.serve_log()[-2000:]


@pytest.mark.process  # the log format of `pbm serve`'s own processes, as an operator's shipper reads it
def test_json_lines_carry_the_facts_of_each_mail(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_LOG_FORMAT"] = "json"
    pbm.start()
    pbm.mail("jo@example.org", "pbm", "help")
    pbm.settle()
    (inbox_id,) = pbm.sql("SELECT id FROM inbox")[0]
    (outbox_id,) = pbm.sql("SELECT id FROM outbox")[0]

    def events() -> list[dict]:
        found = []
        for line in pbm.serve_log().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    wait_until(lambda: any(e.get("event") == "mail out" for e in events()), what="the delivery's JSON line")
    pbm.stop()
    by_event = {e["event"]: e for e in events() if "event" in e}
    assert by_event["mail in"]["inbox"] == [inbox_id] and by_event["mail in"]["sender"] == "jo@example.org"
    assert by_event["mail handled"]["inbox"] == inbox_id and by_event["mail handled"]["result"] == "done"
    assert by_event["mail out"]["outbox"] == outbox_id and by_event["mail out"]["result"] == "sent"
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in events())


def test_an_unknown_log_format_is_one_clear_line():
    with pytest.raises(SettingsError) as err:
        load({"PBM_LOG_FORMAT": "xml"})
    assert err.value.problems == ["PBM_LOG_FORMAT: 'xml' is not accepted: expected text or json"]
