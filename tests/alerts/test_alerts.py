"""Alerts where players are (issue 43): a real HTTP receiver on loopback gets
every alert kind once in each of the four formats, over a real server."""

from __future__ import annotations

import hashlib
import hmac
import re
import threading

import pytest

from games.curio.state import load
from pbm_server.mail.alerts import AlertDelivery
from tests.alerts.receiver import Receiver

PW = "alert-pw-1"
GM_PW = "gm-alert-pw9"
PLAYERS = {"alice": "discord", "bob": "slack", "carol": "ntfy", "dave": "json"}
#: the game channels: one game a format
GAMES = {"gd": "discord", "gs": "slack", "gn": "ntfy", "gj": "json"}
#: Thursday; the first deadline is Saturday 03:00, the reminders go 24 hours before
T0 = "2026-11-19T10:00:00+00:00"
REMINDERS = "2026-11-20T04:00:00+00:00"
AFTER_DEADLINE = "2026-11-21T03:01:00+00:00"
DEADLINE = "every Saturday 03:00 UTC"


def _url(base: str, fmt: str, path: str) -> str:
    return f"{base}{path}" if fmt == "json" else f"{fmt}+{base}{path}"


def _text(req, fmt: str) -> str:
    """What one alert says, read from its format."""
    if fmt == "discord":
        return req.json()["content"]
    if fmt == "slack":
        return req.json()["text"]
    if fmt == "ntfy":
        return req.headers["title"] + " | " + req.body.decode()
    return req.json()["text"]


def _event(req, fmt: str) -> str:
    return req.json()["event"] if fmt == "json" else req.headers["x-pbm-event"]


def _mail(pbm, who: str, to: str, body: str) -> list[str]:
    return [pbm.send(f"{who}@example.org", to, f"{body}\n$${PW}$$")]


