"""Batches (pbm_server/pipeline/worker.py, Worker.process_batch): while mail
waits, one pass of the worker handles the oldest mail of several games and
commits them together; a mail that fails inside the batch is rolled back
alone and set aside, the others' moves stand and are answered; a mail
started before and never finished goes alone; a game's later mail waits for
its earlier one.  Real database, the real migrations, mail stored by the
listener's own store_messages, the worker run once in this process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from email import policy
from email.parser import BytesParser

import pytest
from sqlalchemy import text

from pbm_server.base.settings import load_settings
from pbm_server.mail.compose import Composer, written_out
from pbm_server.mail.inbound import store_messages
from pbm_server.pipeline.worker import Worker
from pbm_server.store.db import Database, game_key

GAMES = ("b1", "b2", "b3", "b4")


@pytest.fixture
def four_games(pbm_stopped):
    """Four giveaway games and a player for each, nobody joined yet."""
    pbm = pbm_stopped
    for n, game in enumerate(GAMES):
        pbm.new_game("giveaway", game)
        pbm.cli("account", "add", f"p{n}", f"p{n}@example.org", "--password", f"batch-pass-{n}")
        pbm.secrets.add(f"batch-pass-{n}")
    return pbm


def _join(pbm, n: int, game: str, subject: str = "join") -> tuple[str, list[str], bytes]:
    msg = pbm.build(f"p{n}@example.org", game, f"JOIN\n$$batch-pass-{n}$$", subject=subject)
    return msg["From"], [msg["To"]], bytes(msg)


@contextmanager
def _worker(pbm, **env: str) -> Iterator[tuple[Database, Worker]]:
    """The real worker on the test's database, in this process (closed after)."""
    db = Database(pbm.db_url)
    settings = load_settings({"PBM_DATABASE_URL": pbm.db_url, "PBM_DOMAIN": pbm.domain,
                              "PBM_GM_ADDRESS": pbm.gm_address, **env})
    worker = Worker(db, settings, Composer(settings))
    try:
        yield db, worker
    finally:
        worker.close()
        db.dispose()


def _status(db: Database) -> dict[int, str]:
    with db.engine.connect() as c:
        return dict(c.execute(text("SELECT id, status FROM inbox")).all())


def _replies(db: Database) -> dict[int, str]:
    with db.engine.connect() as c:
        return dict(c.execute(text("SELECT inbound_id, to_addr FROM outbox WHERE kind LIKE 'reply%'")).all())


def _players(pbm, game: str) -> list[str]:
    """Who has joined ``game`` (giveaway's rules read its state)."""
    from games.giveaway.rules import GiveawayRules

    return sorted(GiveawayRules().players(pbm.state(game)))


def test_one_pass_handles_a_mail_of_each_game_and_commits_them_together(four_games):
    pbm = four_games
    with _worker(pbm) as (db, worker):
        ids = store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES)])
        assert worker.run_once()  # one pass
        assert _status(db) == {i: "done" for i in ids}
        assert _replies(db) == {i: f"p{n}@example.org" for n, i in enumerate(ids)}
        for n, game in enumerate(GAMES):
            assert _players(pbm, game) == [f"p{n}"]
        assert not worker.run_once()  # nothing left


def test_a_game_s_second_mail_waits_for_its_first(four_games):
    """Two mails of b1 and one of b2 waiting: the pass takes b1's first and
    b2's; b1's second is left for the next pass, after its first."""
    pbm = four_games
    with _worker(pbm) as (db, worker):
        first, second, other = store_messages(db, [_join(pbm, 0, "b1"), _join(pbm, 1, "b1"), _join(pbm, 1, "b2")])
        assert worker.run_once()
        assert _status(db) == {first: "done", second: "new", other: "done"}
        assert worker.run_once()
        assert _status(db)[second] == "done"
        assert _players(pbm, "b1") == ["p0", "p1"]


