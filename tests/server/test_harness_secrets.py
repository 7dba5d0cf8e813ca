"""The harness's check that no mail the server sends holds a password
(tests/conftest.py runs it after every server test): it must find a password
however the mail carries it, and take a plain mail's bytes as they are."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from tests.harness import _reads_as_written, secrets_in

pytestmark = pytest.mark.nodb

SECRET = "hunter-22-pass"


def mail(body: str, cte: str | None = None, subject: str = "report", charset: str = "utf-8") -> bytes:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = "pbm@pbm.test", "ann@example.org", subject, "<1@pbm.test>"
    if cte:
        m.set_content(body, charset=charset, cte=cte)
    else:
        m.set_content(body)
    return bytes(m)


@pytest.mark.parametrize("shape", ["plain", "base64", "quoted-printable", "subject", "encoded-subject",
                                   "folded-subject", "latin-1"])
def test_a_password_is_found_however_the_mail_carries_it(shape):
    long = "x " * 40
    raw = {
        "plain": lambda: mail(f"Your password is {SECRET}.\n"),
        "base64": lambda: mail(f"Your password is {SECRET}.\n", "base64"),
        "quoted-printable": lambda: mail(f"{'y' * 70}{SECRET}\n", "quoted-printable"),
        "subject": lambda: mail("hello\n", subject=f"about {SECRET}"),
        "encoded-subject": lambda: mail("hello\n", subject=f"caf\u00e9 {SECRET}"),
        "folded-subject": lambda: mail("hello\n", subject=f"{long}{SECRET} {long}"),
        "latin-1": lambda: mail(f"caf\u00e9 {SECRET}\n", "8bit", charset="latin-1"),
    }[shape]()
    assert secrets_in(raw, [SECRET, "not-in-any-mail"]) == [SECRET]


def test_a_plain_mail_is_searched_as_written_and_an_encoded_one_is_decoded():
    assert _reads_as_written(mail(f"Your password is {SECRET}.\n"), [SECRET])
    assert _reads_as_written(mail("hello\n", "quoted-printable"), [SECRET])  # decoded as it is searched
    assert not _reads_as_written(mail("hello\n", "base64"), [SECRET])
    assert not _reads_as_written(mail("hello\n", "8bit", charset="latin-1"), [SECRET])
    assert not _reads_as_written(mail("hello\n", subject="caf\u00e9"), [SECRET])
    assert not _reads_as_written(mail("hello\n"), ["two words"])  # a fold could split it
    assert secrets_in(mail("nothing here\n"), [SECRET]) == []