def _replies(pbm, ids: list[str]) -> list[str]:
    return [pbm.flat(pbm.reply_to(i)) for i in ids]


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def test_every_alert_kind_reaches_each_format_once_with_retries_and_a_stopped_channel(pbm_stopped, receiver):
    pbm = pbm_stopped
    # plain http:// to a loopback name: allowed only with PBM_NOTIFY_ALLOW_PRIVATE=1 (https with a
    # certificate: test_https_is_verified_through_ssl_cert_file, in a process of its own)
    pbm.env["PBM_NOTIFY_ALLOW_PRIVATE"] = "1"
    base = f"http://localhost:{receiver.port}"
    # the slack game's receiver fails once (500), the ntfy game's is busy once (429, Retry-After: 1 s)
    receiver.script["/g/gs"] = [(500, {}), (200, {})]
    receiver.script["/g/gn"] = [(429, {"Retry-After": "1"}), (200, {})]
    receiver.script["/gone"] = receiver.script["/gone-p"] = [(404, {})]
    pbm.set_clock(T0, tick=True)  # running on: retries fall due
    pbm.start()
    # a second server's alert delivery on the same database: the claims keep each alert to one post
    other = AlertDelivery(pbm.server.db, pbm.server.settings, "another-host|alerts")
    beside = threading.Thread(target=other.run, daemon=True)
    beside.start()

    pbm.register("gm", GM_PW, email="gm@example.org")
    for p in PLAYERS:
        pbm.cli("account", "add", p, f"{p}@example.org", "--password", PW)
        pbm.secrets.add(PW)
    # each player sets their own channel at pbm@; the JSON one is told its signing key once
    said = _replies(pbm, [i for p, fmt in PLAYERS.items() for i in _mail(pbm, p, "pbm", f"notify {_url(base, fmt, '/p/' + p)}")])
    for fmt, text in zip(PLAYERS.values(), said, strict=True):
        assert f"alerts of your games now go to {fmt} at localhost ({fmt} format)" in text, text
    dave_key = re.search(r"with the key ([0-9a-f]{64}) \(shown this once", said[3]).group(1)
    assert "with the key" not in " ".join(said[:3])
    # erin's own receiver is gone (404): her first alert stops her channel, and she is told once
    pbm.cli("account", "add", "erin", "erin@example.org", "--password", PW)
    assert "alerts of your games now go to json" in _replies(pbm, _mail(pbm, "erin", "pbm", f"notify {base}/gone-p"))[0]

    # the GM's game channels, set as the games are made (their start alert), each printing its key
    keys = {}
    for game, fmt in GAMES.items():
        out = pbm.cli("game", "new", "giveaway", game, "--option", "round_limit=1", "--option",
                      f"notify={_url(base, fmt, '/g/' + game)}", "--deadline", DEADLINE).stdout
        keys[game] = re.search(r"^secret: ([0-9a-f]{64})$", out, re.M).group(1)
    # a game whose receiver is gone (404): set afterwards with pbm game set, which prints its key
    pbm.cli("game", "new", "giveaway", "gx", "--option", "round_limit=1", "--deadline", DEADLINE)
    out = pbm.cli("game", "set", "gx", f"notify={base}/gone").stdout
    assert re.search(r"^secret: [0-9a-f]{64}$", out, re.M) and "notify=json@localhost" in out, out
    assert keys["gj"] in pbm.cli("game", "show", "gj").stdout  # shown again on request
    pbm.cli("game", "new", "curio", "curio")

    joins = [i for g in [*GAMES, "gx"] for p in PLAYERS for i in _mail(pbm, p, g, "JOIN")] + _mail(pbm, "erin", "gj", "JOIN")
    assert all("accepted" in t or "joined" in t for t in _replies(pbm, joins))
    # curio: a board's start, "your move" and its end, for each player: two boards a pair, each side once first
    boards = [("alice", "bob"), ("bob", "alice"), ("carol", "dave"), ("dave", "carol")]
    _replies(pbm, [i for light, dark in boards for i in _mail(pbm, light, "pbm", f"curio challenge {light} {dark}")])
    for n, (light, dark) in enumerate(boards, start=101):
        move = next(m for m in load(pbm.state("curio")).boards[n].position.legal_moves() if not m.capture)
        assert "accepted" in _replies(pbm, _mail(pbm, light, "pbm", f"curio move {n} {light} {PW} {move.plain}"))[0]
        _replies(pbm, _mail(pbm, dark, "pbm", f"curio resign {n} {dark} {PW}"))

    pbm.settle()  # no post in flight when the clock jumps (a jump of a day would expire its claim)
    pbm.set_clock(REMINDERS, tick=True)  # the scheduler's reminders: nobody has sent orders
    receiver.wait(lambda: all(any(_event(r, fmt) == "reminder" for r in receiver.taken(f"/g/{g}"))
                              for g, fmt in GAMES.items()), "the reminders")
    pbm.settle()
    pbm.set_clock(AFTER_DEADLINE, tick=True)  # the turns run; with round_limit=1 every game ends
    receiver.wait(lambda: all(any(_event(r, fmt) == "end" for r in receiver.taken(f"/g/{g}"))
                              for g, fmt in GAMES.items())
                  and all(sum(_event(r, fmt) == "end" for r in receiver.taken(f"/p/{p}")) >= 6
                          for p, fmt in PLAYERS.items()), "the turns and ends")
    pbm.settle()
    other.stop()
    beside.join(timeout=30)

    # every game channel: start, reminder, turn, end -- each once, in its format
    for game, fmt in GAMES.items():
        got = receiver.taken(f"/g/{game}")
        assert sorted(_event(r, fmt) for r in got) == ["end", "reminder", "start", "turn"], (game, got)
        said = {_event(r, fmt): _text(r, fmt) for r in got}
        assert "orders are still missing from: alice, bob, carol, dave" in said["reminder"], said
        assert f"{game}: round 1 has been processed" in said["turn"] and f"/games/{game}/turns/1" in (
            said["turn"] if fmt in ("discord", "slack") else str(got)), said
        assert f"{game} (Giveaway" in said["end"] and "is over" in said["end"]
    # every player channel: a reminder, a turn and an end per game (five), and on two boards a start, a move and an end
    for p, fmt in PLAYERS.items():
        got = receiver.taken(f"/p/{p}")
        events = [_event(r, fmt) for r in got]
        assert events.count("reminder") == 5 and events.count("turn") == 5, (p, events)
        assert events.count("start") == 1 and events.count("move") == 1 and events.count("end") == 5 + 1, (p, events)
        texts = [_text(r, fmt) for r in got]
        assert any("your orders for round 1 are still missing" in t for t in texts), texts
        assert any("board 10" in t and "it is your move" in t for t in texts), texts
        assert not any("@example.org" in t for t in texts)  # handles, never addresses

    # the shapes: Discord {"content"} without pings, Slack {"text"}, ntfy text with a Title, signed JSON
    first = {fmt: receiver.taken(f"/p/{p}")[0] for p, fmt in PLAYERS.items()}
    assert set(first["discord"].json()) == {"content", "allowed_mentions"}
    assert set(first["slack"].json()) == {"text"}
    assert first["ntfy"].headers["title"] and first["ntfy"].headers["content-type"].startswith("text/plain")
    for path, key in [("/g/gj", keys["gj"]), ("/p/dave", dave_key)]:
        for r in receiver.taken(path):
            assert set(r.json()) == {"event", "game", "kind", "turn", "url", "text", "sent_at"}
            good = "sha256=" + hmac.new(key.encode(), r.body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(r.headers["x-pbm-signature"], good)
    turn = next(r.json() for r in receiver.taken("/g/gj") if r.json()["event"] == "turn")
    assert turn["game"] == "gj" and turn["kind"] == "giveaway" and turn["turn"] == 1
    assert turn["url"] == f"http://127.0.0.1:{pbm.http_port}/games/gj/turns/1"

    # 500 then 200: the start alert came twice, was taken once; the 429 was waited out for its Retry-After
    gs = [r for r in receiver.requests if r.path == "/g/gs"]
    assert [r.status for r in gs[:2]] == [500, 200] and len(gs) == 5
    assert gs[0].headers["x-pbm-delivery"] == gs[1].headers["x-pbm-delivery"] != gs[2].headers["x-pbm-delivery"]
    gn = [r for r in receiver.requests if r.path == "/g/gn"]
    assert [r.status for r in gn[:2]] == [429, 200] and gn[1].at - gn[0].at >= 0.9 and len(gn) == 5
    # the 404: one post, the channel stopped, the GM told once (gx's reminder, turn and end were not sent)
    assert [r.status for r in receiver.requests if r.path == "/gone"] == [404]
    told = [m for m in pbm.inbox("gm@example.org") if "alerts of gx stopped" in str(m["Subject"])]
    assert len(told) == 1 and "answered 404" in pbm.flat(told[0]), [str(m["Subject"]) for m in pbm.inbox("gm@example.org")]
    assert "STOPPED" in pbm.cli("game", "show", "gx").stdout
    assert [r.status for r in receiver.requests if r.path == "/gone-p"] == [404]  # her reminder; no turn, no end
    told = [m for m in pbm.inbox("erin@example.org") if "your alerts stopped" in str(m["Subject"])]
    assert len(told) == 1 and "answered 404" in pbm.flat(told[0]) and "notify URL" in pbm.flat(told[0])
    assert pbm.sql("SELECT count(*) FROM outbox WHERE kind = 'alert' AND status = 'pending'")[0][0] == 0


def test_private_loopback_and_link_local_urls_are_refused_with_the_reason(pbm):
    pbm.register("gm", GM_PW, email="gm@example.org")
    pbm.cli("account", "add", "alice", "alice@example.org", "--password", PW)
    pbm.secrets.add(PW)
    pbm.cli("game", "new", "giveaway", "g1")
    for url, why in [("https://127.0.0.1/hook", "a loopback address"),
                     ("https://localhost/hook", "localhost resolves to"),
                     ("https://10.0.0.7/hook", "a private address"),
                     ("https://169.254.169.254/latest", "a link-local address"),
                     ("https://[::ffff:192.168.1.1]/x", "a private address"),
                     ("http://example.org/hook", "only to https:// URLs")]:
        cli = pbm.cli("game", "set", "g1", f"notify={url}", check=False)
        assert cli.returncode != 0 and why in cli.stdout + cli.stderr, (url, cli.stdout, cli.stderr)
    # by mail: the GM's game set and a player's notify, each refused with the reason, nothing changed
    [gm, player] = _replies(pbm, [pbm.send("gm@example.org", "pbm", f"game set g1 notify=https://[::1]/x\n$${GM_PW}$$"),
                                  pbm.send("alice@example.org", "pbm", f"notify https://localhost./hook\n$${PW}$$")])
    assert "a loopback address" in gm and "nothing was changed" in gm, gm
    assert "that URL is refused" in player and "a loopback address" in player, player
    assert pbm.sql("SELECT count(*) FROM games WHERE notify_url IS NOT NULL")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM accounts WHERE notify_url IS NOT NULL")[0][0] == 0
    # a public host is taken by mail; the reply names format and host, and never the signing key
    [gm, player] = _replies(pbm, [pbm.send("gm@example.org", "pbm", f"game set g1 notify=https://93.184.215.14/hook/T0K3N\n$${GM_PW}$$"),
                                  pbm.send("alice@example.org", "pbm", f"notify\n$${PW}$$")])
    assert "notify=json@93.184.215.14" in gm and "pbm game show g1, never by mail" in gm, gm
    assert not re.search(r"[0-9a-f]{64}", gm) and gm.count("T0K3N") == 1  # only the GM's own line, echoed
    assert "you have no alerts" in player, player
    assert pbm.sql("SELECT notify_url FROM games WHERE name = 'g1'")[0][0] == "https://93.184.215.14/hook/T0K3N"
    assert "T0K3N" not in " ".join(r[0] for r in pbm.sql("SELECT detail FROM audit_log"))
