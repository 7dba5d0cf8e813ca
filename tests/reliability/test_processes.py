"""`pbm serve` is three processes (docs/benchmarks.md): the listener, a back
end for the worker, outbound and scheduler, and the HTTP side.  A back end
that dies is started again, and neither outlives the listener."""

from __future__ import annotations

import collections
import os
import signal
from pathlib import Path

import pytest

from tests.harness import wait_until

# `pbm serve` in its own processes: what this module shows is about processes
pytestmark = pytest.mark.process


def children(pid: int, http: bool = False) -> list[int]:
    """The back ends of ``pid`` (child processes of any of its threads); with
    ``http``, its HTTP side (a child started `--without worker`) instead."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return [c for c in out if alive(c) and is_http_side(c) == http]


def is_http_side(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"worker" in argv and b"http" not in argv


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"




def test_back_end_restarts_and_mail_still_answered(pbm):
    wait_until(lambda: len(children(pbm.proc.pid)) == 1)
    (back_end,) = children(pbm.proc.pid)
    os.kill(back_end, signal.SIGKILL)
    # mail accepted while the back end is down waits in the inbox ...
    mid = pbm.send("carol@example.org", "pbm", "help")
    # ... and is answered by the new back end
    wait_until(lambda: children(pbm.proc.pid) and children(pbm.proc.pid) != [back_end])
    pbm.settle(timeout=60)
    (reply,) = pbm.replies_to(mid)
    assert "register HANDLE PASSWORD" in pbm.text(reply)
    assert "back end 1 exited" in pbm.serve_log()


@pytest.mark.http_side  # its HTTP side's process goes too
def test_back_end_dies_with_the_listener(pbm):
    wait_until(lambda: len(children(pbm.proc.pid)) == 1 and len(children(pbm.proc.pid, http=True)) == 1)
    (back_end,) = children(pbm.proc.pid)
    (http_side,) = children(pbm.proc.pid, http=True)
    pbm.stop(kill=True)  # SIGKILL: no chance to tell the back end
    wait_until(lambda: not alive(back_end) and not alive(http_side), timeout=10)
    pbm.start()  # and a restart works on the same database
    assert "register HANDLE PASSWORD" in pbm.text(pbm.mail("dave@example.org", "pbm", "help"))


@pytest.mark.http_side  # its HTTP side's process goes too
def test_sigterm_stops_all(pbm):
    wait_until(lambda: len(children(pbm.proc.pid)) == 1 and len(children(pbm.proc.pid, http=True)) == 1)
    (back_end,) = children(pbm.proc.pid)
    (http_side,) = children(pbm.proc.pid, http=True)
    proc = pbm.proc
    pbm.stop()
    assert proc.returncode == 0
    wait_until(lambda: not alive(back_end) and not alive(http_side), timeout=10)


def test_several_back_ends_share_the_games_and_keep_each_games_order(make_server):
    """PBM_BACKENDS=2: two back-end processes beside the listener, each game's
    mails answered once and in the order they arrived, with a back end
    killed half-way (its route locks go with it)."""
    a = make_server("a", extra_env={"PBM_BACKENDS": "2"})
    a.start()
    wait_until(lambda: len(children(a.proc.pid)) == 2)
    players = {f"pl{i}": f"pl{i}-secret-{i}x" for i in range(4)}
    mails = {h: a.register(h, pw) for h, pw in players.items()}
    games = ("g1", "g2", "g3")
    for g in games:
        a.new_game("giveaway", g)
    handles = list(players)
    sent: dict[str, list[str]] = {g: [] for g in games}
    first, second = children(a.proc.pid)
    for n, step in enumerate(("JOIN", "GIVE 3 TO {next}", "GIVE 2 TO {next}\nGIVE 1 TO {prev}")):
        if n == 1:
            os.kill(second, signal.SIGKILL)  # mid-stream: its mail in hand stays new and is done once
        for g in games:
            for i, h in enumerate(handles):
                body = step.format(next=handles[(i + 1) % len(handles)], prev=handles[i - 1])
                sent[g].append(a.send(mails[h], g, f"$${players[h]}$$\n{body}"))
    a.settle(timeout=180)
    wait_until(lambda: len(children(a.proc.pid)) == 2)  # the killed one was started again
    assert {r[0] for r in a.sql("SELECT status FROM inbox")} == {"done"}
    per_mail = a.sql("SELECT inbound_id, count(*) FROM outbox WHERE kind LIKE 'reply%' GROUP BY inbound_id")
    assert per_mail and all(n == 1 for _, n in per_mail)
    # both back ends deliver, each its own claims: every outbox row reached the
    # relay, and a copy only if the kill fell between the relay's 250 and the record
    assert a.sql("SELECT count(*) FROM outbox WHERE status <> 'sent'")[0][0] == 0
    delivered = collections.Counter(m["Message-ID"] for _, m in a.sink.all())
    assert set(delivered) == {r[0] for r in a.sql("SELECT message_id FROM outbox")}
    assert sum(n - 1 for n in delivered.values()) <= 1, delivered.most_common(3)
    for g in games:
        rows = a.sql("SELECT o.inbound_id FROM outbox o JOIN inbox i ON i.id = o.inbound_id "
                     "JOIN games gm ON gm.id = i.game_id WHERE gm.name = :g AND o.kind LIKE 'reply%' ORDER BY o.id", g=g)
        order = [r[0] for r in rows]
        assert len(order) == 3 * len(handles) and order == sorted(order), (g, order)
        for mid in sent[g]:
            # a copy delivered twice (the kill above) is still one reply
            (reply,) = {m["Message-ID"]: m for m in a.replies_to(mid)}.values()
            text = a.flat(reply)
            assert "REFUSED" not in text and "accepted" in text, text
