"""Replies kept as their parts (pbm_server/mail/compose.py, Composer.deferred):
the worker's write transaction puts a reply's parts in the outbox, its
secrets already masked; delivery writes the mail out, the same mail on every
attempt.  Also the listener's and delivery's share of SQLite's one writer
(store/db.py, _WriterTurn): the listener's groups take their turn like every
other writer, and delivery lets a writer of its own process go first.
Real database and migrations, the real worker and delivery in this process,
the harness's real SMTP sink as the relay."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email import policy
from email.parser import BytesParser

import pytest
from sqlalchemy import text

from pbm_server.base.settings import load_settings
from pbm_server.mail.compose import BOUNDARY, DEFERRED, Composer, Rendered, written_out
from pbm_server.mail.headers import POLICY, SMTP_POLICY, PlainHeader, plain_or_parsed
from pbm_server.mail.inbound import IntakeWriter, store_messages
from pbm_server.mail.outbound import Outbound
from pbm_server.pipeline.worker import Worker
from pbm_server.store.db import Database

PASSWORD = "deferred-pass-77"
#: the machine's writer turn is SQLite's (on PostgreSQL writers do not queue for one file)
sqlite_only = pytest.mark.skipif(bool(os.environ.get("PBM_TEST_DATABASE_URL")), reason="the writer turn is SQLite's")


@pytest.fixture
def one_game(pbm_stopped):
    pbm = pbm_stopped
    pbm.new_game("giveaway", "dg1")
    pbm.cli("account", "add", "dora", "dora@example.org", "--password", PASSWORD)
    pbm.secrets.add(PASSWORD)
    return pbm


@contextmanager
def _parts(pbm, **env: str) -> Iterator[tuple[Database, Worker, Outbound]]:
    """The real worker and delivery on the test's database, in this process."""
    db = Database(pbm.db_url)
    settings = load_settings({"PBM_DATABASE_URL": pbm.db_url, "PBM_DOMAIN": pbm.domain,
                              "PBM_GM_ADDRESS": pbm.gm_address, "PBM_RELAY": f"127.0.0.1:{pbm.sink.port}", **env})
    worker = Worker(db, settings, Composer(settings))
    outbound = Outbound(db, settings)
    try:
        yield db, worker, outbound
    finally:
        outbound._end_session()
        worker.close()
        db.dispose()


def _store(pbm, db: Database, body: str) -> tuple[int, str]:
    msg = pbm.build("dora@example.org", "dg1", body)
    [inbox_id] = store_messages(db, [(msg["From"], [msg["To"]], bytes(msg))])
    return inbox_id, msg["Message-ID"]


def _outbox(db: Database) -> list[tuple[int, str, bytes, str]]:
    with db.engine.connect() as c:
        return [(r.id, r.message_id, bytes(r.raw), r.status)
                for r in c.execute(text("SELECT id, message_id, raw, status FROM outbox ORDER BY id"))]


def test_the_outbox_keeps_a_reply_as_its_parts_without_the_password_and_delivery_writes_it_out(one_game):
    pbm = one_game
    with _parts(pbm) as (db, worker, outbound):
        _, asked = _store(pbm, db, f"JOIN\n$$ {PASSWORD} $$")
        assert worker.run_once()
        [(row_id, message_id, raw, status)] = _outbox(db)
        assert raw.startswith(DEFERRED) and status == "pending"
        assert PASSWORD.encode() not in raw  # masked before it was stored, not only in the mail
        assert outbound.run_once() == 1
    assert _outbox(db)[0][3] == "sent"
    [reply] = pbm.sink.replies_to(asked)
    assert reply["Message-ID"] == message_id  # the id chosen with the parts is the mail's
    assert reply["To"] == "dora@example.org" and reply["Auto-Submitted"] == "auto-replied"
    plain = reply.get_body(("plain",)).get_content()
    assert "Hello dora" in plain and "you are in the game" in plain
    assert PASSWORD not in reply.as_string()


def test_a_reply_written_out_again_is_the_same_mail(one_game):
    """A retry (the relay said 4xx, or a kill between its 250 and the mark)
    sends the same Message-ID, Date and text: what a reader and a relay's
    duplicate check see."""
    pbm = one_game
    with _parts(pbm) as (db, worker, _):
        _store(pbm, db, f"JOIN\n$$ {PASSWORD} $$")
        assert worker.run_once()
        [(_, message_id, raw, _)] = _outbox(db)
    first, second = (BytesParser(policy=policy.default).parsebytes(written_out(raw)) for _ in range(2))
    for name in ("Message-ID", "Date", "Subject", "From", "To", "In-Reply-To", "References"):
        assert first[name] == second[name], name
    assert first["Message-ID"] == message_id
    assert first.get_body(("plain",)).get_content() == second.get_body(("plain",)).get_content()
    assert bytes(first) == bytes(second)  # word for word, the boundary too


