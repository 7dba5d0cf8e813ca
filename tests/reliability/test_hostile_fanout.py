"""One forged mail fanned out through its recipients (issue 41, item 1), by
mail through a real `pbm serve` (SMTP on loopback).

An attacker names the victim in ``MAIL FROM`` and lists up to 100 of our
addresses in ``RCPT TO``.  Before, each recipient was an inbox row with the
whole mail in it, and each row was answered on its own: one transaction of
100 recipients and the body ``help`` sent 60 replies to the victim (the
per-address hour limit stopped the rest), and one of 1 MB wrote 100 MB into
the database and its WAL.  Now the mail's bytes are stored once for all its
rows, and a transaction that proved no sender gets one answer, which names
every address it reached; a sender with a valid password still gets each
game's reply.
"""

from __future__ import annotations

import os
import random
import smtplib
import sqlite3
from email.message import EmailMessage
from pathlib import Path

import pytest

from pbm_server.store.db import downgrade, upgrade
from pbm_server.store.models import INBOX_RAW
from tests.harness import PbmServer

VICTIM = "victim@target.example"
PG = bool(os.environ.get("PBM_TEST_DATABASE_URL"))


def games(pbm: PbmServer, n: int) -> list[str]:
    """``n`` giveaway games, g00 ...; their addresses."""
    names = [f"g{i:02d}" for i in range(n)]
    for name in names:
        pbm.new_game("giveaway", name)
    return [pbm.address(name) for name in names]


def forged(pbm: PbmServer, body: str = "help", attachment: bytes = b"") -> EmailMessage:
    msg = pbm.build(VICTIM, "pbm", body, subject="hello")
    if attachment:
        msg.add_attachment(attachment, maintype="application", subtype="octet-stream", filename="big.bin")
    return msg


def crlf(msg: EmailMessage) -> bytes:
    """The mail as it goes over SMTP (CRLF line ends)."""
    return msg.as_bytes(policy=msg.policy.clone(linesep="\r\n"))


def send(pbm: PbmServer, msg: EmailMessage, mail_from: str, rcpts: list[str]) -> tuple[int, bytes]:
    """One SMTP transaction to every address in ``rcpts``: DATA's answer."""
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=60) as smtp:
        smtp.ehlo()
        assert smtp.mail(mail_from)[0] == 250
        for rcpt in rcpts:
            code, text = smtp.rcpt(rcpt)
            assert code == 250, (rcpt, code, text)
        return smtp.data(crlf(msg))


def sqlite_files(pbm: PbmServer) -> tuple[Path, Path]:
    path = Path(pbm.db_url.removeprefix("sqlite:///"))
    return path, Path(str(path) + "-wal")


def on_disk(pbm: PbmServer) -> int:
    """The bytes of the database file and its WAL."""
    return sum(p.stat().st_size for p in sqlite_files(pbm) if p.exists())


def empty_the_wal(pbm: PbmServer) -> None:
    """Every page of the WAL copied into the database and the WAL cut to
    nothing, so that what a mail then writes shows in one of the two."""
    with sqlite3.connect(sqlite_files(pbm)[0]) as con:
        busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0
    assert sqlite_files(pbm)[1].stat().st_size == 0


@pytest.mark.skipif(PG, reason="measures the SQLite database file and its WAL")
def test_a_1_mb_mail_to_100_games_writes_about_twice_its_size(pbm_stopped):
    pbm = pbm_stopped
    ours = games(pbm, 100)
    pbm.start("worker")  # the listener alone: what accepting the mail writes
    # about 1 MB: the line `help` and an attachment of random bytes (base64)
    msg = forged(pbm, attachment=random.Random(41).randbytes(760_000))
    size = len(crlf(msg))
    assert 1_000_000 < size < 1_100_000
    empty_the_wal(pbm)
    before = on_disk(pbm)
    code, text = send(pbm, msg, VICTIM, ours)
    assert code == 250, text
    accepted = on_disk(pbm) - before
    # before: each of the 100 inbox rows held the whole mail, all in one
    # commit: 100 MB in the WAL for 1 MB accepted; now it is stored once
    assert accepted <= 2 * size + 2048 * len(ours), (accepted, size)
    pbm.stop()
    pbm.start()  # the worker handles the 100 rows, each in a commit of its own
    pbm.settle(timeout=120)
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'done'")[0][0] == 100
    pbm.stop()
    handled = on_disk(pbm) - before
    # the WAL is reused once it was checkpointed (every 1,000 pages): what
    # stays is the database's own growth
    empty_the_wal(pbm)
    kept = on_disk(pbm) - before
    print(f"\n{size:,} bytes to 100 games: {accepted / size:.2f} bytes written (database + WAL) per accepted "
          f"byte by the listener; {handled / size:.2f} once the worker handled the rows; {kept / size:.2f} kept "
          f"after a checkpoint")
    assert kept <= 2 * size + 2048 * len(ours), (kept, size)
    # each row's commit rewrites a few pages of the inbox and its indexes in the WAL
    assert handled <= 2 * size + 32 * 1024 * len(ours), (handled, size)