def test_a_mail_failing_inside_a_batch_is_set_aside_alone(four_games):
    pbm = four_games
    with _worker(pbm, PBM_FAILPOINT="break-in-batch") as (db, worker):
        mails = [_join(pbm, n, g, subject="break-in-batch" if g == "b3" else "join") for n, g in enumerate(GAMES)]
        ids = store_messages(db, mails)
        assert worker.run_once()
        status = _status(db)
        assert status == {i: ("shunted" if n == 2 else "done") for n, i in enumerate(ids)}
        # the failing mail changed nothing and got no reply; the others' joins stand, each answered
        assert _players(pbm, "b3") == []
        for n in (0, 1, 3):
            assert _players(pbm, GAMES[n]) == [f"p{n}"]
        assert sorted(_replies(db)) == sorted(i for n, i in enumerate(ids) if n != 2)
        worker.shunts.flush(db)
        with db.engine.connect() as c:
            gm = c.execute(text("SELECT count(*) FROM outbox WHERE to_addr = :gm"), {"gm": pbm.gm_address}).scalar()
        assert gm == 1  # the GM is told


def test_a_mail_started_before_and_never_finished_goes_alone(four_games):
    """Its try count says a process died while handling it (a batch-mate may
    have killed it): it is handled alone, and so is not counted again with
    the others, and the mails of the other games still go together."""
    pbm = four_games
    with _worker(pbm) as (db, worker):
        ids = store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES)])
        with db.engine.begin() as c:
            c.execute(text("UPDATE inbox SET tries = 1 WHERE id = :i"), {"i": ids[1]})
        assert worker.run_once()
        assert _status(db) == {i: "done" for i in ids}
        with db.engine.connect() as c:
            tries = dict(c.execute(text("SELECT id, tries FROM inbox")).all())
        # counted again on its own (a second start, one short of being set aside); the others once, together
        assert tries == {i: 2 if i == ids[1] else 1 for i in ids}
        assert _players(pbm, "b2") == ["p1"]


def _reply_text(db: Database, inbox_id: int) -> str:
    """The text of the reply to ``inbox_id``, as delivery writes it out."""
    with db.engine.connect() as c:
        raw = c.execute(text("SELECT raw FROM outbox WHERE inbound_id = :i AND kind LIKE 'reply%'"),
                        {"i": inbox_id}).scalar_one()
    reply = BytesParser(policy=policy.default).parsebytes(written_out(raw))
    return str(reply.get_body(("plain",)).get_content())


def test_a_batch_hashes_its_senders_passwords_back_to_back(four_games, monkeypatch):
    """Every mail of the batch is read up to its sender's password hash,
    the hashes run one after another, and only then does any mail go on to
    be routed: between Argon2 runs (19 MiB swept through the caches) the
    rest of the work would run cold.  The players' joins are what they would
    have been mail by mail."""
    from pbm_server.accounts import throttle
    from pbm_server.pipeline import worker as worker_module

    pbm = four_games
    events: list[str] = []
    real_verify, real_route = throttle.verify_password, worker_module.route

    def verify(stored, password):
        events.append("hash")
        return real_verify(stored, password)

    def route(*args, **kwargs):
        events.append("route")
        return real_route(*args, **kwargs)

    monkeypatch.setattr(throttle, "verify_password", verify)
    monkeypatch.setattr(worker_module, "route", route)
    with _worker(pbm) as (db, worker):
        ids = store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES)])
        assert worker.run_once()
        assert _status(db) == {i: "done" for i in ids}
    assert events == ["hash"] * 4 + ["route"] * 4
    for n, game in enumerate(GAMES):
        assert _players(pbm, game) == [f"p{n}"]


def test_a_senders_second_mail_in_a_batch_counts_the_first_ones_failed_check(four_games):
    """p0 writes to two games at once, first with a wrong password: with one
    failure allowed, the second mail (its password right) is refused unchecked,
    as it would be mail by mail: its check waits for the first's count, and
    reads it in a read transaction begun after it was written (another
    player's mail, first in the batch, read before it)."""
    pbm = four_games
    wrong = pbm.build("p0@example.org", "b1", "JOIN\n$$not-my-password$$")
    right = _join(pbm, 0, "b2")
    with _worker(pbm, PBM_AUTH_MAX_FAILURES="1") as (db, worker):
        # another player's mail first: its stages read before p0's failure is counted
        other, first, second = store_messages(db, [_join(pbm, 3, "b4"), (wrong["From"], [wrong["To"]], bytes(wrong)),
                                                   right])
        assert worker.run_once()
        assert _status(db) == {other: "done", first: "done", second: "done"}
        assert "Too many failed password attempts for p0 from p0@example.org" in _reply_text(db, second)
    assert _players(pbm, "b1") == [] and _players(pbm, "b2") == [] and _players(pbm, "b4") == ["p3"]