def test_a_reply_written_out_is_the_mail_the_servers_composer_writes(one_game):
    """Delivery writes a reply out from its parts alone (compose.written_out),
    not with the server's settings: the parts must carry all that the
    server's own Composer.message would use, so both write the same bytes."""
    from datetime import datetime, timezone

    pbm = one_game
    settings = load_settings(pbm.env)
    composer = Composer(settings)
    fields = dict(to_addr="dora@example.org", to_name="dora", from_local="dg1", subject="dg1: your orders",
                  body=Rendered(f"You gave 1.\n$${PASSWORD}$$ seen", "<p>You gave 1.</p>"), auto="auto-replied",
                  now=datetime(2026, 11, 26, 18, 0, tzinfo=timezone.utc), in_reply_to="<asked@example.org>",
                  references=["<first@example.org>", "<asked@example.org>"], secrets={PASSWORD},
                  thread="<thread.dg1@" + settings.domain + ">")
    message_id, raw = composer.deferred(**fields)
    _, whole = composer.message(**fields, message_id=message_id)
    assert written_out(raw) == whole
    assert PASSWORD.encode() not in whole


def test_a_row_that_cannot_be_written_out_fails_alone_and_delivery_goes_on(one_game):
    pbm = one_game
    with _parts(pbm) as (db, worker, outbound):
        told: list[str] = []  # what pbm serve tells the GM of a failed delivery (on_failed)
        outbound.on_failed = lambda _s, row: told.append(row.message_id)
        _, asked = _store(pbm, db, f"JOIN\n$$ {PASSWORD} $$")
        assert worker.run_once()
        with db.engine.begin() as c:  # a row before it whose parts are broken
            c.execute(text("INSERT INTO outbox (created_at, kind, to_addr, message_id, raw, status, attempts, "
                           "next_attempt_at) SELECT created_at, kind, to_addr, '<broken@pbm.test>', :raw, 'pending', 0, "
                           "next_attempt_at FROM outbox"), {"raw": DEFERRED + b"{not json"})
        assert outbound.run_once() == 2
        rows = {mid: (status, error) for mid, status, error in db.engine.connect().execute(
            text("SELECT message_id, status, last_error FROM outbox"))}
    assert rows["<broken@pbm.test>"][0] == "failed"
    assert told == ["<broken@pbm.test>"]  # the GM hears of it as of any failed delivery
    assert "could not write this mail out" in rows["<broken@pbm.test>"][1]
    assert len(pbm.sink.replies_to(asked)) == 1  # the good reply went all the same
    assert [m for m in pbm.sink.all() if m[1]["Message-ID"] == "<broken@pbm.test>"] == []


def test_a_mail_quoting_a_deferred_reply_is_not_read_as_commands(one_game):
    """The reader leaves out the lines of our mails that a mail carries
    (mail/replies.py); a reply kept as its parts is written out to be
    compared."""
    pbm = one_game
    with _parts(pbm) as (db, worker, outbound):
        _, asked = _store(pbm, db, f"JOIN\n$$ {PASSWORD} $$")
        assert worker.run_once() and outbound.run_once() == 1
        [reply] = pbm.sink.replies_to(asked)
        # pasted back without quote marks, as some clients forward: only
        # knowing our mail's text tells its lines from commands
        quoted = reply.get_body(("plain",)).get_content()
        msg = pbm.build("dora@example.org", "dg1", f"$$ {PASSWORD} $$\nGIVE 1 TO dora\n\n{quoted}",
                        headers={"In-Reply-To": reply["Message-ID"], "References": reply["Message-ID"]})
        store_messages(db, [(msg["From"], [msg["To"]], bytes(msg))])
        assert worker.run_once() and outbound.run_once() == 1
    [answer] = pbm.sink.replies_to(msg["Message-ID"])
    body = answer.get_body(("plain",)).get_content()
    commands = body.split("Your commands:", 1)[1].split("\n\n", 1)[0]
    assert "> GIVE 1 TO dora" in commands
    assert "JOIN" not in commands and "Hello dora" not in commands  # the quoted reply was left out


