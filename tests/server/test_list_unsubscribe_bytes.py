"""List-Unsubscribe as a mailbox provider reads it: the bytes the relay got
(issue 42).  The email package folds a header line longer than 78
characters into RFC 2047 encoded words, and with any real public URL the
line is longer: ``List-Unsubscribe: =?utf-8?q?=3Chttps=3A//...`` holds no
URL a provider can find, and Gmail's and Yahoo's one-click unsubscribe does
not work.  The tests elsewhere read the header through a decoding policy,
which undoes the encoded words and so never saw it.

Here the header is read from the raw bytes: ``<https://...>,`` CRLF, a
space, ``<mailto:...>``, each URL whole and plain; the https URL found there
stops the stream with one POST.  Without an https PBM_PUBLIC_URL (unset, or
http://) the header holds only the mailto link and there is no
List-Unsubscribe-Post (RFC 8058 asks for https); the mailto link found in
the bytes stops the stream by mail."""

from __future__ import annotations

import re
import urllib.parse
import urllib.request

import pytest

from pbm_server.mail.headers import SMTP_POLICY, UrlListHeader
from tests.harness import PbmServer

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

ANN, BOB = "ann@example.org", "bob@example.org"
#: a public address as long as real ones are: the header's line is far beyond 78 characters
LONG = "https://games.some-long-hostname.example.org/pbm"


def header_block(raw: bytes) -> bytes:
    head, sep, _ = raw.partition(b"\r\n\r\n")
    assert sep, raw[:300]
    return head + b"\r\n"


def field(raw: bytes, name: bytes) -> bytes | None:
    """One header field exactly as it is in the mail's bytes, its folded
    lines with their CRLF and leading white space; None if absent."""
    found = re.search(rb"(?im)^" + re.escape(name) + rb":.*\r\n(?:[ \t].*\r\n)*", header_block(raw))
    return found.group(0) if found else None


def raw_to(pbm: PbmServer, addr: str, subject_has: bytes) -> list[bytes]:
    """The raw mails to ``addr`` whose Subject (as it is in the bytes) holds ``subject_has``."""
    return [raw for rcpts, raw in pbm.sink.raw()
            if addr in rcpts and subject_has in (field(raw, b"Subject") or b"")]


def post_one_click(pbm: PbmServer, path: str) -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{pbm.http_port}{path}", data=b"List-Unsubscribe=One-Click",
                                 method="POST", headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return resp.status, resp.read().decode()


def started(pbm: PbmServer, public_url: str | None) -> PbmServer:
    if public_url is not None:
        pbm.env["PBM_PUBLIC_URL"] = public_url
    pbm.start()
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.settle()
    return pbm


def test_the_header_bytes_hold_plain_urls_folded_after_the_comma(pbm_stopped: PbmServer):
    pbm = started(pbm_stopped, LONG)
    (report,) = raw_to(pbm, ANN, b"round 1 report")
    header = field(report, b"List-Unsubscribe")
    assert header is not None and b"=?" not in header, header
    # exactly: the https URL whole on the first line, a comma, CRLF, a space, the mailto URL whole
    whole = re.fullmatch(rb"List-Unsubscribe: <(https://[\x21-\x3b\x3d\x3f-\x7e]+)>,\r\n"
                         rb" <(mailto:[\x21-\x3b\x3d\x3f-\x7e]+)>\r\n", header)
    assert whole, header
    https, mailto = (g.decode() for g in whole.groups())
    assert https.startswith(LONG + "/unsubscribe/ann/ring1/reports?k="), https
    assert mailto.startswith("mailto:pbm@pbm.test?subject=unsubscribe%20ring1%20reports%20"), mailto
    assert len(b"List-Unsubscribe: <" + https.encode() + b">,") > 78  # the line the email package encoded
    assert field(report, b"List-Unsubscribe-Post") == b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
    # the URL a provider finds in the bytes stops the stream with one POST (sent to the
    # HTTP side's own port, as the proxy at the public address would)
    status, page = post_one_click(pbm, https.removeprefix(LONG))
    assert status == 200 and "Stopped" in page, page
    assert pbm.sql("SELECT address, stream FROM mail_stops") == [(ANN, "reports")]
    # press (another stream, another sender) is written the same way
    sent = pbm.send(BOB, "ring1", "PRESS TO ann\nhello ann\nENDPRESS\n$$bob-pass-1$$")
    pbm.reply_to(sent)
    pbm.settle()
    (press,) = raw_to(pbm, ANN, b"press from bob")
    header = field(press, b"List-Unsubscribe")
    assert header is not None and re.fullmatch(
        rb"List-Unsubscribe: <" + re.escape(LONG.encode()) + rb"/unsubscribe/ann/ring1/press\?k=[\x21-\x3d\x3f-\x7e]+>,"
        rb"\r\n <mailto:pbm@pbm\.test\?subject=unsubscribe%20ring1%20press%20[\x21-\x3d\x3f-\x7e]+>\r\n", header), header
    # mail that must still go carries no header at all: the reply to bob's own mail
    (reply,) = [raw for _, raw in pbm.sink.raw() if sent.encode() in (field(raw, b"In-Reply-To") or b"")]
    assert field(reply, b"List-Unsubscribe") is None and field(reply, b"List-Unsubscribe-Post") is None


@pytest.mark.parametrize("public_url", [None, "http://games.some-long-hostname.example.org/pbm"])
def test_without_an_https_public_url_only_the_mailto_link(pbm_stopped: PbmServer, public_url: str | None):
    pbm = started(pbm_stopped, public_url)
    (report,) = raw_to(pbm, ANN, b"round 1 report")
    header = field(report, b"List-Unsubscribe")
    assert header is not None
    whole = re.fullmatch(rb"List-Unsubscribe: <(mailto:pbm@pbm\.test\?subject=unsubscribe%20ring1%20reports%20"
                         rb"[\x21-\x3d\x3f-\x7e]+)>\r\n", header)
    assert whole, header
    assert field(report, b"List-Unsubscribe-Post") is None
    # the footer still links the settings page for a person (a browser link, http is fine there)
    parsed = next(m for m in pbm.inbox(ANN) if str(m["Subject"]).endswith("round 1 report"))
    assert pbm.stop_link(parsed).startswith(f"{public_url or f'http://127.0.0.1:{pbm.http_port}'}"
                                            "/unsubscribe/ann/ring1/reports?k=")
    # what a mail client sends for that mailto link stops the stream
    subject = urllib.parse.unquote(whole.group(1).decode().split("subject=", 1)[1])
    answer = pbm.mail(ANN, "pbm", "", subject=subject)
    assert "no more turn reports and game notices of ring1" in pbm.text(answer), pbm.text(answer)
    assert pbm.sql("SELECT address, stream FROM mail_stops") == [(ANN, "reports")]


def test_a_short_list_stays_on_one_line_and_an_odd_url_is_left_to_the_email_package():
    short = UrlListHeader("List-Unsubscribe", ["https://a.example/u?k=1", "mailto:p@a.example?subject=x"])
    assert short.fold(policy=SMTP_POLICY) == \
        "List-Unsubscribe: <https://a.example/u?k=1>, <mailto:p@a.example?subject=x>\r\n"
    # a URL with a space or a non-ASCII letter is not written as it is (none of ours has one)
    odd = UrlListHeader("List-Unsubscribe", ["https://a.example/" + "é" * 80]).fold(policy=SMTP_POLICY)
    assert "é" not in odd