def test_a_batch_reads_the_game_states_it_lacks_with_two_selects(four_games):
    """A worker with nothing in memory (a restart, or the other back end
    moved the games on) reads its batch's game documents and their entries
    with one SELECT each for the whole batch, not one of each per game; the
    states it builds are the ones the games have: each second join lands
    beside the first (kept as an entry over the document).  What every mail
    asks before its write transaction is asked once for the batch too."""
    from sqlalchemy import event

    pbm = four_games
    with _worker(pbm) as (db, worker):
        store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES)])
        assert worker.run_once()
    for n in range(4):
        pbm.cli("account", "add", f"q{n}", f"q{n}@example.org", "--password", f"batch-pass-q{n}")
    mails = []
    for n, game in enumerate(GAMES):
        msg = pbm.build(f"q{n}@example.org", game, f"JOIN\n$$batch-pass-q{n}$$")
        mails.append((msg["From"], [msg["To"]], bytes(msg)))
    with _worker(pbm) as (db, worker):
        ids = store_messages(db, mails)
        selects: list[str] = []
        event.listen(db.engine, "before_cursor_execute",
                     lambda conn, cursor, sql, params, context, many: selects.append(" ".join(sql.split())))
        assert worker.run_once()
        status = _status(db)
        assert [status[i] for i in ids] == ["done"] * 4
    from_entries = [q for q in selects if q.startswith("SELECT") and "FROM state_entries" in q]
    documents = [q for q in selects if q.startswith("SELECT") and "FROM game_documents" in q]
    assert len(from_entries) == 1 and len(documents) == 1, (from_entries, documents)
    # what every mail asks of its game and sender (a rollback? a ready check?
    # a hold?) is asked once for the batch's four mails (turns.look_ahead,
    # bounces.look_ahead), not once a mail
    for table in ("snapshots", "vote_settings", "mail_holds"):
        asked = [q for q in selects if q.startswith("SELECT") and f"FROM {table}" in q]
        assert len(asked) == 1, (table, asked)
    # and so is what every mail's reading, routing and password check asks:
    # its row and bytes, a copy handled before, its sender's account, the
    # throttle's counts, its game's name and kind (Worker._prepare_all)
    for part in ("inbox.mail_from", "FROM inbox_bodies WHERE", "inbox.dedup_key IN", "FROM accounts WHERE accounts.email",
                 "FROM auth_throttle", "SELECT games.name, games.kind FROM games"):
        asked = [q for q in selects if q.startswith("SELECT") and part in q]
        assert len(asked) == 1, (part, asked)
    for n, game in enumerate(GAMES):
        assert _players(pbm, game) == [f"p{n}", f"q{n}"]


def test_with_batch_one_each_pass_takes_one_mail(four_games):
    pbm = four_games
    with _worker(pbm, PBM_BATCH="1") as (db, worker):
        ids = store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES[:2])])
        assert worker.run_once()
        assert _status(db) == {ids[0]: "done", ids[1]: "new"}


def test_a_worker_that_finds_every_waiting_game_taken_looks_again_soon(four_games):
    """Mail waits, but its game is in another worker's hands (another host's
    batch): the worker waits BUSY_ELSEWHERE_SECONDS before its next look, not
    the whole poll interval, and takes the mail once the game is free."""
    pbm = four_games
    with _worker(pbm) as (db, worker), _worker(pbm) as (_, other):
        [waiting] = store_messages(db, [_join(pbm, 0, "b1")])
        assert other.routes.take(game_key("b1"))
        assert worker.pick(16) == []
        assert worker._next_wait == Worker.BUSY_ELSEWHERE_SECONDS < worker.poll_seconds
        other.routes.release(game_key("b1"))
        assert worker.run_once()
        assert _status(db) == {waiting: "done"}


