"""Turn runs at each game's design size, through the real server: the game
and its players' accounts are stored in a fresh database, then
``pbm turn run NAME`` (the CLI, the server's own turn path: snapshots, one
report mail per player into the outbox) runs as a process of its own; the
figures are its wall time, CPU time and peak RSS (from wait4).

* giveaway, 10,000 players, every one with an order (goal: peak RSS < 300 MB)
* rmpm, 1,000 players, every one with orders
* sequence, 250 players after 2,500 plays (the game's closing deadline)

    .venv/bin/python benchmarks/bench_turns.py [--only giveaway] [--players N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOMAIN = "pbm.localhost"
SIZES = {"giveaway": 10_000, "rmpm": 1_000, "sequence": 250}


def giveaway_state(n: int) -> tuple[dict, list[str]]:
    from benchmarks.bench_giveaway import make_state

    state, _ = make_state(n, seed=n)
    return state, [p["handle"] for p in state["players"]]


def rmpm_state(n: int, seed: int = 7) -> tuple[dict, list[str]]:
    """n players, every one with orders for this week (bench_rmpm.position's
    layout; the board's 25x25 fields hold two players each, so beyond about
    600 players the rest wait on the parking, which holds any number)."""
    import random

    from benchmarks.bench_rmpm import DIRS, f
    from games.rmpm import RULES

    rng = random.Random(seed)
    free = [(r, c) for r in range(1, 26) for c in range(1, 26) if (r, c) != (13, 13)] * 2
    rng.shuffle(free)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    players, orders = {}, {}
    for i in range(1, n + 1):
        chips = []
        while len(chips) < 2:
            cell = free.pop() if free else (13, 13)
            if cell in chips and cell != (13, 13):
                free.insert(0, cell)
                continue
            chips.append(cell)
        handle = f"p{i:04d}"
        players[handle] = {
            "number": i, "abbr": digits[i // 36 % 36] + digits[i % 36], "alias": f"player {i}",
            "chips": [f(*c) for c in chips], "an": rng.randint(1, 100), "pn": rng.randint(1, 100),
            "capital": rng.randint(0, 20000), "cards": {"MT": 1} if i % 10 == 0 else {},
        }
        lines = []
        for a in chips:
            while True:
                d = rng.choice("urdl")
                t = (a[0] + DIRS[d][0], a[1] + DIRS[d][1])
                if 1 <= t[0] <= 25 and 1 <= t[1] <= 25:
                    break
            lines.append(f"{f(*a)} -> {f(*t)}")
        if i % 3 == 0:
            lines.append("BUY")
        orders[handle] = lines
    owners = {}
    for _ in range(60):
        owners[f(rng.randint(1, 25), rng.randint(1, 12))] = f"p{rng.randint(1, n):04d}"
    owners.pop("13-13", None)
    state = RULES.import_state({"players": players, "orders": orders, "owners": owners, "bank": 50000, "kiosk": 3000})
    return state, list(state["players"])


def sequence_state(n: int) -> tuple[dict, list[str]]:
    """The Fourth Game after every player played all ten pieces (n * 10 plays)."""
    import random

    from benchmarks import bench_sequence as bs
    from games.base import Actor, Context, Line
    from games.sequence import RULES

    bs.PLAYERS = n
    state, plays = bs._setup()
    rng = random.Random(1)
    for k, (handle, text) in enumerate(plays):
        ctx = Context(now=bs.START + timedelta(seconds=30 * k), rng=rng, game_name="four", actor=Actor(handle, "", True))
        out = RULES.apply(state, RULES.parse([Line(1, text)]), ctx)
        assert out.results[0].ok, out.results[0].message
        state = out.state
    return state, list(state["players"])


STATES = {"giveaway": giveaway_state, "rmpm": rmpm_state, "sequence": sequence_state}


def setup(db_url: str, kind: str, n: int) -> str:
    """The game (named after its kind) and an account per player."""
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account, Membership

    state, handles = STATES[kind](n)
    db = Database(db_url)
    db.upgrade()
    now = datetime.now(timezone.utc)
    hashed = hash_password("bench-secret-1")
    with db.write() as s:
        game = create_game(s, kind, kind, {}, None, now, state=state)
        for h in handles:
            s.add(Account(handle=h, handle_key=h.lower(), handle_skeleton=h.lower(), email=f"{h.lower()}@example.org",
                          password_hash=hashed, created_at=now))
        s.flush()
        ids = dict(s.execute(Account.__table__.select().with_only_columns(Account.handle, Account.id)).all())
        for h in handles:
            s.add(Membership(game_id=game.id, account_id=ids[h], role="player", joined_at=now))
    db.dispose()
    return kind


def turn_run(tmp: Path, db_url: str, name: str) -> dict:
    env = dict(os.environ)
    env.update({"PBM_DATABASE_URL": db_url, "PBM_DOMAIN": DOMAIN, "PBM_GM_ADDRESS": "gm@example.org",
                "PBM_RELAY": "", "PBM_MAILDIR": str(tmp / "maildir"), "PYTHONPATH": str(ROOT)})
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "pbm_server.running.cli", "turn", "run", name], env=env, cwd=tmp,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.stdout is not None
    output = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.monotonic() - t0
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    with engine.connect() as c:
        reports = c.execute(text("SELECT count(*), max(length(raw)), sum(length(raw)) FROM outbox WHERE kind = 'report'")).one()
    engine.dispose()
    return {"ok": p.returncode == 0, "seconds": round(elapsed, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "reports": reports[0],
            "largest_report_bytes": reports[1], "all_reports_mb": round((reports[2] or 0) / 2**20, 1),
            **({} if p.returncode == 0 else {"error": output.decode(errors="replace")[-800:]})}


def run(only: list[str] | None = None, players: int | None = None) -> dict:
    out = {}
    for kind, n in SIZES.items():
        if only and kind not in only:
            continue
        n = players or n
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            url = f"sqlite:///{tmp / 'pbm.db'}"
            setup(url, kind, n)
            out[f"{kind}_{n}"] = turn_run(tmp, url, kind)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--players", type=int)
    a = ap.parse_args()
    print(json.dumps(run(a.only, a.players), indent=2))


if __name__ == "__main__":
    main()
