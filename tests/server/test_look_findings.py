"""Findings of issue 42 on the web side: what the pages count and when they
are made again."""

from __future__ import annotations

import json
import urllib.request

from pbm_server.web.app import PageCache
from tests.harness import PbmServer
from tests.server.weeks import PW, addr, first_legal_move, players


def get_json(pbm: PbmServer, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}{path}", timeout=30) as resp:
        return json.loads(resp.read())


def get_text(pbm: PbmServer, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}{path}", timeout=30) as resp:
        return resp.read().decode()


def test_the_curio_page_counts_the_players_of_every_board(pbm: PbmServer):
    players(pbm, "ann", "bob", "cat", "dan")
    pbm.mail(addr("ann"), "pbm", f"curio challenge -base=3 -cols=3 ann bob\n$${PW['ann']}$$")
    pbm.mail(addr("cat"), "pbm", f"curio challenge -base=3 -cols=3 cat dan\n$${PW['cat']}$$")
    # the two of board 101 play on; on board 102 cat moves, then resigns: cat and dan played there too
    pbm.mail(addr("cat"), "pbm", f"curio move 102 cat {PW['cat']} {first_legal_move(pbm, 102)}")
    pbm.mail(addr("cat"), "pbm", f"curio resign 102 cat {PW['cat']}")
    pbm.settle()
    game = get_json(pbm, "/games/curio.json")
    listed = next(g for g in get_json(pbm, "/games.json")["games"] if g["name"] == "curio")
    assert game["players"] == 4 and sorted(game["handles"]) == ["ann", "bob", "cat", "dan"], game
    assert listed["players"] == 4


def test_the_list_its_twin_and_player_pages_follow_a_new_deadline_and_a_pause(pbm: PbmServer, monkeypatch):
    monkeypatch.setattr(PageCache, "FRESH_SECONDS", 0.0)  # a page asked for again is checked against its games
    pbm.set_clock("2026-11-30T10:00:00+00:00")
    players(pbm, "ann")
    pbm.new_game("giveaway", "gift", deadline="every Saturday 12:00")
    pbm.mail(addr("ann"), "gift", f"JOIN\n$${PW['ann']}$$")
    listed = get_json(pbm, "/games.json")["games"][0]
    assert listed["next_deadline"].startswith("2026-12-05T12:00") and listed["status"] == "running"
    assert "2026-12-05 12:00" in get_text(pbm, "/")
    assert get_json(pbm, "/players/ann.json")["games"][0]["status"] == "running"
    assert "running" in get_text(pbm, "/players/ann")

    pbm.cli("game", "deadline", "gift", "every", "Sunday", "18:00")
    listed = get_json(pbm, "/games.json")["games"][0]
    assert listed["next_deadline"].startswith("2026-12-06T18:00"), listed
    assert "2026-12-06 18:00" in get_text(pbm, "/")
    pbm.cli("game", "pause", "gift")
    assert get_json(pbm, "/games.json")["games"][0]["status"] == "paused"
    assert "paused" in get_text(pbm, "/")
    assert get_json(pbm, "/players/ann.json")["games"][0]["status"] == "paused"
    assert "paused" in get_text(pbm, "/players/ann")
