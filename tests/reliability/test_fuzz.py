"""Fuzzing with hypothesis: the mail parser and every game's command parser,
on arbitrary bytes and on mutated valid mails.  No exception escapes.

The end-to-end half (test_fuzzed_mails_through_the_server) sends mutated mails
through a running `pbm serve` and checks every accepted one got a reply or a
recorded drop.  More examples: ``PBM_FUZZ_EXAMPLES=5000`` (docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import re
import smtplib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from games import KINDS as GAME_KINDS
from games import get_rules
from games.base import Command, Line
from pbm_server.mail import mailtext
from pbm_server.mail.mailtext import (
    PASSWORD_RE,
    automatic_reason,
    command_lines,
    dedup_key,
    read_mail,
    subject_command,
    take_passwords,
)
from tests.contract.games import scenario_of

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

EXAMPLES = int(os.environ.get("PBM_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID_MAILS = [
    b"From: Alice <alice@example.org>\r\nTo: pbm@pbm.test\r\nSubject: register\r\nMessage-ID: <1@example.org>\r\n\r\nregister zed zed-secret-9\r\n",
    b"From: bob@example.org\r\nTo: gift@pbm.test\r\nSubject: Re: [2] orders\r\nIn-Reply-To: <x@pbm.test>\r\n"
    b"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"$$pw=E4$$\r\nGIVE 2 TO alice\r\n\r\n> quoted GIVE 3 TO carol\r\n-- \r\nBob\r\n",
    b"From: carol@example.org\r\nTo: curio@pbm.test\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=XX\r\n\r\n"
    b"--XX\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>move 101 carol pw a1-b3</p><div>JOIN</div>\r\n--XX--\r\n",
    b"From: =?utf-8?b?w4R0c2No?= <dave@example.org>\r\nTo: rmpm@pbm.test\r\nSubject: =?utf-8?q?16-04_-=3E_16-05?=\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\nJCRwdyQkCkpPSU4gYmQgMDEtMDUgMjUtMTAgYmx1ZSBkcmFnb24K\r\n",
    b"From: MAILER-DAEMON@example.org\r\nAuto-Submitted: auto-replied\r\nPrecedence: bulk\r\nList-Id: <l.example.org>\r\n\r\nbounce\r\n",
]


def mutate(rng: random.Random, data: bytes, rounds: int) -> bytes:
    """Byte flips, insertions, deletions, duplicated and cut spans."""
    b = bytearray(data)
    for _ in range(rounds):
        op = rng.randrange(6)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif op == 2 and b:
            del b[i:i + rng.randrange(1, 16)]
        elif op == 3:
            j = rng.randrange(len(b) + 1)
            b[i:i] = b[min(i, j):max(i, j)][:200]
        elif op == 4:
            b[i:i] = rng.choice([b"\r\n", b"\n", b"\r", b"\x00", b"=?utf-8?b?", b"--XX\r\n", b":", b"$$", b"\r\n\r\n", b"\xff\xfe"])
        else:
            del b[i:]
    return bytes(b)


def check_mail(raw: bytes) -> None:
    mail = read_mail(raw, "sender@example.org")
    assert isinstance(mail.body, str) and isinstance(mail.subject, str) and isinstance(mail.from_addr, str)
    lines = command_lines(mail.body)
    assert all(isinstance(ln, Line) and ln.text and "\n" not in ln.text for ln in lines)
    _, kept = take_passwords(lines)
    assert not any(PASSWORD_RE.search(ln.text) for ln in kept), "a $$password$$ left in a command line"
    subject_command(mail.subject)
    automatic_reason(mail, "sender@example.org", "pbm.test")
    assert len(dedup_key(raw, mail.message_id)) == 64


@FUZZ
@given(st.binary(max_size=3000))
def test_mail_parser_on_arbitrary_bytes(raw):
    check_mail(raw)


@FUZZ
@given(st.sampled_from(VALID_MAILS), st.randoms(use_true_random=False), st.integers(1, 40))
def test_mail_parser_on_mutated_mails(raw, rng, rounds):
    check_mail(mutate(rng, raw, rounds))


#: mails that no part of is multipart, as clients write them, and some that
#: only look so (a message/rfc822 mail, a Content-Type the regex misses)
SINGLE_MAILS = [m for m in VALID_MAILS if b"multipart" not in m] + [
    b"From: eve@example.org\r\nTo: pbm@pbm.test\r\nContent-Type: text/plain; format=flowed; delsp=yes\r\n\r\n"
    b"$$pw$$ \r\nGIVE 1 TO  \r\nbob\r\n",
    b"From: fay@example.org\r\nTo: pbm@pbm.test\r\nContent-Type: text/html\r\n\r\n<b>help</b>\r\n",
    b"From: gil@example.org\r\nTo: pbm@pbm.test\r\nContent-Type: message/rfc822\r\n\r\n"
    b"From: x@example.org\r\nSubject: inner\r\n\r\nhelp\r\n",
    b"From: hal@example.org\r\nTo: pbm@pbm.test\r\nContent-Type:\r\n multipart/mixed; boundary=B\r\n\r\n"
    b"--B\r\nContent-Type: text/plain\r\n\r\nhelp\r\n--B--\r\n",
    b"From: ivy@example.org\r\nTo: pbm@pbm.test\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.4\r\n",
]


@FUZZ
@given(st.sampled_from(SINGLE_MAILS), st.randoms(use_true_random=False), st.integers(0, 40))
def test_a_mail_parsed_once_reads_as_when_parsed_in_two_steps(raw, rng, rounds):
    """A mail with no multipart in it is parsed once, whole (mailtext._parse);
    what is read of it is what the two steps (its header block, then the
    whole mail) read of every mail make of it."""
    raw = mutate(rng, raw, rounds)
    once = read_mail(raw, "sender@example.org")
    always = re.compile(rb"")  # every mail takes the two steps
    kept, mailtext._MULTIPART = mailtext._MULTIPART, always
    try:
        twice = read_mail(raw, "sender@example.org")
    finally:
        mailtext._MULTIPART = kept
    assert once == twice


#: what a Message-ID, References or In-Reply-To may be made of: msg-ids,
#: comments, quotes, escapes, encoded words, folds, stray bytes
_ID_PARTS = st.lists(st.one_of(
    st.sampled_from(["<", ">", "@", "(", ")", '"', "\\", " ", "\t", "\r\n ", "\r\n\t", "=?utf-8?q?x?=", "=?", ".", ",",
                     "<a.b@c.d>", "<x@[1.2.3.4]>", "\x00", "\x7f", "\xe9", "\udce9"]),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=12)), max_size=30).map("".join)


@FUZZ
@given(st.sampled_from(["Message-ID", "References", "In-Reply-To"]), _ID_PARTS)
def test_a_header_read_as_written_reads_as_the_email_package_parses_it(name, value):
    """Message-ID, References and In-Reply-To are read as written when that
    is plain (mailtext._AS_WRITTEN): exactly what the email package's parse of
    them gives."""
    raw = f"From: a@example.org\r\n{name}: {value}\r\n\r\nhelp\r\n".encode("utf-8", "surrogateescape")
    msg, _ = mailtext._parse(raw)
    assert mailtext._header(msg, name) == mailtext._parsed_header(msg, name)


@FUZZ
@given(st.text(max_size=2000))
def test_command_lines_on_arbitrary_text(body):
    lines = command_lines(body)
    take_passwords(lines)
    subject_command(body[:300])


# -- every game's command parser ---------------------------------------------------------
#: every registered game: one whose package fails to import fails its tests here
KINDS = list(GAME_KINDS)


def parser_lines(kind: str) -> tuple[str, ...]:
    """The game's own seed lines: ``SCENARIO.parser_lines`` of games/<kind>/scenario.py."""
    return scenario_of(kind).parser_lines


