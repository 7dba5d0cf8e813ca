"""The "how to join" text of the games list and of each game's page (issue
42): it said "mail JOIN (and your password)" for every game, but curio
answers ``unknown curio command 'JOIN'`` (its boards start with a challenge
to pbm@DOMAIN), rmpm needs ``JOIN ABBR F1 F2 ALIAS`` and a giveaway game
past round 1 refuses every join.  Now each kind says it (``Rules.join_hint``)
and the pages show it: the line to mail and where, or that the game is
closed to new players and why.  Read over real HTTP from the real server;
what a page says to send is sent, exactly, by real SMTP and accepted."""

from __future__ import annotations

import html
import json
import re
import urllib.request
from collections.abc import Callable

from tests.harness import PbmServer, wait_until

PW = {"ann": "ann-pass-1", "bob": "bob-pass-1", "cat": "cat-pass-1", "dan": "dan-pass-1"}


def get(pbm: PbmServer, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}{path}", timeout=20) as resp:
        assert resp.status == 200
        return resp.read().decode()


def when(pbm: PbmServer, path: str, ready: Callable[[str], bool]) -> str:
    """The page once ``ready(page)``: a kept page is served for up to a second
    (PageCache.FRESH_SECONDS) before it is checked against its game."""
    found: list[str] = []
    wait_until(lambda: ready(found.append(get(pbm, path)) or found[-1]), 10, f"the page {path} to change")
    return found[-1]


def words(page: str) -> str:
    """A page's text as a reader sees it: tags out, entities read, white space one space."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def join_paragraph(page: str) -> str:
    found = re.search(r'<p class="join">(.*?)</p>', page, re.S)
    return found.group(1) if found else ""


def offered(pbm: PbmServer, game: str, unlike: str | None = None) -> tuple[str, str, str]:
    """(line, address, the whole paragraph's words) a game's page says to mail
    (once the page is no longer the one that offered ``unlike``)."""
    pattern = r"To play, mail <code>([^<]+)</code> to <code>([^<]+)</code>"

    def ready(page: str) -> bool:
        found = re.search(pattern, join_paragraph(page))
        return found is not None and html.unescape(found.group(1)) != unlike
    paragraph = join_paragraph(when(pbm, f"/games/{game}", ready))
    found = re.search(pattern, paragraph)
    assert found is not None
    return html.unescape(found.group(1)), found.group(2), words(paragraph)


def index_cell(page: str, game: str) -> str:
    """The "to join" cell of the game's row in the games list."""
    row = re.search(rf'<tr>\s*<td><a href="/games/{game}">.*?</tr>', page, re.S)
    return words(re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)[-1]) if row else ""


