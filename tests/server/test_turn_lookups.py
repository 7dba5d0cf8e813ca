"""A turn's mails find their recipients' accounts in few statements (issue
45): the accounts of the next 500 notices in one SELECT, and those a
vacation check looks at likewise, not one SELECT a player (a turn of 10,000
players asked 20,000).  Every player still gets exactly one report."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Engine

from benchmarks.bench_giveaway import make_state
from tests.scale.test_scale import store_game

PLAYERS = 1_200


def test_a_turn_of_1200_players_reads_their_accounts_in_a_few_selects(pbm_stopped):
    pbm = pbm_stopped
    state, _ = make_state(PLAYERS, seed=5)
    handles = [p["handle"] for p in state["players"]]
    store_game(pbm, "giveaway", "big", state, handles)
    asked: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        flat = " ".join(statement.split())
        if flat.startswith("SELECT") and " FROM accounts " in flat + " ":
            asked.append(flat)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        proc = pbm.cli("turn", "run", "big")
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert "processed" in proc.stdout, proc.stdout + proc.stderr
    # 1,200 players: three look-ups for the reports, three for the vacation check, and a few of the turn's own
    assert len(asked) <= 12, f"{len(asked)} SELECTs of accounts"
    rows = pbm.sql("SELECT to_addr, count(*) FROM outbox WHERE kind = 'report' GROUP BY to_addr")
    assert len(rows) == PLAYERS and {n for _, n in rows} == {1}
    assert {a for a, _ in rows} == {f"{h.lower()}@example.org" for h in handles}
