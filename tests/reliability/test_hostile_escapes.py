"""Hostile input, round three (issue 41, items 3 and 5), through a real
`pbm serve`: control and format characters a sender puts in its envelope
address, its From or an address it asks for are escaped in the text log, in
the JSON log and in the SMTP replies; and a public press with characters XML
1.0 does not allow leaves the game's Atom feed well-formed.

The log tests run `pbm serve` as its own process (``process``): what they
read is what the operator's terminal or log shipper gets from the server's
own log formatter (PBM_LOG_FORMAT), not from the test harness's.
"""

from __future__ import annotations

import json
import socket
import unicodedata
import xml.etree.ElementTree as ET

import pytest

from pbm_server.web import charts
from tests.harness import PbmServer, wait_until
from tests.server.test_web_pages import page, press_players, settled

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

#: the hidden characters a reader must never get raw (pbm_server/base/printable.py)
HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}

#: an envelope sender made to forge a log line, clear the terminal and break
#: lines for viewers that take VT, NEL or LS as a line end (SMTPUTF8: raw UTF-8)
SENDER = '"a\rFAKE 2026-01-01 INFO pbm_server: forged\x1b[2J\x0bv\u2028w\x85x"@evil.example'
#: the same tricks in the From header (the worker's "mail handled" line names it)
FROM_HEADER = '"b\u2028c\x85d\x1b[31me"@evil.example'
#: how the text log writes the sender
SENDER_ESCAPED = '"a\\rFAKE 2026-01-01 INFO pbm_server: forged\\x1b[2J\\x0bv\\u2028w\\x85x"@evil.example'


def raw_hidden(text: str, allowed: str = "") -> list[str]:
    """The hidden characters of ``text`` (but ``allowed``), as their names or code points."""
    return sorted({unicodedata.name(ch, f"U+{ord(ch):04X}") for ch in text
                   if unicodedata.category(ch) in HIDDEN and ch not in allowed})


