"""On SQLite the route of a mail (its game) is locked across processes by a
byte-range lock of a file beside the database (pbm_server/store/db.py,
RouteLocks): a game another process works on cannot be taken, another game
can, and a process that dies lets go of what it held."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from pbm_server.store.db import Database, RouteLocks, game_key
from tests.harness import wait_until

HOLDER = textwrap.dedent("""
    import sys, time
    from pbm_server.store.db import Database, RouteLocks, game_key
    locks = RouteLocks(Database(sys.argv[1]))
    assert locks.take(game_key("g1"))
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_route_held_by_another_process_waits_until_it_dies(tmp_path):
    url = f"sqlite:///{tmp_path / 'pbm.sqlite'}"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        mine = RouteLocks(Database(url))
        assert not mine.take(game_key("g1"))  # the other process works on g1
        assert mine.take(game_key("g2"))  # another game goes side by side
        other_thread = RouteLocks(Database(url))
        assert not other_thread.take(game_key("g2"))  # and a second worker of this process waits for it
        mine.release(game_key("g2"))
        assert other_thread.take(game_key("g2"))
        other_thread.release(game_key("g2"))
        holder.kill()
        holder.wait()
        wait_until(lambda: mine.take(game_key("g1")), timeout=10, what="the dead process's lock to go")
        mine.release(game_key("g1"))
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
