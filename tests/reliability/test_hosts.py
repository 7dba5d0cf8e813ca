"""Two hosts, one PostgreSQL: two complete `pbm serve` (listener, back end,
delivery, scheduler), each in a network namespace of its own with its own
address (benchmarks/netns.py), share one database.  Mail comes over SMTP
from the root namespace to both; both deliver to one relay sink there; the
database is reached through a TCP forwarder (PostgreSQL itself listens on
127.0.0.1 only).

* every mail is handled once and answered once, every reply reaches the
  relay once, and every turn that falls due while both schedulers watch is
  run once, with one set of reports;
* SIGKILL of one host's whole process group in the middle of a burst loses
  nothing: every mail either host acknowledged is handled and answered once,
  by the survivor, which also delivers the replies the dead host had claimed
  once its claim has run out.  A reply the relay may have accepted just
  before the kill, and whose row was not yet marked sent, is re-sent with the
  same Message-ID: only rows the dead host had claimed can be sent twice.

The hosts share PostgreSQL, so the module runs only with
PBM_TEST_DATABASE_URL=postgresql://...; it needs root and iproute2's ``ip``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import re
import smtplib
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from benchmarks import netns
from pbm_server.store.models import INBOX_RAW
from tests.harness import PbmServer, Sink, SinkHandler, wait_until

pytestmark = pytest.mark.process

BASE = os.environ.get("PBM_TEST_DATABASE_URL", "")


def _skip_reason() -> str | None:
    if not BASE.startswith("postgresql"):
        return "the hosts share one PostgreSQL: set PBM_TEST_DATABASE_URL=postgresql://..."
    why = netns.missing()
    if why:
        return why
    from sqlalchemy import create_engine, text

    engine = create_engine(BASE.replace("postgresql://", "postgresql+psycopg://"), connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as c:
            c.execute(text("SELECT 1"))
    except Exception as exc:
        return f"no PostgreSQL answers at PBM_TEST_DATABASE_URL: {type(exc).__name__}"
    finally:
        engine.dispose()
    return None


_why = _skip_reason()
if _why:
    pytestmark = [pytest.mark.process, pytest.mark.skip(reason=_why)]

GAMES = ("g0", "g1", "g2", "g3")
PER_GAME = 4
PLAYERS = {f"p{g}{i}": (name, f"pw-{name}-{i}-secret") for g, name in enumerate(GAMES) for i in range(PER_GAME)}


class _Handler(SinkHandler):
    """The harness's sink, optionally slow (``delay`` seconds per message), so
    that a delivering host holds its claimed rows for a while."""

    def __init__(self, delay: float = 0.0):
        super().__init__()
        self.delay = delay

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().handle_DATA(server, session, envelope)


class GatewaySink(Sink):
    """The relay sink on the hosts' gateway address (reachable from each host)."""

    def __init__(self, host: str, delay: float = 0.0):
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        super().__init__(port)
        self.host = host
        self.handler = _Handler(delay)

    def start(self):
        from aiosmtpd.controller import Controller

        self.controller = Controller(self.handler, hostname=self.host, port=self.port)
        self.controller.start()