def test_a_worker_sharing_the_mail_takes_its_share_of_the_waiting_games(four_games):
    """Two workers on the machine (pbm serve sets ``sharers``): a pass takes
    the oldest mail of half the waiting games, so the other worker finds the
    rest at once instead of every route taken."""
    pbm = four_games
    with _worker(pbm) as (db, worker):
        worker.sharers = 2
        ids = store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES)])
        assert worker.run_once()
        assert _status(db) == {ids[0]: "done", ids[1]: "done", ids[2]: "new", ids[3]: "new"}
        assert worker.run_once()  # two games wait: one is its share
        assert sorted(_status(db).values()) == ["done", "done", "done", "new"]
        assert worker.run_once()
        assert set(_status(db).values()) == {"done"}


def test_a_worker_that_met_another_s_route_takes_half_the_waiting_games(four_games):
    """Another host's worker (which ``sharers`` does not count) shows itself
    by the routes it holds: for a while after meeting one, a pass takes at
    most half of the waiting games."""
    pbm = four_games
    with _worker(pbm) as (db, worker), _worker(pbm) as (_, other):
        first = store_messages(db, [_join(pbm, n, g) for n, g in enumerate(GAMES)])
        assert other.routes.take(game_key("b1"))
        assert worker.run_once()  # b2, b3, b4: it learns of the other worker only now
        assert [_status(db)[i] for i in first] == ["new", "done", "done", "done"]
        other.routes.release(game_key("b1"))
        later = store_messages(db, [_join(pbm, n, g, subject="again") for n, g in enumerate(GAMES) if g != "b1"])
        assert worker.run_once()  # four games wait: two are its share
        assert sorted(_status(db)[i] for i in [first[0], *later]) == ["done", "done", "new", "new"]


def test_delivery_takes_twenty_replies_a_pass_while_mail_streams_in(pbm_stopped):
    """While the listener hands over groups of mail, a delivery pass of `pbm
    serve` relays and marks at most Outbound.MARK_BATCH (20) replies, so the
    listener and the workers get the writer between its commits; once intake
    is quiet, a pass takes what is due (up to 100)."""
    from pbm_server.running.server import INTAKE_GROUP, Server

    pbm = pbm_stopped
    pbm.cli("account", "add", "p0", "p0@example.org", "--password", "batch-pass-0")
    settings = load_settings({**pbm.env, "PBM_RELAY": f"127.0.0.1:{pbm.sink.port}"})
    server = Server(settings, parts=("worker", "outbound"), processes=1)
    try:
        mails = []
        for _ in range(30):
            msg = pbm.build("p0@example.org", "pbm", "help\n$$batch-pass-0$$")
            mails.append((msg["From"], [msg["To"]], bytes(msg)))
        store_messages(server.db, mails)
        while server.worker.run_once():
            pass
        with server.db.engine.connect() as c:
            assert c.execute(text("SELECT count(*) FROM outbox")).scalar() == 30
        server._wake_local(INTAKE_GROUP)  # a group of mails came in just now
        assert server.outbound.step() == 20 and pbm.sink.count() == 20
        server._last_intake = 0.0  # intake has been quiet for a while
        assert server.outbound.step() == 10 and pbm.sink.count() == 30
    finally:
        server.outbound._end_session()
        server.worker.close()
        server.db.dispose()


