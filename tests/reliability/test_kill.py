"""SIGKILL `pbm serve` at random moments under load, restart it each time:
every mail that got a 250 is processed exactly once, and every reply reaches
the relay sink.

A reply can reach the sink twice only if the kill falls between the relay's
250 and the commit that marks the outbox row sent; the copy carries the same
Message-ID (the outbox keeps it), so it is recognisable.  Outbound delivers one
row at a time, so each kill can cause at most one such copy: the test asserts
that bound and prints how many there were.

The default run kills once; the heavy variant (``-m heavy``) five times under a
longer load.  ``PBM_KILL_SEED`` picks the moments (default 9).
"""

from __future__ import annotations

import collections
import os
import random
import re
import time

import pytest

from benchmarks.smtpload import LoadProcess, LoadSpec

# `pbm serve` in its own processes: what this module shows is about processes
pytestmark = pytest.mark.process


def run_kill_loop(pbm, kills: int, count: int, rate: float, seed: int) -> dict:
    rng = random.Random(seed)
    pbm.start()
    spec = LoadSpec("127.0.0.1", pbm.port, count, concurrency=8, domain=pbm.domain, senders=max(50, count // 4),
                    rate=rate, tag=f"kill{seed}")
    load = LoadProcess(spec)
    restarts = 0
    for _ in range(kills):
        time.sleep(rng.uniform(0.3, 2.5))
        pbm.stop(kill=True)
        pbm.start()
        restarts += 1
    result = load.result(timeout=600)
    pbm.settle(timeout=300)
    accepted = {s.message_id for s in result.accepted}
    assert len(accepted) >= count // 3, "the load hardly got through"

    rows = pbm.sql("SELECT id, status, raw FROM inbox")
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
    assert copies <= restarts, f"{copies} duplicate deliveries after {restarts} kills"
    figures = {"sent": len(result.sent), "acknowledged": len(accepted), "stored": len(stored), "kills": restarts,
               "replies": len(outbox_ids), "duplicate_deliveries": copies}
    print(f"\nkill test: {figures}")
    return figures


def test_sigkill_under_load_once(pbm_stopped):
    run_kill_loop(pbm_stopped, kills=1, count=150, rate=30, seed=int(os.environ.get("PBM_KILL_SEED", "9")))


@pytest.mark.heavy
@pytest.mark.parametrize("seed", [int(os.environ.get("PBM_KILL_SEED", "9")), 2, 3])
def test_sigkill_under_load_five_times(pbm_stopped, seed):
    run_kill_loop(pbm_stopped, kills=5, count=1500, rate=60, seed=seed)
