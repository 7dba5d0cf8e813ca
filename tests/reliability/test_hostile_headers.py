"""Hostile headers and malformed passwords (issue 14, items 6 and 9).

* A Subject or Message-ID holding a line break (NEL from a mislabelled
  cp1252 "...", U+2028, CR/LF in an RFC 2047 word) is answered; the reply's
  headers are built only from cleaned values.
* Mail that breaks the worker is shunted, and the GM hears about it at most
  once per hour, in one summary.
* Nothing between $$ marks, closed or not, is echoed; lines after the 300th
  are not read, and the reply says so."""

from __future__ import annotations

import base64
import smtplib
import time
from datetime import datetime, timedelta, timezone

import pytest

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

PW = "alice-secret-1"


def raw_mail(frm: str, to: str, subject: bytes, message_id: bytes, body: str = "help") -> bytes:
    return (
        b"From: " + frm.encode() + b"\r\nTo: " + to.encode() + b"\r\nSubject: " + subject
        + b"\r\nMessage-ID: " + message_id + b"\r\nDate: Mon, 4 May 2026 10:00:00 +0000\r\n"
        + b"Content-Type: text/plain; charset=utf-8\r\n\r\n" + body.encode() + b"\r\n"
    )


def send_raw(pbm, frm: str, raw: bytes) -> None:
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
        smtp.sendmail(frm, [f"pbm@{pbm.domain}"], raw)


def test_line_breaks_in_subject_and_message_id_are_answered(pbm):
    cases = {
        # cp1252 "..." (0x85) in a word that says ISO-8859-1: NEL
        "nel@example.org": (b"=?iso-8859-1?q?help_me=85_please?=", b"<nel-1@example.org>"),
        "ls@example.org": (b"=?utf-8?b?" + base64.b64encode("help\u2028me".encode()) + b"?=", b"<ls-1@example.org>"),
        "crlf@example.org": (b"=?utf-8?q?help=0D=0ABcc:_victim@example.net?=", b"<crlf-1@example.org>"),
        "mid@example.org": (b"help", b"=?utf-8?q?<mid-1=0A@example.org>?="),
    }
    for frm, (subject, mid) in cases.items():
        send_raw(pbm, frm, raw_mail(frm, f"pbm@{pbm.domain}", subject, mid))
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status <> 'done'")[0][0] == 0
    for frm in cases:
        (reply,) = pbm.inbox(frm)
        for name in ("Subject", "In-Reply-To", "References"):
            value = str(reply.get(name) or "")
            assert not any(ch in value for ch in "\r\n\x85\u2028\u2029"), (frm, name, value)
        assert reply["Subject"].startswith("pbm-server: ")  # the server's words, never the sender's
        assert "Bcc" not in reply and "victim" not in str(reply.get("To"))
    assert "victim" not in str(pbm.inbox("crlf@example.org")[0]["Subject"])
    assert pbm.inbox("nel@example.org")[0]["In-Reply-To"] == "<nel-1@example.org>"
    assert pbm.inbox("mid@example.org")[0]["In-Reply-To"] == "<mid-1@example.org>"
    assert pbm.inbox("gm@example.org") == []


def test_gm_hears_of_shunted_mail_at_most_once_an_hour(pbm_stopped):
    pbm = pbm_stopped
    start = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)
    pbm.set_clock(start)
    pbm.env["PBM_FAILPOINT"] = "break-the-worker"
    pbm.start()
    for i in range(6):
        pbm.send(f"sender{i}@example.org", "pbm", "help", subject="break-the-worker")
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'shunted'")[0][0] == 6
    time.sleep(1)  # the idle worker has looked for a due summary several times
    (first,) = pbm.inbox("gm@example.org")
    assert "could not be processed and was set aside" in pbm.flat(first)
    # an hour later the idle worker sends one summary of the other five
    pbm.set_clock(start + timedelta(minutes=61))
    second = pbm.wait_for("gm@example.org", 2)[1]
    text = pbm.flat(second)
    assert "5 mails could not be processed and were set aside" in text
    for i in range(1, 6):
        assert f"sender{i}@example.org" in text
    time.sleep(6)  # and nothing more while nothing new is shunted
    assert len(pbm.inbox("gm@example.org")) == 2


def test_malformed_password_forms_are_never_echoed(pbm):
    alice = pbm.register("alice", PW)
    pbm.new_game("giveaway", "gift")
    forms = [
        "$$alice-secret-1\n$$\nJOIN",            # wrapped: closing marks on the next line
        "$$alice-sec\nret-1$$\nJOIN",            # wrapped in the middle
        "$$alice-secret-1\nJOIN",                # no closing marks
        "JOIN $$alice-secret-1",                 # no closing marks after a command
        "alice-secret-1$$\nJOIN",                # no opening marks
        "$$alice-secret-1$\nJOIN",               # one closing $ short
    ]
    for body in forms:
        reply = pbm.mail(alice, "gift", body)
        text = pbm.text(reply) + str(reply["Subject"])
        for fragment in ("alice-secret-1", "alice-sec", "ret-1$$", "secret-1"):
            assert fragment not in text, (body, text)
        assert "has password marks without a partner and was not read" in pbm.flat(reply)
    # spaces inside the marks are no part of a password: this one is accepted
    assert "accepted" in pbm.flat(pbm.mail(alice, "gift", "$$ alice-secret-1 $$\nJOIN"))
    # nor is a stray $$ in the Subject repeated in the reply's Subject
    reply = pbm.mail(alice, "gift", "JOIN", subject="orders $$alice-secret-1")
    assert "alice-secret-1" not in str(reply["Subject"])


def test_lines_after_300_are_not_read_and_the_reply_says_so(pbm):
    body = "\n".join(["games"] * 310)
    reply = pbm.flat(pbm.mail("lots@example.org", "pbm", body))
    assert "lines after line 300 were not read" in reply
    short = pbm.flat(pbm.mail("few@example.org", "pbm", "\n".join(["games"] * 300)))
    assert "were not read" not in short