class Site:
    """One database (a PbmServer harness that is never started: its database,
    CLI, SQL and clock file), two hosts, the forwarder and the sink."""

    def __init__(self, tmp: Path, extra_env: dict[str, str], sink_delay: float = 0.0, clock: datetime | None = None):
        self.tmp = tmp
        (tmp / "db").mkdir()
        self.db = PbmServer(tmp / "db")
        self.hosts = netns.Hosts(2, tag="test", net=1)
        self.forwarder = netns.Forwarder(self.hosts.gateway)
        self.serves: list[netns.HostServe] = []
        self.extra_env = extra_env
        self.sink_delay = sink_delay
        self.clock = clock

    def __enter__(self) -> "Site":
        try:
            if self.clock is not None:
                self.db.set_clock(self.clock)
            self.hosts.make()
            self.forwarder.start()
            self.db.sink.stop()
            self.db.sink = GatewaySink(self.hosts.gateway, self.sink_delay)
            self.db.sink.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def start_hosts(self) -> None:
        env = {k: v for k, v in self.db.env.items() if k.startswith("PBM_") and not k.startswith("PBM_TEST_")}
        env.update({
            "PBM_DATABASE_URL": netns.via(self.db.db_url, self.hosts.gateway, self.forwarder.port),
            "PBM_RELAY": f"{self.hosts.gateway}:{self.db.sink.port}",
            "PBM_HTTP_LISTEN": "",
            "PBM_BACKENDS": "1",
        })
        env.update(self.extra_env)
        for i in range(2):
            env_i = dict(env, PBM_MAILDIR=str(self.tmp / f"host{i}" / "maildir"))
            self.serves.append(netns.HostServe(self.hosts, i, env_i, self.tmp / f"host{i}"))
        for serve in self.serves:
            serve.launch()
        for serve in self.serves:
            serve.wait()

    def logs(self) -> str:
        return "\n".join(f"--- host {s.index}:\n{s.log()[-2500:]}" for s in self.serves)

    def settle(self, timeout: float = 40.0) -> None:
        try:
            self.db.settle(timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def __exit__(self, *exc) -> None:
        for serve in self.serves:
            serve.stop()
        self.forwarder.stop()
        self.hosts.close()
        self.db.close()

    # -- load over SMTP, split across the hosts
    def burst(self, mails: list[tuple[str, str, str]], tag: str, rate: float = 0.0,
              on_way=None) -> tuple[dict[str, int], list]:
        """Mail ``mails`` in turn to host 0 and host 1 (each host its half,
        four sessions each); returns {Message-ID: host} of the mails a host
        acknowledged with 250, and every attempt."""
        from benchmarks.smtpload import LoadProcess, LoadSpec

        halves = [mails[0::2], mails[1::2]]
        loads = [LoadProcess(LoadSpec(self.serves[i].address, self.serves[i].port, len(half), concurrency=4,
                                      domain=self.db.domain, mails=half, tag=f"{tag}{i}", rate=rate / 2))
                 for i, half in enumerate(halves) if half]
        if on_way is not None:
            on_way()
        results = [load.result(timeout=120) for load in loads]
        acked = {s.message_id: i for i, r in enumerate(results) for s in r.accepted}
        return acked, [s for r in results for s in r.sent]

    # -- what users see
    def inbox_by_message_id(self) -> tuple[collections.Counter, dict[str, tuple[int, str]]]:
        stored: collections.Counter = collections.Counter()
        rows: dict[str, tuple[int, str]] = {}
        for row_id, status, raw in self.db.sql(f"SELECT id, status, {INBOX_RAW} AS raw FROM inbox"):
            m = re.search(rb"^Message-ID: (\S+)", bytes(raw), re.M | re.I)
            mid = m.group(1).decode() if m else f"row{row_id}"
            stored[mid] += 1
            rows[mid] = (row_id, status)
        return stored, rows

    def replies_per_row(self) -> dict[int, int]:
        return dict(self.db.sql("SELECT inbound_id, count(*) FROM outbox WHERE kind LIKE 'reply%' GROUP BY inbound_id"))

    def delivered(self) -> tuple[collections.Counter, collections.Counter]:
        """How often the relay got each Message-ID, and each In-Reply-To."""
        got = [m for _, m in self.db.sink.all()]
        return (collections.Counter(m["Message-ID"] for m in got),
                collections.Counter(m["In-Reply-To"] for m in got if m["In-Reply-To"]))


def _add_players(site: Site) -> None:
    for handle, (game, pw) in PLAYERS.items():
        site.db.cli("account", "add", handle, f"{handle}@example.org", "--password", pw)
        site.db.secrets.add(pw)
        site.db.cli("game", "add-player", game, handle)


def _orders(site: Site, rounds: int) -> list[tuple[str, str, str]]:
    """``rounds`` order mails from every player: each gives all they hold to
    the next player of the game."""
    mails = []
    holdings = dict.fromkeys(PLAYERS, 3)  # before round 1 everyone holds 3
    for game in GAMES:
        for p in site.db.state(game)["players"]:
            holdings[p["handle"]] = p["holding"]
    for k in range(rounds):
        for handle, (game, pw) in PLAYERS.items():
            i = int(handle[2:])
            nxt = f"{handle[:2]}{(i + 1 + k % (PER_GAME - 1)) % PER_GAME}"
            mails.append((f"{handle}@example.org", f"{game}@{site.db.domain}",
                          f"$${pw}$$\nGIVE {holdings[handle]} TO {nxt}\n"))
    return mails


def _helps(n: int, domain: str, tag: str) -> list[tuple[str, str, str]]:
    return [(f"someone{tag}{k}@example.org", f"pbm@{domain}", "help") for k in range(n)]


def _check_once(site: Site, acked: dict[str, int]) -> None:
    """Every acknowledged mail stored once and done, every stored mail
    answered once, every outbox row delivered once."""
    stored, rows = site.inbox_by_message_id()
    for mid in acked:
        assert stored[mid] == 1, f"{mid} stored {stored[mid]} times"
    assert all(n == 1 for n in stored.values()), [m for m, n in stored.items() if n > 1]
    assert {st for _, st in rows.values()} == {"done"}, collections.Counter(st for _, st in rows.values())
    replies = site.replies_per_row()
    assert sorted(replies) == sorted(row_id for row_id, _ in rows.values())
    assert set(replies.values()) == {1}
    by_mid, by_irt = site.delivered()
    outbox = {r[0] for r in site.db.sql("SELECT message_id FROM outbox")}
    assert set(by_mid) == outbox
    twice = {k: n for k, n in by_mid.items() if n > 1}
    assert not twice, f"delivered more than once: {twice}"
    for mid in acked:
        assert by_irt[mid] == 1, f"the reply to {mid} reached the relay {by_irt[mid]} times"


def test_two_hosts_handle_reply_and_run_turns_once(tmp_path):
    start = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)  # a Monday
    with Site(tmp_path, {}, clock=start) as site:
        for game in GAMES:
            site.db.new_game("giveaway", game, deadline="every day 18:00 UTC")
        _add_players(site)
        site.start_hosts()

        # round 1's orders and mails to pbm@, to both hosts at once
        mails = _orders(site, 2) + _helps(24, site.db.domain, "a")
        acked, sent = site.burst(mails, "orders1-")
        assert len(acked) == len(mails), collections.Counter(s.code for s in sent)
        assert set(acked.values()) == {0, 1}
        site.settle()
        _check_once(site, acked)

        # the deadline passes while both schedulers watch: each game's round 1 runs once
        site.db.set_clock(start + timedelta(hours=6, seconds=5))
        wait_until(lambda: all(t == 2 for (t,) in site.db.sql("SELECT turn FROM games")), 40, "round 1 of every game")
        site.settle()
        # round 2's orders, then its deadline
        more = _orders(site, 1) + _helps(8, site.db.domain, "b")
        acked2, _ = site.burst(more, "orders2-")
        assert len(acked2) == len(more)
        site.settle()
        site.db.set_clock(start + timedelta(days=1, hours=6, seconds=5))
        wait_until(lambda: all(t == 3 for (t,) in site.db.sql("SELECT turn FROM games")), 40, "round 2 of every game")
        time.sleep(1.5)  # both schedulers have looked again (every 0.25 s: PBM_POLL_SECONDS)
        site.settle()

        acked.update(acked2)
        _check_once(site, acked)
        # each game's rounds 1 and 2 ran once: one snapshot after each, one report per player
        after = collections.Counter(site.db.sql("SELECT g.name, s.turn FROM snapshots s JOIN games g ON g.id = s.game_id "
                                                "WHERE s.phase = 'after'"))
        assert after == {(g, t): 1 for g in GAMES for t in (1, 2)}, after
        sent_mail = [m for _, m in site.db.sink.all()]
        for handle, (game, _) in PLAYERS.items():
            for rnd in (1, 2):
                reports = [m for m in sent_mail if m["To"] == f"{handle}@example.org"
                           and m["Subject"].startswith(f"{game}: round {rnd} report")]
                assert len(reports) == 1, (handle, rnd, [m["Subject"] for m in sent_mail if m["To"] == f"{handle}@example.org"])
        assert not site.db.leaked_secrets()
        assert all(s.running for s in site.serves), site.logs()


