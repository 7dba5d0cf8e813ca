"""The back end on mail already in the inbox, through the real server.

The mails are stored in the inbox as the listener stores them (one
transaction, pbm_server.mail.inbound.store_messages), then a back end is started
(`pbm serve --without listener --without outbound --without scheduler`, the
real worker) and timed until every mail is processed; its CPU time comes from
/proc.  Each mail is an order with its `$$password$$`.

1. ``order_cost``: CPU per order mail into a 10-player giveaway and into a
   10,000-player one; the figure is the ratio large/small (goal of issue 15:
   at most 1.5).
2. ``workers``: mails spread over 20 giveaway games of 10 players; the time
   to drain them with one back-end process and with two on the same
   database (goal: two at least 1.5 times as fast, on PostgreSQL).

Each ratio comes from one run whose two sides are measured in turn,
``--rounds`` times each (A B, B A, A B, ...), each measurement on a fresh
copy of a database set up once per side: the ratio of every round, their
median and their range (servers.paired_ratio).

    .venv/bin/python benchmarks/bench_backend.py [--postgres URL] [--mails 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
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

from benchmarks.servers import (  # noqa: E402
    alternate,
    clone_database,
    cpu_seconds,
    fresh_database,
    paired_ratio,
    peak_rss_mb,
    usable_cores,
)

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


def _hash_many(count: int) -> list[str]:
    """``count`` Argon2 hashes of PASSWORD, each with its own salt (so a
    verified-password cache keyed by the stored hash knows none from another),
    made on every usable core."""
    from concurrent.futures import ProcessPoolExecutor

    from pbm_server.accounts.passwords import hash_password

    with ProcessPoolExecutor(max(1, usable_cores())) as ex:
        return list(ex.map(hash_password, [PASSWORD] * count, chunksize=64))


def setup_orders(db_url: str, games: dict[str, int], mails_per_game: int,
                 distinct_players: bool = False) -> list[tuple[str, str, str]]:
    """The same games and accounts; returns (sender, game address, body) of
    the order mails, each body a `$$password$$` and one GIVE line by which
    the sender gives away exactly what they hold.

    By default player i of every game is the same account p0000i (so 20
    games of 10 have 10 accounts, each in all 20 games) and every account
    has the same stored hash; 20 players of each game write, again and
    again.  With ``distinct_players`` every membership is an account of its
    own with a hash of its own (the games' players are p00000, p00001, ...
    across all games), and each player writes once: ``mails_per_game`` is
    then at most the game's size."""
    from benchmarks.bench_giveaway import make_state
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account, Game, Membership

    db = Database(db_url)
    db.upgrade()
    now = datetime.now(timezone.utc)
    first: dict[str, int] = {}  # game -> its first player's number
    total = 0
    for name, n in games.items():
        first[name] = total if distinct_players else 0
        total += n
    hashes = _hash_many(total) if distinct_players else None
    hashed = hash_password(PASSWORD)
    made: set[str] = set()
    with db.write() as s:
        for name, n in games.items():
            state, _ = make_state(n, seed=len(name) + n)
            handles = [f"p{first[name] + i:05d}" for i in range(n)]
            if first[name]:  # the game's players are p<first>, p<first + 1>, ...
                new = dict(zip((p["handle"] for p in state["players"]), handles, strict=True))
                for p in state["players"]:
                    p["handle"] = new[p["handle"]]
                state["orders"] = {new[u]: [[a, new[v]] for a, v in gifts] for u, gifts in state["orders"].items()}
            game = create_game(s, "giveaway", name, {}, None, now, state=state)
            for h in handles:
                if h not in made:
                    s.add(Account(handle=h, handle_key=h, handle_skeleton=h, email=f"{h}@example.org",
                                  password_hash=hashes[int(h[1:])] if hashes else hashed, created_at=now))
                    made.add(h)
            s.flush()
            ids = dict(s.execute(Account.__table__.select().with_only_columns(Account.handle, Account.id)).all())
            for h in handles:
                s.add(Membership(game_id=game.id, account_id=ids[h], role="player", joined_at=now))
    # each player gives away exactly what they hold
    with db.read() as s:
        holdings = {g.name: {p["handle"]: p["holding"] for p in g.state["players"]} for g in s.query(Game).all()}
    items = []
    for name, n in games.items():
        writers = n if distinct_players else min(n, 20)  # 20 players of the game write, again and again
        for k in range(mails_per_game):
            i, j = first[name] + k % writers, first[name] + (k + 1) % writers
            frm = f"p{i:05d}@example.org"
            items.append((frm, f"{name}@{DOMAIN}", f"$${PASSWORD}$$\nGIVE {holdings[name][f'p{i:05d}']} TO p{j:05d}\n"))
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


