"""Every board drawn on every page, turn pages for every kind with their
structured twins, feeds with scores and moves, one colour per player, and
the schemas read by plain ``jsonschema`` (issue 42, items 4 and 5): read over
a real socket from the real server, the games played by mail."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from games import get_rules
from pbm_server.web import app as web_app
from pbm_server.web.charts import PALETTE, line_chart, scale
from tests.harness import ROOT, PbmServer
from tests.server.test_web_pages import page, settled
from tests.server.weeks import curio, giveaway, send

SCHEMAS = ROOT / "docs" / "schema"
ATOM = "{http://www.w3.org/2005/Atom}"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def twin(pbm: PbmServer, path: str, schema_name: str) -> dict:
    """The JSON twin at ``path``, checked by nothing but ``jsonschema`` and the schema file."""
    status, _, body = page(pbm, path)
    assert status == 200, (path, body[:300])
    data = json.loads(body)
    jsonschema.validate(data, schema(schema_name), format_checker=jsonschema.FormatChecker())
    return data


def drawn(body: str, text_ok: bool = False) -> str:
    """The page's main part; no <pre> in it (no ASCII board, no text report);
    ``text_ok``: a <pre> of plain lines may be there (an own view's status),
    but never a board drawn in text."""
    main = body[body.index("<main>"):body.index("</main>")]
    blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", main, re.S)
    if text_ok:
        assert not [b for b in blocks if "Position after" in b or "(?)" in b or "[?]" in b or "+--" in b], blocks
    else:
        assert not blocks, blocks[:1]
    return main


def legend(svg: str) -> dict[str, str]:
    """handle -> the colour of its line in one SVG chart (its legend's swatch)."""
    return {h: c for c, h in re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"/><text [^>]*>([^<]+)</text>', svg)}


def charts_of(body: str) -> list[str]:
    return re.findall(r'<svg class="chart".*?</svg>', body, re.S)


def rmpm_two_weeks(pbm: PbmServer) -> str:
    """ann and bob join; week 1 places them; in week 2 only bob moves, so
    bob leads AN and PN while ann (alphabetically) leads the tied capital."""
    from tests.server.weeks import players

    players(pbm, "ann", "bob")
    pbm.new_game("rmpm", "world")
    send(pbm, "ann", "world", "JOIN bd 01-05 25-10 blue dragon")
    send(pbm, "bob", "world", "JOIN ir 01-06 25-11 Irata")
    pbm.run_turn("world")
    send(pbm, "bob", "world", "01-06 -> 02-06", "25-11 -> 24-11")
    pbm.run_turn("world")
    pbm.settle()
    return "world"


def test_rmpm_pages_draw_the_board_and_keep_each_players_colour(pbm: PbmServer, monkeypatch):
    monkeypatch.setattr(web_app.PageCache, "FRESH_SECONDS", 0.0)
    name = rmpm_two_weeks(pbm)
    body = settled(pbm, f"/games/{name}", lambda st, b: b.count('<svg class="chart"') == 3)[2]
    # the board's chips: bob (player 2) is chip colour c1 everywhere
    assert '<span class="chip c1">ir</span>' in body and '<span class="chip c0">bd</span>' in body
    svgs = charts_of(body)
    assert len(svgs) == 3  # capital, AN, PN
    for svg in svgs:
        colours = legend(svg)
        assert colours["bob"] == PALETTE[1] and colours["ann"] == PALETTE[0], colours
        # ticks: whole numbers within the figures' range (not from zero, not far beyond)
        ticks = [int(t) for t in re.findall(r'<text class="tick"[^>]*>(-?\d+)</text>', svg)]
        figures = [float(v) for v in re.findall(r"week \d+ (-?[\d.]+)", svg)]
        assert ticks and min(figures) <= min(ticks) and max(ticks) <= max(figures), (ticks, figures)
    # the score table beside the charts shows the same colours as swatches
    assert re.search(r'<span class="swatch c1" aria-hidden="true"></span> <a href="/players/bob">bob</a>', body)
    # the JSON twin: every player with their colour
    data = twin(pbm, f"/games/{name}.json", "game.schema.json")
    assert [(r["handle"], r["colour"]) for r in data["roster"]] == [("ann", 0), ("bob", 1)]
    # turn pages drawn as the report mail: the board as a table, no ASCII art; previous and next
    week2 = drawn(page(pbm, f"/games/{name}/turns/2")[2])
    assert '<table class="rmpm"' in week2 and '<span class="chip c1">ir</span>' in week2
    assert f'href="/games/{name}/turns/1" rel="prev"' in week2 and 'rel="next"' not in week2
    week1 = drawn(page(pbm, f"/games/{name}/turns/1")[2])
    assert f'href="/games/{name}/turns/2" rel="next"' in week1 and 'rel="prev"' not in week1
    # the turn's twin: per player figures, what they did
    turn = twin(pbm, f"/games/{name}/turns/2.json", "turn.schema.json")
    assert (turn["previous"], turn["next"], turn["label"]) == (1, None, "week 2")
    figures = {f["handle"]: f for f in turn["figures"]}
    assert figures["bob"]["did"].startswith("01-06 25-11 -> 02-06 ") and figures["ann"]["did"] is None
    assert figures["bob"]["an"] > figures["ann"]["an"] and figures["ann"]["score"] == figures["bob"]["score"]
    assert (figures["ann"]["colour"], figures["bob"]["colour"]) == (0, 1)
    assert '<span class="swatch c1" aria-hidden="true"></span> <a href="/players/bob">bob</a>' in week2


@pytest.mark.nodb
def test_chart_ticks_are_whole_numbers_inside_the_figures_and_one_turn_is_no_chart():
    low, high, ticks = scale([0.0, 31.0])
    assert ticks == [0, 10, 20, 30] and -2 < low < 0 and 31 < high < 33
    assert scale([1484.0, 1531.0])[2] == [1490, 1500, 1510, 1520, 1530]
    assert scale([7.0, 7.0])[2] == [7]
    # a chart of one turn: nothing drawn (the page's table shows the figures)
    assert line_chart({"ann": [(1, 4.0)], "bob": [(1, 3.0)]}, "round", "t") == ""
    two = line_chart({"ann": [(1, 4.0), (2, 1.0)], "bob": [(1, 3.0), (2, 9.0)]}, "round", "t",
                     colours={"ann": 0, "bob": 1})
    assert legend(two) == {"ann": PALETTE[0], "bob": PALETTE[1]}  # bob leads, keeps his own colour


def test_giveaway_curio_and_sequence_turn_pages_twins_and_feeds(pbm: PbmServer, monkeypatch):
    monkeypatch.setattr(web_app.PageCache, "FRESH_SECONDS", 0.0)
    giveaway(pbm)
    curio(pbm)
    four = sequence_plays(pbm)
    pbm.settle()
    # giveaway: one round is a table row, not a chart; its turn page is the report mail's table
    game = settled(pbm, "/games/gift", lambda st, b: "/games/gift/turns/1" in b)[2]
    assert '<svg class="chart"' not in game and '<table class="list scores">' in game
    main = drawn(game)
    assert '<table class="grid">' in main  # the standings as a table, not text in <pre>
    round1 = drawn(page(pbm, "/games/gift/turns/1")[2])
    assert "<td>gave 3 to bob</td>" in round1 and "<b>4</b>" in round1
    turn = twin(pbm, "/games/gift/turns/1.json", "turn.schema.json")
    assert {f["handle"]: (f["score"], f["did"]) for f in turn["figures"]} == {
        "ann": (4, "gave 3 to bob"), "bob": (3, "gave 2 to cat, 1 to ann"), "cat": (2, "gave 3 to ann")}
    entry = ET.fromstring(page(pbm, "/games/gift/feed.atom")[2]).find(f"{ATOM}entry")
    assert entry.find(f"{ATOM}title").text == "gift: round 1 processed"
    assert "Scores: ann 4, bob 3, cat 2." in entry.find(f"{ATOM}summary").text

    # curio: the game page draws the pieces (observer's view: hidden faces stay hidden)
    state = pbm.state("curio")
    hidden = get_rules("curio").hidden_from(state, None)
    assert hidden
    main = drawn(page(pbm, "/games/curio")[2])
    assert main.count('<table class="curio"') == 2 and 'href="/games/curio/turns/1"' in main
    move1 = page(pbm, "/games/curio/turns/1")
    assert move1[0] == 200
    main = drawn(move1[2])
    assert '<table class="curio"' in main and "Board 101: move 1" in main
    data = twin(pbm, "/games/curio/turns/1.json", "turn.schema.json")
    assert data["move"] is True and data["previous"] is None and data["next"] is None
    (mover,) = [f for f in data["figures"] if f["did"]]
    assert (mover["handle"], mover["board"], mover["side"]) == ("ann", 101, "Light")
    for shown in (html.unescape(main), json.dumps(data), page(pbm, "/games/curio.json")[2]):
        assert not [h for h in hidden if h in shown]
    assert page(pbm, "/games/curio/turns/2")[0] == 404
    # the game's twin holds every board and its players: two boards, four seats, three players
    game_twin = twin(pbm, "/games/curio.json", "game.schema.json")
    boards = {b["number"]: b for b in game_twin["boards"]}
    assert {n: (b["light"], b["dark"], b["status"], b["moves"], b["to_move"]) for n, b in boards.items()} == {
        101: ("ann", "bob", "active", 1, "bob"), 102: ("cat", "ann", "active", 0, "cat")}
    assert boards[101]["last_move"] and boards[102]["last_move"] is None
    assert sorted(r["handle"] for r in game_twin["roster"]) == ["ann", "bob", "cat"]
    assert twin(pbm, "/games/gift.json", "game.schema.json")["boards"] == []  # one board: the game itself
    titles = [e.find(f"{ATOM}title").text for e in ET.fromstring(page(pbm, "/games/curio/feed.atom")[2])
              .findall(f"{ATOM}entry")]
    assert titles == ["curio: move 1"]
    # a player's own view draws the board too, their own faces shown
    text = pbm.text(pbm.mail("ann@example.org", "pbm", "status curio\n$$ann-secret-77$$"))
    own = re.search(r"http://127\.0\.0\.1:\d+(/me/ann/curio\?k=\S+)", text).group(1)
    main = drawn(page(pbm, own)[2], text_ok=True)
    assert main.count('<table class="curio"') == 2 and "you play Light" in main
    assert not [h for h in get_rules("curio").hidden_from(state, "ann") if h in html.unescape(main)]

    # sequence: each play is a turn, the closing deadline the one after the last play
    game = settled(pbm, f"/games/{four}", lambda st, b: f"/games/{four}/turns/4" in b)[2]
    drawn(game)
    play2 = drawn(page(pbm, f"/games/{four}/turns/2")[2])
    assert f'/games/{four}/turns/1" rel="prev"' in play2 and f'/games/{four}/turns/3" rel="next"' in play2
    assert "<strong>ann</strong> played piece 2" in play2
    data = twin(pbm, f"/games/{four}/turns/2.json", "turn.schema.json")
    assert data["label"] == "play 2" and [f["handle"] for f in data["figures"] if f["did"]] == ["ann"]
    deadline = twin(pbm, f"/games/{four}/turns/4.json", "turn.schema.json")
    assert deadline["label"] == "the deadline" and deadline["previous"] == 3 and deadline["seed"]
    assert "Final standings" in drawn(page(pbm, f"/games/{four}/turns/4")[2])
    entries = [e.find(f"{ATOM}title").text for e in ET.fromstring(page(pbm, f"/games/{four}/feed.atom")[2])
               .findall(f"{ATOM}entry")]
    assert entries == [f"{four}: turn 4: the deadline processed", f"{four}: play 3", f"{four}: play 2", f"{four}: play 1"]
    game_twin = twin(pbm, f"/games/{four}.json", "game.schema.json")
    assert game_twin["move_turns"] == 3 and [t["turn"] for t in game_twin["turns"]] == [4]
    for path in (f"/games/{four}/turns/2", f"/games/{four}/turns/2.json", "/games/curio/turns/1"):
        assert "@example.org" not in page(pbm, path)[2]


def sequence_plays(pbm: PbmServer) -> str:
    """Three plays (dk, ann, dk), then the closing deadline."""
    from games.sequence.model import pieces_from_email

    players = {"ann": "ann@example.org", "dk": "dk@example.org"}
    pbm.register("dk", "dk-secret-77", email=players["dk"])
    pbm.cli("game", "new", "sequence", "four")
    pw = {"ann": "ann-secret-77", "dk": "dk-secret-77"}
    for h, e in players.items():
        pbm.mail(e, "four", f"JOIN\n$${pw[h]}$$")
    for number, who in ((1, "dk"), (2, "ann"), (3, "dk")):
        piece = pieces_from_email(players[who])[number - 1]
        reply = pbm.flat(pbm.mail(players[who], "four",
                                  f"Piece Number {number}: {piece.value}, {piece.multiplier}.\n$${pw[who]}$$"))
        assert f"accepted: play {number}" in reply, reply
    pbm.run_turn("four")
    return "four"


@pytest.mark.nodb
def test_the_schemas_resolve_from_the_repository_alone():
    """No $ref leaves its file and no id names a host: a plain
    ``jsonschema.validate`` reads each schema alone; game.schema.json's copy of
    the games list's summary is the same as the list's."""
    for path in SCHEMAS.glob("*.schema.json"):
        text = path.read_text()
        assert "pbm-server.example" not in text and '"$id"' not in text, path
        refs = re.findall(r'"\$ref":\s*"([^"]*)"', text)
        assert all(r.startswith("#") for r in refs), (path, refs)
        jsonschema.validators.validator_for(json.loads(text)).check_schema(json.loads(text))
    assert schema("game.schema.json")["$defs"]["summary"] == schema("games.schema.json")["$defs"]["summary"]
    with pytest.raises(jsonschema.ValidationError):  # the summary is checked: a game without a name is refused
        jsonschema.validate({"board": []}, schema("game.schema.json"))
    assert Path(SCHEMAS / "turn.schema.json").exists()