def test_each_kind_says_what_to_send_and_that_is_accepted(pbm: PbmServer):
    addr = {h: pbm.register(h, pw) for h, pw in PW.items()}
    pbm.new_game("giveaway", "ring1")
    pbm.new_game("rmpm", "world")
    pbm.new_game("sequence", "four")
    pbm.new_game("agora_rpg", "crawl")
    pbm.new_game("curio", "curio")
    games = ("ring1", "world", "four", "crawl", "curio")
    index = when(pbm, "/", lambda page: all(index_cell(page, g) for g in games))

    # giveaway before round 1: JOIN, to the game's address; sent as it stands, accepted
    line, to, _ = offered(pbm, "ring1")
    assert (line, to) == ("JOIN", "ring1@pbm.test")
    assert index_cell(index, "ring1") == "mail JOIN to ring1@pbm.test"
    for h in ("ann", "bob", "cat"):
        reply = pbm.flat(pbm.mail(addr[h], to.split("@")[0], f"{line}\n$${PW[h]}$$"))
        assert "accepted" in reply and "REFUSED" not in reply, reply

    # rmpm: the whole JOIN line, an example the game accepts as it stands
    line, to, paragraph = offered(pbm, "world")
    assert to == "world@pbm.test" and line == "JOIN bd 01-05 25-10 blue dragon", line
    assert "ABBR: two letters or digits" in paragraph
    assert index_cell(index, "world") == f"mail {line} to world@pbm.test"
    reply = pbm.flat(pbm.mail(addr["ann"], "world", f"{line}\n$${PW['ann']}$$"))
    assert "accepted" in reply and "you join as bd (blue dragon)" in reply, reply
    # ann has bd now: the next newcomer is shown another example, and it is accepted too
    line, _, _ = offered(pbm, "world", unlike=line)
    assert line == "JOIN gf 01-05 25-10 green falcon", line
    reply = pbm.flat(pbm.mail(addr["bob"], "world", f"{line}\n$${PW['bob']}$$"))
    assert "accepted" in reply and "you join as gf (green falcon)" in reply, reply
    # a third player's chips on those start fields would be refused (two players at most): the example moves on
    line, _, _ = offered(pbm, "world", unlike=line)
    assert line.startswith("JOIN rw ") and "01-05" not in line and "25-10" not in line, line
    cats = line
    reply = pbm.flat(pbm.mail(addr["cat"], "world", f"{line}\n$${PW['cat']}$$"))
    assert "accepted" in reply and "you join as rw (red wolf)" in reply, reply

    # sequence and agora_rpg: JOIN, accepted
    for game in ("four", "crawl"):
        line, to, _ = offered(pbm, game)
        assert (line, to) == ("JOIN", f"{game}@pbm.test")
        assert index_cell(index, game) == f"mail JOIN to {game}@pbm.test"
        reply = pbm.flat(pbm.mail(addr["dan"], game, f"{line}\n$${PW['dan']}$$"))
        assert "accepted" in reply and "REFUSED" not in reply, reply

    # curio: no JOIN; a challenge to the server's address, the handles filled in, starts a board
    line, to, paragraph = offered(pbm, "curio")
    assert (line, to) == ("curio challenge YOURHANDLE OPPONENT", "pbm@pbm.test")
    assert "JOIN" not in paragraph and "curio boards are not joined" in paragraph, paragraph
    assert index_cell(index, "curio") == "mail curio challenge YOURHANDLE OPPONENT to pbm@pbm.test"
    sent = line.replace("YOURHANDLE", "ann").replace("OPPONENT", "bob")
    reply = pbm.flat(pbm.mail(addr["ann"], "pbm", f"{sent}\n$${PW['ann']}$$"))
    assert "accepted" in reply and "101" in reply and "REFUSED" not in reply, reply

    # giveaway past round 1: closed, and says why; a JOIN is indeed refused
    pbm.run_turn("ring1")
    page = when(pbm, "/games/ring1", lambda p: "Closed" in join_paragraph(p))
    paragraph = words(join_paragraph(page))
    assert paragraph.startswith("Closed to new players: round 1 has been played"), paragraph
    assert "To play" not in paragraph and "JOIN" not in paragraph
    index = when(pbm, "/", lambda p: index_cell(p, "ring1") != "mail JOIN to ring1@pbm.test")
    assert index_cell(index, "ring1") == "closed to new players"
    reply = pbm.flat(pbm.mail(addr["dan"], "ring1", f"JOIN\n$${PW['dan']}$$"))
    assert "REFUSED" in reply and "round 1 has been played" in reply, reply
    # the JSON twins say the same
    twin = when(pbm, "/games.json", lambda p: '"join_line":null' in p.replace(" ", ""))
    listed = {g["name"]: g for g in json.loads(twin)["games"]}
    assert (listed["ring1"]["join_address"], listed["ring1"]["join_line"]) == (None, None)
    assert listed["curio"]["join_address"] == "pbm@pbm.test"
    assert json.loads(get(pbm, "/games/world.json"))["join_line"].startswith("JOIN ")
    # the `games` mail says the same for each game
    text = pbm.text(pbm.mail(addr["dan"], "pbm", "games"))
    blocks = {m.group(1): m.group(0) for m in re.finditer(r"^[* ] (\w+)@pbm\.test.*(?:\n {4}.*)*", text, re.M)}
    assert "closed to new players" in blocks["ring1"] and "to join" not in blocks["ring1"], text
    assert "to join: curio challenge YOURHANDLE OPPONENT (to pbm@pbm.test)" in blocks["curio"], text
    line, _, _ = offered(pbm, "world", unlike=cats)
    assert line.startswith("JOIN yo ") and f"to join: {line}\n" in blocks["world"] + "\n", text
    assert "to join: JOIN\n" in blocks["four"] + "\n" and "to join: JOIN\n" in blocks["crawl"] + "\n", text
