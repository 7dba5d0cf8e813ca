"""The listener: who is refused at RCPT, size limits, odd mail, mail inject."""

import smtplib
from email.message import EmailMessage

import pytest


def test_unknown_addresses_are_refused_at_rcpt(pbm):
    for rcpt in ("nosuchgame@pbm.test", "someone@elsewhere.example", "pbm@pbm.test.evil.example"):
        with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
            smtp.ehlo()
            smtp.mail("a@example.org")
            code, message = smtp.rcpt(rcpt)
            assert code == 550, (rcpt, code, message)
    pbm.new_game("giveaway", "ring")
    with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
        smtp.ehlo()
        smtp.mail("a@example.org")
        assert smtp.rcpt("RING@pbm.test")[0] == 250
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == 0


def test_oversized_mail_gets_552_and_is_not_stored(pbm):
    msg = pbm.build("a@example.org", "pbm", "help\n" + ("x" * 75 + "\n") * 15000)
    with pytest.raises(smtplib.SMTPException) as info:
        pbm.send_message(msg)
    assert "552" in str(info.value)
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == 0


def test_html_only_mail_is_read_as_text(pbm):
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "hana@example.org", "pbm@pbm.test", "hi"
    msg["Message-ID"] = "<html-1@example.org>"
    msg.set_content("<html><body><p><b>register</b> hana petals-42</p><div>help</div></body></html>", subtype="html")
    pbm.send_message(msg)
    reply = pbm.wait_for("hana@example.org", 1)[0]
    text = pbm.flat(reply)
    assert "almost done" in text
    assert "registered as hana" in pbm.flat(pbm.confirm("hana@example.org", reply))
    assert "Commands to pbm@pbm.test" in text
    assert "no plain-text part" in text
    pbm.secrets.add("petals-42")


@pytest.mark.parametrize(
    "charset, body",
    [
        ("iso-8859-7", "register zeta Ζήτα-κωδικός\n".encode("iso-8859-7")),
        ("x-unknown-charset", "register zeta secret-Ωmega\n".encode("utf-8")),
        (None, "register zeta caf\xe9-secret\n".encode("cp1252")),
    ],
)
def test_oddly_encoded_mail_is_answered(pbm, charset, body):
    ctype = f'text/plain; charset="{charset}"' if charset else "text/plain"
    raw = (
        b"From: zeta@example.org\r\nTo: pbm@pbm.test\r\nSubject: reg\r\nMessage-ID: <odd@example.org>\r\n"
        b"MIME-Version: 1.0\r\nContent-Type: " + ctype.encode() + b"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + body
    )
    with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
        smtp.sendmail("zeta@example.org", ["pbm@pbm.test"], raw)
    reply = pbm.wait_for("zeta@example.org", 1)[0]
    assert "registered as zeta" in pbm.flat(pbm.confirm("zeta@example.org", reply))
    (stored_hash,) = pbm.sql("SELECT password_hash FROM accounts WHERE handle='zeta'")[0]
    assert stored_hash.startswith("$argon2")


def test_hostile_mail_never_stops_the_worker(pbm):
    junk = [
        b"\x00\x01\x02 not a mail at all \xff\xfe",
        b"From: <<<@@@>>>\r\nSubject: =?bogus?Q?x?=\r\nContent-Type: multipart/mixed; boundary=\"\"\r\n\r\n--\r\n",
        b"From: a@example.org\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!notbase64###\r\n",
        b"From: a@example.org\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>" + b"<div>\r\n" * 5000 + b"\r\n--b--\r\n",
    ]
    with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
        for raw in junk:
            smtp.sendmail("a@example.org", ["pbm@pbm.test"], raw)
    pbm.settle()
    statuses = [r[0] for r in pbm.sql("SELECT status FROM inbox ORDER BY id")]
    assert len(statuses) == 4 and "new" not in statuses and "shunted" not in statuses
    # and the worker still answers the next player
    assert "almost done" in pbm.flat(pbm.mail("ok@example.org", "pbm", "register ok fine-pass1"))


def test_mail_inject_for_mta_pipes(pbm):
    raw = (
        "From: pipe@example.org\nTo: pbm@pbm.test\nSubject: x\nMessage-ID: <pipe-1@example.org>\n\n"
        "register piper pipe-pass1\n"
    )
    pbm.secrets.add("pipe-pass1")
    out = pbm.cli("mail", "inject", input=raw)
    assert "stored as" in out.stdout
    reply = pbm.wait_for("pipe@example.org", 1)[0]
    assert "registered as piper" in pbm.flat(pbm.confirm("pipe@example.org", reply))
    too_big = raw + "x" * 2_000_000
    proc = pbm.cli("mail", "inject", input=too_big, check=False)
    assert proc.returncode == 65 and "larger than" in proc.stderr
