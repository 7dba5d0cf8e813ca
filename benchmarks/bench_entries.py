"""CPU per mail that should not grow with the game (issue 15, "orders as
rows"), through the real back end: the mails are stored in the inbox as the
listener stores them, a back end (`pbm serve --without listener --without
outbound --without scheduler`, one worker) processes them, and its CPU time
comes from /proc (benchmarks/bench_backend.drain).

1. ``rmpm_orders``: order mails (each a `$$password$$` and a player's move
   lines for the week, with a BUY for every third player) into an rmpm game
   of 10 players and into one of 1,000; 20 players write again and again.
2. ``giveaway_joins``: JOIN mails, each from a new player, into a giveaway
   that has not played round 1 yet, with 10 and with 10,000 players joined.

Each gives the CPU per mail of both sizes in the same run and the ratio
large/small (goal: at most 1.5).

    .venv/bin/python benchmarks/bench_entries.py [--postgres URL] [--mails 300] [--only rmpm giveaway]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_backend import DOMAIN, PASSWORD, drain  # noqa: E402
from benchmarks.servers import fresh_database  # noqa: E402


def joining_giveaway(n: int) -> dict:
    """A giveaway before round 1 with n players joined (p00000, ...)."""
    return {"schema": 1, "options": {"no_order": "forfeit", "round_limit": 0}, "round": 1, "status": "joining",
            "players": [{"handle": f"p{i:05d}", "holding": 3, "active": True, "score": None, "left_round": None}
                        for i in range(n)],
            "orders": {}, "winner": None, "end_note": None, "last": None}


def store(db_url: str, kind: str, name: str, state: dict, players: list[str], others: list[str]) -> None:
    """The game, an account and a membership per player, and an account for
    each of ``others`` (who are not in the game)."""
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account, Membership

    db = Database(db_url)
    db.upgrade()
    now = datetime.now(timezone.utc)
    hashed = hash_password(PASSWORD)
    with db.write() as s:
        game = create_game(s, kind, name, {}, None, now, state=state)
        s.add_all(Account(handle=h, handle_key=h.lower(), handle_skeleton=h.lower(), email=f"{h.lower()}@example.org",
                          password_hash=hashed, created_at=now) for h in [*players, *others])
        s.flush()
        ids = dict(s.execute(Account.__table__.select().with_only_columns(Account.handle, Account.id)).all())
        s.add_all(Membership(game_id=game.id, account_id=ids[h], role="player", joined_at=now) for h in players)
    db.dispose()


def raw_mails(items: list[tuple[str, str, str]]) -> list[tuple[str, list[str], bytes]]:
    out = []
    for frm, rcpt, body in items:
        m = EmailMessage()
        m["From"], m["To"], m["Subject"] = frm, rcpt, "orders"
        m["Message-ID"] = make_msgid(domain="example.org")
        m.set_content(body)
        out.append((frm, [rcpt], bytes(m)))
    return out


def rmpm_setup(db_url: str, n: int, mails: int) -> list[tuple[str, list[str], bytes]]:
    from benchmarks.bench_turns import rmpm_state

    state, handles = rmpm_state(n)
    store(db_url, "rmpm", "world", state, handles, [])
    writers = handles[:20]
    items = [(f"{h}@example.org", f"world@{DOMAIN}", f"$${PASSWORD}$$\n" + "\n".join(state["orders"][h]) + "\n")
             for h in (writers[k % len(writers)] for k in range(mails + 2))]
    return raw_mails(items)


def giveaway_setup(db_url: str, n: int, mails: int) -> list[tuple[str, list[str], bytes]]:
    state = joining_giveaway(n)
    joiners = [f"j{k:05d}" for k in range(mails + 2)]
    store(db_url, "giveaway", "gift", state, [p["handle"] for p in state["players"]], joiners)
    return raw_mails([(f"{h}@example.org", f"gift@{DOMAIN}", f"$${PASSWORD}$$\nJOIN\n") for h in joiners])


SCENARIOS = {"rmpm": (rmpm_setup, (10, 1_000)), "giveaway": (giveaway_setup, (10, 10_000))}


def measure(kind: str, pg: str | None, mails: int) -> dict:
    setup, sizes = SCENARIOS[kind]
    out: dict = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            url, drop = fresh_database(tmp, pg)
            try:
                out[f"{n}_players"] = drain(tmp, url, setup(url, n, mails))
            finally:
                drop()
    small, large = (out[f"{n}_players"]["cpu_ms_per_mail"] for n in sizes)
    out["ratio_large_to_small"] = round(large / small, 2) if small else None
    out["goal"] = "at most 1.5"
    return out


def run(pg: str | None = None, mails: int = 300, only: list[str] | None = None) -> dict:
    return {f"{kind}_{'orders' if kind == 'rmpm' else 'joins'}": measure(kind, pg, mails)
            for kind in SCENARIOS if not only or kind in only}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--mails", type=int, default=300)
    ap.add_argument("--only", nargs="*", choices=list(SCENARIOS))
    a = ap.parse_args()
    print(json.dumps(run(a.postgres, a.mails, a.only), indent=2))


if __name__ == "__main__":
    main()
