"""The back end on mail already in the inbox, through the real server.

The mails are stored in the inbox as the listener stores them (one
transaction, pbm_server.mail.inbound.store_messages), then a back end is started
(`pbm serve --without listener --without outbound --without scheduler`, the
real worker) and timed until every mail is processed; its CPU time comes from
/proc.  Each mail is an order with its `$$password$$`.

1. ``order_cost``: CPU per order mail into a 10-player giveaway and into a
   10,000-player one, in the same run; the figure is the ratio large/small
   (goal of issue 15: at most 1.5).
2. ``workers``: mails spread over 20 giveaway games of 10 players; the time
   to drain them with one back-end process and with two on the same
   database, in the same run (goal: two at least 1.5 times as fast, on
   PostgreSQL).

    .venv/bin/python benchmarks/bench_backend.py [--postgres URL] [--mails 300]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.servers import cpu_seconds, fresh_database, peak_rss_mb  # noqa: E402

DOMAIN = "pbm.localhost"
PASSWORD = "bench-secret-1"


def _settings(db_url: str):
    from pbm_server.base.settings import load_settings

    return load_settings({"PBM_DATABASE_URL": db_url, "PBM_DOMAIN": DOMAIN, "PBM_GM_ADDRESS": "gm@example.org"})


def setup(db_url: str, games: dict[str, int], mails_per_game: int) -> list[tuple[str, list[str], bytes]]:
    """Games of the given sizes (started giveaways, every player with an
    order), their players' accounts; returns the order mails to store."""
    raws = []
    for frm, rcpt, body in setup_orders(db_url, games, mails_per_game):
        m = EmailMessage()
        m["From"] = frm
        m["To"] = rcpt
        m["Subject"] = "orders"
        m["Message-ID"] = make_msgid(domain="example.org")
        m.set_content(body)
        raws.append((frm, [rcpt], bytes(m)))
    return raws


def setup_orders(db_url: str, games: dict[str, int], mails_per_game: int) -> list[tuple[str, str, str]]:
    """The same games and accounts; returns (sender, game address, body) of
    the order mails, each body a `$$password$$` and one GIVE line by which
    the sender gives away exactly what they hold."""
    from benchmarks.bench_giveaway import make_state
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account, Game, Membership

    db = Database(db_url)
    db.upgrade()
    now = datetime.now(timezone.utc)
    hashed = hash_password(PASSWORD)
    made: set[str] = set()
    with db.write() as s:
        for name, n in games.items():
            state, _ = make_state(n, seed=len(name) + n)
            game = create_game(s, "giveaway", name, {}, None, now, state=state)
            for i in range(n):
                handle = f"p{i:05d}"
                if handle not in made:
                    s.add(Account(handle=handle, handle_key=handle, handle_skeleton=handle, email=f"{handle}@example.org",
                                  password_hash=hashed, created_at=now))
                    made.add(handle)
            s.flush()
            ids = dict(s.execute(Account.__table__.select().with_only_columns(Account.handle, Account.id)).all())
            for i in range(n):
                s.add(Membership(game_id=game.id, account_id=ids[f"p{i:05d}"], role="player", joined_at=now))
    # each player gives away exactly what they hold
    with db.read() as s:
        holdings = {g.name: {p["handle"]: p["holding"] for p in g.state["players"]} for g in s.query(Game).all()}
    items = []
    for name, n in games.items():
        for k in range(mails_per_game):
            i, j = k % min(n, 20), (k + 1) % min(n, 20)  # 20 players of the game write, again and again
            frm = f"p{i:05d}@example.org"
            items.append((frm, f"{name}@{DOMAIN}",
                          f"$${PASSWORD}$$\nGIVE {holdings[name][f'p{i:05d}']} TO p{j:05d}\n"))
    db.dispose()
    return items


