"""The scheduler's pass at every number of games a server holds: CPU per
pass when no game has anything to do (every deadline days away, the
reminders of none due), the common case, which `pbm serve` pays every half
second whatever the mail does.

For each size a fresh database with that many running giveaway games on a
weekly deadline; the real Scheduler (turns, reminders; the minute's tick is
left out: giveaway does not tick) passes ``--passes`` times in this process,
and the CPU time of the passes (``time.process_time``) is divided by their
number.  The ratio of each size to the smallest comes from the same run.

    .venv/bin/python benchmarks/bench_scheduler.py [--sizes 10 200 2000 10000] [--passes 40] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.servers import fresh_database  # noqa: E402


def games(db_url: str, n: int, now: datetime) -> None:
    """``n`` running giveaway games, each with its deadline three days from ``now``."""
    from sqlalchemy import update

    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Game

    db = Database(db_url)
    db.upgrade()
    with db.write() as s:
        for i in range(n):
            create_game(s, "giveaway", f"g{i:05d}", {}, "every Saturday 03:00 UTC", now)
        s.execute(update(Game).values(next_deadline=now + timedelta(days=3)))
    db.dispose()


def passes(db_url: str, count: int) -> float:
    """CPU milliseconds of one scheduler pass (the mean of ``count``)."""
    from pbm_server.base.settings import load_settings
    from pbm_server.mail.compose import Composer
    from pbm_server.play.notices import Mailer
    from pbm_server.running.scheduler import Scheduler
    from pbm_server.store.db import Database

    settings = load_settings({"PBM_DATABASE_URL": db_url, "PBM_DOMAIN": "pbm.localhost",
                              "PBM_GM_ADDRESS": "gm@example.org", "PBM_RELAY": ""})
    db = Database(db_url)
    sched = Scheduler(db, settings, Mailer(Composer(settings)))
    sched._last_tick = time.monotonic()  # the tick is not what is measured
    sched.run_once()  # warm: statements compiled, pages cached
    t0 = time.process_time()
    for _ in range(count):
        assert sched.run_once() == 0, "a game had something to do"
    cpu = time.process_time() - t0
    db.dispose()
    return 1000 * cpu / count


def run(sizes: list[int], count: int = 40, pg: str | None = None) -> dict:
    now = datetime.now(timezone.utc)
    out: dict = {"what": "one scheduler pass with nothing to do, CPU ms", "database": "postgresql" if pg else "sqlite",
                 "passes": count, "sizes": {}}
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            url, drop = fresh_database(Path(tmp), pg)
            try:
                games(url, n, now)
                out["sizes"][n] = {"cpu_ms_per_pass": round(passes(url, count), 3)}
            finally:
                drop()
    base = out["sizes"][sizes[0]]["cpu_ms_per_pass"]
    for n in sizes:
        out["sizes"][n][f"to_{sizes[0]}_games"] = round(out["sizes"][n]["cpu_ms_per_pass"] / base, 2)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[10, 200, 2000, 10000])
    ap.add_argument("--passes", type=int, default=40)
    ap.add_argument("--postgres", default=None)
    a = ap.parse_args()
    print(json.dumps(run(a.sizes, a.passes, a.postgres), indent=2))