@pytest.mark.nodb
def test_the_boundary_never_occurs_inside_a_part():
    """One boundary per process: a text that holds it word for word still
    makes two whole parts (quoted-printable writes every "=" as "=3D")."""
    from pbm_server.base.settings import Settings

    composer = Composer(Settings(domain="pbm.test"))
    evil = f"--{BOUNDARY}\nContent-Type: text/html\n\n<b>forged</b>\n--{BOUNDARY}--\n"
    _, raw = composer.message(to_addr="x@example.org", to_name="x", from_local="pbm", subject="s",
                              body=Rendered(evil, f"<p>{evil}</p>"), auto="auto-replied",
                              now=__import__("datetime").datetime(2026, 11, 26, 12, 0))
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    parts = list(msg.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    assert f"--{BOUNDARY}" in parts[0].get_content() and "<b>forged</b>" in parts[0].get_content()


@pytest.mark.parametrize("name,value", [
    ("Subject", "dg1: your orders (turn 3)"),
    ("Subject", "a subject long enough to be folded over more than one line of the mail, " * 2),
    ("Subject", "Grüße aus Köln"),
    ("From", '"pbm-server" <dg1@pbm.test>'),
    ("To", "dora@example.org"),
    ("References", " ".join(f"<{n}.thread@pbm.test>" for n in range(12))),
])
@pytest.mark.nodb
def test_a_header_folded_from_the_cache_is_folded_as_the_email_package_folds_it(name, value):
    plain = policy.SMTP.clone(linesep="\r\n")
    for _ in range(2):  # the second from the cache
        ours = SMTP_POLICY.fold_binary(name, SMTP_POLICY.header_store_parse(name, value)[1])
        assert ours == plain.fold_binary(name, plain.header_store_parse(name, value)[1])


_PLAIN_VALUES = [
    ("To", "p01104@example.org"), ("To", "dora.k+pbm@mail.example.org"),
    ("Date", "Fri, 27 Nov 2026 01:41:27 +0000"), ("Date", "Mon, 02 Feb 2026 23:59:59 -0000"),
    ("Message-ID", "<179574368722.9093.214625668469391846@pbm.localhost>"),
    ("In-Reply-To", "<burst.1999.9109@example.org>"), ("In-Reply-To", "<a(b)c\"d\"@x>"),
    ("References", "<game.r110.111@pbm.localhost> <burst.1999.9109@example.org>"),
    ("References", " ".join(f"<{n}.thread@pbm.test>" for n in range(12))),  # longer than a line: folded
]
_PARSED_VALUES = [
    ("To", '"Dora K" <dora@example.org>'), ("To", "dora@example.org (Dora)"), ("To", "dörte@example.org"),
    ("To", '"a b"@example.org'), ("In-Reply-To", "=?utf-8?q?a=0Ab?="), ("References", "<a@x>  <b@y>"),
    ("In-Reply-To", "<a@x>\t<b@y>"), ("References", "<ä@x>"), ("Date", "Fri,  27 Nov 2026 01:41:27 +0000"),
]


@pytest.mark.nodb
def test_a_plain_header_is_written_as_the_email_package_writes_it():
    """The values of a reply of its own are written as they are
    (headers.PlainHeader) only where the email package would write the
    same bytes; every other value is parsed as before."""
    import random
    rng = random.Random(30)
    alphabet = "az09.@<>-_+=?!#()\"', :"
    made = [("In-Reply-To", "<" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 70))) + ">")
            for _ in range(300)]
    made += [("To", "".join(rng.choice("ab.-+=?!#~@") for _ in range(rng.randint(3, 20)))) for _ in range(300)]
    plain = sum(isinstance(plain_or_parsed(n, v), PlainHeader) for n, v in made)
    assert 0 < plain < len(made)  # the random values are of both kinds
    assert all(isinstance(plain_or_parsed(n, v), PlainHeader) for n, v in _PLAIN_VALUES)
    assert not any(isinstance(plain_or_parsed(n, v), PlainHeader) for n, v in _PARSED_VALUES)
    for ours, theirs in ((SMTP_POLICY, policy.SMTP.clone(linesep="\r\n")), (POLICY, policy.default),
                         (SMTP_POLICY.clone(utf8=True), policy.SMTPUTF8)):
        for name, value in _PLAIN_VALUES + _PARSED_VALUES + made:
            try:
                expected: object = theirs.fold_binary(name, theirs.header_store_parse(name, value)[1])
            except Exception as exc:  # the email package fails on some broken addresses: ours the same
                expected = type(exc)
            try:
                got: object = ours.fold_binary(name, ours.header_store_parse(name, plain_or_parsed(name, value))[1])
            except Exception as exc:
                got = type(exc)
            assert got == expected, (name, value)