def drain(tmp: Path, db_url: str, raws: list, processes: int = 1, workers: int = 1, timeout: float = 900) -> dict:
    """Start ``processes`` back ends and let them take one mail each (so
    start-up is not counted); then store the rest at once and time them
    until nothing is new; the back ends' CPU over that time."""
    import os

    from sqlalchemy import create_engine, text

    from pbm_server.mail.inbound import store_messages
    from pbm_server.store.db import Database

    db = Database(db_url)
    warm, raws = raws[:processes * 2], raws[processes * 2:]
    total = len(raws)

    env = dict(os.environ)
    env.update({"PBM_DATABASE_URL": db_url, "PBM_DOMAIN": DOMAIN, "PBM_GM_ADDRESS": "gm@example.org",
                "PBM_RELAY": "", "PBM_MAILDIR": str(tmp / "maildir"), "PBM_WORKERS": str(workers),
                "PBM_REPLY_LIMIT_PER_HOUR": "1000000", "PBM_POLL_SECONDS": "0.05", "PYTHONPATH": str(ROOT)})
    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    args = [sys.executable, "-m", "pbm_server.running.cli", "serve", "--without", "listener", "--without", "outbound",
            "--without", "scheduler"]
    log = open(tmp / "backend.log", "ab")
    t0 = time.monotonic()
    procs = [subprocess.Popen(args, env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT) for _ in range(processes)]

    def waiting() -> int:
        with engine.connect() as c:
            return c.execute(text("SELECT count(*) FROM inbox WHERE status = 'new'")).scalar_one()

    try:
        store_messages(db, warm)
        while waiting():
            if time.monotonic() - t0 > 120:
                raise RuntimeError("the back ends did not start")
            time.sleep(0.05)
        time.sleep(1.0)  # every back end is up and idle
        c0 = sum(cpu_seconds(p.pid) for p in procs)
        t0 = time.monotonic()
        store_messages(db, raws)
        while True:
            with engine.connect() as c:
                left = c.execute(text("SELECT count(*) FROM inbox WHERE status = 'new'")).scalar_one()
            if not left:
                break
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"{left} mails still waiting after {timeout} s")
            time.sleep(0.05)
        elapsed = time.monotonic() - t0
        cpu = sum(cpu_seconds(p.pid) for p in procs) - c0
        rss = max(peak_rss_mb(p.pid) for p in procs)
        with engine.connect() as c:
            done = c.execute(text("SELECT count(*) FROM inbox WHERE status = 'done'")).scalar_one() - len(warm)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        engine.dispose()
        db.dispose()
    return {"mails": total, "done": done, "seconds": round(elapsed, 2), "cpu_seconds": round(cpu, 2),
            "cpu_ms_per_mail": round(cpu / max(total, 1) * 1000, 1), "peak_rss_mb": round(rss)}


def order_cost(pg: str | None, mails: int) -> dict:
    out = {}
    for label, size in (("10_players", 10), ("10000_players", 10_000)):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            url, drop = fresh_database(tmp, pg)
            try:
                raws = setup(url, {"big" if size > 10 else "small": size}, mails)
                out[label] = drain(tmp, url, raws)
            finally:
                drop()
    small, large = out["10_players"]["cpu_ms_per_mail"], out["10000_players"]["cpu_ms_per_mail"]
    out["ratio_large_to_small"] = round(large / small, 2) if small else None
    out["goal"] = "at most 1.5"
    return out


def workers(pg: str | None, mails: int) -> dict:
    out = {}
    games = {f"g{i:02d}": 10 for i in range(20)}
    for label, procs in (("one_process", 1), ("two_processes", 2)):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            url, drop = fresh_database(tmp, pg)
            try:
                raws = setup(url, games, max(1, mails // len(games)))
                raws = [raws[(k % len(games)) * (len(raws) // len(games)) + k // len(games)] for k in range(len(raws))]
                out[label] = drain(tmp, url, raws, processes=procs)
            finally:
                drop()
    one, two = out["one_process"]["seconds"], out["two_processes"]["seconds"]
    out["speedup_two_vs_one"] = round(one / two, 2) if two else None
    out["goal"] = "at least 1.5 (PostgreSQL, 2 cores)"
    return out


def run(pg: str | None = None, mails: int = 300) -> dict:
    return {"order_cost": order_cost(pg, mails), "workers": workers(pg, mails)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--mails", type=int, default=300)
    a = ap.parse_args()
    print(json.dumps(run(a.postgres, a.mails), indent=2))


if __name__ == "__main__":
    main()
