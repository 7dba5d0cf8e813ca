"""Several workers on one database: `pbm serve --workers N` threads and more
than one back-end process.  Mails of different games are processed side by
side, the mails of one game strictly in the order they arrived, and every
mail exactly once (pbm_server/store/db.py, docs/scaling.md).  On PostgreSQL (when
PBM_TEST_DATABASE_URL is set) the processes really run side by side; on
SQLite they take turns at the one writer, and order and once-only must hold
all the same."""

from __future__ import annotations

import collections

PLAYERS = {f"pl{i}": f"pl{i}-secret-{i}x" for i in range(5)}
GAMES = ("g1", "g2", "g3", "g4")


def test_several_workers_keep_each_games_order_and_process_every_mail_once(make_server):
    a = make_server("a")
    a.start()
    mails = {h: a.register(h, pw) for h, pw in PLAYERS.items()}
    for g in GAMES:
        a.new_game("giveaway", g)
    a.stop()

    # the mails wait in the inbox while no worker runs: listener and outbound only
    a.start("worker", "scheduler")
    handles = list(PLAYERS)
    sent: dict[str, list[str]] = {g: [] for g in GAMES}
    # per game and player: JOIN, then orders that are refused unless the JOIN
    # (and, for the second, nothing after it) was processed first
    # (a later order replaces the earlier one: the last must stand)
    for step in ("JOIN", "GIVE 3 TO {next}", "GIVE 2 TO {next}\nGIVE 1 TO {prev}"):
        for g in GAMES:
            for i, h in enumerate(handles):
                body = step.format(next=handles[(i + 1) % len(handles)], prev=handles[i - 1])
                sent[g].append(a.send(mails[h], g, f"$${PLAYERS[h]}$$\n{body}"))
    helps = [a.send(f"visitor{i}@example.org", "pbm", "help") for i in range(8)]
    waiting = a.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0]
    assert waiting == 3 * len(GAMES) * len(handles) + len(helps)

    # two back ends on the same database: 3 worker threads and 2
    backs = []
    for name, workers in (("b", "3"), ("c", "2")):
        b = make_server(name)
        b.env["PBM_DATABASE_URL"] = a.db_url
        b.env["PBM_WORKERS"] = workers
        b.start("listener", "outbound", "scheduler")
        backs.append(b)
    a.settle(timeout=180)

    # every mail once, and one reply to each
    statuses = collections.Counter(r[0] for r in a.sql("SELECT status FROM inbox"))
    assert set(statuses) == {"done"}, statuses
    per_mail = a.sql("SELECT inbound_id, count(*) FROM outbox WHERE kind LIKE 'reply%' GROUP BY inbound_id")
    assert all(n == 1 for _, n in per_mail) and len(per_mail) == sum(statuses.values())
    # each game's mails were answered in the order they arrived
    for g in GAMES:
        rows = a.sql("SELECT o.inbound_id FROM outbox o JOIN inbox i ON i.id = o.inbound_id "
                     "JOIN games gm ON gm.id = i.game_id WHERE gm.name = :g AND o.kind LIKE 'reply%' ORDER BY o.id", g=g)
        order = [r[0] for r in rows]
        assert len(order) == 3 * len(handles) and order == sorted(order), (g, order)
    # and what the players read says so: every line accepted, in every game
    for g in GAMES:
        for mid in sent[g]:
            replies = a.replies_to(mid)
            assert len(replies) == 1, mid
            text = a.flat(replies[0])
            assert "REFUSED" not in text and "accepted" in text, text
    # the last order of each player stands in each game
    for g in GAMES:
        held = {r[0]: r[1] for r in a.sql("SELECT o.handle, o.lines FROM orders o JOIN games gm ON gm.id = o.game_id "
                                          "WHERE gm.name = :g", g=g)}
        assert set(held) == set(handles)
        for i, h in enumerate(handles):
            assert f"GIVE 2 TO {handles[(i + 1) % len(handles)]}" in str(held[h])
            assert f"GIVE 1 TO {handles[i - 1]}" in str(held[h])
    for mid in helps:
        assert len(a.replies_to(mid)) == 1
