"""The public game pages of the HTTP side (issue 29, first part): the list of
games, each game's page with its public board and turn archive, the JSON
twins, the Atom feed; read over a real socket from the real server.  The
contract part: for every registered game, every state of its scenario is put
in a real game and its page shown: nothing the rules hide from an observer
(``hidden_from(state, None)``) may appear on it."""

from __future__ import annotations

import html
import json
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from games import KINDS
from pbm_server.web import app as web_app
from tests.contract.games import play
from tests.harness import ROOT, PbmServer
from tests.server.test_http_side import get


def page(pbm: PbmServer, path: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}{path}", timeout=20) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()


def settled(pbm: PbmServer, path: str, ready, timeout: float = 10) -> tuple[int, dict[str, str], str]:
    """The page once ``ready(status, body)``: a kept page is served for up to a
    second (PageCache.FRESH_SECONDS) before it is checked against its game."""
    deadline = time.monotonic() + timeout
    while True:
        got = page(pbm, path)
        if ready(got[0], got[2]) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def valid(schema: str, data: object) -> object:
    """``data`` checked against docs/schema/SCHEMA (the schemas shipped for players' tools):
    each file is read alone, with no registry (issue 42)."""
    wanted = json.loads((ROOT / "docs" / "schema" / schema).read_text())
    jsonschema.validate(data, wanted, format_checker=jsonschema.FormatChecker())
    return data