class Streams:
    """Mail to both hosts without end (two SMTP sessions at a time to each,
    ``per_second`` in all, each mail with a Message-ID of its own) until
    :meth:`stop`: one host can be killed while mail flows to both."""

    def __init__(self, site: Site, mails: list[tuple[str, str, str]], per_second: float):
        self.site, self.mails, self.interval = site, mails, 4 / per_second
        self._stop = threading.Event()
        self._numbers = itertools.count()
        self.lock = threading.Lock()
        #: Message-ID -> (host, monotonic time of its 250)
        self.acked: dict[str, tuple[int, float]] = {}
        #: (host, monotonic time) of each attempt that got no 250
        self.failed: list[tuple[int, float]] = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in (0, 1, 0, 1)]
        for t in self.threads:
            t.start()

    def _run(self, host: int) -> None:
        serve = self.site.serves[host]
        due = time.monotonic()
        while not self._stop.is_set():
            frm, to, body = self.mails[next(self._numbers) % len(self.mails)]
            msg = self.site.db.build(frm, to, body)
            smtp = None
            try:
                smtp = smtplib.SMTP(serve.address, serve.port, timeout=10)
                smtp.send_message(msg)
                with self.lock:
                    self.acked[msg["Message-ID"]] = (host, time.monotonic())
            except (smtplib.SMTPException, OSError):
                with self.lock:
                    self.failed.append((host, time.monotonic()))
            finally:
                if smtp is not None:
                    try:
                        smtp.quit()
                    except (smtplib.SMTPException, OSError):
                        smtp.close()
            due += self.interval
            self._stop.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        for t in self.threads:
            t.join(30)


