"""Mails: joining, leaving, order sets, pre-analysis, authentication, GM
operations, import/export, board files, views, parsing."""

from __future__ import annotations

import re
from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from games.base import ALL_PLAYERS, Actor, GameError, Line
from games.rmpm import RULES
from games.rmpm.board import parse_board_file

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def flat(text: str) -> str:
    return " ".join(text.split())


def new(t, **options):
    return RULES.new_game(options, t.ctx())


# -- joining ------------------------------------------------------------------------------

def test_join_and_placement_at_the_update(t):
    st = new(t)
    out = t.mail(st, "alice", "JOIN bd 01-05 25-10 blue dragon")
    assert out.results[0].ok and out.joined == ["alice"]
    assert out.results[0].message == "accepted: you join as bd (blue dragon), player #01"
    assert "you would start with AN 1, PN 4 and 10000 WCU" in flat(out.sections[0].text)
    st = out.state
    assert st["players"]["alice"]["chips"] is None
    assert RULES.players(st) == ["alice"] and RULES.waiting_for(st) == []
    out = t.week(st)
    a = out.state["players"]["alice"]
    assert a["chips"] == ["01-05", "25-10"] and a["an"] == 1 and a["pn"] == 4 and a["capital"] == 10000
    text = t.text(out.notices[0].data)
    assert "01 bd blue dragon: chips on 01-05 25-10, AN 1, PN 4" in text
    assert RULES.waiting_for(out.state) == ["alice"]


def test_join_refusals(t):
    st = t.mail(new(t), "alice", "JOIN bd 01-05 25-10 blue dragon").state
    out = t.mail(st, "bob", "JOIN BD 01-07 25-11 bold dog")
    assert not out.results[0].ok
    assert out.results[0].message.startswith("the abbreviation 'bd' is taken by blue dragon")
    out = t.mail(st, "bob", "JOIN bo 05-05 25-11 bob")
    assert out.results[0].message.startswith("start field 05-05 is not on the edge")
    out = t.mail(st, "bob", "JOIN bo 01-07 01-07 bob")
    assert out.results[0].message.startswith("your two chips need two different start fields")
    out = t.mail(st, "bob", "JOIN bob 01-07 01-08 bob")
    assert "exactly 2 letters or digits" in out.results[0].message
    out = t.mail(st, "bob", "JOIN bo 01-07 01-08")
    assert out.results[0].message.startswith("the alias is missing")


def test_start_field_with_two_players_is_refused(t):
    st = t.position({"v": {"chips": ["01-05", "20-20"]}, "w": {"chips": ["01-05", "21-21"]}})
    out = t.mail(st, "bob", "JOIN bo 01-05 25-11 bob")
    assert not out.results[0].ok
    assert out.results[0].message.startswith("start field 01-05 already holds chips of two players")
    out = t.mail(st, "bob", "JOIN bo 01-06 25-11 bob")
    assert out.results[0].ok


def test_joiners_are_placed_after_the_moves_in_join_order(t):
    st = t.position({"v": {"chips": ["02-05", "20-20"], "an": 1, "pn": 10, "capital": 2000}})
    st = t.mail(st, "bob", "JOIN bo 01-05 25-11 bob").state
    st = t.mail(st, "cid", "JOIN ci 01-05 25-12 cid").state
    st = t.mail(st, "dan", "JOIN da 01-05 25-13 dan").state
    # v moves onto 01-05 before anyone is placed: no encounter
    st = t.orders(st, v=["02-05 -> 01-05", "20-20 -> 21-20"])
    out = t.week(st)
    s = out.state
    assert s["players"]["bob"]["chips"] == ["01-05", "25-11"]
    # 01-05 now holds v and bob: cid cannot be placed there, nor dan
    assert s["players"]["cid"]["chips"] is None and s["players"]["dan"]["chips"] is None
    assert [s["players"][h]["capital"] for h in ("v", "bob")] == [2000, 10000]
    text = t.text(out.notices[0].data)
    assert "03 ci cid: start field 01-05 already holds chips of two players" in text
    # cid may send JOIN again
    out = t.mail(s, "cid", "JOIN ci 01-06 25-12 cid")
    assert out.results[0].ok and "your join is changed" in out.results[0].message


