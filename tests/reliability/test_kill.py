"""SIGKILL `pbm serve` at random moments under load, restart it each time:
every mail that got a 250 is processed exactly once, and every reply reaches
the relay sink.

A reply can reach the sink twice only if the kill falls between the relay's
250 and the commit that marks the outbox row sent; the copy carries the same
Message-ID (the outbox keeps it), so it is recognisable.  Delivery marks its
rows in batches (Outbound.MARK_BATCH, 20), so each kill can cause at most that
many copies: the test asserts that bound and prints how many there were.

Batches are also killed on purpose (PBM_FAILPOINT): inside the worker's batch
before its commit (none of the batch is lost or done twice; the mail that
kills is set aside alone), and between the relay's 250 and the commit of the
marks (exactly the unmarked replies are sent again, no more).

The default run kills once; the heavy variant (``-m heavy``) five times under a
longer load.  ``PBM_KILL_SEED`` picks the moments (default 9): each kill falls
when a number of the load's mails is stored, drawn between a third and two
thirds of the load.
"""

from __future__ import annotations

import collections
import os
import random
import re
import time

import pytest

from benchmarks.smtpload import LoadProcess, LoadSpec
from pbm_server.mail.inbound import store_messages
from pbm_server.mail.outbound import Outbound
from pbm_server.store.db import Database
from pbm_server.store.models import INBOX_RAW

# `pbm serve` in its own processes: what this module shows is about processes
pytestmark = pytest.mark.process


