"""A plain From (an address alone, or after a display name of plain words)
and a plain Subject are read as written, without the email package's header
parser (mailtext._from_address, _AS_WRITTEN): the sender's address, the
reason a From cannot carry a password, and the Subject must be what the
package's reading gives, for every From and Subject."""

from __future__ import annotations

from email.utils import getaddresses, parseaddr

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbm_server.mail.mailtext import _PLAIN_FROM, _header, _parse, _parsed_header, read_mail
from pbm_server.mail.senderauth import raw_header, read_from

pytestmark = pytest.mark.nodb


def mail(from_value: str, subject: str = "orders") -> bytes:
    return f"From: {from_value}\r\nTo: g@pbm.test\r\nSubject: {subject}\r\n\r\nJOIN\r\n".encode("utf-8", "surrogateescape")


def by_the_package(raw: bytes) -> tuple[str, str | None]:
    msg, _ = _parse(raw)
    from_header = _parsed_header(msg, "From")
    try:
        pairs = getaddresses([from_header])
        addr = pairs[0][1] if pairs else ""
    except Exception:
        addr = parseaddr(from_header)[1]
    addr, problem = read_from(raw_header(msg, "From"), addr)
    return (addr or "").strip().lower(), problem


FROMS = [
    "ann@example.org", "  Ann.Smith@Example.ORG  ", "Ann Smith <ann@example.org>", "ann <ann@example.org>",
    "o'brien+pbm@mail-1.example.co.uk", "Zoë <zoe@example.org>", "=?utf-8?q?Zo=C3=AB?= <zoe@example.org>",
    "bob@example.org <mallory@evil.test>", "\"bob@example.org\" <mallory@evil.test>", "<ann@example.org>",
    "Ann<ann@example.org>", "ann@example.org (Ann)", "Ann Smith <ann@example.org>, bob@example.org",
    "J. Smith <j@example.org>", "undisclosed-recipients:;", "", "ann@[127.0.0.1]", "ann@localhost",
    "a" * 2100 + "@example.org", "x=?y <ann@example.org>", "=?utf-8?q?j=C3=B6rg?=@example.org",
    "Ann <=?utf-8?q?j=C3=B6rg?=@example.org>",
]


@pytest.mark.parametrize("value", FROMS)
def test_the_sender_is_who_the_package_reads(value):
    raw = mail(value)
    got = read_mail(raw)
    assert (got.from_addr, got.from_problem) == by_the_package(raw)


def test_the_plain_forms_take_the_short_way():
    """The forms most mail has are the plain ones (else the test above proves nothing of them)."""
    assert _PLAIN_FROM.fullmatch("ann@example.org")
    assert _PLAIN_FROM.fullmatch("Ann Smith <ann@example.org>")
    assert not _PLAIN_FROM.fullmatch("bob@example.org <mallory@evil.test>")
    assert not _PLAIN_FROM.fullmatch("=?utf-8?q?Zo=C3=AB?= <zoe@example.org>")
    assert not _PLAIN_FROM.fullmatch("=?utf-8?q?j=C3=B6rg?=@example.org")


_ATEXT = st.one_of(st.text(st.sampled_from("abcXYZ019!#$%&'*+/=?^_`{|}~-.@<> \"(),;:\\[]\u00e9"), min_size=1, max_size=12),
                   st.sampled_from(["=?utf-8?q?j=C3=B6rg?=", "=?utf-8?b?w7Y=?=", "=?iso-8859-1?q?a?="]))


@settings(max_examples=400, deadline=None)
@given(name=st.lists(_ATEXT, max_size=3), local=_ATEXT, domain=_ATEXT, angle=st.booleans())
def test_any_from_reads_as_the_package_reads_it(name, local, domain, angle):
    value = f"{' '.join(name)} <{local}@{domain}>" if angle else f"{local}@{domain}"
    raw = mail(value)
    got = read_mail(raw)
    assert (got.from_addr, got.from_problem) == by_the_package(raw)


@settings(max_examples=400, deadline=None)
@given(subject=st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=120))
def test_any_plain_subject_reads_as_the_package_reads_it(subject):
    raw = mail("ann@example.org", subject.strip() or "x")
    msg, _ = _parse(raw)
    assert " ".join(_header(msg, "Subject").split()) == " ".join(_parsed_header(msg, "Subject").split())
    assert read_mail(raw).subject == " ".join(_parsed_header(msg, "Subject").split())[:998]