def test_every_game_has_fuzz_seed_lines():
    assert all(parser_lines(kind) for kind in KINDS)


def check_parse(kind: str, lines: list[Line]) -> None:
    commands = get_rules(kind).parse(lines)
    assert isinstance(commands, list)
    for cmd in commands:
        assert isinstance(cmd, Command)
        assert cmd.line in lines, f"{kind}: a command for a line that was not given: {cmd.line!r}"
        assert cmd.error is None or (isinstance(cmd.error, str) and cmd.error.strip())
        if cmd.credentials:  # an inline password is never echoed
            assert cmd.credentials[1] not in cmd.text.split()
    answered = {cmd.line for cmd in commands}
    missing = [ln for ln in lines if ln not in answered]
    assert not missing, f"{kind}: no command (and so no answer) for {missing!r}"


line_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), min_size=1, max_size=120).map(str.strip).filter(bool)


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(data=st.data())
def test_game_parser_on_arbitrary_lines(kind, data):
    texts = data.draw(st.lists(line_text, min_size=1, max_size=8))
    check_parse(kind, [Line(i + 1, t) for i, t in enumerate(texts)])


@pytest.mark.parametrize("kind", KINDS)
@FUZZ
@given(data=st.data())
def test_game_parser_on_mutated_lines(kind, data):
    rng = data.draw(st.randoms(use_true_random=False))
    picks = data.draw(st.lists(st.sampled_from(parser_lines(kind)), min_size=1, max_size=8))
    texts = []
    for t in picks:
        m = mutate(rng, t.encode(), rng.randrange(0, 6)).decode("utf-8", "replace")
        m = " ".join(m.replace("\x00", " ").split())
        if rng.random() < 0.3:
            m = m.upper() if rng.random() < 0.5 else m.lower()
        texts.append(m or t)
    check_parse(kind, [Line(i + 1, t) for i, t in enumerate(texts)])


