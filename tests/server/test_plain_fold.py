"""Headers of a mail we write that are never parsed (mail/headers.py,
PlainHeader): a From of a plain name and address, and a long line of plain
words (a reply's References of two message ids) folded without the email
package.  Each must be byte for byte what the package itself writes (its
default policy, nothing of ours in between), whatever the words."""

from __future__ import annotations

from email.policy import default
from email.utils import formataddr

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbm_server.mail.headers import SMTP_POLICY, PlainHeader, fold_plain_words, is_plain, plain_or_parsed

pytestmark = pytest.mark.nodb

#: the email package alone, writing for SMTP
PACKAGE = default.clone(linesep="\r\n")


def by_the_package(name: str, value: str) -> str:
    return str(PACKAGE.header_factory(name, value).fold(policy=PACKAGE))


def as_we_write(name: str, value: str) -> str:
    return str(SMTP_POLICY.fold(*SMTP_POLICY.header_store_parse(name, plain_or_parsed(name, value))))


REFERENCES = "<game.r017.18@pbm.localhost> <179632564360.19600.8383641509200622281@example.org>"


@pytest.mark.parametrize("value", [
    REFERENCES,  # a reply's: the game's thread and the mail answered; too long for one line
    "<game.g.1@pbm.test> <1.2@example.org>",  # fits on the label's line
    "<" + "a" * 60 + "@example.org>",  # fits on a line of its own, not after the label
    " ".join(f"<{n}.{'x' * 20}@example.org>" for n in range(6)),  # several lines
    "<a@b> " + "<" + "c" * 70 + "@d>",  # a word as long as a line can hold
])
def test_references_are_written_as_the_package_writes_them(value):
    assert as_we_write("References", value) == by_the_package("References", value)


def test_a_reply_s_references_are_folded_without_the_package():
    folded = fold_plain_words("References", REFERENCES, 78, "\r\n")
    assert folded == ("References: <game.r017.18@pbm.localhost>\r\n"
                      " <179632564360.19600.8383641509200622281@example.org>\r\n")
    # a value that fits on a line of its own goes there whole, as the package puts it
    alone = "<" + "a" * 60 + "@example.org>"
    assert fold_plain_words("References", alone, 78, "\r\n") == f"References:\r\n {alone}\r\n"


def test_what_the_model_does_not_cover_goes_to_the_package():
    long_word = "<" + "w" * 90 + "@example.org>"
    assert fold_plain_words("References", f"<a@b> {long_word}", 78, "\r\n") is None
    assert fold_plain_words("Message-ID", REFERENCES, 78, "\r\n") is None  # the package parses it
    assert fold_plain_words("To", REFERENCES, 78, "\r\n") is None  # as addresses
    assert fold_plain_words("References", "=?utf-8?q?x?= " + "y" * 80, 78, "\r\n") is None
    assert as_we_write("References", f"<a@b> {long_word}") == by_the_package("References", f"<a@b> {long_word}")


WORD = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=90).filter(
    lambda w: "=?" not in w)
#: headers the package reads as free text (any name it does not know is one), in any case
NAMES = st.sampled_from(["References", "In-Reply-To", "X-Loop", "auto-submitted", "X-AUTO-RESPONSE-SUPPRESS",
                         "Subject", "Comments", "X-Pbm-Anything"])


@settings(max_examples=400, deadline=None)
@given(NAMES, st.lists(WORD, min_size=1, max_size=8))
def test_any_plain_words_are_folded_as_the_package_folds_them(name, words):
    value = " ".join(words)
    if "=?" in value:
        return
    assert as_we_write(name, value) == by_the_package(name, value)


ATOM = st.text(st.sampled_from("abcxyzABZ0189!#$%&'*+/=?^_`{|}~-"), min_size=1, max_size=20).filter(
    lambda w: "=?" not in w)
LOCAL = st.text(st.sampled_from("abcz09.-_+"), min_size=1, max_size=20).filter(
    lambda w: not w.startswith(".") and not w.endswith(".") and ".." not in w)


@settings(max_examples=300, deadline=None)
@given(st.lists(ATOM, min_size=1, max_size=4), LOCAL, st.sampled_from(["pbm.localhost", "mail.example-1.org"]))
def test_a_from_of_plain_words_and_address_is_written_as_it_is(words, local, domain):
    value = formataddr((" ".join(words), f"{local}@{domain}"))
    if "=?" in value:
        return
    assert as_we_write("From", value) == by_the_package("From", value)
    if is_plain("From", value) and len(value) + 6 <= 78:
        assert as_we_write("From", value) == f"From: {value}\r\n"


@pytest.mark.parametrize("value, plain", [
    ("pbm-server <r017@pbm.localhost>", True),  # a reply's From
    ("r017@pbm.localhost", True),
    ("Ann Lee <ann@example.org>", True),
    ('"J. Smith" <j@example.org>', False),  # quoted: the package writes it its way
    ("J. Smith <j@example.org>", False),
    ("Ann  Lee <ann@example.org>", False),  # two spaces
    ("=?utf-8?q?J=C3=B6rg?= <j@example.org>", False),
    ("Ann <ann@example.org>, Bob <bob@example.org>", False),
])
def test_which_froms_are_written_as_they_are(value, plain):
    assert is_plain("From", value) is plain
    assert isinstance(plain_or_parsed("From", value), PlainHeader) is plain
    assert as_we_write("From", value) == by_the_package("From", value)