def run_kill_loop(pbm, kills: int, count: int, rate: float, seed: int) -> dict:
    rng = random.Random(seed)
    pbm.start()
    spec = LoadSpec("127.0.0.1", pbm.port, count, concurrency=8, domain=pbm.domain, senders=max(50, count // 4),
                    rate=rate, tag=f"kill{seed}")
    load = LoadProcess(spec)
    restarts = 0
    # each kill falls once a random number of the load's mails is stored (a
    # sleep from the start said nothing on a busy machine: the kill could come
    # before the load process had sent anything, and a slow restart left the
    # whole load to a server that was down); the first after more than a third
    for stored_before in sorted(rng.randint(count // 3 + 10, count * 2 // 3) for _ in range(kills)):
        give_up = time.monotonic() + 120
        while pbm.sql("SELECT count(*) FROM inbox")[0][0] < stored_before and time.monotonic() < give_up:
            time.sleep(0.02)
        pbm.stop(kill=True)
        pbm.start()
        restarts += 1
    result = load.result(timeout=600)
    pbm.settle(timeout=300)
    accepted = {s.message_id for s in result.accepted}
    assert len(accepted) >= count // 3, "the load hardly got through"

    rows = pbm.sql(f"SELECT id, status, {INBOX_RAW} AS raw FROM inbox")
    stored = collections.Counter()
    status = {}
    for row_id, st, raw in rows:
        m = re.search(rb"^Message-ID: (\S+)", bytes(raw), re.M)
        mid = m.group(1).decode()
        stored[mid] += 1
        status[mid] = (row_id, st)
    # every acknowledged mail is in the inbox exactly once and processed
    for mid in accepted:
        assert stored[mid] == 1, f"{mid} stored {stored[mid]} times"
        assert status[mid][1] == "done", status[mid]
    # a mail whose 250 was lost in the kill may be stored, but never twice
    assert all(n == 1 for n in stored.values())
    # processed exactly once: one reply per mail in the outbox
    replies = dict(pbm.sql("SELECT inbound_id, count(*) FROM outbox WHERE kind LIKE 'reply%' GROUP BY inbound_id"))
    for mid, (row_id, st) in status.items():
        assert st == "done" and replies.get(row_id) == 1, (mid, st, replies.get(row_id))
    assert pbm.sql("SELECT count(*) FROM outbox WHERE status <> 'sent'")[0][0] == 0
    # every reply reached the sink; a copy only with the same Message-ID, at most one per kill
    outbox_ids = {r[0] for r in pbm.sql("SELECT message_id FROM outbox")}
    delivered = collections.Counter(m["Message-ID"] for _, m in pbm.sink.all())
    assert set(delivered) == outbox_ids
    answered = {m["In-Reply-To"] for _, m in pbm.sink.all()}
    assert accepted <= answered
    copies = sum(n - 1 for n in delivered.values())
    assert copies <= restarts * Outbound.MARK_BATCH, f"{copies} duplicate deliveries after {restarts} kills"
    figures = {"sent": len(result.sent), "acknowledged": len(accepted), "stored": len(stored), "kills": restarts,
               "replies": len(outbox_ids), "duplicate_deliveries": copies}
    print(f"\nkill test: {figures}")
    return figures


def test_sigkill_under_load_once(pbm_stopped):
    run_kill_loop(pbm_stopped, kills=1, count=240, rate=30, seed=int(os.environ.get("PBM_KILL_SEED", "9")))


@pytest.mark.heavy
@pytest.mark.parametrize("seed", [int(os.environ.get("PBM_KILL_SEED", "9")), 2, 3])
def test_sigkill_under_load_five_times(pbm_stopped, seed):
    run_kill_loop(pbm_stopped, kills=5, count=1500, rate=60, seed=seed)


GAMES = ("k1", "k2", "k3", "k4", "k5", "k6")


def _games_with_waiting_joins(pbm, n: int, subject_of=lambda i: "join") -> list[int]:
    """``n`` giveaway games with a player each, and each player's JOIN stored
    in the inbox while `pbm serve` is stopped (so that it starts on a backlog
    and takes them as one batch); the inbox ids."""
    mails = []
    for i, game in enumerate(GAMES[:n]):
        pbm._cli_here(("game", "new", "giveaway", game), None, True)
        pbm._cli_here(("account", "add", f"k{i}", f"k{i}@example.org", "--password", f"kill-pass-{i}"), None, True)
        pbm.secrets.add(f"kill-pass-{i}")
        msg = pbm.build(f"k{i}@example.org", game, f"JOIN\n$$kill-pass-{i}$$", subject=subject_of(i))
        mails.append((msg["From"], [msg["To"]], bytes(msg)))
    db = Database(pbm.db_url)
    try:
        return store_messages(db, mails)
    finally:
        db.dispose()


def test_a_kill_inside_a_batch_before_its_commit(pbm_stopped):
    """The third of four mails kills its back end after it was handled,
    before the batch commits: after the restart nothing of that batch is
    done twice, the three others are handled and answered once each (alone:
    their tries say they were started before), and the one that kills is set
    aside when it has killed twice."""
    pbm = pbm_stopped
    ids = _games_with_waiting_joins(pbm, 4, lambda i: "kill-in-batch" if i == 2 else "join")
    pbm.env["PBM_FAILPOINT"] = "sigkill-before-commit:kill-in-batch"
    pbm.start()
    pbm.wait_for(pbm.gm_address, 1, timeout=60)  # the GM hears of the mail set aside
    pbm.settle(timeout=60)
    status = dict(pbm.sql("SELECT id, status FROM inbox"))
    assert status == {i: ("shunted" if n == 2 else "done") for n, i in enumerate(ids)}
    assert "started 2 times" in pbm.sql("SELECT note FROM inbox WHERE id = :i", i=ids[2])[0][0]
    replies = dict(pbm.sql("SELECT inbound_id, count(*) FROM outbox WHERE kind LIKE 'reply%' GROUP BY inbound_id"))
    assert replies == {i: 1 for n, i in enumerate(ids) if n != 2}
    for n in range(len(ids)):
        # one reply each; the second kill may fall after the relay took a reply
        # and before its mark: that reply comes again, the same mail (same Message-ID)
        got = {m["Message-ID"] for m in pbm.inbox(f"k{n}@example.org")}
        assert len(got) == (0 if n == 2 else 1), (n, got)
    assert "k2" not in str(pbm.state("k3"))  # the killed mail's JOIN never committed


def test_a_kill_between_the_relay_and_the_marks_sends_only_those_again(pbm_stopped):
    """Six replies go out over one relay session; the back end is killed
    once the relay accepted three whose marks were not yet committed.  The
    restarted back end takes its claims back and delivers all six: the three
    unmarked ones a second time (same Message-ID), the others once."""
    pbm = pbm_stopped
    ids = _games_with_waiting_joins(pbm, 6)
    pbm.env["PBM_FAILPOINT"] = "sigkill-after-relay:3"
    pbm.start()
    pbm.settle(timeout=60)
    assert (pbm.tmp / "failpoint-fired").exists()  # the kill did happen
    assert pbm.sql("SELECT count(*) FROM outbox WHERE status = 'sent' AND kind LIKE 'reply%'")[0][0] == 6
    delivered = collections.Counter(m["In-Reply-To"] for _, m in pbm.sink.all())
    mids = {i: pbm.sql("SELECT message_id FROM outbox WHERE inbound_id = :i", i=i)[0][0] for i in ids}
    per_reply = collections.Counter(m["Message-ID"] for _, m in pbm.sink.all())
    assert len(delivered) == 6 and all(per_reply[mids[i]] in (1, 2) for i in ids)
    assert sum(n - 1 for n in per_reply.values()) == 3  # exactly the three unmarked, sent again
