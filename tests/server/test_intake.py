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


@pytest.mark.nodb
def test_the_listener_reads_every_envelope_address_as_aiosmtpd_does(monkeypatch):
    """The listener reads the usual <local@domain> paths itself, without the
    email package's full parser (a tenth of a session's CPU), and hands every
    other form to aiosmtpd's: both give the same address and parameters, or
    the same refusal, for every form -- comments, quoted and encoded local
    parts, domain literals, routes, blanks, the null sender, thousands made at
    random."""
    import asyncio
    import random

    from aiosmtpd.smtp import SMTP

    from pbm_server.mail.inbound import SessionLimits, _limited_smtp_class

    loop = asyncio.new_event_loop()
    try:
        ours = _limited_smtp_class()(object(), SessionLimits(1, 1), loop=loop)
        theirs = SMTP(object(), loop=loop)

        def read(session, arg):
            try:
                return session._getaddr(arg)
            except Exception as exc:  # aiosmtpd's parser raises on some forms: ours must too
                return type(exc).__name__

        forms = ["<player1@example.org>", "<a.b+tag@c-d.example> SIZE=100 BODY=8BITMIME", "<a@b.c>SIZE=1", "<>",
                 '<"q u"@x.y>', "<a@[192.0.2.1]>", "<@relay.example:a@b.c>", "<a..b@c>", "<a@b.>", " <a@b.c>",
                 "<a@b.c", "a@b.c", "<a@b.c> (comment) SIZE=5", "<a@b.c>\t\r\nX", "<=?utf-8?q?x?=@b.c>",
                 "<a@=?utf-8?q?x?=>", "<ä@b.c>", "<" + "x" * 70 + "@y.z>", "<a(c)@b.c>", "<a@b.c>  "]
        chars = "abcXY019!#$%&'*+/=?^_`{|}~-.@<>\"[]() :;,\\\t\r\x0b"
        rnd = random.Random(30)
        for n in range(4000):
            body = "".join(rnd.choice(chars if n % 3 else "ab.=?") for _ in range(rnd.randint(1, 12)))
            forms.append("<" + body + rnd.choice([">", "> X=1", "", ">x", ">\t (c)y", ">  \x0bz", "@b.c> ", "@=?a?b?c?=>"]))
        differ = [(f, read(ours, f), read(theirs, f)) for f in forms if read(ours, f) != read(theirs, f)]
        assert differ == []
        assert read(ours, "<player1@example.org> SIZE=100") == ("player1@example.org", "SIZE=100")
        # the usual forms never reach the email package's parser; the others do
        import aiosmtpd.smtp

        parsed: list[str] = []
        full_parser = aiosmtpd.smtp.get_angle_addr

        def counted(arg):
            parsed.append(arg)
            return full_parser(arg)

        monkeypatch.setattr(aiosmtpd.smtp, "get_angle_addr", counted)
        assert read(ours, "<player1@example.org>") == ("player1@example.org", "")
        assert read(ours, "<a.b+tag@c-d.example> SIZE=100 BODY=8BITMIME") == ("a.b+tag@c-d.example",
                                                                              "SIZE=100 BODY=8BITMIME")
        assert parsed == []
        assert read(ours, "<a@b.c> (comment) SIZE=5") == ("a@b.c", "SIZE=5")
        assert parsed == ["<a@b.c> (comment) SIZE=5"]
    finally:
        loop.close()


@pytest.mark.nodb
def test_a_listener_session_knows_the_commands_and_hooks_aiosmtpd_finds():
    """A session lists only the names aiosmtpd looks up (inbound.py,
    LimitedSMTP.__dir__), which spares it reading every attribute of every
    new session; it still finds every command, AUTH mechanism and handler
    hook that aiosmtpd's own class finds, and they still run ours."""
    import asyncio

    from aiosmtpd.smtp import SMTP

    from pbm_server.base.settings import load_settings
    from pbm_server.mail.inbound import GameNames, InboundHandler, IntakeWriter, SessionLimits, _limited_smtp_class
    from pbm_server.store.db import Database

    db = Database("sqlite://")
    handler = InboundHandler(load_settings(), IntakeWriter(db), GameNames(db))
    loop = asyncio.new_event_loop()
    try:
        ours = _limited_smtp_class()(handler, SessionLimits(1, 1), loop=loop)
        theirs = SMTP(handler, loop=loop)
        assert sorted(ours._smtp_methods) == sorted(theirs._smtp_methods)
        assert "RCPT" in ours._smtp_methods and "DATA" in ours._handle_hooks
        assert sorted(ours._auth_methods) == sorted(theirs._auth_methods) == ["LOGIN", "PLAIN"]
        assert ours._handle_hooks == theirs._handle_hooks
        assert ours._smtp_methods["MAIL"].__self__ is ours  # bound to this session
        assert all(n.startswith(("smtp_", "auth_")) for n in dir(ours))
    finally:
        loop.close()
        db.dispose()