def test_one_host_killed_mid_burst_loses_nothing(tmp_path):
    # a slow relay (30 ms a message): a delivering host holds claimed rows for
    # a while; claims run out after 4 s
    env = {"PBM_OUTBOUND_CLAIM_SECONDS": "4", "PBM_UNAUTHENTICATED_REPLIES_PER_DOMAIN_PER_HOUR": "100000"}
    with Site(tmp_path, env, sink_delay=0.03) as site:
        for game in GAMES:
            site.db.new_game("giveaway", game)
        _add_players(site)
        site.start_hosts()
        victim, survivor = site.serves[1], site.serves[0]
        identity = f"{socket.gethostname()}|{victim.address}:{victim.port}"[:58]
        claimed_q = "SELECT message_id FROM outbox WHERE status = 'pending' AND claimed_by LIKE :me"

        def busy() -> bool:  # host 1 holds claimed replies and mail waits in the inbox
            claimed = site.db.sql(claimed_q, me=identity + "%")
            new = site.db.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0]
            return len(claimed) >= 1 and new >= 2

        streams = Streams(site, _orders(site, 1) + _helps(16, site.db.domain, "k"), per_second=40)
        try:
            time.sleep(1.0)  # mail flows to both
            wait_until(busy, 40, "host 1 holding claimed replies while mail waits")
            victim.kill()
            killed_at = time.monotonic()
            claimed_at_kill = {r[0] for r in site.db.sql(claimed_q, me=identity + "%")}
            new_at_kill = {r[0] for r in site.db.sql("SELECT id FROM inbox WHERE status = 'new'")}
            time.sleep(1.0)  # the burst goes on: host 0 takes mail, host 1 refuses it
        finally:
            streams.stop()
        acked = {mid: host for mid, (host, _) in streams.acked.items()}
        assert not victim.running
        assert not any(netns.descendants(victim.proc.pid)[1:]), "a process of the killed host is left"
        assert claimed_at_kill, "host 1 held no claimed reply at the kill"
        assert new_at_kill, "no mail waited at the kill"
        assert any(h == 1 for h in acked.values()), "host 1 acknowledged mail before the kill"
        assert any(h == 0 and t > killed_at for h, t in streams.acked.values()), "host 0 went on taking mail"
        assert any(h == 1 and t > killed_at for h, t in streams.failed), "host 1 refused mail after the kill"
        site.settle(timeout=45)

        stored, rows = site.inbox_by_message_id()
        for mid in acked:  # nothing acknowledged is lost, nothing stored twice
            assert stored[mid] == 1, f"{mid} stored {stored[mid]} times"
            assert rows[mid][1] == "done", rows[mid]
        assert all(n == 1 for n in stored.values())
        # the mail that waited at the kill was handled by the survivor
        done = {row_id for row_id, st in rows.values() if st == "done"}
        assert new_at_kill <= done
        replies = site.replies_per_row()
        for row_id, st in rows.values():
            assert st == "done" and replies.get(row_id) == 1, (row_id, st, replies.get(row_id))
        # every reply reached the relay; only a row the dead host had claimed may have gone twice
        by_mid, by_irt = site.delivered()
        outbox = {r[0] for r in site.db.sql("SELECT message_id FROM outbox")}
        assert set(by_mid) == outbox
        twice = {k for k, n in by_mid.items() if n > 1}
        assert twice <= claimed_at_kill, twice - claimed_at_kill
        assert all(by_mid[k] == 2 for k in twice)
        for mid in acked:
            assert by_irt[mid] >= 1, f"no reply to {mid}"
        # the rows the dead host had claimed were delivered by the survivor
        claimed_by = dict(site.db.sql("SELECT message_id, claimed_by FROM outbox"))
        assert all(claimed_by[m] is None or not claimed_by[m].startswith(identity) for m in claimed_at_kill)
        assert survivor.running, site.logs()
        assert not site.db.leaked_secrets()
        print(f"\nhosts kill: {len(acked)} acknowledged ({collections.Counter(acked.values())} by host), "
              f"{len(new_at_kill)} waiting and {len(claimed_at_kill)} replies claimed by the killed host at the kill, "
              f"{len(twice)} sent twice")
