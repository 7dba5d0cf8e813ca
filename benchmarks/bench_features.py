"""Features on the SMTP path (issue 45): what each costs the order mails that
come in over SMTP, measured against the same server without it, in turn.

Each sub-part has two sides measured alternately (with, without; without,
with; ...: servers.alternate), a fresh `pbm serve` on a fresh copy of one
database for every measurement, and reports the paired ratio with / without
(servers.paired_ratio) with the goal ">= 0.95": the feature costs nothing
measurable.

The load of (a) to (c) is a small "today" (bench_e2e's mix, smaller): order
mails (``$$password$$``, ``GIVE n TO handle``) into 10 giveaway games of 10
(10 accounts, each a player of all 10 games, one stored hash); one warm-up
mail from every membership first, so the verified-password cache spares the
Argon2 checks; then a burst of ``burst`` mails as fast as the listener takes
them (bench_e2e.measure: rate = replies / (last reply at the relay sink -
first SMTP byte)).  Default settings otherwise.

(a) ``imap``: the mailbox intake (PBM_IMAP_URL, PBM_IMAP_PASSWORD_FILE,
    PBM_MAILBOX_ADDRESS; running/mailbox.py) configured against a real
    Dovecot (tests/imap/dovecot.py) whose mailbox stays empty: the reader
    logs in and waits in IDLE beside the SMTP load.  Skipped when Dovecot is
    not installed (.ci/dovecot-install).
(b) ``alerts``: every account has a player's alert channel (accounts.notify_url,
    what ``notify URL`` at pbm@ sets) pointing at a local HTTP receiver, vs no
    channel; PBM_NOTIFY_ALLOW_PRIVATE=1 on both sides, so the channels are
    the only difference.  An order mail queues no alert of its own (alerts
    come from a game's start, turns, reminders and end: play/alerting.py), so
    this is what a set channel costs the order path and the alert delivery
    polling beside it.
(c) ``http``: the HTTP side on (PBM_HTTP_LISTEN on a free port, idle) vs off
    (PBM_HTTP_LISTEN empty).
(d) ``body_once``: the cost of storing one mail sent to 20 of our addresses
    against one sent to one: smtp-source (``-r 20``: recipients g, 2g, ...,
    20g) sends 600-byte mails, 16 sessions at a time, to `pbm serve
    --without worker` (the listener stores the body once and one inbox row
    per recipient; no worker, so what is timed is the intake, not twenty
    mails' processing) and to the bare aiosmtpd listener (which stores
    nothing).  The SMTP dialogue itself costs more with 20 RCPT commands, on
    both servers alike, so the fair figure divides it out: per round, the
    durable-intake ratio pbm/bare with 20 recipients over the same ratio
    with one.  Near 1: twenty recipients cost the durable store no more
    than one.  Beside it, per mail, the bytes of stored bodies (20 / 1: 1
    when the body is kept once) and the growth of the whole database (the
    body once and a small inbox row per recipient).  The games g, 2g, ... are renamed
    in the database after they are made (the create path wants a letter
    first); with no worker running no rules ever see them.

    .venv/bin/python -m benchmarks.bench_features [--only imap alerts http body_once] [--burst 600] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.servers import (  # noqa: E402
    BareListener,
    PbmServe,
    PostfixSink,
    RelaySink,
    alternate,
    clone_database,
    fresh_database,
    paired_ratio,
    with_goal,
)

GOAL = ">= 0.95"
PARTS = ("imap", "alerts", "http", "body_once")
GAMES = 10


def _remove_sqlite(url: str) -> None:
    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm", "-write", "-routes"):
            Path(f"{url[len('sqlite:///'):]}{suffix}").unlink(missing_ok=True)


def orders_template(home: Path, pg: str | None) -> tuple[str, callable, list]:
    """The small today: its database (URL, what drops it) and its mails, the games in turn."""
    from benchmarks.bench_backend import setup_orders

    home.mkdir(parents=True, exist_ok=True)
    url, drop = fresh_database(home, pg)
    mails = setup_orders(url, {f"g{i:02d}": 10 for i in range(GAMES)}, 10)
    per = len(mails) // GAMES
    return url, drop, [mails[(k % GAMES) * per + k // GAMES] for k in range(len(mails))]


def _paired(tmp: Path, name: str, sides: dict[str, tuple[str, dict]], mails: list, burst: int, rounds: int,
            concurrency: int, relay: str) -> dict:
    """Two sides (label -> (database URL, settings of pbm serve)), the first
    the feature on, measured in turn with bench_e2e.measure; the ratio on / off."""
    from benchmarks.bench_e2e import measure

    runs: dict[str, list[dict]] = {label: [] for label in sides}
    for r, label in alternate(list(sides), rounds):
        print(f"  features {name}: round {r + 1}/{rounds}, {label} ...", file=sys.stderr, flush=True)
        url, env = sides[label]
        runs[label].append(measure(tmp / f"{name}-{label}-{r}", url, "today", mails, mails, env, burst, 0, 0.5,
                                   concurrency, relay=relay))
    on, off = sides
    return {
        **{label: {"env": sides[label][1], "per_second_rounds": [x["per_second"] for x in runs[label]],
                   "cpu_ms_per_mail_rounds": [x["cpu_ms_per_mail"] for x in runs[label]],
                   "all_replied": all(x["replied"] == x["mails"] for x in runs[label])} for label in sides},
        "ratio": with_goal(paired_ratio(f"order mails/s over SMTP, {on} / {off}",
                                        [x["per_second"] for x in runs[on]], [x["per_second"] for x in runs[off]]),
                           GOAL),
    }


def imap(tmp: Path, url: str, mails: list, burst: int, rounds: int, concurrency: int, relay: str) -> dict:
    from tests.imap.conftest import MAILBOX
    from tests.imap.dovecot import Dovecot, installed

    if not installed():
        return {"skipped": "Dovecot is not installed (.ci/dovecot-install)"}
    home = tmp / "dovecot"
    home.mkdir()
    box = Dovecot(home).start()
    try:
        env = {"PBM_IMAP_URL": box.url, "PBM_IMAP_PASSWORD_FILE": str(box.password_file),
               "PBM_MAILBOX_ADDRESS": MAILBOX}
        out = _paired(tmp, "imap", {"mailbox_intake_on": (url, env), "mailbox_intake_off": (url, {})}, mails, burst,
                      rounds, concurrency, relay)
        out["mailbox_untouched"] = box.count("INBOX") == 0
        return out
    finally:
        box.remove()


class _Hook(BaseHTTPRequestHandler):
    posts = 0

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).posts += 1
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def alerts(tmp: Path, url: str, mails: list, burst: int, rounds: int, concurrency: int, relay: str) -> dict:
    from sqlalchemy import create_engine, text

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    home = tmp / "alerts-template"
    home.mkdir()
    with_channels, remove = clone_database(url, home)
    engine = create_engine(with_channels.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as c:
            c.execute(text("UPDATE accounts SET notify_url = :u, notify_secret = :s"),
                      {"u": f"http://127.0.0.1:{receiver.server_address[1]}/hook", "s": "ab" * 16})
        engine.dispose()
        env = {"PBM_NOTIFY_ALLOW_PRIVATE": "1"}
        out = _paired(tmp, "alerts", {"player_channels": (with_channels, env), "no_channels": (url, env)}, mails,
                      burst, rounds, concurrency, relay)
        out["alerts_posted"] = _Hook.posts
        out["note"] = ("an order mail queues no alert (alerts come from a game's start, turns, reminders, end); "
                       "the figure is what set channels cost the order path")
        return out
    finally:
        engine.dispose()
        receiver.shutdown()
        remove()


def http(tmp: Path, url: str, mails: list, burst: int, rounds: int, concurrency: int, relay: str) -> dict:
    from benchmarks.servers import free_port

    return _paired(tmp, "http", {"http_side_on": (url, {"PBM_HTTP_LISTEN": f"127.0.0.1:{free_port()}"}),
                                 "http_side_off": (url, {"PBM_HTTP_LISTEN": ""})}, mails, burst, rounds, concurrency,
                   relay)


def _recipient_games(home: Path, pg: str | None, count: int) -> tuple[str, callable]:
    """A database with ``count`` games named g, 2g, 3g, ... (smtp-source's -r numbering)."""
    from datetime import datetime, timezone

    from sqlalchemy import text

    from benchmarks.bench_giveaway import make_state
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database

    home.mkdir(parents=True, exist_ok=True)
    url, drop = fresh_database(home, pg)
    db = Database(url)
    db.upgrade()
    now = datetime.now(timezone.utc)
    with db.write() as s:
        for k in range(1, count + 1):
            create_game(s, "giveaway", f"rcpt{k:02d}", {}, None, now, state=make_state(10, seed=k)[0])
        s.flush()
        for k in range(1, count + 1):
            s.execute(text("UPDATE games SET name = :new WHERE name = :old"),
                      {"new": "g" if k == 1 else f"{k}g", "old": f"rcpt{k:02d}"})
    db.dispose()
    return url, drop


def _inbox_size(db_url: str) -> tuple[int, int, int, int]:
    """(bodies, bytes of the bodies, inbox rows, bytes of the whole database)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as c:
            bodies, size = c.execute(text("SELECT count(*), coalesce(sum(length(raw)), 0) FROM inbox_bodies")).one()
            rows = c.execute(text("SELECT count(*) FROM inbox")).scalar_one()
            if db_url.startswith("sqlite"):  # pages written to the WAL count too
                whole = (c.execute(text("PRAGMA page_count")).scalar_one()
                         * c.execute(text("PRAGMA page_size")).scalar_one())
            else:
                whole = c.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        return int(bodies), int(size), int(rows), int(whole)
    finally:
        engine.dispose()


def body_once(tmp: Path, pg: str | None, count: int, rounds: int, recipients: int = 20, size: int = 600,
              concurrency: int = 16) -> dict:
    from benchmarks.bench_intake import SMTP_SOURCE, _measure

    if not SMTP_SOURCE:
        return {"skipped": "smtp-source is not installed (.ci/postfix-install)"}
    url, drop = _recipient_games(tmp / "body-once", pg, recipients)
    sink = RelaySink()
    bare = BareListener()
    serve = PbmServe(tmp / "body-once", sink.port, url, args=("--without", "worker")).start()
    try:
        def one(port: int, pids: list[int], rcpts: int) -> dict:
            return _measure(port, count, concurrency, 0, pids, "smtp-source", size, recipients=rcpts, to="g")

        one(bare.port, [bare.pid], 1)  # warm-up of both
        one(serve.port, serve.pids(), 1)
        sides = {"one": 1, "twenty": recipients}
        runs: dict[str, dict[str, list[dict]]] = {k: {"bare": [], "pbm": []} for k in sides}
        grew: dict[str, list[tuple[int, ...]]] = {k: [] for k in sides}
        for r, label in alternate(list(sides), rounds):
            print(f"  features body_once: round {r + 1}/{rounds}, {sides[label]} recipient(s) ...", file=sys.stderr,
                  flush=True)
            order = ["bare", "pbm"] if r % 2 == 0 else ["pbm", "bare"]
            for server in order:
                if server == "bare":
                    runs[label]["bare"].append(one(bare.port, [bare.pid], sides[label]))
                else:
                    before = _inbox_size(url)
                    runs[label]["pbm"].append(one(serve.port, serve.pids(), sides[label]))
                    after = _inbox_size(url)
                    grew[label].append(tuple(b - a for a, b in zip(before, after, strict=True)))
    finally:
        serve.stop()
        bare.stop()
        sink.stop()
        drop()
        _remove_sqlite(url)

    def durable(label: str) -> list[float]:
        return [p["per_second"] / b["per_second"] if b["per_second"] else 0.0
                for p, b in zip(runs[label]["pbm"], runs[label]["bare"], strict=True)]

    def bytes_per_mail(label: str, column: int) -> list[float]:
        return [g[column] / g[0] if g[0] else 0.0 for g in grew[label]]

    return {
        "what": f"smtp-source, {size}-byte mails, {concurrency} sessions, to pbm serve --without worker and to the "
                f"bare listener; {recipients} recipients a mail vs one",
        "mails_per_run": count,
        **{label: {"recipients": sides[label],
                   "pbm_per_second_rounds": [x["per_second"] for x in runs[label]["pbm"]],
                   "bare_per_second_rounds": [x["per_second"] for x in runs[label]["bare"]],
                   "pbm_listener_cpu_us_per_message_rounds": [x["listener_cpu_us_per_message"]
                                                              for x in runs[label]["pbm"]],
                   "inbox_growth_rounds": [dict(zip(("bodies", "body_bytes", "rows", "database_bytes"), g, strict=True))
                                           for g in grew[label]]}
           for label in sides},
        "ratio": with_goal(paired_ratio(f"durable intake (pbm serve / bare listener), {recipients} recipients a mail "
                                        "/ one", durable("twenty"), durable("one")), GOAL),
        "body_bytes_ratio": paired_ratio(f"bytes of stored bodies per mail, {recipients} recipients / one (1: the "
                                         "body kept once)", bytes_per_mail("twenty", 1), bytes_per_mail("one", 1)),
        "database_bytes_ratio": paired_ratio(f"database growth per mail, {recipients} recipients / one (the body "
                                             "once, plus a small inbox row per recipient)",
                                             bytes_per_mail("twenty", 3), bytes_per_mail("one", 3)),
    }


def run(only: tuple[str, ...] = PARTS, burst: int = 600, rounds: int = 3, concurrency: int = 20,
        intake_count: int = 3000, pg: str | None = None, relay: str | None = None) -> dict:
    relay = relay or ("postfix" if PostfixSink.available() else "python")
    tmp = Path(tempfile.mkdtemp(prefix="pbm-bench-features-"))
    out: dict = {"database": "postgresql" if pg else "sqlite", "burst_mails": burst, "rounds": rounds,
                 "concurrency": concurrency, "relay_sink": relay, "goal": GOAL}
    url = drop = None
    try:
        if any(p in only for p in ("imap", "alerts", "http")):
            t0 = time.monotonic()
            url, drop, mails = orders_template(tmp / "template", pg)
            out["setup_seconds"] = round(time.monotonic() - t0, 1)
        for name in only:
            t0 = time.monotonic()
            try:
                if name == "body_once":
                    got = body_once(tmp, pg, intake_count, rounds)
                else:
                    got = {"imap": imap, "alerts": alerts, "http": http}[name](tmp, url, mails, burst, rounds,
                                                                               concurrency, relay)
            except Exception as exc:  # one sub-part that fails does not stop the others
                import traceback

                traceback.print_exc()
                got = {"error": f"{type(exc).__name__}: {exc}"}
            got["wall_seconds"] = round(time.monotonic() - t0, 1)
            out[name] = got
    finally:
        if drop is not None:
            drop()
            _remove_sqlite(url)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    ap.add_argument("--burst", type=int, default=600, help="order mails of each measurement of (a) to (c)")
    ap.add_argument("--intake-count", type=int, default=3000, help="mails of each measurement of (d)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a smoke run: --burst 300 --intake-count 1000 --rounds 2")
    ap.add_argument("--postgres", default=None)
    a = ap.parse_args()
    burst, count, rounds = (300, 1000, 2) if a.quick else (a.burst, a.intake_count, a.rounds)
    print(json.dumps(run(tuple(a.only), burst, rounds, intake_count=count, pg=a.postgres), indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