class Session:
    """A raw SMTP session: each command's reply lines, as the bytes came."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.file = self.sock.makefile("rb")
        self.replies: list[bytes] = []
        self.read()

    def read(self) -> list[bytes]:
        lines = []
        while True:
            line = self.file.readline()
            assert line.endswith(b"\r\n"), line
            lines.append(line)
            if line[3:4] != b"-":
                self.replies.extend(lines)
                return lines

    def say(self, command: bytes) -> list[bytes]:
        self.sock.sendall(command)
        return self.read()

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def hostile_transaction(pbm: PbmServer) -> Session:
    """EHLO; MAIL FROM the hostile sender with SMTPUTF8; a RCPT to a game
    name with a CR in it (refused); a RCPT to pbm@ with a mail whose From is
    hostile too; and a command word that is an ESC sequence."""
    s = Session(pbm.port)
    assert b"250-SMTPUTF8\r\n" in s.say(b"EHLO client.example\r\n")
    assert s.say(b"MAIL FROM:<" + SENDER.encode() + b"> SMTPUTF8\r\n")[0].startswith(b"250 ")
    refused = s.say(f'RCPT TO:<"g1\rFAKE\u2028xé"@{pbm.domain}>\r\n'.encode())
    # escaped, but what is printable stays as it came (the client asked for SMTPUTF8)
    assert refused[0].startswith("550 5.1.1 No game named g1\\rfake\\u2028xé here".encode()), refused
    assert s.say(f"RCPT TO:<pbm@{pbm.domain}>\r\n".encode())[0].startswith(b"250 ")
    assert s.say(b"DATA\r\n")[0].startswith(b"354 ")
    mail = (f"From: {FROM_HEADER}\r\nTo: pbm@{pbm.domain}\r\nSubject: help\r\nMessage-ID: <esc1@evil.example>\r\n"
            "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"
            "\r\nhelp\r\n.\r\n")
    assert s.say(mail.encode())[0].startswith(b"250 OK queued as ")
    assert s.say(b"\x1b[2J\x1b]0;OWNED\x07\r\n")[0].startswith(b"500 ")
    s.say(b"QUIT\r\n")
    s.close()
    return s


def no_raw_control_in_replies(s: Session) -> None:
    """Each reply line is one line: nothing hidden before its CRLF."""
    for line in s.replies:
        text = line.decode("utf-8")
        assert not raw_hidden(text[:-2]), (line, raw_hidden(text[:-2]))
    unknown = next(r for r in s.replies if r.startswith(b"500 "))
    assert b"\\x1b[2J\\x1b]0;OWNED\\x07" in unknown, unknown


def log_text(pbm: PbmServer) -> str:
    """serve.log as its bytes are (PbmServer.serve_log reads it with universal
    newlines, which would make a raw CR a line end and hide it)."""
    return (pbm.tmp / "serve.log").read_bytes().decode("utf-8", "replace")


def handled(pbm: PbmServer) -> None:
    """The hostile mail is stored, handled and its reply tried (each a log line)."""
    pbm.settle()
    wait_until(lambda: "mail out: outbox " in pbm.serve_log() and "(CommandMail)" in pbm.serve_log(),
               what="the log lines of the mail handled and its reply")


@pytest.mark.process  # the text log of `pbm serve`'s own processes, as the operator's terminal shows it
def test_hidden_characters_are_escaped_in_the_text_log_and_the_smtp_replies(pbm_stopped):
    pbm = pbm_stopped
    pbm.start()
    s = hostile_transaction(pbm)
    no_raw_control_in_replies(s)
    handled(pbm)
    log = log_text(pbm)
    # nothing hidden in the whole log but its own line ends: no forged line, no terminal control
    assert not raw_hidden(log, allowed="\n"), raw_hidden(log, allowed="\n")
    assert not any(line.startswith("FAKE") for line in log.split("\n"))
    [mail_in] = [ln for ln in log.split("\n") if " mail in: inbox " in ln]
    assert f"from {SENDER_ESCAPED} to pbm@{pbm.domain}" in mail_in, mail_in
    [mail_handled] = [ln for ln in log.split("\n") if "(CommandMail) from " in ln]
    assert 'from "b\\u2028c\\x85d' in mail_handled, mail_handled


@pytest.mark.process  # the JSON log of `pbm serve`'s own processes, as a log shipper reads it
def test_hidden_characters_are_json_escapes_in_the_json_log(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_LOG_FORMAT"] = "json"
    pbm.start()
    s = hostile_transaction(pbm)
    no_raw_control_in_replies(s)
    handled(pbm)
    whole = log_text(pbm).split("\n")[:-1]  # lines with their line end: one being written is left out
    lines = [ln for ln in whole if ln.startswith("{")]
    # U+2028, U+0085 and DEL are legal raw in a JSON string, but not on a log line (nor is anything else)
    assert not raw_hidden(log_text(pbm), allowed="\n"), raw_hidden(log_text(pbm), allowed="\n")
    events = {e.get("event"): (e, ln) for ln in lines if (e := json.loads(ln))}
    mail_in, line = events["mail in"]
    # the shipper decodes the sender as it came; the line has it as JSON escapes
    assert mail_in["sender"] == SENDER
    assert "\\rFAKE" in line and "\\u001b[2J" in line and "\\u000b" in line
    assert "\\u2028" in line and "\\u0085" in line
    assert events["mail handled"][0]["sender"].startswith('"b\u2028c\x85d')


def test_smtp_replies_escape_what_the_client_sent(pbm):
    """Without a log to read (the server in this process): every reply line
    a hostile session gets has its hidden characters escaped."""
    s = hostile_transaction(pbm)
    no_raw_control_in_replies(s)
    # a client that did not ask for SMTPUTF8 gets ASCII (RFC 6531 3.7.4)
    t = Session(pbm.port)
    t.say(b"HELO client.example\r\n")
    t.say(b"MAIL FROM:<x@example.org>\r\n")
    refused = t.say(f'RCPT TO:<"no\x7fgame\x0bé"@{pbm.domain}>\r\n'.encode())
    assert refused[0].startswith(b"550 5.1.1 No game named no\\x7fgame\\x0b\\xe9 here"), refused
    t.close()


# -- item 5: a public press with characters XML 1.0 does not allow ------------------------------
#: characters XML 1.0 allows nowhere (a lone surrogate cannot come by mail: it is no UTF-8)
NOT_XML = "\ufffe\uffff\x01\x08\x1b\x1f"


def test_a_public_press_with_characters_xml_does_not_allow_leaves_the_feed_well_formed(pbm: PbmServer):
    pw = press_players(pbm)
    pbm.cli("game", "set", "ring", "public_press=on")
    pbm.settle()
    text = "odd " + " ".join(NOT_XML) + " end"
    reply = pbm.flat(pbm.mail("ann@example.org", "ring", f"PRESS TO ALL\n{text}\nENDPRESS\n$${pw['ann']}$$"))
    assert "it is public" in reply, reply
    status, headers, body = settled(pbm, "/games/ring/feed.atom", lambda st, b: "odd " in b)
    assert status == 200 and headers["content-type"].startswith("application/atom+xml")
    feed = ET.fromstring(body.encode())  # well-formed: every reader's parser takes it
    atom = "{http://www.w3.org/2005/Atom}"
    [entry] = feed.findall(f"{atom}entry")
    content = entry.find(f"{atom}content")
    assert content is not None and content.text is not None
    shown = content.text
    assert not set(shown) & set(NOT_XML), shown
    # the press as the JSON twin has it (JSON can carry every character): the feed shows
    # the same text with each character XML cannot carry as one U+FFFD where it was
    [press] = json.loads(page(pbm, "/games/ring.json")[2])["press"]
    assert "\ufffe" in press["text"] and "\uffff" in press["text"], press
    assert shown == "".join("\ufffd" if ch in NOT_XML else ch for ch in press["text"]), (shown, press)
    assert shown.startswith("odd \ufffd \ufffd ") and shown.endswith(" end"), shown
    # the game page and its JSON twin still answer
    assert page(pbm, "/games/ring")[0] == 200 and page(pbm, "/games/ring.json")[0] == 200


def test_a_chart_with_characters_xml_does_not_allow_is_well_formed_svg():
    """The charts' SVG (inline in the pages) names players and games: a
    name with such a character still makes well-formed SVG."""
    svg = charts.line_chart({"ann\ufffe\x01": [(1, 3.0), (2, 5.0)], "bob": [(1, 1.0), (2, 2.0)]},
                            "round", "scores of g\uffff1")
    root = ET.fromstring(svg)
    texts = "".join(root.itertext())
    assert "ann\ufffd\ufffd" in texts and "scores of g\ufffd1" in texts


def test_mail_inject_refuses_in_one_escaped_line(pbm):
    """`pbm mail inject`'s refusal is the MTA's bounce text, and may name a
    recipient from the mail's To: one line, its hidden characters escaped."""
    raw = pbm.build("ann@players.example", "pbm", "help").as_bytes()
    proc = pbm.cli("mail", "inject", "--from", "ann@players.example", "--to", "g1\rFAKE\x1b[2J\u2028é@pbm.test",
                   input=raw, check=False)
    assert proc.returncode == 67, proc.stderr
    assert proc.stderr == ("pbm: g1\\rFAKE\\x1b[2J\\u2028\\xe9@pbm.test: no game named g1\\rfake\\x1b[2j\\u2028\\xe9 "
                           "here; mail pbm@pbm.test with 'games' for the list\n"), proc.stderr
