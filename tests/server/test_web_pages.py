"""The public game pages of the HTTP side (issue 29, first part): the list of
games, each game's page with its public board and turn archive, the JSON
twins, the Atom feed; read over a real socket from the real server.  The
contract part: for every registered game, every state of its scenario is put
in a real game and its page shown: nothing the rules hide from an observer
(``hidden_from(state, None)``) may appear on it."""

from __future__ import annotations

import html
import json
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import jsonschema
import pytest
from referencing import Registry, Resource

from games import KINDS
from tests.contract.games import play
from tests.harness import ROOT, PbmServer
from tests.server.test_http_side import get


def page(pbm: PbmServer, path: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}{path}", timeout=20) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()


def valid(schema: str, data: object) -> object:
    """``data`` checked against docs/schema/SCHEMA (the schemas shipped for players' tools)."""
    schemas = [json.loads(p.read_text()) for p in (ROOT / "docs" / "schema").glob("*.schema.json")]
    registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas])
    wanted = next(s for s in schemas if s["$id"].endswith("/" + schema))
    jsonschema.Draft202012Validator(wanted, registry=registry,
                                    format_checker=jsonschema.FormatChecker()).validate(data)
    return data


def test_the_list_of_games_and_a_game_page_with_its_archive(pbm: PbmServer):
    get(pbm.http_port, "/healthz")  # the side is up
    pbm.cli("game", "new", "giveaway", "ring1")
    pbm.cli("game", "new", "sequence", "seq1")
    for handle in ("ann", "bob", "cat"):
        pbm.register(handle, f"{handle}-pass-1")
        pbm.mail(f"{handle}@example.org", "ring1", f"JOIN\n$${handle}-pass-1$$")
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
    status, headers, body = page(pbm, "/games/ring1")
    assert status == 200 and "Board" in body and "ann" in body
    data = valid("game.schema.json", json.loads(page(pbm, "/games/ring1.json")[2]))
    (turn,) = data["turns"]
    assert turn["turn"] == 1 and turn["rolled_back"] is False
    # the revealed seed is the one whose hash was published before the turn
    assert turn["seed_sha256"] == before["open_turn_seed_sha256"]
    assert turn["seed"] in body
    report = valid("turn.schema.json", json.loads(page(pbm, "/games/ring1/turns/1.json")[2]))
    assert report["turn"] == 1 and report["seed"] == turn["seed"]
    status, _, body = page(pbm, "/games/ring1/turns/1")
    assert status == 200 and (report["report"] is None or html.escape(report["report"].splitlines()[0]) in body)
    feed = ET.fromstring(page(pbm, "/games/ring1/feed.atom")[2])
    atom = "{http://www.w3.org/2005/Atom}"
    assert [e.find(f"{atom}title").text for e in feed.findall(f"{atom}entry")] == ["ring1: round 1 processed"]
    # a rollback marks the voided turn in the archive
    pbm.cli("turn", "rollback", "ring1", "1")
    assert json.loads(page(pbm, "/games/ring1.json")[2])["turns"][0]["rolled_back"] is True
    assert "(rolled back)" in page(pbm, "/games/ring1")[2]
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
def test_pages_never_show_what_is_hidden_from_an_observer(pbm: PbmServer, kind: str):
    """Every state the game's contract scenario passes through, shown on the
    game's page and in its JSON twin."""
    table, probe = play(kind)
    rules = table.rules
    pbm.cli("game", "new", kind, "g1")
    hidden_somewhere = False
    for state in table.history:
        hidden = rules.hidden_from(state, None)
        hidden_somewhere |= bool(hidden)
        pbm.set_state("g1", json.loads(json.dumps(rules.export_state(state))))
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