def test_a_batch_still_holds_a_same_seed_rollback_and_begins_a_ready_check(four_games):
    """What a batch looks up for all its games and senders at once
    (turns.look_ahead: which were rolled back, which have a ready check;
    bounces.look_ahead: which senders are held) answers each mail as a lookup
    of its own would: in one batch, an order to a game whose round was rolled
    back with its seed is refused, the join that takes another game's last
    seat begins that game's ready check, and a held sender's join with its
    password lifts the hold and says so."""
    pbm = four_games
    with _worker(pbm) as (db, worker):
        for n in (0, 1):
            store_messages(db, [_join(pbm, n, "b1")])
            assert worker.run_once()
    pbm.cli("turn", "run", "b1")
    assert "with the same seed" in pbm.cli("turn", "rollback", "b1", "1", "--same-seed").stdout
    pbm.cli("game", "set", "b2", "seats=1", "ready=48h")
    order = pbm.build("p0@example.org", "b1", "$$batch-pass-0$$\nGIVE 1 TO p1")
    with _worker(pbm) as (db, worker):
        with db.engine.begin() as c:  # p3's address bounced: held
            c.execute(text("INSERT INTO mail_holds (address, since, reason) "
                           "VALUES ('p3@example.org', '2026-11-01 00:00:00', 'bounced')"))
        held, joined, unheld = store_messages(db, [(order["From"], [order["To"]], bytes(order)), _join(pbm, 1, "b2"),
                                                   _join(pbm, 3, "b4")])
        assert worker.run_once()  # one pass, all three mails
        status = _status(db)
        assert status[held] == status[joined] == status[unheld] == "done"
        with db.engine.connect() as c:
            back = c.execute(text("SELECT raw FROM outbox WHERE inbound_id = :i"), {"i": unheld}).scalar()
        welcome = BytesParser(policy=policy.default).parsebytes(written_out(back)).get_body(("plain",)).get_content()
        assert "you get the server's mail again from now on" in " ".join(welcome.split()), welcome
        assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0
        with db.engine.connect() as c:
            refusal = c.execute(text("SELECT raw FROM outbox WHERE inbound_id = :i"), {"i": held}).scalar()
            phase = c.execute(text("SELECT ready_phase FROM vote_settings JOIN games ON games.id = game_id "
                                   "WHERE games.name = 'b2'")).scalar()
            to_p1 = [written_out(r) for r, in c.execute(text("SELECT raw FROM outbox WHERE to_addr = 'p1@example.org'"))]
    reply = BytesParser(policy=policy.default).parsebytes(written_out(refusal))
    text_of = " ".join(reply.get_body(("plain",)).get_content().split())
    assert "no orders are taken until round 1 has run again" in text_of, text_of
    asked = [m for m in to_p1 if b"are you ready?" in m]
    assert phase == "open" and len(asked) == 1, [m[:300] for m in to_p1]


def test_a_mail_another_worker_handled_meanwhile_leaves_nothing_of_a_second_handling(four_games):
    """The write transaction takes the mail's row as its read found it and
    marks it done only while it is still new: a worker that prepared a mail
    which another worker then handled (a tool's call, holding no route)
    leaves no second join, no second reply, and sets nothing aside."""
    import time

    pbm = four_games
    with _worker(pbm) as (db, worker), _worker(pbm) as (_, other):
        (mail,) = store_messages(db, [_join(pbm, 0, "b1")])
        prep = worker.prepare(mail)
        assert prep is not None and prep.stored is not None
        assert other.run_once()  # the other worker handles it first
        replies = _replies(db)
        worker._commit_one(prep, set(), time.monotonic())
        assert _status(db)[mail] == "done"
        assert _replies(db) == replies == {mail: "p0@example.org"}
        with db.engine.connect() as c:
            assert c.execute(text("SELECT count(*) FROM outbox")).scalar() == 1
    assert _players(pbm, "b1") == ["p0"]


def test_what_a_batch_asks_once_answers_each_mail_as_alone(four_games):
    """The batch's look-aheads (Worker._prepare_all: copies handled before,
    senders' accounts, the throttle's counts, the games' names) give each
    mail the answer it would get alone: a redelivered copy is a duplicate, a
    sender blocked by failed checks is refused unchecked, a stranger is
    answered as one, a mail to no game is told so -- and the others' joins
    stand, all in one batch."""
    pbm = four_games
    first = _join(pbm, 0, "b1")
    wrong = pbm.build("p1@example.org", "b2", "JOIN\n$$not-my-password$$")
    with _worker(pbm, PBM_AUTH_MAX_FAILURES="1") as (db, worker):
        done = store_messages(db, [first, (wrong["From"], [wrong["To"]], bytes(wrong))])
        assert worker.run_once()
        assert _status(db) == {i: "done" for i in done}
        stranger = pbm.build("nobody@example.org", "b3", "JOIN\n$$batch-pass-2$$")
        nowhere = pbm.build("p3@example.org", "nosuchgame", "JOIN\n$$batch-pass-3$$")
        copy, blocked, unknown, lost, joins = store_messages(db, [
            first,  # the same mail again (an MTA's redelivery)
            _join(pbm, 1, "b2"),  # the right password now, but p1's failure blocks it
            (stranger["From"], [stranger["To"]], bytes(stranger)),
            (nowhere["From"], [nowhere["To"]], bytes(nowhere)),
            _join(pbm, 3, "b4"),
        ])
        assert worker.run_once()
        status = _status(db)
        assert status[copy] == "duplicate"
        assert [status[i] for i in (blocked, unknown, lost, joins)] == ["done"] * 4
        assert "Too many failed password attempts for p1 from p1@example.org" in _reply_text(db, blocked)
        assert "nosuchgame" in _reply_text(db, lost)
        assert copy not in _replies(db)
    assert _players(pbm, "b1") == ["p0"] and _players(pbm, "b2") == [] and _players(pbm, "b3") == []
    assert _players(pbm, "b4") == ["p3"]