def test_pending_player_cannot_send_orders_but_can_withdraw(t):
    st = t.mail(new(t), "alice", "JOIN bd 01-05 25-10 blue dragon").state
    out = t.mail(st, "alice", "01-05 -> 02-05", "25-10 -> 24-10")
    assert not out.results[0].ok and "your chips are placed at the update of week 1" in out.results[0].message
    out = t.mail(st, "alice", "LEAVE")
    assert out.results[0].ok and out.left == ["alice"] and out.state["players"] == {}


def test_placed_player_cannot_join_again(t):
    st = t.position({"a": {"abbr": "bd", "alias": "blue dragon", "chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "JOIN xx 01-05 25-10 x")
    assert not out.results[0].ok and out.results[0].message == "you are already in the game as bd (blue dragon)"


# -- leaving -------------------------------------------------------------------------------

def test_leave_removes_chips_fields_and_money(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}, "b": {"chips": ["06-06", "21-21"]}},
                    owners={"07-07": "a", "08-08": "b"}, businesses={"07-07": "poles"}, bank=100)
    out = t.mail(st, "a", "LEAVE")
    assert out.results[0].ok and out.orders == {"a": ["LEAVE"]}
    out = t.week(out.state)
    s = out.state
    assert list(s["players"]) == ["b"] and out.left == ["a"]
    assert s["owners"] == {"08-08": "b"} and s["businesses"] == {} and s["bank"] == 100
    assert "05-05" not in [f for p in s["players"].values() for f in p["chips"]]
    assert "LEFT THE GAME:\n01 aa a" in t.text(out.notices[0].data)


def test_leave_must_be_alone(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "LEAVE", "05-05 -> 05-06", "20-20 -> 21-20")
    assert not out.results[0].ok and out.results[0].message == "LEAVE must be the only order of the mail"


# -- order sets ------------------------------------------------------------------------------

def test_new_order_mail_replaces_the_held_set(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "05-05 -> 05-06", "20-20 -> 21-20")
    assert out.orders == {"a": ["05-05 -> 05-06", "20-20 -> 21-20"]}
    out = t.mail(out.state, "a", "05-5 -> 04-5", "20-20 -> 20-19")
    assert out.orders == {"a": ["05-05 -> 04-05", "20-20 -> 20-19"]}
    out = t.week(out.state)
    assert out.state["players"]["a"]["chips"] == ["04-05", "20-15"]


def test_mail_with_a_refused_line_keeps_the_previous_set(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    st = t.mail(st, "a", "05-05 -> 05-06", "20-20 -> 21-20").state
    out = t.mail(st, "a", "05-05 -> 04-05", "20-20 -> 20-19", "F 05-05 x -> l")
    assert [r.ok for r in out.results] == [False, False, False]
    assert out.results[0].message == "valid, but not taken: line 3 of this mail was refused"
    assert out.results[2].message == "expected F <field of your chip> <u|r|d|l> -> <u|r|d|l>, e.g. F 15-04 u -> l"
    assert out.orders == {"a": ["05-05 -> 05-06", "20-20 -> 21-20"]}
    assert out.sections[0].title == "Orders not changed"
    assert "your previous orders stay in force" in flat(out.sections[0].text)
    assert out.state["orders"]["a"] == ["05-05 -> 05-06", "20-20 -> 21-20"]


def test_cancel(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    st = t.mail(st, "a", "05-05 -> 05-06", "20-20 -> 21-20").state
    out = t.mail(st, "a", "cancel")
    assert out.results[0].ok and out.orders == {"a": []} and "a" not in out.state["orders"]
    assert RULES.waiting_for(out.state) == ["a"]


def test_two_move_blocks_without_mt_are_refused(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "05-05 -> 05-06", "20-20 -> 21-20", "05-06 -> 05-07")
    assert not out.results[2].ok and "send USE MT before a second move" in out.results[2].message


def test_preanalysis(t):
    st = t.position({
        "a": {"abbr": "bd", "chips": ["08-13", "13-09"], "an": 49, "pn": 91},
        "b": {"abbr": "ir", "chips": ["09-23", "13-13"], "an": 52, "pn": 95},
        "c": {"abbr": "mb", "chips": ["01-01", "25-25"], "pn": 12},
    })
    out = t.mail(st, "a", "08-13 -> 08-12", "13-09 -> 16-09")
    assert out.results[0].message == "accepted; now: chip 1 moves left to 08-12 (number 3)"
    assert out.results[1].message == "accepted; now: chip 2 moves 3 down to 16-09 (number 2)"
    pre = out.sections[0]
    assert pre.title == "Pre-analysis"
    assert all(len(line) <= 78 for line in pre.text.splitlines())
    pre.text = flat(pre.text)
    assert "Your chips would end on 08-12 and 16-09: MN 13, AN 62, PN 96, capital 10000 WCU." in pre.text
    assert "players with a higher PN move first this week" in pre.text
    assert "Before you (1): ir (PN 95)." in pre.text
    # the state itself is unchanged apart from the held orders
    assert out.state["players"]["a"]["chips"] == ["08-13", "13-09"]


def test_preanalysis_shows_stop_and_encounter(t):
    st = t.position({
        "a": {"chips": ["10-02", "20-20"], "an": 31, "pn": 90, "capital": 1000},
        "v": {"abbr": "vv", "chips": ["10-03", "03-03"], "pn": 10, "capital": 3100},
    })
    out = t.mail(st, "a", "10-02 -> 10-03", "20-20 -> 20-21")
    text = flat(out.sections[0].text)
    assert "encounter on 10-03 with vv (v), AN 45: aa gets an MT (move twice) card" in text
    assert "with PN 90 nobody moves before you" in text
    out = t.mail(st, "a", "10-02 -> 10-03", "20-20 -> 20-19")
    assert "chip 2 moves 4 left to 20-16" in out.results[1].message
    st2 = t.position({"a": {"chips": ["05-05", "10-10"]}})
    out = t.mail(st2, "a", "05-05 -> 05-06", "10-10 -> 10-11")
    assert out.results[1].message == "accepted; now: chip 2 moves 3 right (fence after 3 of 6) to 10-13 (number 3)"


# -- authentication -----------------------------------------------------------------------------

def test_unregistered_and_unauthenticated(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    cmds = RULES.parse([Line(1, "05-05 -> 05-06"), Line(2, "20-20 -> 21-20")])
    ctx = t.ctx()
    ctx.actor = Actor(None, "stranger@example.org", False)
    out = RULES.apply(st, cmds, ctx)
    assert [r.ok for r in out.results] == [False, False]
    assert "register first by mailing 'register HANDLE PASSWORD'" in out.results[0].message
    out = t.mail(st, "a", "05-05 -> 05-06", "20-20 -> 21-20", authenticated=False)
    assert out.results[0].message.startswith("this needs your password")
    assert "a" not in out.state["orders"]


def test_gm_commands(t):
    st = t.position({"a": {"abbr": "bd", "chips": ["05-05", "20-20"], "capital": 300}})
    out = t.mail(st, "a", "GM CARD bd MT 2")
    assert not out.results[0].ok and out.audit == []
    out = t.mail(st, None, "GM CARD bd MT 2", "GM CARD bd SM", "GM KIOSK 3000", "GM BANK -700",
                 "GM CAPITAL bd +200", "GM OWN 07-07 bd", "GM BUSINESS 07-07 Fence Vaulting Poles", gm=True)
    assert all(r.ok for r in out.results), [r.message for r in out.results]
    s = out.state
    assert s["players"]["a"]["cards"] == {"MT": 2, "SM": 1}
    assert (s["kiosk"], s["bank"], s["players"]["a"]["capital"]) == (3000, -700, 500)
    assert s["owners"] == {"07-07": "a"} and s["businesses"] == {"07-07": "Fence Vaulting Poles"}
    assert len(out.audit) == 7
    assert out.audit[0] == "rmpm world week 1: GM CARD bd MT 2: bd now holds 2 MT"
    out = t.mail(s, None, "GM CAPITAL bd -501", "GM BUSINESS 09-09 x", "GM CARD zz MT", "GM OWN 13-13 bd", gm=True)
    assert [r.ok for r in out.results] == [False] * 4
    assert out.results[0].message == "capital cannot go below 0: bd has 500 WCU"
    assert out.results[1].message.startswith("nobody owns 09-09")
    assert out.results[2].message == "no player with the abbreviation 'zz'"
    assert out.results[3].message == "the parking 13-13 cannot be owned"
    assert out.audit == []


# -- import / export / board file ----------------------------------------------------------------

def test_export_import_round_trip(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    st = t.orders(st, a=["05-05 -> 05-06", "20-20 -> 21-20"])
    st = t.week(st).state
    again = RULES.import_state(RULES.export_state(st))
    assert again == st


@pytest.mark.parametrize("doc,msg", [
    ({"players": {"a": {"abbr": "abc", "chips": ["05-05", "20-20"]}}}, "players.a.abbr"),
    ({"players": {"a": {"abbr": "aa", "chips": ["05-05", "30-20"]}}}, "players.a.chips"),
    ({"players": {"a": {"abbr": "aa", "chips": ["05-05", "20-20"]},
                  "b": {"abbr": "AA", "chips": ["06-05", "21-20"]}}}, "'aa' is used twice"),
    ({"players": {h: {"abbr": h * 2, "chips": ["05-05", f"2{i}-20"]} for i, h in enumerate("abc")}},
     "05-05 would hold chips of more than two players"),
    ({"players": {"a": {"abbr": "aa", "chips": ["05-05", "20-20"], "an": 0}}}, "players.a.an"),
    ({"numbers": ["2" * 25] * 24}, "numbers: expected 25 rows"),
    ({"fences": ["01-25 r"]}, "fences: bad entry"),
    ({"owners": {"05-05": "nobody"}}, "not a player"),
    ({"format": "chess/1"}, "format"),
])
def test_import_rejects_bad_documents(doc, msg):
    with pytest.raises(GameError) as err:
        RULES.import_state(doc)
    assert msg in str(err.value)


def test_board_file_option(t):
    text = "# a flat board\n" + "\n".join(["3 " * 25] * 25) + "\nFENCE 05-05 r\nFENCE 05-05 u\n"
    st = new(t, board=text, capital="5000")
    assert st["numbers"][0] == "3" * 25 and sorted(st["fences"]) == ["04-05 d", "05-05 r"]
    st = t.mail(st, "a", "JOIN aa 01-01 25-25 a").state
    assert t.week(st).state["players"]["a"]["capital"] == 5000
    assert new(t, board="NO FENCES")["fences"] == []
    with pytest.raises(ValueError, match="line 2"):
        parse_board_file("FENCE 05-05 r\nFENCE 01-01 u\n")
    with pytest.raises(GameError, match="number row needs 25 digits"):
        new(t, board="2345\n")
    opt = {o.name: o for o in RULES.options}["board"]
    with pytest.raises(ValueError):
        opt.parse("hello")


# -- views, notices ------------------------------------------------------------------------------

def test_report_notice_and_view(t):
    st = t.position({"a": {"abbr": "bd", "alias": "blue dragon", "chips": ["05-05", "20-20"]}})
    view = RULES.view(st, None)
    assert view[0].template == "report.txt"
    assert "No weekly update has been made yet." in t.text(view[0].data)
    st = t.orders(st, a=["05-05 -> 05-06", "20-20 -> 21-20"])
    view = RULES.view(st, "a")
    assert view[1].text == "05-05 -> 05-06\n20-20 -> 21-20"
    assert len(RULES.view(st, None)) == 1  # nobody else sees a's orders
    out = t.week(st)
    n = out.notices[0]
    assert n.to == [ALL_PLAYERS] and n.kind == "report" and n.template == "report.txt"
    assert out.turn_done and n.subject == "world: report of week 1"
    assert t.text(RULES.view(out.state, None)[0].data) == t.text(n.data)
    text = t.text(n.data)
    assert t.server_text(n.data) == text  # trim_blocks / lstrip_blocks make no difference
    assert all(len(line) <= 79 for line in text.splitlines())
    assert "BLUE DRAGON IS CHAMPION OF THE WEEK. CONGRATULATIONS !" in text
    assert "Bank: 0 wcu" in text and "Kiosk: 0 wcu" in text
    board = n.data["board"].splitlines()
    assert board[2 + 4 * 3 + 1][16:18] == "bd"  # the alias under 05-06


def test_report_html_grid(t):
    st = t.position({"a": {"abbr": "bd", "chips": ["05-05", "20-20"]},
                     "b": {"abbr": "ir", "chips": ["05-05", "21-21"]}}, owners={"07-07": "a"})
    out = t.week(st)
    html = t.html(out.notices[0].data)
    assert len(re.findall(r'title="\d\d-\d\d number', html)) == 625
    assert 'title="05-05 number 6, chips: bd ir"' in html
    assert 'title="07-07 number 4, owned by bd"' in html
    assert len(re.findall(r'<td class="[a-z ]*\bfr\b', html)) == 25  # the wall
    assert "A AND B ARE CHAMPIONS OF THE WEEK" in html


def test_hint_for_unknown_lines(t):
    cmds = RULES.parse([Line(1, "MOVE 16-04 16-05")])
    assert cmds[0].error.startswith("unknown command 'MOVE'; expected a move line like 16-04 -> 16-05")


def test_help_text_mentions_every_order():
    h = RULES.help_text()
    for word in ("JOIN", "F 15-04 u -> l", "E 16-03 <-> 16-05", "BUY", "USE MT", "LEAVE", "CANCEL"):
        assert word in h


@settings(max_examples=300, deadline=None)
@given(st_.lists(st_.text(max_size=60), max_size=8))
def test_parse_never_raises(texts):
    lines = [Line(i + 1, x) for i, x in enumerate(texts)]
    cmds = RULES.parse(lines)
    assert len(cmds) == len(lines)
    assert all(c.line is ln for c, ln in zip(cmds, lines, strict=True))


APPLY_STATE = RULES.import_state({"players": {
    "a": {"abbr": "aa", "alias": "a", "chips": ["05-05", "20-20"], "cards": {"MT": 1}},
    "b": {"abbr": "bb", "alias": "b", "chips": ["05-06", "13-13"]},
}})


@settings(max_examples=200, deadline=None)
@given(st_.lists(st_.sampled_from([
    "05-05 -> 05-06", "20-20 -> 21-20", "F 05-05 u -> l", "E 05-04 <-> 05-06", "BUY", "USE MT",
    "LEAVE", "CANCEL", "JOIN xx 01-01 25-25 x", "05-6 -> 04-6", "hello", "GM KIOSK 5", "05-06 -> 05-07",
]), max_size=6), st_.sampled_from(["a", "b", "c"]))
def test_apply_one_result_per_line_and_week_runs(texts, who):
    import copy
    import random
    from datetime import datetime

    from games.base import Context
    ctx = Context(now=datetime(2026, 1, 3, tzinfo=UTC), rng=random.Random(1),
                  actor=Actor(who, f"{who}@example.org", True))
    before = copy.deepcopy(APPLY_STATE)
    out = RULES.apply(copy.deepcopy(APPLY_STATE), RULES.parse([Line(i + 1, x) for i, x in enumerate(texts)]), ctx)
    assert len(out.results) == len(texts)
    assert APPLY_STATE == before
    if not any(r.ok for r in out.results):
        assert out.state["orders"] == before["orders"] and out.state["players"] == before["players"]
    week = RULES.run_turn(out.state, ctx)
    assert week.turn_done and RULES.import_state(week.state) == week.state


def test_empty_game_week_and_leave_then_cancel(t):
    out = t.week(new(t))
    text = t.server_text(out.notices[0].data)
    assert "(nobody was on the board)" in text and "CHAMPION" not in text
    st = t.position({"a": {"chips": ["05-05", "20-20"]}, "b": {"chips": ["06-06", "21-21"]}})
    st = t.mail(st, "a", "LEAVE").state
    out = t.mail(st, "a", "CANCEL")
    assert out.results[0].ok and out.orders == {"a": []}
    out = t.week(out.state)
    assert list(out.state["players"]) == ["a", "b"] and out.left == []


def test_only_fence_and_exchange_orders_give_mn_0(t):
    st = t.position({"a": {"chips": ["05-13", "20-20"], "an": 7, "pn": 10}})
    out = t.week(t.orders(st, a=["F 05-13 r -> u", "E 05-12 <-> 05-14"]))
    a = out.state["players"]["a"]
    assert (a["an"], a["pn"], a["chips"]) == (7, 10, ["05-13", "20-20"])
    assert t.row(t.text(out.notices[0].data), "01").endswith(" 0 7 10")
    assert "04-13 d" in out.state["fences"] and "05-13 r" not in out.state["fences"]


def test_week_follows_the_servers_turn_counter(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}}, week=12)
    ctx = t.ctx()
    ctx.turn = 3
    out = RULES.run_turn(st, ctx)
    assert out.notices[0].subject == "world: report of week 3"
    assert out.state["week"] == 4
    assert "THE BOARD AFTER THE UPDATE OF WEEK 3" in t.text(RULES.view(out.state, None)[0].data)


@pytest.mark.parametrize("line,name,text", [
    ("16-4 -> 16-5", "move", "16-04 -> 16-05"),
    ("16-04-->16-05", "move", "16-04 -> 16-05"),
    ("22-7 -> 26-7", "move", "22-07 -> 26-07"),
    ("f 15-4 [u] -> [l]", "fence", "F 15-04 u -> l"),
    ("F 15-04 up -> Left", "fence", "F 15-04 u -> l"),
    ("e 16-3 <-> 16-5", "exchange", "E 16-03 <-> 16-05"),
    ("buy 16-9", "buy", "BUY 16-09"),
    ("Use Mt", "use_mt", "USE MT"),
    ("join BD 1-5 25-10 Blue  Dragon", "join", "JOIN bd 01-05 25-10 Blue Dragon"),
])
def test_parse_variants(line, name, text):
    c = RULES.parse([Line(1, line)])[0]
    assert (c.ok, c.name, c.text) == (True, name, text)


@pytest.mark.parametrize("line,message", [
    ("26-04 -> 25-04", "the chip's field 26-04 is off the board (rows and columns run 01 to 25)"),
    ("F 15-04 u -> u", "the fence would stay on the up side; give two different sides, e.g. F 15-04 u -> l"),
    ("F 15-04 x -> l", "expected F <field of your chip> <u|r|d|l> -> <u|r|d|l>, e.g. F 15-04 u -> l"),
    ("E 16-03 <-> 16-04", ("16-03 and 16-04 are not the two opposite neighbours of one field; "
                           "e.g. E 16-03 <-> 16-05 (around a chip on 16-04)")),
    ("BUY now", "expected BUY or BUY <field>, e.g. BUY 16-09"),
    ("USE SM", "expected USE MT (only the MT card can be played by mail)"),
    ("GM CARD bd XX", "expected GM CARD <abbr> <MT|SM|RM|DM> [n], e.g. GM CARD bd MT 2 (n may be negative)"),
])
def test_parse_errors_say_what_would_be_accepted(line, message):
    c = RULES.parse([Line(1, line)])[0]
    assert c.error == message
