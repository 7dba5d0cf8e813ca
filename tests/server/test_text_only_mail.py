"""A reply of one text part is written out without an EmailMessage
(compose.text_only_mail): it must be byte for byte what the email package
writes for the same headers and text, whatever the text and headers hold."""

from __future__ import annotations

from datetime import datetime, timezone
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from email.utils import format_datetime, formataddr

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbm_server.base.settings import Settings
from pbm_server.mail.compose import Composer, Rendered, subject_header, text_only_mail
from pbm_server.mail.headers import POLICY, SMTP_POLICY, UrlListHeader, plain_or_parsed

pytestmark = pytest.mark.nodb


def by_the_package(headers: list[tuple[str, object]], text: str) -> bytes:
    msg = EmailMessage(policy=POLICY)
    for name, value in headers:
        msg[name] = value
    msg.set_content(text, cte="quoted-printable")
    return msg.as_bytes(policy=SMTP_POLICY)


def headers_of(subject: str, name: str = "pbm-server", to: str = "ann@example.org",
               references: str = "<game.g.1@pbm.test> <1.2@example.org>",
               unsubscribe: list[str] | None = None) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [
        ("From", formataddr((name, "g@pbm.test"))),
        ("To", plain_or_parsed("To", to)),
        ("Subject", subject_header(subject)),
        ("Date", plain_or_parsed("Date", format_datetime(datetime(2027, 2, 26, 23, 30, tzinfo=timezone.utc)))),
        ("Message-ID", plain_or_parsed("Message-ID", "<17.42@pbm.test>")),
        ("Auto-Submitted", "auto-replied"),
        ("X-Auto-Response-Suppress", "All"),
        ("X-Loop", "pbm@pbm.test"),
    ]
    if unsubscribe:
        out.append(("List-Unsubscribe", UrlListHeader("List-Unsubscribe", unsubscribe)))
        out.append(("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
    out.append(("In-Reply-To", plain_or_parsed("In-Reply-To", "<1.2@example.org>")))
    out.append(("References", plain_or_parsed("References", references)))
    return out


TEXTS = {
    "plain": "Hello ann,\n\nYour commands:\n> GIVE 6 TO bob\n  ok (line 2): accepted\n\n-- \nfooter\n",
    "non-ASCII": "Grüße, Zoë: 5 € to 🎲 player\nnext line\n",
    "long line": "x" * 200 + "\n" + "word " * 40 + "\n",
    "trailing spaces and tabs": "line with spaces   \nline with a tab\t\n   \n",
    "equals and dots": "a=b ==== =3D\n.\n..leading dots\nFrom the start\n",
    "line ends": "crlf\r\nlone cr\rlf\n\nlast line without an end",
    "empty": "",
    "one new line": "\n",
    "control characters": "bell\x07 form feed\x0c vertical tab\x0b escape\x1b nul\x00\n",
    "a soft break at the edge": "y" * 75 + "=" + "z" * 10 + "\n" + "w" * 76 + " \n",
}


@pytest.mark.parametrize("text", list(TEXTS.values()), ids=list(TEXTS))
def test_the_text_is_written_as_the_email_package_writes_it(text):
    headers = headers_of("g round 1: order held (1 line)")
    assert text_only_mail(headers, text) == by_the_package(headers, text)


SUBJECTS = {
    "plain": "g round 1: order held (1 line)",
    "long": "Re: " + " ".join(["a-long-subject-word"] * 12),
    "a word longer than a line": "Re: " + "x" * 120 + " end",
    "non-ASCII": "Zoë's orders for round 3: Grüße",
    "an encoded word in it": "=?utf-8?q?caf=C3=A9?= menu",
    "double spaces": "two  spaces   here",
    "glued colon": "ring: " + "word " * 20,
}


@pytest.mark.parametrize("subject", list(SUBJECTS.values()), ids=list(SUBJECTS))
def test_every_subject_is_written_as_before(subject):
    headers = headers_of(subject)
    assert text_only_mail(headers, TEXTS["plain"]) == by_the_package(headers, TEXTS["plain"])


@pytest.mark.parametrize("case", ["long references", "non-ASCII name", "quoted name", "unsubscribe"])
def test_every_header_is_written_as_before(case):
    headers = {
        "long references": lambda: headers_of("s", references=" ".join(f"<{n}.{'x' * 30}@example.org>" for n in range(6))),
        "non-ASCII name": lambda: headers_of("s", name="Zoë the GM"),
        "quoted name": lambda: headers_of("s", name='pbm, "server" (g)'),
        "unsubscribe": lambda: headers_of("s", unsubscribe=["https://pbm.test/u/" + "k" * 60, "mailto:pbm@pbm.test?subject=stop"]),
    }[case]()
    assert text_only_mail(headers, TEXTS["plain"]) == by_the_package(headers, TEXTS["plain"])


@settings(max_examples=150, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=300),
       subject=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=120))
