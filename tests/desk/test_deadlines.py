"""Deadlines on a controllable clock: exactly once across restarts and two
schedulers, reminders once, early processing, grace."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from tests.desk.conftest import PLAYERS, T0


def test_missed_deadline_runs_once_after_restart(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    for p in PLAYERS:
        t.order(p)
    pbm.stop()
    pbm.set_clock("2026-11-21T09:00:00+00:00")  # the Saturday 03:00 deadline passed while stopped
    pbm.start()
    for p in PLAYERS:
        report = t.wait_mails(p, "round 1 report")
        assert len(report) == 1
    assert t.turn() == 2 and t.runs() == 1
    body = pbm.text(report[0])
    assert "Next deadline: Sat 2026-11-28 03:00 UTC" in body

    # a restart right after the run does not run it again; to see the
    # scheduler has looked, move into the reminder window of the next deadline
    pbm.stop()
    pbm.start()
    pbm.set_clock("2026-11-27T04:00:00+00:00")
    t.wait_mails("alice", "reminder")
    pbm.settle()
    assert t.turn() == 2 and t.runs() == 1
    for p in PLAYERS:
        assert len(t.mails(p, "round 1 report")) == 1


def test_two_serve_processes_run_a_deadline_once(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    for p in PLAYERS:
        t.order(p)
    # two more `pbm serve` processes on the same database, scheduler only
    others = []
    for i in range(2):
        log = open(pbm.tmp / f"other{i}.log", "ab")
        others.append(subprocess.Popen(
            [sys.executable, "-m", "pbm_server.running.cli", "serve", "--without", "listener", "--without", "worker", "--without", "outbound"],
            env=pbm.env, cwd=pbm.tmp, stdout=log, stderr=subprocess.STDOUT,
        ))
    try:
        pbm.set_clock("2026-11-21T03:00:00+00:00")
        for p in PLAYERS:
            t.wait_mails(p, "round 1 report")
        # and into the next reminder window: one reminder, from one of them
        pbm.set_clock("2026-11-27T04:00:00+00:00")
        t.wait_mails("alice", "reminder")
        pbm.settle()
    finally:
        for proc in others:
            proc.terminate()
            proc.wait(timeout=30)
    assert t.runs() == 1 and t.turn() == 2
    for p in PLAYERS:
        assert len(t.mails(p, "round 1 report")) == 1
        assert len(t.mails(p, "reminder")) == 1


def test_two_schedulers_racing_in_one_process_run_once(pbm_stopped, monkeypatch):
    """Two Scheduler objects released at the same moment on one SQLite file."""
    from pbm_server.base.settings import load_settings
    from pbm_server.mail.compose import Composer
    from pbm_server.play.notices import Mailer
    from pbm_server.running.scheduler import Scheduler
    from pbm_server.store.db import Database
    from tests.desk.conftest import Table

    pbm_stopped.set_clock(T0)
    pbm_stopped.start()
    t = Table(pbm_stopped).setup()
    for p in PLAYERS:
        t.order(p)
    pbm_stopped.stop()
    pbm_stopped.set_clock("2026-11-21T03:30:00+00:00")
    monkeypatch.setattr("pbm_server.base.clock._file", str(pbm_stopped.clock_file))
    settings = load_settings(pbm_stopped.env)
    ran = []
    barrier = threading.Barrier(2)

    def one():
        db = Database(pbm_stopped.db_url)
        sched = Scheduler(db, settings, Mailer(Composer(settings)))
        barrier.wait()
        ran.append(sched.run_due())
        db.dispose()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert sorted(ran) == [0, 1]
    assert t.runs() == 1 and t.turn() == 2
    queued = pbm_stopped.sql("SELECT count(*) FROM outbox WHERE kind = 'report'")[0][0]
    assert queued == 3  # one report per player


def test_reminders_go_once_to_players_without_orders(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    t.order("alice")
    pbm.mail("bob@example.org", "pbm", "timezone Europe/Zurich\n$$secret-pw1$$")
    pbm.set_clock("2026-11-20T04:00:00+00:00")  # 23 hours before Saturday 03:00
    bob = t.wait_mails("bob", "reminder")
    carol = t.wait_mails("carol", "reminder")
    text = pbm.text(bob[0])
    assert "no orders from you yet for round 1 of g1" in text
    assert "Sat 2026-11-21 03:00 UTC (Sat 2026-11-21 04:00 Europe/Zurich)" in text
    assert "04:00 Europe/Zurich" not in pbm.text(carol[0])
    pbm.settle()
    assert t.mails("alice", "reminder") == []
    # a restart inside the window sends nothing again
    pbm.stop()
    pbm.start()
    pbm.set_clock("2026-11-21T03:00:00+00:00")
    for p in PLAYERS:
        t.wait_mails(p, "round 1 report")
    pbm.settle()
    assert len(t.mails("bob", "reminder")) == 1 and len(t.mails("carol", "reminder")) == 1
    assert t.mails("alice", "reminder") == []
    rows = pbm.sql("SELECT detail FROM audit_log WHERE action = 'reminders'")
    assert len(rows) == 1 and "bob, carol" in rows[0][0]
    # the report names who sent nothing
    report = pbm.text(t.mails("alice", "round 1 report")[0])
    assert "No orders for round 1 from: bob, carol" in report


def test_vacation_keeps_a_player_out_of_reminders_and_no_order_list(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    reply = pbm.text(pbm.mail("carol@example.org", "pbm", "absent 2026-11-19 2026-11-22\n$$secret-pw1$$"))
    assert "you are on vacation from 2026-11-19 to 2026-11-22" in reply
    bad = pbm.text(pbm.mail("bob@example.org", "pbm", "absent 2026-11-22 2026-11-20\n$$secret-pw1$$"))
    assert "REFUSED" in bad and "absent FROM TO" in bad
    t.order("alice")
    pbm.set_clock("2026-11-20T04:00:00+00:00")
    t.wait_mails("bob", "reminder")
    pbm.set_clock("2026-11-21T03:00:00+00:00")
    report = pbm.text(t.wait_mails("alice", "round 1 report")[0])
    assert "No orders for round 1 from: bob\n" in report
    assert "On vacation (kept out of the no-order rules): carol" in report
    assert t.mails("carol", "reminder") == []
    assert pbm.sql("SELECT absent_from IS NOT NULL FROM accounts WHERE handle = 'bob'")[0][0] == 0


def test_early_processing_when_all_orders_are_in(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    assert "early=on" in t.gm("game set g1 early=on")
    t.order("alice")
    t.order("bob")
    pbm.settle()
    assert t.turn() == 1
    t.order("carol")
    for p in PLAYERS:
        t.wait_mails(p, "round 1 report")
    assert t.turn() == 2
    # the Saturday 21 deadline is used up: the next one is a week later
    nd = pbm.cli("game", "list").stdout
    assert "2026-11-28 03:00" in nd


def test_grace_period_waits_for_missing_orders(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    t.gm("game set g1 grace=6h")
    # a second game with the same deadline and no grace shows the scheduler has passed
    pbm.new_game("giveaway", "g2", deadline="every Saturday 03:00 UTC")
    for p in PLAYERS:
        t.player(p, "g2", "JOIN")
    t.order("alice")
    t.order("bob")
    pbm.set_clock("2026-11-21T04:00:00+00:00")
    t.wait_mails("alice", "g2: round 1 report")
    assert t.turn("g1") == 1  # in the grace period, carol's order is missing
    t.order("carol")
    for p in PLAYERS:
        t.wait_mails(p, "g1: round 1 report")
    assert t.turn("g1") == 2
    # and without the missing orders, the grace period ends
    pbm.set_clock("2026-11-28T04:00:00+00:00")
    t.wait_mails("alice", "g2: round 2 report")
    assert t.turn("g1") == 2
    pbm.set_clock("2026-11-28T09:00:00+00:00")
    t.wait_mails("alice", "g1: round 2 report")
    assert t.turn("g1") == 3


def test_a_turn_that_fails_leaves_nothing_behind_and_tells_the_gm(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    for p in PLAYERS:
        t.order(p)
    # damage the stored state the way a bad import or a bug would
    pbm.set_state("g1", {**pbm.state("g1"), "schema": 99})
    row = ("SELECT d.state, g.version, g.turn, g.turn_seed, g.rng_state FROM games g "
           "JOIN game_documents d ON d.game_id = g.id WHERE g.name = 'g1'")
    before = pbm.sql(row)
    outbox = pbm.sql("SELECT count(*) FROM outbox")[0][0]
    pbm.set_clock("2026-11-21T03:00:00+00:00")
    gm = t.wait_mails("gm@example.org", "was not run")
    text = pbm.flat(gm[0])  # long lines are wrapped to fit a terminal
    assert "unknown giveaway state schema 99" in text and "pbm turn run g1 --turn 1" in text
    pbm.settle()
    assert pbm.sql(row) == before
    assert t.runs() == 0 and t.turn() == 1
    assert pbm.sql("SELECT count(*) FROM snapshots WHERE phase = 'before'")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM outbox")[0][0] == outbox + 1  # only the GM's mail
    assert pbm.sql("SELECT next_deadline FROM games WHERE name = 'g1'") == [(None,)]
    assert pbm.sql("SELECT count(*) FROM audit_log WHERE action = 'turn failed'")[0][0] == 1


@pytest.mark.process  # SIGKILL
def test_orders_received_before_the_deadline_count_even_if_processed_after(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    t.order("alice")
    t.order("bob")
    pbm.stop()
    pbm.start("worker")  # the listener takes carol's order, nobody processes it yet
    pbm.send("carol@example.org", "g1", "GIVE 3 TO alice\n$$secret-pw1$$")
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0] == 1
    pbm.stop(kill=True)
    pbm.set_clock("2026-11-21T09:00:00+00:00")  # the deadline passed meanwhile
    pbm.start()
    for p in PLAYERS:
        t.wait_mails(p, "round 1 report")
    pbm.settle()
    # carol's order was taken for round 1, before the round ran
    held = pbm.sql("SELECT o.turn FROM orders o WHERE o.handle = 'carol'")
    assert held == [(1,)]
    assert t.runs() == 1 and t.turn() == 2


def test_the_minute_tick_writes_only_for_the_kinds_that_tick(pbm_stopped):
    """Between turns only curio (its clocks) and the sequence game (its
    digests) do anything as time passes: the scheduler's tick opens a write
    transaction for their games and leaves a giveaway game alone (a minute's
    thousands of giveaway games would otherwise hold SQLite's one writer)."""
    from pbm_server.base.settings import load_settings
    from pbm_server.mail.compose import Composer
    from pbm_server.play.notices import Mailer
    from pbm_server.running.scheduler import Scheduler
    from pbm_server.store.db import Database

    pbm_stopped.new_game("giveaway", "give1")
    pbm_stopped.new_game("curio", "cur1")
    pbm_stopped.new_game("sequence", "four")
    settings = load_settings(pbm_stopped.env)
    db = Database(pbm_stopped.db_url)
    written: list[list[str]] = []
    write = db.write

    def recording(*args, **kwargs):
        written.append(sorted(kwargs.get("keys", ())))
        return write(*args, **kwargs)

    db.write = recording  # type: ignore[method-assign]
    try:
        Scheduler(db, settings, Mailer(Composer(settings))).run_ticks()
    finally:
        db.dispose()
    touched = {key for keys in written for key in keys}
    assert {"game:cur1", "game:four"} <= touched
    assert "game:give1" not in touched


def test_a_scheduler_pass_reads_only_the_games_with_something_to_do(pbm_stopped):
    """A pass every half second over thousands of games whose deadlines are
    days away reads none of them: the database picks the running games whose
    deadline has passed, whose early turn may now be ready (changed since it
    was last judged), or whose reminder window is open with the reminders not
    yet sent -- and the reminders of a game whose window opens within the next
    second are not sent early (the database's pick is a superset that the
    step judges exactly)."""
    from datetime import datetime, timedelta, timezone

    from sqlalchemy import select

    from pbm_server.base.settings import load_settings
    from pbm_server.mail.compose import Composer
    from pbm_server.play.notices import Mailer
    from pbm_server.running.scheduler import Scheduler
    from pbm_server.store.db import Database
    from pbm_server.store.models import Game

    now = datetime(2026, 11, 19, 10, 0, tzinfo=timezone.utc)
    later, soon = now + timedelta(days=3), now + timedelta(hours=1)
    shapes = {  # name: (status, next_deadline, remind_minutes, reminded_for, early, early_version is version)
        "far": ("running", later, 1440, None, False, False),
        "due": ("running", now - timedelta(minutes=1), 1440, None, False, False),
        "window": ("running", soon, 1440, None, False, False),
        "reminded": ("running", soon, 1440, soon, False, False),
        "no-reminders": ("running", soon, 0, None, False, False),
        "early-judged": ("running", later, 1440, None, True, True),
        "early-changed": ("running", later, 1440, None, True, False),
        "paused": ("paused", now - timedelta(hours=1), 1440, None, False, False),
        "opens-in-a-moment": ("running", now + timedelta(days=1, milliseconds=400), 1440, None, False, False),
    }
    for name in shapes:
        pbm_stopped.new_game("giveaway", name, deadline="every Saturday 03:00 UTC")
    db = Database(pbm_stopped.db_url)
    try:
        with db.write() as s:
            for game in s.scalars(select(Game)):
                status, deadline, remind, reminded, early, judged = shapes[game.name]
                game.status, game.next_deadline, game.remind_minutes, game.reminded_for = status, deadline, remind, reminded
                game.early, game.early_version = early, (game.version if judged else game.version - 1)
            ids = {g.name: g.id for g in s.scalars(select(Game))}
        settings = load_settings(pbm_stopped.env)
        sched = Scheduler(db, settings, Mailer(Composer(settings)))
        picked = {name for name, gid in ids.items() if gid in {r.id for r in sched._overview(now)}}
        assert {"due", "window", "early-changed"} <= picked
        assert picked - {"due", "window", "early-changed", "opens-in-a-moment"} == set()
        in_window = [r.id for r in sched._overview(now) if sched._in_reminder_window(r, now)]
        assert in_window == [ids["window"]]
        # a second later the window of the last one is open: it is picked and judged in
        picked_then = {r.id for r in sched._overview(now + timedelta(seconds=1)) if sched._in_reminder_window(r, now + timedelta(seconds=1))}
        assert picked_then == {ids["window"], ids["opens-in-a-moment"]}
    finally:
        db.dispose()


def test_an_idle_scheduler_pass_asks_three_statements(pbm_stopped):
    """Every half second, on every back end, the scheduler asks what is due:
    with nothing due (no vote, no ready check, no deadline near) a pass is
    one read of three statements -- the games with votes due, those with
    ready checks due, and the overview of the games -- not a read for the
    people and another for the games (five statements and a transaction
    more: half of an idle back end's scheduler CPU)."""
    from sqlalchemy import event

    from pbm_server.base import clock
    from pbm_server.base.settings import load_settings
    from pbm_server.mail.compose import Composer
    from pbm_server.play.notices import Mailer
    from pbm_server.running.scheduler import Scheduler
    from pbm_server.store.db import Database

    pbm_stopped.new_game("giveaway", "give1", deadline="every Saturday 03:00 UTC")
    pbm_stopped.new_game("giveaway", "give2", deadline="every Saturday 03:00 UTC")
    settings = load_settings(pbm_stopped.env)
    clock.use_file(settings.clock_file)  # the harness's Monday morning, days before the deadlines
    db = Database(pbm_stopped.db_url)
    asked: list[str] = []
    event.listen(db.engine, "before_cursor_execute",
                 lambda conn, cursor, sql, params, context, many: asked.append(" ".join(sql.split())))
    reads = 0
    read = db.read

    def counting():
        nonlocal reads
        reads += 1
        return read()

    db.read = counting  # type: ignore[method-assign]
    try:
        sched = Scheduler(db, settings, Mailer(Composer(settings)))
        sched._last_tick = 1e18  # the minute's tick is not part of this pass
        assert sched.run_once() == 0
    finally:
        clock.use_file(None)
        db.dispose()
    assert reads == 1, reads
    assert len(asked) == 3, asked
    assert any("FROM votes" in q and "vote_settings" in q for q in asked), asked
    assert any("FROM ready_seats" in q for q in asked), asked