def test_the_list_of_games_and_a_game_page_with_its_archive(pbm: PbmServer):
    get(pbm.http_port, "/healthz")  # the side is up
    pbm.game_of_three()
    pbm.cli("game", "new", "sequence", "seq1")
    status, headers, body = page(pbm, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in headers["content-security-policy"] and "<script" not in body
    assert '<a href="/games/ring1">ring1</a>' in body and '<a href="/games/seq1">seq1</a>' in body
    listed = valid("games.schema.json", json.loads(page(pbm, "/games.json")[2]))["games"]
    ring = next(g for g in listed if g["name"] == "ring1")
    assert ring["players"] == 3 and ring["turn"] == 1 and ring["join_address"] == "ring1@pbm.test"
    # a turn runs: the archive shows it with its revealed seed, the report page and the feed follow
    before = valid("game.schema.json", json.loads(page(pbm, "/games/ring1.json")[2]))
    assert before["turns"] == [] and len(before["open_turn_seed_sha256"]) == 64
    pbm.run_turn("ring1")
    pbm.settle()
    settled(pbm, "/games/ring1.json", lambda st, b: json.loads(b)["turns"] != [])
    status, headers, body = settled(pbm, "/games/ring1", lambda st, b: "/games/ring1/turns/1" in b)
    assert status == 200 and "Board" in body and "ann" in body
    data = valid("game.schema.json", json.loads(page(pbm, "/games/ring1.json")[2]))
    (turn,) = data["turns"]
    assert turn["turn"] == 1 and turn["rolled_back"] is False
    # the revealed seed is the one whose hash was published before the turn
    assert turn["seed_sha256"] == before["open_turn_seed_sha256"]
    assert turn["seed"] in body
    # the scores after the turn: one turn is a table row, not a chart (issue 42); the JSON's scores
    assert '<svg class="chart"' not in body and '<table class="list scores">' in body
    assert sorted(r["handle"] for r in data["scores"]) == ["ann", "bob", "cat"]
    assert all(list(r["by_turn"]) == ["1"] for r in data["scores"])
    report = valid("turn.schema.json", json.loads(page(pbm, "/games/ring1/turns/1.json")[2]))
    assert report["turn"] == 1 and report["seed"] == turn["seed"]
    status, _, body = page(pbm, "/games/ring1/turns/1")
    # drawn as the report mail's HTML part (issue 42), the report's text kept in the twin
    assert status == 200 and "<h2>ring1: round 1</h2>" in body and '<table class="grid">' in body
    assert report["report"].startswith("Round 1 of ring1 has been played.")
    feed = ET.fromstring(page(pbm, "/games/ring1/feed.atom")[2])
    atom = "{http://www.w3.org/2005/Atom}"
    assert [e.find(f"{atom}title").text for e in feed.findall(f"{atom}entry")] == ["ring1: round 1 processed"]
    # a rollback marks the voided turn in the archive
    pbm.cli("turn", "rollback", "ring1", "1")
    assert json.loads(settled(pbm, "/games/ring1.json", lambda st, b: '"rolled_back":true' in b)[2])["turns"][0]["rolled_back"] is True
    assert "(rolled back)" in settled(pbm, "/games/ring1", lambda st, b: "(rolled back)" in b)[2]
    # no player's address anywhere
    for path in ("/", "/games.json", "/games/ring1", "/games/ring1.json", "/games/ring1/turns/1"):
        assert "@example.org" not in page(pbm, path)[2], path


def test_unknown_games_and_turns_are_404_and_the_stylesheet_is_served(pbm: PbmServer):
    pbm.cli("game", "new", "giveaway", "ring1")
    for path in ("/games/nope", "/games/nope.json", "/games/ring1/turns/7", "/games/ring1/turns/x",
                 "/games/nope/feed.atom"):
        status, _, body = page(pbm, path)
        assert status == 404 and "no" in body, (path, status, body)
    status, headers, css = page(pbm, "/static/pbm.css")
    assert status == 200 and headers["content-type"].startswith("text/css") and "max-width" in css


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_pages_never_show_what_is_hidden_from_an_observer(pbm: PbmServer, kind: str, monkeypatch):
    """Every state the game's contract scenario passes through, shown on the
    game's page and in its JSON twin (each state a new version of the game, and
    no page kept fresh without asking: each page is made for its state)."""
    monkeypatch.setattr(web_app.PageCache, "FRESH_SECONDS", 0.0)
    table, probe = play(kind)
    rules = table.rules
    pbm.cli("game", "new", kind, "g1")
    hidden_somewhere = False
    for state in table.history:
        hidden = rules.hidden_from(state, None)
        hidden_somewhere |= bool(hidden)
        pbm.set_state("g1", json.loads(json.dumps(rules.export_state(state))))
        pbm.execute("UPDATE games SET version = version + 1 WHERE name = 'g1'")
        for path in ("/games/g1", "/games/g1.json"):
            status, _, body = page(pbm, path)
            assert status == 200, (path, body[:500])
            if path.endswith(".json"):
                valid("game.schema.json", json.loads(body))
            shown = html.unescape(body) if path.endswith("g1") else json.dumps(json.loads(body), ensure_ascii=False)
            leaked = [h for h in hidden if h in shown]
            assert not leaked, f"{kind}: {path} shows {leaked}"
    # a game that hides something had it to hide here: the check was not empty
    assert hidden_somewhere == probe.hides


def test_a_private_game_has_no_public_pages(pbm: PbmServer):
    pbm.cli("game", "new", "giveaway", "ring1")
    pbm.cli("game", "new", "giveaway", "ring2")
    out = pbm.cli("game", "private", "ring1").stdout
    assert "ring1's pages are private" in out
    for path in ("/games/ring1", "/games/ring1.json", "/games/ring1/feed.atom"):
        assert settled(pbm, path, lambda st, b: st == 404)[0] == 404, path
    names = [g["name"] for g in json.loads(settled(pbm, "/games.json", lambda st, b: "ring1" not in b)[2])["games"]]
    assert names == ["ring2"] and "ring1" not in settled(pbm, "/", lambda st, b: "ring1" not in b)[2]
    assert "public" in pbm.cli("game", "private", "ring1", "--public").stdout
    assert settled(pbm, "/games/ring1", lambda st, b: st == 200)[0] == 200
    assert pbm.sql("SELECT action FROM audit_log WHERE action LIKE 'game p%' ORDER BY id") == [
        ("game private",), ("game public",)]


# -- issue 29, engineer H: players' pages, sequence standings, public press ------------------------------

CURIO_PW = {"ann": "ann-pass-1", "bob": "bob-pass-22", "cat": "cat-pass-333"}


def curio_players(pbm: PbmServer) -> dict[str, str]:
    """ann, bob and cat registered; bob resigned board 101 to ann and cat
    resigned board 102 to ann: two rated boards of ann's in the game curio."""
    addr = {h: pbm.register(h, pw) for h, pw in CURIO_PW.items()}
    for number, other in ((101, "bob"), (102, "cat")):
        pbm.mail(addr["ann"], "pbm", f"curio challenge ann {other} $${CURIO_PW['ann']}$$")
        moved = pbm.flat(pbm.mail(addr["ann"], "pbm", f"curio move {number} ann {CURIO_PW['ann']} a2-a3"))
        assert "REFUSED" not in moved, moved
        gone = pbm.flat(pbm.mail(addr[other], "pbm", f"curio move {number} {other} {CURIO_PW[other]} resign"))
        assert "REFUSED" not in gone, gone
    return addr


def test_a_players_page_shows_games_and_curio_rating_history(pbm: PbmServer):
    curio_players(pbm)
    pbm.cli("game", "new", "giveaway", "ring1")
    pbm.cli("game", "new", "giveaway", "hidden1")
    for game in ("ring1", "hidden1"):
        pbm.mail("ann@example.org", game, f"JOIN\n$${CURIO_PW['ann']}$$")
    pbm.cli("game", "private", "hidden1")
    status, headers, body = settled(pbm, "/players/ann", lambda st, b: "hidden1" not in b)
    assert status == 200 and "default-src 'none'" in headers["content-security-policy"]
    assert '<a href="/games/curio">curio</a>' in body and '<a href="/games/ring1">ring1</a>' in body
    assert "hidden1" not in body  # a private game is left out
    # the rating after each finished board, as `curio ratings` computes it: 1516, then 1531
    assert '<svg class="chart"' in body and "<polyline" in body and "<script" not in body and "style=" not in body
    assert "rated board 1 1516, rated board 2 1531" in body
    data = valid("player.schema.json", json.loads(page(pbm, "/players/ann.json")[2]))
    assert data["handle"] == "ann" and [g["name"] for g in data["games"]] == ["curio", "ring1"]
    (curio,) = data["curio_ratings"]
    assert [(r["board"], r["opponent"], r["result"], r["rating"]) for r in curio["history"]] == [
        (101, "bob", "won", 1516), (102, "cat", "won", 1531)]
    bob = valid("player.schema.json", json.loads(page(pbm, "/players/BOB.json")[2]))
    assert bob["handle"] == "bob" and [r["rating"] for r in bob["curio_ratings"][0]["history"]] == [1484]
    # no address anywhere; an unknown handle, or one in no public game, is 404 alike
    for path in ("/players/ann", "/players/ann.json", "/players/bob"):
        assert "@example.org" not in page(pbm, path)[2], path
    pbm.register("dan", "dan-pass-4444")
    for path in ("/players/nobody", "/players/nobody.json", "/players/dan"):
        assert page(pbm, path)[0] == 404, path
    # the game page links its players to their pages
    game = settled(pbm, "/games/ring1", lambda st, b: "/players/ann" in b)[2]
    assert '<a href="/players/ann">ann</a>' in game


def test_a_sequence_game_charts_its_public_standings_by_play(pbm: PbmServer):
    players = {"ann": "ann@example.org", "dk": "dk@example.org"}
    for h, e in players.items():
        pbm.register(h, f"pw-{h}-77", email=e)
    pbm.cli("game", "new", "sequence", "four")
    for h, e in players.items():
        pbm.mail(e, "four", f"JOIN\n$$pw-{h}-77$$")
    from games.sequence.model import pieces_from_email
    for number, who in ((1, "dk"), (2, "ann"), (3, "dk")):
        piece = pieces_from_email(players[who])[number - 1]
        line = f"Piece Number {number}: {piece.value}, {piece.multiplier}."
        reply = pbm.flat(pbm.mail(players[who], "four", f"{line}\n$$pw-{who}-77$$"))
        assert f"accepted: play {number}" in reply, reply
    status, _, body = settled(pbm, "/games/four", lambda st, b: "play 3" in b)
    assert status == 200 and '<svg class="chart"' in body and "four: scores by play" in body
    assert '<a href="/players/dk">dk</a>' in body
    data = valid("game.schema.json", json.loads(page(pbm, "/games/four.json")[2]))
    assert data["scores_after"] == "play"
    # the figures are the standings every play's public mail shows
    state = pbm.state("four")
    from games import get_rules
    standings = dict(get_rules("sequence").score_history(state)[-1][1])
    assert {r["handle"]: r["by_turn"]["3"] for r in data["scores"]} == standings
    assert [int(k) for k in data["scores"][0]["by_turn"]] == [1, 2, 3]
    assert "@example.org" not in body


def press_players(pbm: PbmServer) -> dict[str, str]:
    pbm.cli("game", "new", "giveaway", "ring")
    pw = {h: f"{h}-pass-1" for h in ("ann", "bob", "cat")}
    for h in pw:
        pbm.register(h, pw[h])
        pbm.mail(f"{h}@example.org", "ring", f"JOIN\n$${pw[h]}$$")
    return pw


def test_public_press_is_on_the_game_page_and_in_its_feed_only_while_set(pbm: PbmServer):
    pw = press_players(pbm)
    say = lambda who, body: pbm.flat(pbm.mail(f"{who}@example.org", "ring", f"{body}\n$${pw[who]}$$"))  # noqa: E731
    # off (the default): press to all stays with the players
    reply = say("ann", "PRESS TO ALL\nbefore: players only\nENDPRESS")
    assert "sent to all 2 other players" in reply and "public" not in reply
    out = pbm.cli("game", "set", "ring", "public_press=on").stdout
    assert "public_press=on" in out
    pbm.settle()
    told = [m for m in pbm.inbox("bob@example.org") if "changed its settings" in str(m["Subject"])]
    assert told and "PRESS TO ALL is public" in pbm.flat(told[-1])
    reply = say("ann", "PRESS TO ALL\nhello world, $$ann-pass-1$$ and ann-pass-1\nENDPRESS")
    assert "it is public" in reply and "web page of ring" in reply, reply
    assert "public" not in say("bob", "PRESS TO ann\na private word\nENDPRESS")
    body = settled(pbm, "/games/ring", lambda st, b: "Public press" in b)[2]
    assert "hello world" in html.unescape(body) and "ann," in body
    assert "ann-pass-1" not in body and "before: players only" not in body and "a private word" not in body
    data = valid("game.schema.json", json.loads(page(pbm, "/games/ring.json")[2]))
    assert [(p["sender"], p["text"]) for p in data["press"]] == [("ann", "hello world, $$****$$ and ****")]
    feed = ET.fromstring(page(pbm, "/games/ring/feed.atom")[2])
    atom = "{http://www.w3.org/2005/Atom}"
    entries = [e.find(f"{atom}title").text for e in feed.findall(f"{atom}entry")]
    assert entries == ["ring: press from ann"]
    # anonymous press: no handle on the page; off again: new press stays private
    pbm.cli("game", "set", "ring", "anonymous=on")
    assert "without your handle" in say("cat", "PRESS TO ALL\nwho am I\nENDPRESS")
    pbm.cli("game", "set", "ring", "public_press=off")
    assert "public" not in say("bob", "PRESS TO ALL\nafter: players only\nENDPRESS")
    data = json.loads(settled(pbm, "/games/ring.json", lambda st, b: "who am I" in b)[2])
    assert [(p["sender"], p["text"]) for p in data["press"]] == [(None, "who am I"), ("ann", "hello world, $$****$$ and ****")]
    for path in ("/games/ring", "/games/ring.json", "/games/ring/feed.atom"):
        shown = page(pbm, path)[2]
        assert "after: players only" not in shown and "@example.org" not in shown, path
    # a bad value is refused and changes nothing
    assert "not on or off" in pbm.cli("game", "set", "ring", "public_press=maybe", check=False).stderr + \
        pbm.cli("game", "set", "ring", "public_press=maybe", check=False).stdout


def test_an_rmpm_game_charts_capital_an_and_pn_by_week(pbm: PbmServer):
    """rmpm's page charts what its reports show everybody: capital (the score),
    AN and PN after each week, each with its table and in the JSON twin."""
    from tests.server.weeks import rmpm

    name = rmpm(pbm)
    pbm.settle()
    data = valid("game.schema.json", json.loads(settled(pbm, f"/games/{name}.json",
                                                        lambda st, b: '"trends":{"AN"' in b)[2]))
    assert data["scores"] and set(data["trends"]) == {"AN", "PN"}
    assert {r["handle"] for r in data["trends"]["PN"]} == {r["handle"] for r in data["scores"]}
    body = page(pbm, f"/games/{name}")[2]
    assert f"{name}: AN by week" in body and f"{name}: PN by week" in body and body.count('<svg class="chart"') == 3


def test_every_page_of_a_played_week_of_each_game_hides_what_the_rules_hide(pbm: PbmServer, monkeypatch):
    """A scripted week of every game played over SMTP (tests/server/weeks.py),
    then every page: the list, each game's page and JSON twin (against the
    game's state now), each processed turn's page and twin (against the
    state after that turn), each player's page: nothing ``hidden_from(state,
    None)`` names appears, nor any player's address."""
    from games import get_rules
    from tests.server.weeks import WEEKS

    monkeypatch.setattr(web_app.PageCache, "FRESH_SECONDS", 0.0)
    for week in WEEKS.values():
        week(pbm)
    pbm.settle()
    bodies: list[tuple[str, str, list[str]]] = []
    for name, kind in pbm.sql("SELECT name, kind FROM games ORDER BY name"):
        rules = get_rules(kind)
        hidden = rules.hidden_from(pbm.state(name), None)
        for path in (f"/games/{name}", f"/games/{name}.json", f"/games/{name}/feed.atom"):
            bodies.append((path, page(pbm, path)[2], hidden))
        turns = pbm.sql("SELECT s.turn, s.state FROM snapshots s JOIN games g ON g.id = s.game_id "
                        "WHERE g.name = :n AND s.phase = 'after' ORDER BY s.id", n=name)
        for turn, state in turns:
            state = state if isinstance(state, dict) else json.loads(state)
            after = rules.hidden_from(state, None)
            for path in (f"/games/{name}/turns/{turn}", f"/games/{name}/turns/{turn}.json"):
                status, _, body = page(pbm, path)
                assert status == 200, path
                bodies.append((path, body, after))
    handles = [h for (h,) in pbm.sql("SELECT handle FROM accounts ORDER BY handle")]
    everything_hidden = sorted({h for _, _, hidden in bodies for h in hidden})
    for handle in handles:
        status, _, body = page(pbm, f"/players/{handle}")
        bodies.append((f"/players/{handle}", body if status == 200 else "", everything_hidden))
    bodies.append(("/", page(pbm, "/")[2], everything_hidden))
    assert len(bodies) > 20 and any(hidden for _, _, hidden in bodies)
    for path, body, hidden in bodies:
        shown = html.unescape(body)
        leaked = [h for h in hidden if h in shown]
        assert not leaked, f"{path} shows {leaked}"
        assert "@example.org" not in shown, path