def alternating_drains(pg: str | None, sides: dict[str, tuple], rounds: int) -> dict[str, list[dict]]:
    """Measure the sides of a ratio in turn in one run (A B, B A, A B, ...:
    servers.alternate).  ``sides`` maps a label to (set-up, drain options):
    the set-up makes its database once (``setup(url)`` returns the mails to
    store) and every measurement drains a fresh copy of it, so both sides
    meet the same machine.  Sides with the same set-up function share its
    database.  Returns each side's drain() results, one per round."""
    runs: dict[str, list[dict]] = {label: [] for label in sides}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        made: dict[int, tuple[str, list]] = {}
        drops = []
        try:
            for setup_fn, _ in sides.values():
                if id(setup_fn) not in made:
                    home = tmp / f"template-{len(made)}"
                    home.mkdir()
                    url, drop = fresh_database(home, pg)
                    drops.append(drop)
                    made[id(setup_fn)] = (url, setup_fn(url))
            for r, label in alternate(list(sides), rounds):
                setup_fn, options = sides[label]
                url, raws = made[id(setup_fn)]
                work = tmp / f"{label}-{r}"
                work.mkdir()
                copy, remove = clone_database(url, work)
                try:
                    runs[label].append(drain(work, copy, raws, **options))
                finally:
                    remove()
        finally:
            for drop in drops:
                drop()
    return runs


def side(runs: list[dict]) -> dict:
    """One side of a ratio: the medians of its rounds, and the rounds."""
    return {"cpu_ms_per_mail": round(statistics.median(r["cpu_ms_per_mail"] for r in runs), 2),
            "seconds": round(statistics.median(r["seconds"] for r in runs), 2), "runs": runs}


def order_cost(pg: str | None, mails: int, rounds: int = 3) -> dict:
    sides = {f"{n}_players": (functools.partial(_order_setup, size=n, mails=mails), {}) for n in (10, 10_000)}
    runs = alternating_drains(pg, sides, rounds)
    return {"10_players": side(runs["10_players"]), "10000_players": side(runs["10000_players"]),
            "ratio_large_to_small": paired_ratio("CPU per order mail, 10,000-player game / 10-player game",
                                                 [r["cpu_ms_per_mail"] for r in runs["10000_players"]],
                                                 [r["cpu_ms_per_mail"] for r in runs["10_players"]], 2),
            "goal": "at most 1.5"}


def _order_setup(url: str, size: int, mails: int) -> list:
    return setup(url, {"big" if size > 10 else "small": size}, mails)


def _spread_setup(url: str, mails: int) -> list:
    games = {f"g{i:02d}": 10 for i in range(20)}
    raws = setup(url, games, max(1, mails // len(games)))
    return [raws[(k % len(games)) * (len(raws) // len(games)) + k // len(games)] for k in range(len(raws))]


def workers(pg: str | None, mails: int, rounds: int = 3) -> dict:
    spread = functools.partial(_spread_setup, mails=mails)
    runs = alternating_drains(pg, {"one_process": (spread, {"processes": 1}),
                                   "two_processes": (spread, {"processes": 2})}, rounds)
    return {"one_process": side(runs["one_process"]), "two_processes": side(runs["two_processes"]),
            "speedup_two_vs_one": paired_ratio("seconds to drain with one back end / with two",
                                               [r["seconds"] for r in runs["one_process"]],
                                               [r["seconds"] for r in runs["two_processes"]], 2),
            "goal": "at least 1.5 (PostgreSQL, 2 cores)"}


def run(pg: str | None = None, mails: int = 300, rounds: int = 3) -> dict:
    return {"order_cost": order_cost(pg, mails, rounds), "workers": workers(pg, mails, rounds)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--mails", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="measurements of each side, in turn")
    a = ap.parse_args()
    print(json.dumps(run(a.postgres, a.mails, a.rounds), indent=2))


if __name__ == "__main__":
    main()
