"""Two `pbm serve` processes sharing one database (PostgreSQL when
PBM_TEST_DATABASE_URL points at one, else one SQLite file) process every mail
once and run every turn once, and every mail they send reaches the relay
exactly once: a server claims an outbox row (one UPDATE whose row count says
whether it got it) before delivering it (docs/reliability.md)."""

from __future__ import annotations

import collections
import time
from datetime import datetime, timedelta, timezone

import pytest

# `pbm serve` in its own processes: what this module shows is about processes
pytestmark = pytest.mark.process

PW = {"alice": "alice-pass-1", "bob": "bob-pass-22", "carol": "carol-pass-3"}  # a round needs 3


def test_two_servers_one_database(make_server):
    a = make_server("a")
    b = make_server("b")
    b.env["PBM_DATABASE_URL"] = a.db_url  # b's own (empty) database is dropped at the end
    start = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)  # a Monday
    a.set_clock(start)
    b.env["PBM_CLOCK_FILE"] = str(a.clock_file)
    b.env["PBM_RELAY"] = a.env["PBM_RELAY"]  # one relay: every mail either server sends lands in a.sink
    a.cli("db", "upgrade")
    a.new_game("giveaway", "gift", deadline="every day 18:00 UTC")
    a.start()
    b.start()

    mails = {h: a.register(h, pw) for h, pw in PW.items()}
    for h in PW:
        server = b if h == "bob" else a
        mid = server.send(mails[h], "gift", f"$${PW[h]}$$\nJOIN")
        a.settle()
        replies = a.replies_to(mid)
        assert len(replies) == 1
        assert "accepted" in a.text(replies[0])

    sent = []
    for i in range(40):
        server = (a, b)[i % 2]
        sent.append(server.send(f"player{i}@example.org", "pbm", "help"))
    a.settle(timeout=120)

    # the deadline passes while both schedulers watch
    a.set_clock(start + timedelta(hours=7))
    deadline = time.monotonic() + 60
    while a.sql("SELECT turn FROM games WHERE name = 'gift'")[0][0] < 2:
        assert time.monotonic() < deadline, "the turn did not run"
        time.sleep(0.1)
    time.sleep(2)  # both schedulers have looked again
    a.settle(timeout=120)

    assert a.sql("SELECT turn FROM games WHERE name = 'gift'")[0][0] == 2
    assert a.sql("SELECT count(*) FROM snapshots s JOIN games g ON g.id = s.game_id "
                 "WHERE g.name = 'gift' AND s.phase = 'after'")[0][0] == 1
    # every mail once
    statuses = collections.Counter(r[0] for r in a.sql("SELECT status FROM inbox"))
    assert statuses == {"done": 3 * 2 + 3 + 40}, statuses  # register and confirm, JOIN, help
    per_mail = a.sql("SELECT inbound_id, count(*) FROM outbox WHERE kind LIKE 'reply%' GROUP BY inbound_id")
    assert len(per_mail) == 49 and all(n == 1 for _, n in per_mail)
    # every reply and report reached a relay once
    got = [m for _, m in a.sink.all()]
    counts = collections.Counter(m["Message-ID"] for m in got)
    outbox_ids = {r[0] for r in a.sql("SELECT message_id FROM outbox")}
    assert set(counts) == outbox_ids
    twice = {k: n for k, n in counts.items() if n > 1}
    assert not twice, f"delivered more than once: {twice}"
    assert {m["In-Reply-To"] for m in got} >= set(sent)
    for h in PW:  # one round report each
        reports = [m["Message-ID"] for m in got if m["To"] == mails[h] and "report" in m["Subject"]]
        assert len(reports) == 1, [m["Subject"] for m in got if m["To"] == mails[h]]