def test_any_text_and_subject_are_written_as_the_email_package_writes_them(text, subject):
    headers = headers_of(" ".join(subject.split()) or "s")
    assert text_only_mail(headers, text) == by_the_package(headers, text)


def test_a_reply_reads_back_as_written():
    """Composer.message takes the short way for a reply without HTML to an
    ASCII address: a mail client reads its headers and its text as given."""
    composer = Composer(Settings(domain="pbm.test"))
    now = datetime(2027, 2, 26, 23, 30, tzinfo=timezone.utc)
    mid, raw = composer.message(to_addr="ann@example.org", to_name="ann", from_local="g", subject="g: Zoë's turn",
                                body=Rendered("Your order: GIVE 5 € TO bob\n", None), auto="auto-replied", now=now,
                                in_reply_to="<1.2@example.org>", thread="<game.g.1@pbm.test>")
    msg = message_from_bytes(raw, policy=default)
    assert raw.count(b"\r\n") > 5 and b"\n" not in raw.replace(b"\r\n", b"")
    assert msg["Message-ID"] == mid
    assert str(msg["Subject"]) == "g: Zoë's turn"
    assert msg["References"] == "<game.g.1@pbm.test> <1.2@example.org>"
    assert msg.get_content_type() == "text/plain" and msg.get_content_charset() == "utf-8"
    assert "Your order: GIVE 5 € TO bob" in msg.get_content()
    assert msg.get_content().startswith("Hello ann,")


@settings(max_examples=300, deadline=None)
@given(local=st.text(st.sampled_from("abcXYZ019!#$%&'*+/=?^_`{|}~-.@<> \"(),;:\\[]\u00e9"), min_size=1, max_size=12),
       domain=st.text(st.sampled_from("abc019-.[]@ \u00e9"), min_size=1, max_size=12))
def test_an_address_is_quoted_for_smtp_as_smtplib_quotes_it(local, domain):
    """Delivery writes a plain address in MAIL and RCPT without smtplib's parse (outbound.quoted)."""
    import smtplib

    from pbm_server.mail.outbound import quoted

    addr = f"{local}@{domain}"
    assert quoted(addr) == smtplib.quoteaddr(addr)
    assert quoted("ann@example.org") == "<ann@example.org>"


@pytest.mark.parametrize("to_addr, html, short", [("ann@example.org", None, True), ("jörg@example.org", None, False),
                                                  ("ann@example.org", "<p>board</p>", False)])
def test_only_a_text_reply_to_an_ascii_address_takes_the_short_way(monkeypatch, to_addr, html, short):
    """docs: a reply with an HTML part, or to an address outside ASCII (sent
    with SMTPUTF8), is written by the email package as before."""
    from pbm_server.mail import compose

    taken: list[int] = []
    real = compose.text_only_mail
    monkeypatch.setattr(compose, "text_only_mail", lambda headers, text: taken.append(1) or real(headers, text))
    composer = Composer(Settings(domain="pbm.test"))
    _, raw = composer.message(to_addr=to_addr, to_name="ann", from_local="g", subject="g: turn", body=Rendered("x\n", html),
                              auto="auto-replied", now=datetime(2027, 2, 26, 23, 30, tzinfo=timezone.utc))
    assert bool(taken) is short
    msg = message_from_bytes(raw, policy=default)
    assert msg.get_content_type() == ("text/plain" if html is None else "multipart/alternative")