@pytest.mark.nodb
def test_a_reply_writes_its_own_header_values_without_parsing_them(monkeypatch):
    """Writing out a reply parses none of its header values when they are
    plain (the server's From of a plain name, To, Date, Message-ID,
    In-Reply-To, References, the loop and auto-reply markers); a value that
    is not (a quoted display name) is parsed as before."""
    from datetime import datetime, timezone

    from pbm_server.mail import headers

    parsed: list[str] = []
    real = headers._parsed

    def counted(factory, name, value, budget=None):
        parsed.append(name)
        return real(factory, name, value, budget)

    monkeypatch.setattr(headers, "_parsed", counted)
    composer = Composer(load_settings({"PBM_DOMAIN": "pbm.test"}))

    def write(to_addr: str) -> bytes:
        parsed.clear()
        return composer.message(to_addr=to_addr, to_name="dora", from_local="dg1", subject="dg1: orders",
                                body=Rendered("ok", None), auto="auto-replied",
                                now=datetime(2026, 11, 27, 3, 0, tzinfo=timezone.utc),
                                in_reply_to="<a.1@example.org>", references=["<a.0@example.org>"],
                                thread="<game.dg1@pbm.test>")[1]

    write("dora@example.org")  # the first in a process also takes a text part's MIME headers from the package, once
    raw = write("dora@example.org")
    assert b"To: dora@example.org\r\n" in raw and b"In-Reply-To: <a.1@example.org>\r\n" in raw
    assert parsed == []  # not even the server's From (pbm-server <dg1@pbm.test>), parsed and cached until 2026-12-03
    write('"Dora K" <dora@example.org>')
    assert parsed == ["To"]


@sqlite_only
def test_the_listener_waits_for_its_turn_to_write(one_game):
    """The listener's group commit takes the machine's writer turn like every
    writer (a back end holding it makes the listener wait; SQLite's own
    busy wait would poll with sleeps)."""
    pbm = one_game
    db = Database(pbm.db_url)
    intake = IntakeWriter(db)
    msg = pbm.build("dora@example.org", "dg1", "help")
    done = threading.Event()
    stored: list[list[list[int]]] = []
    try:
        with db.writer_turn():
            t = threading.Thread(target=lambda: (stored.append(intake._fast.store([(msg["From"], [msg["To"]], bytes(msg))])),
                                                 done.set()))
            t.start()
            assert not done.wait(0.3)  # the turn is held: nothing stored yet
        t.join(10)
        assert done.is_set() and len(stored[0]) == 1
    finally:
        db.dispose()


@sqlite_only
def test_delivery_lets_a_writer_of_its_process_go_first(one_game):
    pbm = one_game
    with _parts(pbm) as (db, worker, outbound):
        _store(pbm, db, f"JOIN\n$$ {PASSWORD} $$")
        assert worker.run_once()
        result: list[int] = []
        with db.writer_turn():
            t = threading.Thread(target=lambda: result.append(outbound.run_once()))
            t.start()
            t.join(0.3)
            assert pbm.sink.count() == 0  # it waits before it writes out and relays the reply
        t.join(10)
        assert result == [1] and pbm.sink.count() == 1


@sqlite_only
def test_a_writer_turn_never_given_back_stalls_delivery_only_for_a_while(one_game, monkeypatch):
    """A thread that keeps the writer turn (a write opened inside another,
    a hung writer) makes delivery wait at most ``_WriterTurn.WAIT`` (60 s;
    here half a second): then it writes out, relays and marks the reply
    without the turn, SQLite's own lock still guarding the file."""
    from pbm_server.store.db import _WriterTurn

    monkeypatch.setattr(_WriterTurn, "WAIT", 0.5)
    pbm = one_game
    with _parts(pbm) as (db, worker, outbound):
        _store(pbm, db, f"JOIN\n$$ {PASSWORD} $$")
        assert worker.run_once()
        result: list[int] = []
        let_go = threading.Event()
        holder = threading.Thread(target=lambda: _hold(db, let_go))
        holder.start()
        try:
            t = threading.Thread(target=lambda: result.append(outbound.run_once()))
            t.start()
            t.join(20)
            assert result == [1] and pbm.sink.count() == 1  # the turn is still held
            assert pbm.sql("SELECT status FROM outbox")[0][0] == "sent"
        finally:
            let_go.set()
            holder.join(10)


def _hold(db: Database, let_go: threading.Event) -> None:
    with db.writer_turn():
        let_go.wait(30)
