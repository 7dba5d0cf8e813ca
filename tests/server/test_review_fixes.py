"""Fixes from the review of issue 30, over real SMTP and the real migrated
database: `who` of a game without turns never dates press (and answers a game
once per mail); the outbox's rate-limit counts read through an index; the
streams a player stopped follow the account when it moves and go when it is
removed; a mail from a registered address without $$password$$ costs no
password hashing unless our MTA proved its From."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from pbm_server.accounts.passwords import VERIFIED
from pbm_server.mail.outbound import outbox_count
from pbm_server.store.models import Base
from tests.harness import PbmServer
from tests.server import weeks
from tests.server.weeks import PW, addr

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)
UNDO_LINE = re.compile(r"undo (\w+) ([0-9A-Z]{5}-[0-9A-Z]{5})")


def line_of(text: str, handle: str) -> str:
    [found] = [ln for ln in text.splitlines() if ln.strip().startswith(handle + " ")]
    return found


# -- 2: who -----------------------------------------------------------------------------
def test_who_of_a_curio_game_never_dates_anonymous_press(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.set_clock(T0)
    pbm.start()
    weeks.curio(pbm)  # ann challenges bob and moves on board 101, at 12:00
    out = pbm.cli("game", "set", "curio", "press=on", "anonymous=on").stdout
    assert "anonymous=on" in out, out
    pbm.set_clock(T0 + timedelta(hours=1, minutes=34))
    said = pbm.flat(pbm.mail(addr("ann"), "curio", f"PRESS TO ALL\nguess who\nENDPRESS\n$${PW['ann']}$$"))
    assert "anonymous press" in said, said
    text = pbm.text(pbm.mail("stranger@example.org", "pbm", "who curio\nwho curio"))
    assert "curio: who plays" in text, text
    # ann's line dates her move, not her anonymous press
    assert "13:34" not in text, text
    assert "last game mail Tue 2026-11-24 12:00 UTC" in line_of(text, "ann"), text
    assert "no game mail yet" in line_of(text, "bob"), text
    # the second `who curio` of the mail is not answered again
    assert text.count("curio: who plays") == 1, text
    assert "'who curio' was answered by an earlier line of this mail" in " ".join(text.split()), text


# -- 3 and 14: the outbox's counts --------------------------------------------------------
def _plans(pbm: PbmServer, query: str) -> str:
    if pbm.db_url.startswith("sqlite"):
        return " ".join(str(r[-1]) for r in pbm.sql("EXPLAIN QUERY PLAN " + query))
    return " ".join(r[0] for r in pbm.sql("EXPLAIN " + query))


def _grown_outbox(pbm: PbmServer) -> None:
    """An outbox of a server that ran a while: many old reports, a year of them."""
    if pbm.db_url.startswith("sqlite"):
        return  # SQLite's planner takes an index that serves the WHERE without statistics
    pbm.execute("INSERT INTO outbox (created_at, kind, to_addr, message_id, raw, status, attempts, next_attempt_at) "
                "SELECT timestamp '2025-11-26 00:00' + n * interval '15 minutes', 'report', "
                "'p' || (n % 500) || '@example.org', '<' || n || '@pbm.test>', '', 'sent', 1, "
                "timestamp '2025-11-26 00:00' FROM generate_series(1, 30000) AS n")
    pbm.execute("ANALYZE outbox")


def test_the_outbox_counts_of_the_rate_limits_read_through_the_kind_index(pbm: PbmServer):
    since = "'2026-11-26 12:00:00'"
    queries = [
        # the global and per-domain budgets of replies to unproven mails (reply.py)
        f"SELECT count(*) FROM outbox WHERE kind IN ('reply-unproven', 'reply-code') AND created_at >= {since}",
        f"SELECT count(*) FROM outbox WHERE kind IN ('reply-unproven', 'reply-code') AND created_at >= {since} "
        "AND to_addr LIKE '%@example.org'",
        # forwards to the GM of mail to postmaster@ (postmaster.py)
        f"SELECT count(*) FROM outbox WHERE kind = 'gm-postmaster' AND created_at >= {since}",
        "SELECT inbound_id FROM outbox WHERE kind = 'gm-postmaster' ORDER BY created_at DESC, id DESC LIMIT 1",
        # the GM's bounce summary (bounces.py)
        "SELECT max(created_at) FROM outbox WHERE kind = 'gm-bounces'",
    ]
    _grown_outbox(pbm)
    for query in queries:
        plan = _plans(pbm, query)
        assert "ix_outbox_kind_created" in plan, (query, plan)
    # the one helper counts what a user's mail left behind
    pbm.mail("stranger@example.org", "pbm", "help")
    from sqlalchemy.orm import Session

    with Session(pbm._engine) as s:
        hour_ago = pbm.now() - timedelta(hours=1)
        assert outbox_count(s, ("reply-unproven",), hour_ago, to_addr="stranger@example.org") == 1
        assert outbox_count(s, "reply-unproven", hour_ago, domain="example.org") == 1
        assert outbox_count(s, "reply-unproven", hour_ago, domain="example.com") == 0
        assert outbox_count(s, "reply-unproven", pbm.now() + timedelta(minutes=5)) == 0


def test_the_models_and_the_migrations_agree_on_every_index(pbm: PbmServer):
    with pbm._engine.connect() as c:
        diffs = compare_metadata(MigrationContext.configure(c), Base.metadata)
    about_indexes = [d for d in diffs if isinstance(d, tuple) and d[0] in ("add_index", "remove_index")]
    assert about_indexes == [], about_indexes
    with pbm._engine.connect() as c:
        from sqlalchemy import inspect

        names = {i["name"] for i in inspect(c).get_indexes("outbox")}
        names |= {i["name"] for i in inspect(c).get_indexes("inbox")}
    assert {"ix_outbox_kind_created", "ix_inbox_game_received"} <= names


# -- 9: mail stops follow the account ------------------------------------------------------
BOB, NEW_BOB = "bob@example.org", "bob@new.example"


def _ring(pbm: PbmServer) -> None:
    pbm.cli("game", "new", "giveaway", "ring1")
    for handle in ("ann", "bob", "cat"):
        pbm.register(handle, f"{handle}-pass-1")
        pbm.mail(f"{handle}@example.org", "ring1", f"JOIN\n$${handle}-pass-1$$")
    pbm.run_turn("ring1")


def _press_to(pbm: PbmServer, address: str) -> int:
    pbm.settle()
    return len([m for m in pbm.inbox(address) if "press from ann" in str(m["Subject"])])


def test_a_moved_account_keeps_its_stopped_press_stopped(pbm: PbmServer):
    _ring(pbm)
    said = pbm.text(pbm.mail(BOB, "pbm", "unsubscribe ring1 press\n$$bob-pass-1$$"))
    assert "no more press" in said, said
    text = pbm.flat(pbm.mail(BOB, "pbm", f"email bob {NEW_BOB}\n$$bob-pass-1$$"))
    assert f"a code went to {NEW_BOB}" in text, text
    pbm.settle()
    [code_mail] = pbm.inbox(NEW_BOB)
    code = PbmServer.code_in(code_mail)
    assert "now belongs to this address" in pbm.flat(pbm.mail(NEW_BOB, "pbm", f"confirm {code}"))
    answer = pbm.flat(pbm.mail("ann@example.org", "ring1", "PRESS TO ALL\nhello all\nENDPRESS\n$$ann-pass-1$$"))
    assert "bob stopped press mail of ring1" in answer, answer
    assert _press_to(pbm, NEW_BOB) == 0 and _press_to(pbm, "cat@example.org") == 1
    assert "stopped: press from the other players of ring1" in pbm.text(
        pbm.mail(NEW_BOB, "pbm", "settings\n$$bob-pass-1$$"))
    # the old address undoes the move: the stop comes back with the account
    pbm.settle()
    told = [m for m in pbm.inbox(BOB) if "has moved" in str(m["Subject"])]
    handle, undo = UNDO_LINE.search(pbm.flat(told[0])).groups()
    pbm.secrets.add("bob-pass-2")
    assert "is back at this address" in pbm.flat(pbm.mail(BOB, "pbm", f"undo {handle} {undo} bob-pass-2"))
    assert pbm.sql("SELECT address FROM mail_stops") == [(BOB,)]
    pbm.mail("ann@example.org", "ring1", "PRESS TO ALL\nagain\nENDPRESS\n$$ann-pass-1$$")
    assert _press_to(pbm, BOB) == 0 and _press_to(pbm, "cat@example.org") == 2


def test_a_removed_accounts_stops_do_not_pass_to_the_next_account_at_its_address(pbm: PbmServer):
    _ring(pbm)
    pbm.register("dan", "dan-pass-1")
    said = pbm.text(pbm.mail("dan@example.org", "pbm", "unsubscribe ring1\n$$dan-pass-1$$"))
    assert "no more" in said, said
    assert pbm.cli("account", "remove", "dan").stdout.strip() == "dan removed"
    pbm.register("dana", "dana-pass-1", email="dan@example.org")
    text = pbm.text(pbm.mail("dan@example.org", "pbm", "settings\n$$dana-pass-1$$"))
    assert "you get all the mail of your games" in text, text
    assert pbm.sql("SELECT count(*) FROM mail_stops")[0][0] == 0


# -- 10: no hashing for a From anyone may write -------------------------------------------
def test_a_forged_from_with_bare_words_costs_no_password_hash(pbm: PbmServer):
    pbm.register("ann", PW["ann"])
    [stored] = pbm.sql("SELECT password_hash FROM accounts WHERE handle = 'ann'")[0]
    VERIFIED._entries.clear()  # nothing checked lately (the server runs in this process)
    # anyone may write From: ann@...: two bare words, one of them her password
    reply = pbm.flat(pbm.mail(addr("ann"), "pbm", f"timezone {PW['ann']} Europe/Berlin"))
    # the reply (to ann's own address) still masks the likeliest words, unchecked
    assert PW["ann"] not in reply and "> timezone **** ****" in reply, reply
    # had the password been hashed, a match would now be in the cache of verified passwords
    assert not VERIFIED.knows(stored, PW["ann"])
    # once ann's own mail proved her password, the cheap cache masks a bare copy of it
    pbm.mail(addr("ann"), "pbm", f"timezone UTC\n$${PW['ann']}$$")
    assert VERIFIED.knows(stored, PW["ann"])
    echoed = pbm.flat(pbm.mail(addr("ann"), "pbm", f"timezone {PW['ann']}"))
    assert PW["ann"] not in echoed and "****" in echoed, echoed


def test_a_from_our_mta_proved_still_has_its_bare_password_checked_and_masked(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.env["PBM_TRUSTED_AUTHSERV_ID"] = "mx.pbm.test"
    pbm.start()
    passed = {"Authentication-Results": "mx.pbm.test 1; spf=pass smtp.mailfrom=ann@example.org; "
                                        "dkim=pass header.d=example.org; dmarc=pass header.from=example.org"}
    reply = pbm.mail(addr("ann"), "pbm", "register ann " + PW["ann"], subject="register")
    pbm.secrets.add(PW["ann"])
    msg = pbm.build(addr("ann"), "pbm", f"confirm {PbmServer.code_in(reply)}", subject="confirm", headers=passed)
    pbm.send_message(msg)
    pbm.settle()
    [stored] = pbm.sql("SELECT password_hash FROM accounts WHERE handle = 'ann'")[0]
    VERIFIED._entries.clear()
    msg = pbm.build(addr("ann"), "pbm", f"timezone {PW['ann']} Europe/Berlin", headers=passed)
    pbm.send_message(msg)
    pbm.settle()
    [answer] = pbm.replies_to(msg["Message-ID"])
    text = pbm.flat(answer)
    # checked (the cache now knows it) and masked; the other word, not the password, stays as written
    assert VERIFIED.knows(stored, PW["ann"])
    assert PW["ann"] not in text and "> timezone **** Europe/Berlin" in text, text