# -- through the server -------------------------------------------------------------------------
def test_fuzzed_mails_through_the_server(pbm):
    """Mutated valid mails over SMTP: each one the listener accepted is answered
    or dropped with its reason recorded; none is shunted (an exception)."""
    rng = random.Random(int(os.environ.get("PBM_FUZZ_SEED", "9")))
    count = max(20, EXAMPLES // 3)
    pbm.register("alice", "secret-1")
    for kind in KINDS:
        if kind != "curio":
            pbm.new_game(kind, kind)
    pbm.mail("alice@example.org", "pbm", "curio challenge alice alice $$secret-1$$")
    pbm.settle()
    first = pbm.sql("SELECT coalesce(max(id), 0) FROM inbox")[0][0]
    accepted = 0
    for n in range(count):
        base = rng.choice(VALID_MAILS)
        head, _, body = base.partition(b"\r\n\r\n")
        head = b"\r\n".join(h for h in head.split(b"\r\n") if not h.lower().startswith((b"to:", b"message-id:")))
        to = rng.choice(["pbm"] + [k for k in KINDS])
        raw = mutate(rng, head + b"\r\n\r\n" + body, rng.randrange(0, 12))
        raw = f"To: {to}@{pbm.domain}\r\nMessage-ID: <fuzz.{n}@example.org>\r\n".encode() + raw
        sender = rng.choice(["alice@example.org", f"p{n}@example.org", ""])
        try:
            with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
                smtp.sendmail(sender, [f"{to}@{pbm.domain}"], raw)
            accepted += 1
        except smtplib.SMTPException:
            pass  # refused at the door (e.g. a line too long): the sender's MTA bounces it
    assert accepted >= count // 2
    pbm.settle(timeout=120)
    rows = pbm.sql("SELECT id, status, note FROM inbox WHERE id > :first", first=first)
    assert len(rows) == accepted
    shunted = [r for r in rows if r[1] not in ("done", "dropped", "duplicate")]
    assert not shunted, shunted
    for row_id, status, note in rows:
        if status == "done":
            replies = pbm.sql("SELECT count(*) FROM outbox WHERE inbound_id = :i AND kind LIKE 'reply%'", i=row_id)[0][0]
            assert replies == 1 or (note or "").startswith("not answered"), (row_id, note)
        else:
            assert note, f"inbox {row_id} was {status} without a reason"


def test_a_charset_name_with_a_null_character_is_read_as_utf8():
    # found by test_mail_parser_on_mutated_mails: bytes.decode raised ValueError, not LookupError
    raw = (b"From: carol@example.org\r\nTo: pbm@pbm.test\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: text/plain; charset=\"utf\x00-8\"\r\nContent-Transfer-Encoding: 8bit\r\n\r\nhelp\r\n")
    mail = read_mail(raw, "carol@example.org")
    assert mail.body.strip() == "help"