def test_a_batch_reads_small_bodies_ahead_and_a_large_one_with_its_mail(four_games):
    """The batch's read takes the bytes of bodies up to AHEAD_BODY_BYTES with
    one SELECT; a larger body is left to be read with its own mail (a batch
    never holds many large mails at once), and both mails are handled."""
    pbm = four_games
    large = pbm.build("p1@example.org", "b2", "JOIN\n$$batch-pass-1$$\n\n-- \n" + "x" * 70 + ("\n" + "y" * 70) * 1000)
    with _worker(pbm) as (db, worker):
        small_id, large_id = store_messages(db, [_join(pbm, 0, "b1"), (large["From"], [large["To"]], bytes(large))])
        assert len(bytes(large)) > Worker.AHEAD_BODY_BYTES
        with db.read() as s:
            ahead = worker._stored_ahead(s, [small_id, large_id])
        assert ahead[small_id].raw is not None and ahead[large_id].raw is None
        assert worker.run_once()
        assert _status(db) == {small_id: "done", large_id: "done"}
    assert _players(pbm, "b1") == ["p0"] and _players(pbm, "b2") == ["p1"]


def test_a_busy_game_stays_with_the_worker_that_holds_its_state(four_games):
    """A game's mail handled alone: the pass goes on with that game's next
    mails while each is the oldest waiting, the game's route held all along
    (another worker finds it taken), so the state is decoded once for all
    of them (a 10,000-player giveaway's document takes 16 ms to decode).
    The route is given back when the pass ends."""
    pbm = four_games
    with _worker(pbm) as (db, worker), _worker(pbm) as (_, other):
        ids = store_messages(db, [_join(pbm, n, "b1") for n in range(3)])
        seen: list[list] = []
        rests: list[float] = []
        worker.on_processed = lambda: seen.append(other.pick(16))
        worker.after_busy = rests.append  # what pbm serve's run gives: intake goes first
        assert worker.run_once()  # one pass
        assert _status(db) == {i: "done" for i in ids}
        assert seen[:2] == [[], []]  # between the game's mails, b1 was this worker's
        assert len(rests) == 2  # rested between the mails, as between passes
        assert _players(pbm, "b1") == ["p0", "p1", "p2"]
        assert worker.states.misses == 1 and worker.states.hits >= 2
        assert other.routes.take(game_key("b1"))  # given back at the end of the pass


def test_a_pass_leaves_a_game_when_another_game_s_mail_is_older(four_games):
    pbm = four_games
    with _worker(pbm, PBM_BATCH="1") as (db, worker):
        ids = store_messages(db, [_join(pbm, 0, "b1"), _join(pbm, 1, "b2"), _join(pbm, 2, "b1")])
        assert worker.run_once()  # b1's first mail; then b2's is the oldest
        assert _status(db) == {ids[0]: "done", ids[1]: "new", ids[2]: "new"}
        assert worker.run_once()  # b2's, then b1's second is the oldest, but of another game
        assert _status(db) == {ids[0]: "done", ids[1]: "done", ids[2]: "new"}
        assert worker.run_once()
        assert _status(db)[ids[2]] == "done"


def test_server_mail_is_handled_one_a_pass(four_games):
    """Mail to pbm@ (the server's route) has no game state to keep warm: a
    pass takes one and gives the route back."""
    pbm = four_games
    with _worker(pbm) as (db, worker):
        ids = store_messages(db, [_join(pbm, n, "pbm", subject=f"help {n}") for n in range(2)])
        assert worker.run_once()
        assert _status(db) == {ids[0]: "done", ids[1]: "new"}
        assert worker.run_once()
        assert _status(db) == {i: "done" for i in ids}
