"""CPU per play mail in the Fourth Game, small game against large, through
the real back end (benchmarks/bench_backend.py's ``drain``: the mails stored
in the inbox as the listener stores them, then one `pbm serve --without
listener --without outbound --without scheduler` process timed until every
mail is processed, its CPU from /proc).

* small: 10 players, no play made yet; the 100 mails are all their pieces.
* large: 250 players, 2,400 plays made already (240 players used all their
  pieces); 10 players who have not played yet send the 100 mails, so the
  game ends the run at 2,500 plays, its design size.

Each mail is one play line with the sender's `$$password$$`.  Every player
has the default MAIL DIGEST, so a play makes no mail to others (MAIL EACH
players would get one mail per play each: that cost grows with them by the
rules, and the notice budget bounds it).  The figure is the ratio of CPU
per mail, large to small (goal of issue 15: at most 1.5).  Each size is run
``--repeats`` times and the least CPU per mail is kept (the machine may be
busy with other work).

    .venv/bin/python benchmarks/bench_sequence_orders.py [--repeats 3] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_backend import DOMAIN, PASSWORD, drain  # noqa: E402
from benchmarks.servers import fresh_database  # noqa: E402

START = datetime(2007, 12, 7, 5, 0, tzinfo=timezone.utc)
WRITERS = 10
PIECES = 10
SIZES = {"small": (10, 0), "large": (250, 2_400)}  # players, plays made before the timed mails


def handle_of(i: int) -> str:
    return f"p{i:05d}"


def make_state(players: int, plays: int, seed: int = 4) -> tuple[dict, list[str]]:
    """A sequence game with ``players`` players (addresses HANDLE@example.org)
    after ``plays`` plays, all made through the rules by the players who are
    not among the last WRITERS; returns the state and the writers' handles."""
    from games.base import Actor, Context, Line
    from games.sequence import RULES

    rng = random.Random(seed)
    state = RULES.new_game({}, Context(now=START, rng=rng))
    handles = [handle_of(i) for i in range(players)]
    for h in handles:
        ctx = Context(now=START, rng=rng, game_name="four", actor=Actor(h, f"{h}@example.org", True))
        out = RULES.apply(state, RULES.parse([Line(1, "JOIN")]), ctx)
        assert out.results[0].ok, out.results[0].message
        state = out.state
    others, writers = handles[:-WRITERS], handles[-WRITERS:]
    assert plays <= len(others) * PIECES
    made = 0
    for piece in range(1, PIECES + 1):
        order = others[:]
        rng.shuffle(order)
        for h in order:
            if made == plays:
                break
            value, mult = state["players"][h]["pieces"][piece - 1]
            sign = "-" if rng.random() < 0.4 else ""
            ctx = Context(now=START + timedelta(seconds=made), rng=rng, game_name="four", actor=Actor(h, "", True))
            out = RULES.apply(state, RULES.parse([Line(1, f"Piece {piece}: {sign}{value}, {mult}")]), ctx)
            assert out.results[0].ok, out.results[0].message
            state = out.state
            made += 1
    return state, writers


def setup(db_url: str, name: str, players: int, plays: int) -> list[tuple[str, list[str], bytes]]:
    """The game, an account and membership per player; returns the play
    mails (each writer's pieces 1 to 10, the writers taking turns)."""
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account, Membership

    state, writers = make_state(players, plays)
    db = Database(db_url)
    db.upgrade()
    now = datetime.now(timezone.utc)
    hashed = hash_password(PASSWORD)
    with db.write() as s:
        game = create_game(s, "sequence", name, {}, None, now, state=state)
        for h in state["players"]:
            s.add(Account(handle=h, handle_key=h, handle_skeleton=h, email=f"{h}@example.org",
                          password_hash=hashed, created_at=now))
        s.flush()
        ids = dict(s.execute(Account.__table__.select().with_only_columns(Account.handle, Account.id)).all())
        for h in state["players"]:
            s.add(Membership(game_id=game.id, account_id=ids[h], role="player", joined_at=now))
    db.dispose()
    raws = []
    for piece in range(1, PIECES + 1):
        for h in writers:
            value, mult = state["players"][h]["pieces"][piece - 1]
            m = EmailMessage()
            m["From"] = f"{h}@example.org"
            m["To"] = f"{name}@{DOMAIN}"
            m["Subject"] = "play"
            m["Message-ID"] = make_msgid(domain="example.org")
            m.set_content(f"$${PASSWORD}$$\nPiece {piece}: {value}, {mult}\n")
            raws.append((m["From"], [m["To"]], bytes(m)))
    return raws


def run(pg: str | None = None, repeats: int = 3) -> dict:
    out: dict = {}
    for label, (players, plays) in SIZES.items():
        runs = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as d:
                tmp = Path(d)
                url, drop = fresh_database(tmp, pg)
                try:
                    runs.append(drain(tmp, url, setup(url, "four", players, plays)))
                finally:
                    drop()
        best = min(runs, key=lambda r: r["cpu_ms_per_mail"])
        out[label] = {"players": players, "plays_before": plays, **best,
                      "cpu_ms_per_mail_runs": [r["cpu_ms_per_mail"] for r in runs]}
    small, large = out["small"]["cpu_ms_per_mail"], out["large"]["cpu_ms_per_mail"]
    out["ratio_large_to_small"] = round(large / small, 2) if small else None
    out["goal"] = "at most 1.5"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps(run(a.postgres, a.repeats), indent=2))


if __name__ == "__main__":
    main()
