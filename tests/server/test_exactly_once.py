"""Nothing accepted is lost, nothing is done twice."""

import time

import pytest


def test_the_same_mail_delivered_twice_is_handled_once(pbm):
    msg = pbm.build("twice@example.org", "pbm", "register twice twice-pass1")
    pbm.secrets.add("twice-pass1")
    pbm.send_message(msg)
    pbm.send_message(msg)  # a redelivery by a confused MTA: same Message-ID, same content
    pbm.settle()
    statuses = [r[0] for r in pbm.sql("SELECT status FROM inbox ORDER BY id")]
    assert statuses == ["done", "duplicate"]
    assert len(pbm.inbox("twice@example.org")) == 1
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 1


@pytest.mark.process  # SIGKILL
def test_mail_stored_by_a_killed_server_is_processed_once_after_restart(pbm_stopped):
    pbm = pbm_stopped
    pbm.start("worker")  # listener only: the mail is stored and 250 given, nothing processed
    pbm.secrets.add("kill-pass1")
    mid = pbm.send("kim@example.org", "pbm", "register kim kill-pass1")
    assert pbm.sql("SELECT status FROM inbox")[0][0] == "new"
    pbm.stop(kill=True)
    pbm.start()
    pbm.settle()
    pbm.stop()
    pbm.start()  # a second restart must not process it again
    pbm.settle()
    assert [m["In-Reply-To"] for m in pbm.inbox("kim@example.org")] == [mid]
    assert pbm.sql("SELECT status FROM inbox")[0][0] == "done"
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 1


def test_relay_down_then_back_delivers_once(pbm):
    pbm.sink.stop()
    mid = pbm.send("rita@example.org", "pbm", "help")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = pbm.sql("SELECT status, attempts FROM outbox")
        if rows and rows[0][1] >= 2:
            break
        time.sleep(0.05)
    status, attempts = pbm.sql("SELECT status, attempts FROM outbox")[0]
    assert status == "pending" and attempts >= 2
    pbm.sink.start()
    pbm.settle()
    time.sleep(1.5)  # any further (wrong) retry would have happened by now
    got = pbm.inbox("rita@example.org")
    assert [m["In-Reply-To"] for m in got] == [mid]
    assert pbm.sql("SELECT status FROM outbox")[0][0] == "sent"


def test_relay_refusing_temporarily_then_accepting(pbm):
    pbm.sink.handler.refuse_with = "451 4.3.0 try later"
    mid = pbm.send("tom@example.org", "pbm", "help")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not pbm.sql("SELECT attempts FROM outbox WHERE attempts >= 2"):
        time.sleep(0.05)
    assert pbm.inbox("tom@example.org") == []
    pbm.sink.handler.refuse_with = None
    pbm.settle()
    assert [m["In-Reply-To"] for m in pbm.inbox("tom@example.org")] == [mid]


def test_a_mail_that_breaks_the_worker_is_shunted_and_the_gm_told(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_FAILPOINT"] = "break-the-worker"
    pbm.start()
    pbm.send("sam@example.org", "pbm", "register sam shunt-pass1", subject="break-the-worker")
    pbm.secrets.add("shunt-pass1")
    gm_mail = pbm.wait_for("gm@example.org", 1)[0]
    assert "could not be processed and was set aside" in pbm.flat(gm_mail)
    assert pbm.sql("SELECT status FROM inbox")[0][0] == "shunted"
    # the transaction was rolled back: no account was made
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 0
    # the worker goes on
    assert "almost done" in pbm.flat(pbm.mail("sue@example.org", "pbm", "register sue other-pass1"))
    status = pbm.cli("mail", "status").stdout
    assert "shunted 1" in status


def test_undeliverable_mail_is_marked_failed_and_the_gm_told(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_RETRY_PERIOD_SECONDS"] = "1"
    pbm.start()
    # only the player's address refuses: the GM's notice, queued the moment
    # the reply fails, goes out (with the relay refusing all, it could be
    # tried before the test lets the relay take mail again, and be given up
    # within the one-second retry period: it failed so once in a full run)
    pbm.sink.handler.refuse_with = "451 4.3.0 mailbox busy"
    pbm.sink.handler.refuse_only = {"gone@example.org"}
    pbm.send("gone@example.org", "pbm", "help")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not pbm.sql("SELECT id FROM outbox WHERE status='failed'"):
        time.sleep(0.05)
    assert pbm.sql("SELECT to_addr, status FROM outbox WHERE kind LIKE 'reply%'") == [("gone@example.org", "failed")]
    pbm.sink.handler.refuse_with = None
    gm = pbm.wait_for("gm@example.org", 1)[0]
    assert "gone@example.org could not be delivered" in pbm.flat(gm)
    assert pbm.inbox("gone@example.org") == []