def test_the_rows_of_one_mail_share_one_stored_body(pbm):
    ours = [pbm.address("pbm")] + games(pbm, 3)
    bodies = pbm.sql("SELECT count(*) FROM inbox_bodies")[0][0]
    msg = forged(pbm, body="games")
    code, text = send(pbm, msg, VICTIM, ours + [ours[1].upper()])  # one address twice: one recipient
    assert code == 250 and len(text.split()) == len(b"OK queued as".split()) + 4, text
    pbm.settle()
    rows = pbm.sql("SELECT i.rcpt_tos, b.raw, b.rcpt_tos FROM inbox i JOIN inbox_bodies b ON b.id = i.body_id "
                   "ORDER BY i.id")
    assert len(rows) == 4 and pbm.sql("SELECT count(*) FROM inbox_bodies")[0][0] == bodies + 1
    assert {bytes(raw) for _, raw, _ in rows} == {crlf(msg)}


def test_a_forged_mail_to_many_addresses_gets_one_answer_that_names_them(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_WORKERS"] = "3"  # rows of different games handled side by side: one takes the answer
    pbm.start()
    ours = [pbm.address("pbm")] + games(pbm, 30)
    msg = forged(pbm)
    code, _ = send(pbm, msg, VICTIM, ours)
    assert code == 250
    pbm.settle()
    # before: 31 replies to the victim, one from each address
    (answer,) = pbm.replies_to(msg["Message-ID"])
    assert answer["To"] == VICTIM
    text = pbm.flat(answer)
    assert "This mail was sent to 31 of our addresses" in text, text
    assert all(address in text for address in ours), text
    notes = [n for (n,) in pbm.sql("SELECT note FROM inbox ORDER BY id")]
    assert len(notes) == 31 and pbm.sql("SELECT count(*) FROM inbox WHERE status <> 'done'")[0][0] == 0
    assert sum(1 for n in notes if n and "one answer" in n) == 30, notes
    # the same mail sent again (its sender's MTA missed our 250): copies, never answered
    send(pbm, msg, VICTIM, ours)
    pbm.settle()
    assert len(pbm.replies_to(msg["Message-ID"])) == 1
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'duplicate'")[0][0] == 31


def test_a_sender_with_a_password_still_gets_each_games_reply(pbm):
    games(pbm, 2)
    pbm.register("ann", "ann-pass1")
    msg = pbm.build("ann@example.org", "g00", "JOIN\n$$ann-pass1$$")
    code, _ = send(pbm, msg, "ann@example.org", [pbm.address("g00"), pbm.address("g01")])
    assert code == 250
    pbm.settle()
    replies = pbm.replies_to(msg["Message-ID"])
    assert sorted(m["From"].addresses[0].username for m in replies) == ["g00", "g01"]
    assert not any("of our addresses" in pbm.flat(m) for m in replies)
    # the same sender without the password: one answer for both
    msg = pbm.build("ann@example.org", "g00", "help")
    send(pbm, msg, "ann@example.org", [pbm.address("g00"), pbm.address("g01")])
    pbm.settle()
    (answer,) = pbm.replies_to(msg["Message-ID"])
    assert "This mail was sent to 2 of our addresses" in pbm.flat(answer)


def test_mail_stored_before_the_upgrade_is_moved_and_answered(pbm_stopped):
    pbm = pbm_stopped
    downgrade(pbm._engine, "0016")
    raw = crlf(forged(pbm, body="help"))
    json = "CAST(:r AS JSON)" if PG else ":r"
    for n in range(2):  # two rows of one mail, each with its own copy (as stored before)
        pbm.execute("INSERT INTO inbox (received_at, mail_from, rcpt_tos, raw, status, tries) "
                    f"VALUES (CURRENT_TIMESTAMP, :f, {json}, :raw, 'new', 0)",
                    f=VICTIM, r=f'["{"pbm" if n == 0 else "postmaster"}@{pbm.domain}"]', raw=raw)
    # a mail handled before, and its reply, which names it
    pbm.execute("INSERT INTO inbox (received_at, mail_from, rcpt_tos, raw, status, tries) "
                f"VALUES (CURRENT_TIMESTAMP, :f, {json}, :raw, 'done', 0)", f=VICTIM, r='["pbm@pbm.test"]', raw=b"old")
    pbm.execute("INSERT INTO outbox (created_at, inbound_id, kind, to_addr, message_id, raw, status, attempts, "
                "next_attempt_at) VALUES (CURRENT_TIMESTAMP, 3, 'reply', :t, '<old@pbm.test>', :raw, 'sent', 1, "
                "CURRENT_TIMESTAMP)", t=VICTIM, raw=b"old reply")
    pbm.start()  # upgrades the database, then handles both new rows
    pbm.settle()
    rows = pbm.sql("SELECT i.id, i.body_id, i.status, b.raw FROM inbox i JOIN inbox_bodies b ON b.id = i.body_id "
                   "ORDER BY i.id")
    assert [(i, b, st, bytes(r)) for i, b, st, r in rows] == [(1, 1, "done", raw), (2, 2, "done", raw),
                                                              (3, 3, "done", b"old")]
    # what names an inbox row still names it (a table rebuilt under SQLite's foreign keys would have lost it)
    assert pbm.sql("SELECT inbound_id FROM outbox WHERE message_id = '<old@pbm.test>'") == [(3,)]
    # pbm@ answered the help, postmaster@ forwarded the mail to the GM
    assert len(pbm.inbox(VICTIM)) == 1 and len(pbm.inbox(pbm.gm_address)) == 1
    # a new mail takes a body id after the moved ones
    send(pbm, forged(pbm), VICTIM, [pbm.address("pbm")])
    assert pbm.sql("SELECT max(body_id) FROM inbox")[0][0] == 4
    # and back: each row gets its mail's bytes again
    pbm.stop()
    downgrade(pbm._engine, "0016")
    assert [bytes(r) for (r,) in pbm.sql("SELECT raw FROM inbox ORDER BY id")][:3] == [raw, raw, b"old"]
    assert pbm.sql("SELECT inbound_id FROM outbox WHERE message_id = '<old@pbm.test>'") == [(3,)]
    # and up again
    upgrade(pbm._engine)
    assert pbm.sql(f"SELECT count(*) FROM inbox WHERE {INBOX_RAW} IS NULL")[0][0] == 0
    assert pbm.sql("SELECT inbound_id FROM outbox WHERE message_id = '<old@pbm.test>'") == [(3,)]


def test_a_register_sent_to_a_game_and_pbm_still_gets_its_code(pbm):
    # the game's row comes first and takes the one answer; the reply with the
    # confirmation code goes all the same (the account is useless without it)
    games(pbm, 1)
    pbm.secrets.add("bea-pass-77")
    msg = pbm.build("bea@example.org", "pbm", "register bea bea-pass-77", subject="register")
    send(pbm, msg, "bea@example.org", [pbm.address("g00"), pbm.address("pbm")])
    pbm.settle()
    replies = pbm.replies_to(msg["Message-ID"])
    assert len(replies) == 2, [pbm.flat(m) for m in replies]
    coded = [m for m in replies if m["From"].addresses[0].username == "pbm"]
    confirmed = pbm.confirm("bea@example.org", coded[0])
    assert "registered as" in pbm.text(confirmed), pbm.text(confirmed)


@pytest.mark.process  # SIGKILL
def test_a_forged_mail_stored_before_a_kill_gets_one_answer_after_it(pbm_stopped):
    pbm = pbm_stopped
    ours = [pbm.address("pbm")] + games(pbm, 2)
    pbm.start("worker")  # the listener alone: stored, 250 given, nothing handled
    msg = forged(pbm)
    assert send(pbm, msg, VICTIM, ours)[0] == 250
    pbm.stop(kill=True)
    pbm.start()
    pbm.settle()
    (answer,) = pbm.replies_to(msg["Message-ID"])
    assert "This mail was sent to 3 of our addresses" in pbm.flat(answer)
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'done'")[0][0] == 3
