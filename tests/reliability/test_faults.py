"""Database faults around a mail (issue 14, item 5).

* The disk fills right after the relay accepted a reply: the server cannot
  mark the row sent.  It must not send the mail again and again; it keeps
  the outcome, backs off, and records it once the database takes writes.
  Fault: a trigger makes the UPDATE that marks an outbox row sent fail, the
  way a full disk makes that write fail (on PostgreSQL with its own disk-full
  error, SQLSTATE 53100).
* The disk is full while the worker handles a mail: the mail stays queued
  (not shunted) and is answered once the disk has room.  Fault: the worker
  runs as its own process with ``PBM_SQLITE_MAX_PAGE_COUNT``, so SQLite
  answers "database or disk is full" (SQLITE_FULL) when the reply would make
  the file grow.
"""

from __future__ import annotations

import collections
import sqlite3
import time

import pytest


def sqlite_only(server):
    if not server.db_url.startswith("sqlite"):
        pytest.skip("the fault is injected with SQLite features")


def test_a_delivery_that_cannot_be_recorded_is_not_sent_again(pbm):
    if pbm.db_url.startswith("sqlite"):
        pbm.execute(
            "CREATE TRIGGER disk_full BEFORE UPDATE OF status ON outbox WHEN NEW.status = 'sent' "
            "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    else:  # PostgreSQL's own error for a full disk (SQLSTATE 53100)
        pbm.execute(
            "CREATE FUNCTION disk_full() RETURNS trigger AS $f$ BEGIN "
            "RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; "
            "END $f$ LANGUAGE plpgsql"
        )
        pbm.execute(
            "CREATE TRIGGER disk_full BEFORE UPDATE OF status ON outbox FOR EACH ROW "
            "WHEN (NEW.status = 'sent') EXECUTE FUNCTION disk_full()"
        )
    mid = pbm.send("tom@example.org", "pbm", "help")
    deadline = time.monotonic() + 30
    while not pbm.replies_to(mid):
        assert time.monotonic() < deadline, "the reply never reached the relay"
        time.sleep(0.05)
    # the outbound loop runs every 50 ms in the tests: a few seconds are
    # dozens of chances to send the mail again
    time.sleep(3)
    assert len(pbm.replies_to(mid)) == 1
    assert pbm.sql("SELECT status FROM outbox")[0][0] == "pending"
    pbm.execute("DROP TRIGGER disk_full" + ("" if pbm.db_url.startswith("sqlite") else " ON outbox"))
    pbm.settle()
    assert pbm.sql("SELECT status, attempts FROM outbox") == [("sent", 1)]
    assert len(pbm.replies_to(mid)) == 1
    assert "could not record the delivery" in pbm.serve_log()


def test_disk_full_while_processing_leaves_the_mail_queued(make_server):
    front = make_server("front")
    sqlite_only(front)
    front.cli("db", "upgrade")
    path = front.db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as con:  # no free pages left for the worker to reuse
        con.execute("VACUUM")
    front.start("worker")  # listener, outbound, scheduler
    # a long reply (the rules of every game, and 60 unknown commands, each answered with the
    # list of commands; a section repeated word for word is shown once): it needs many new pages
    body = "\n".join(["help", "help curio", "help rmpm", "help agora_rpg", "help sequence", "help giveaway"]
                     + [f"frobnicate {i}" for i in range(60)])
    mid = front.send("tom@example.org", "pbm", body)
    with sqlite3.connect(path) as con:
        pages = con.execute("PRAGMA page_count").fetchone()[0]
    # the worker may grow the file by 3 pages: room for small writes (such as
    # setting a mail aside), not for the reply
    worker = make_server("worker")
    worker.env["PBM_DATABASE_URL"] = front.db_url
    worker.env["PBM_SQLITE_MAX_PAGE_COUNT"] = str(pages + 3)
    worker.start("listener", "outbound", "scheduler")
    deadline = time.monotonic() + 30
    while "database or disk is full" not in worker.serve_log():
        assert time.monotonic() < deadline, worker.serve_log()[-3000:]
        time.sleep(0.05)
    time.sleep(1)  # more tries, with backoff
    assert front.sql("SELECT status FROM inbox") == [("new",)]
    assert front.replies_to(mid) == []
    assert front.sql("SELECT count(*) FROM outbox")[0][0] == 0

    # room again: the same worker set-up without the cap answers it once
    worker.stop()
    del worker.env["PBM_SQLITE_MAX_PAGE_COUNT"]
    worker.start("listener", "outbound", "scheduler")
    front.settle()
    assert front.sql("SELECT status FROM inbox") == [("done",)]
    replies = front.replies_to(mid)
    assert len(replies) == 1 and "help" in front.flat(replies[0]).lower()
    assert collections.Counter(r[0] for r in front.sql("SELECT kind FROM outbox")) == {"reply-unproven": 1}  # a mail without a password
