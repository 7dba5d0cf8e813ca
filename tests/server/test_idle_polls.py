"""Idle polls (store/db.py, Database.change_mark): on SQLite the worker and
delivery, once a look found nothing to do, ask the database nothing until
some connection commits again -- and then see the new work at their very
next pass.  Real database and migrations, the real worker and delivery in
this process, the harness's real SMTP sink as the relay; on PostgreSQL
(no change mark) every pass looks, and the same work is found."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import event, text

from pbm_server.base import clock
from pbm_server.base.settings import load_settings
from pbm_server.mail.alerts import ALERT, AlertDelivery
from pbm_server.mail.compose import Composer
from pbm_server.mail.inbound import store_messages
from pbm_server.mail.outbound import Outbound, enqueue_one
from pbm_server.pipeline.worker import Worker
from pbm_server.store.db import Database

PASSWORD = "idle-pass-4242"
SQLITE = not os.environ.get("PBM_TEST_DATABASE_URL")


@contextmanager
def _parts(pbm) -> Iterator[tuple[Database, Worker, Outbound, list[str]]]:
    """The real worker and delivery on the test's database, in this process,
    and the statements they send to it."""
    db = Database(pbm.db_url)
    settings = load_settings({"PBM_DATABASE_URL": pbm.db_url, "PBM_DOMAIN": pbm.domain,
                              "PBM_GM_ADDRESS": pbm.gm_address, "PBM_RELAY": f"127.0.0.1:{pbm.sink.port}"})
    worker = Worker(db, settings, Composer(settings))
    outbound = Outbound(db, settings)
    asked: list[str] = []
    event.listen(db.engine, "before_cursor_execute",
                 lambda conn, cursor, sql, params, context, many: asked.append(" ".join(sql.split())))
    try:
        yield db, worker, outbound, asked
    finally:
        outbound._end_session()
        worker.close()
        db.dispose()


def _store_elsewhere(pbm, body: str) -> str:
    """A mail stored through another Database (another connection, as the
    listener's process stores it)."""
    msg = pbm.build("ida@example.org", "ig1", body)
    other = Database(pbm.db_url)
    try:
        store_messages(other, [(msg["From"], [msg["To"]], bytes(msg))])
    finally:
        other.dispose()
    return msg["Message-ID"]


def _elsewhere(pbm, sql: str, **params) -> None:
    other = Database(pbm.db_url)
    try:
        with other.engine.begin() as c:
            c.execute(text(sql), params)
    finally:
        other.dispose()


def test_an_idle_worker_asks_nothing_until_a_mail_is_stored_and_then_takes_it_at_once(pbm_stopped):
    pbm = pbm_stopped
    pbm.new_game("giveaway", "ig1")
    pbm.cli("account", "add", "ida", "ida@example.org", "--password", PASSWORD)
    pbm.secrets.add(PASSWORD)
    with _parts(pbm) as (db, worker, outbound, asked):
        assert worker.run_once() is False  # a look: nothing waits
        asked.clear()
        assert worker.run_once() is False
        assert worker.run_once() is False
        if SQLITE:
            assert asked == [], asked  # nothing committed since: nothing asked
        else:
            assert any("FROM inbox" in q for q in asked), asked  # no change mark: every pass looks
        first = _store_elsewhere(pbm, f"JOIN\n$${PASSWORD}$$")
        assert worker.run_once() is True  # the very next pass takes it
        assert worker.run_once() is False
        # the reply is delivered at delivery's next pass; then delivery rests too
        assert outbound.run_once() == 1
        assert pbm.sink.replies_to(first)
        assert outbound.run_once() == 0
        assert worker.run_once() is False  # delivery committed since the worker's last look: it looks once
        asked.clear()
        assert outbound.run_once() == 0
        assert worker.run_once() is False
        if SQLITE:
            assert asked == [], asked
        # a second mail: taken, its reply delivered, each at the next pass
        second = _store_elsewhere(pbm, f"GIVE 1 TO ida\n$${PASSWORD}$$")
        assert worker.run_once() is True
        assert outbound.run_once() == 1
        assert pbm.sink.replies_to(second)


def test_delivery_keeps_looking_while_a_row_waits_for_its_next_attempt(pbm_stopped):
    """A row whose next attempt is later is pending: time alone makes it due,
    with nothing committed meanwhile, so every pass still looks."""
    pbm = pbm_stopped
    pbm.new_game("giveaway", "ig1")
    pbm.cli("account", "add", "ida", "ida@example.org", "--password", PASSWORD)
    pbm.secrets.add(PASSWORD)
    with _parts(pbm) as (db, worker, outbound, asked):
        asked_of = _store_elsewhere(pbm, f"JOIN\n$${PASSWORD}$$")
        assert worker.run_once() is True
        later = clock.now() + timedelta(hours=1)
        _elsewhere(pbm, "UPDATE outbox SET next_attempt_at = :t WHERE status = 'pending'", t=later)
        assert outbound.run_once() == 0  # not due yet
        asked.clear()
        assert outbound.run_once() == 0
        assert any("FROM outbox" in q for q in asked), asked  # it looked again
        # due now (another connection moves the attempt; the next pass sends it)
        _elsewhere(pbm, "UPDATE outbox SET next_attempt_at = :t WHERE status = 'pending'",
                   t=clock.now() - timedelta(minutes=1))
        assert outbound.run_once() == 1
        assert pbm.sink.replies_to(asked_of)


def test_an_idle_worker_looks_anyway_after_a_while(pbm_stopped):
    """The change mark is trusted for a few seconds at a time
    (IdleMark.LOOK_ANYWAY_SECONDS): a database file replaced under a running
    server keeps the old file's mark, and the poll must not rest for ever."""
    pbm = pbm_stopped
    with _parts(pbm) as (db, worker, outbound, asked):
        worker.idle.LOOK_ANYWAY_SECONDS = 0.0  # the while is over at once
        assert worker.run_once() is False
        asked.clear()
        assert worker.run_once() is False
        assert any("FROM inbox" in q for q in asked), asked


def test_the_alert_poller_rests_while_no_alert_is_pending_and_looks_while_one_waits(pbm_stopped):
    """The alert poller (mail/alerts.py) rests like delivery: nothing asked
    while no alert row is pending; an alert row waiting for a later attempt
    keeps it looking (time alone makes the row due), and once the row is due
    the next pass takes it."""
    pbm = pbm_stopped
    with _parts(pbm) as (db, worker, outbound, asked):
        alerts = AlertDelivery(db, outbound.settings, "idle-test")
        assert alerts.run_once() == 0  # a look: no alert at all
        asked.clear()
        assert alerts.run_once() == 0
        assert alerts.run_once() == 0
        if SQLITE:
            assert asked == [], asked
        else:
            assert any("FROM outbox" in q for q in asked), asked
        # another connection writes an alert row for an hour from now (a retry)
        other = Database(pbm.db_url)
        try:
            with other.write() as s:
                enqueue_one(s, to_addr="alert:game:999999", message_id="<idle-alert@test>", raw=b"{}",
                            kind=ALERT, now=clock.now() + timedelta(hours=1))
        finally:
            other.dispose()
        for _ in range(3):
            asked.clear()
            assert alerts.run_once() == 0  # not due yet ...
            assert any("FROM outbox" in q for q in asked), asked  # ... but every pass looks
        _elsewhere(pbm, "UPDATE outbox SET next_attempt_at = :t WHERE kind = 'alert'",
                   t=clock.now() - timedelta(minutes=1))
        assert alerts.run_once() == 1  # due: taken at the next pass (its game is gone: dropped)
        assert alerts.run_once() == 0
        asked.clear()
        assert alerts.run_once() == 0
        if SQLITE:
            assert asked == [], asked  # nothing pending again: resting
