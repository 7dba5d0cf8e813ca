"""Moving: the sample moves table, chip 1 / chip 2, fences, edge, refused
landings, exchanges, fence turns, MN/AN/PN and their wrap, order of play."""

from __future__ import annotations

import pytest

from games.rmpm.board import SIZE, Board, default_number

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

# -- the board ------------------------------------------------------------------

def test_default_numbers_reproduce_the_sample_board():
    b = Board.default()
    assert [b.number((1, c)) for c in range(1, 26)] == [2] * 25
    assert [b.number((2, c)) for c in range(1, 26)] == [2] + [3] * 23 + [2]
    assert [b.number((5, c)) for c in range(1, 8)] == [2, 3, 4, 5, 6, 6, 6]
    assert [b.number((9, c)) for c in (1, 5, 9, 12, 18, 21, 25)] == [2, 6, 2, 2, 3, 6, 2]
    assert b.number((13, 13)) == 6
    assert default_number(8, 12) == 3 and default_number(16, 9) == 2


def test_default_wall_between_columns_13_and_14():
    b = Board.default()
    for r in range(1, SIZE + 1):
        assert b.fence_at((r, 13), "r") and b.fence_at((r, 14), "l")
    assert len(b.fences) == 25
    assert b.blocked((1, 1), "u") == "edge" and b.blocked((5, 13), "r") == "fence"
    assert b.blocked((5, 12), "r") is None


# -- the sample moves table ------------------------------------------------------------

SAMPLE = {
    "daleus": {"number": 1, "abbr": "dp", "alias": "daleus", "chips": ["07-06", "09-25"], "an": 4, "pn": 62},
    "dragon": {"number": 3, "abbr": "bd", "alias": "blue dragon", "chips": ["08-13", "13-09"], "an": 49, "pn": 91},
    "hagbard": {"number": 29, "abbr": "hc", "alias": "hagbard celine", "chips": ["18-19", "16-13"], "an": 82, "pn": 2},
    "mibo": {"number": 37, "abbr": "mb", "alias": "mibo", "chips": ["24-09", "13-13"], "an": 3, "pn": 63},
    "irata": {"number": 39, "abbr": "ir", "alias": "Irata", "chips": ["09-23", "13-13"], "an": 52, "pn": 42},
}


def test_sample_moves_table(t):
    st = t.position(SAMPLE)
    st = t.orders(st, dragon=["08-13 -> 08-12", "13-09 -> 16-09"],
                  hagbard=["18-19 -> 18-18", "16-13 -> 13-13"],
                  mibo=["24-09 -> 23-09", "13-13 -> 13-09"])
    out = t.week(st)
    text = t.text(out.notices[0].data)
    assert t.row(text, "03") == "03 bd blue dragon 08-13 13-09 08-12 16-09 13 62 96"
    assert t.row(text, "29") == "29 hc hagbard celine 18-19 16-13 18-18 13-13 11 93 11"
    assert t.row(text, "37") == "37 mb mibo 24-09 13-13 23-09 13-09 15 18 69"
    # players without orders: MN "-", AN and PN kept
    assert t.row(text, "01") == "01 dp daleus 07-06 09-25 07-06 09-25 - 4 62"
    assert t.row(text, "39") == "39 ir Irata 09-23 13-13 09-23 13-13 - 52 42"
    bd = out.state["players"]["dragon"]
    assert (bd["an"], bd["pn"], bd["chips"]) == (62, 96, ["08-12", "16-09"])


# -- chip 2: distance, "as far as possible", the edge ----------------------------------

def test_chip2_distance_is_number_of_chip1_landing_field(t):
    st = t.position({"a": {"chips": ["05-05", "10-10"], "an": 1, "pn": 10}})
    # chip 1 to 05-06 (number 6): chip 2 moves 6 down from 10-10 to 16-10
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "10-10 -> 11-10"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-06", "16-10"]
    # MN = right 1 + (6-1)*4 + down 2 = 23; PN += 6 + number(16-10)=3
    assert a["an"] == 24 and a["pn"] == 19


def test_fence_stops_chip2_early(t):
    # the wall between columns 13 and 14 stops chip 2 at column 13
    st = t.position({"a": {"chips": ["05-05", "10-10"], "an": 1, "pn": 10}})
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "10-10 -> 10-11"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-06", "10-13"]  # 3 of 6 fields
    assert a["an"] == 1 + 1 + (3 - 1) * 4 + 1  # 11
    text = t.text(out.notices[0].data)
    assert "10" in t.row(text, "01").split()[-3]


def test_edge_stops_chip2(t):
    st = t.position({"a": {"chips": ["05-05", "03-20"], "an": 1, "pn": 10}})
    # chip 2 must move 6 up from row 3: only 2 fields to the edge
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "03-20 -> 02-20"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-06", "01-20"]
    assert a["an"] == 1 + 1 + (2 - 1) * 4 + 0  # 6
    assert a["pn"] == 10 + 6 + 2


def test_chip2_next_to_fence_does_not_move(t):
    st = t.position({"a": {"chips": ["05-05", "10-13"], "an": 7, "pn": 10}})
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "10-13 -> 10-14"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-06", "10-13"]
    assert a["an"] == 8 and a["pn"] == 16  # chip 1 only: MN 1, PN + 6
    assert "cannot move right: the fence is right next to it" in t.text(out.notices[0].data)


def test_fence_blocks_chip1_and_then_chip2_stays(t):
    st = t.position({"a": {"chips": ["05-13", "20-20"], "an": 7, "pn": 10}})
    out = t.week(t.orders(st, a=["05-13 -> 05-14", "20-20 -> 21-20"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-13", "20-20"] and a["an"] == 7 and a["pn"] == 10
    text = t.text(out.notices[0].data)
    assert t.row(text, "01").endswith(" 0 7 10")
    assert "a fence stands between 05-13 and 05-14" in text


def test_chip1_off_the_board_is_refused_at_once(t):
    st = t.position({"a": {"chips": ["01-05", "20-20"]}})
    out = t.mail(st, "a", "01-05 -> 00-05", "20-20 -> 21-20")
    assert not out.results[0].ok and "leaves the board" in out.results[0].message


def test_ambiguous_move_is_refused(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "05-05 -> 06-06", "20-20 -> 21-20")
    assert not out.results[0].ok
    assert out.results[0].message.startswith("ambiguous move 05-05 -> 06-06")


def test_chip1_must_move_exactly_one_field(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "05-05 -> 05-07", "20-20 -> 21-20")
    assert not out.results[0].ok
    assert out.results[0].message == "chip 1 moves exactly one field up, down, left or right, not 05-05 -> 05-07"


def test_second_line_must_be_the_other_chip(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"]}})
    out = t.mail(st, "a", "05-05 -> 05-06", "20-21 -> 21-21")
    assert not out.results[1].ok and out.results[1].message == "chip 2 must be your other chip, on 20-20"
    out = t.mail(st, "a", "06-05 -> 05-05", "20-20 -> 21-20")
    assert out.results[0].message == "no chip of yours on 06-05; your chips are on 05-05 and 20-20"


def test_either_chip_can_be_chip1(t):
    st = t.position({"a": {"chips": ["05-05", "20-20"], "an": 1, "pn": 10}})
    out = t.week(t.orders(st, a=["20-20 -> 20-19", "05-05 -> 04-05"]))
    # 20-19 has number 5: chip 2 moves up 5 from 05-05 -> stops at the edge after 4
    assert out.state["players"]["a"]["chips"] == ["01-05", "20-19"]


# -- refused landings -------------------------------------------------------------

def test_passing_over_own_chip_is_fine(t):
    st = t.position({"a": {"chips": ["05-05", "05-07"], "an": 1, "pn": 10}})
    # chip 2 moves left 6 from 05-07: passes over chip 1 on 05-06, stops at the edge
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "05-07 -> 05-06"]))
    assert out.state["players"]["a"]["chips"] == ["05-06", "05-01"]


def test_chip1_landing_on_own_other_chip_is_refused(t):
    st = t.position({"a": {"chips": ["05-05", "05-06"], "an": 1, "pn": 10}})
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "05-06 -> 06-06"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-05", "05-06"] and a["an"] == 1 and a["pn"] == 10
    assert "05-06 holds your other chip" in t.text(out.notices[0].data)


def test_chip2_landing_on_chip1_is_refused(t):
    # chip 1 to 05-08 (6); chip 2 at 05-14?  use rows: chip 2 at 11-08 moves up 6 -> 05-08
    st = t.position({"a": {"chips": ["05-07", "11-08"], "an": 1, "pn": 10}})
    out = t.week(t.orders(st, a=["05-07 -> 05-08", "11-08 -> 10-08"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-08", "11-08"]
    assert a["an"] == 2 and a["pn"] == 16  # only chip 1 counted
    assert "chip 2 would land on 05-08, but 05-08 holds your other chip" in t.text(out.notices[0].data)


def test_field_with_two_other_players_is_blocked(t):
    st = t.position({
        "a": {"chips": ["05-05", "20-20"], "an": 1, "pn": 90},
        "v": {"chips": ["05-06", "21-21"], "pn": 10},
        "w": {"chips": ["05-06", "22-22"], "pn": 11},
    })
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "20-20 -> 21-20"]))
    assert out.state["players"]["a"]["chips"] == ["05-05", "20-20"]
    assert "05-06 already holds chips of two players" in t.text(out.notices[0].data)


def test_parking_takes_any_number_and_no_encounter(t):
    st = t.position({
        "a": {"chips": ["13-12", "20-20"], "an": 1, "pn": 90, "capital": 100},
        "v": {"chips": ["13-13", "21-21"], "pn": 10, "capital": 5000},
        "w": {"chips": ["13-13", "22-22"], "pn": 11, "capital": 5000},
    })
    out = t.week(t.orders(st, a=["13-12 -> 13-13", "20-20 -> 19-20"]))
    a = out.state["players"]["a"]
    assert a["chips"][0] == "13-13"
    assert [out.state["players"][h]["capital"] for h in "avw"] == [100, 5000, 5000]
    assert "**" in out.notices[0].data["board"].splitlines()[2 + 12 * 3 + 1]


def test_both_chips_may_share_the_parking(t):
    st = t.position({"a": {"chips": ["13-12", "07-13"], "an": 1, "pn": 10}})
    # 13-13 has number 6: chip 2 goes 6 down from 07-13 to 13-13
    out = t.week(t.orders(st, a=["13-12 -> 13-13", "07-13 -> 08-13"]))
    assert out.state["players"]["a"]["chips"] == ["13-13", "13-13"]


# -- fences and exchanges -------------------------------------------------------------

def test_turning_a_fence_opens_the_way(t):
    st = t.position({"a": {"chips": ["05-13", "20-05"], "an": 1, "pn": 10}})
    out = t.week(t.orders(st, a=["F 05-13 r -> d", "05-13 -> 05-14", "20-05 -> 20-06"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-14", "20-11"]  # 05-14 has number 6
    assert "05-13 r" not in out.state["fences"] and "05-13 d" in out.state["fences"]
    board = out.notices[0].data["board"].splitlines()
    row5 = board[2 + 4 * 3]
    assert row5[39] == "|"  # no fence right of 05-13 any more
    assert board[2 + 4 * 3 + 2][37:40] == "+++"  # ++ under 05-13 and the wall joint


def test_fence_turn_needs_a_fence_there(t):
    st = t.position({"a": {"chips": ["05-05", "20-05"], "an": 1, "pn": 10}})
    out = t.mail(st, "a", "F 05-05 u -> l", "05-05 -> 05-06", "20-05 -> 20-06")
    assert out.results[0].ok
    assert "no fence on the up side of 05-05" in out.results[0].message
    out = t.mail(st, "a", "F 06-05 u -> l")
    assert not out.results[0].ok and "no chip of yours on 06-05" in out.results[0].message


def test_exchange_changes_chip2_distance(t):
    base = {"a": {"chips": ["05-05", "10-20"], "an": 1, "pn": 10}}
    # without exchange: chip 1 to 05-06 (6), chip 2 moves 6 down: 16-20
    out = t.week(t.orders(t.position(base), a=["05-05 -> 05-06", "10-20 -> 11-20"]))
    assert out.state["players"]["a"]["chips"] == ["05-06", "16-20"]
    # E 05-04 <-> 05-06 around chip 05-05 puts 5 on 05-06: chip 2 moves 5
    out = t.week(t.orders(t.position(base), a=["E 05-04 <-> 05-06", "05-05 -> 05-06", "10-20 -> 11-20"]))
    a = out.state["players"]["a"]
    assert a["chips"] == ["05-06", "15-20"]
    assert out.state["numbers"][4][3:6] == "665"  # 05-04 now 6, 05-06 now 5
    assert a["an"] == 1 + 1 + (5 - 1) * 4 + 2 and a["pn"] == 10 + 5 + 5


def test_exchange_must_be_around_own_chip(t):
    st = t.position({"a": {"chips": ["05-05", "20-05"]}})
    out = t.mail(st, "a", "E 06-04 <-> 06-06")
    assert not out.results[0].ok
    assert "not the opposite neighbours of one of your chips" in out.results[0].message
    out = t.mail(st, "a", "E 05-04 <-> 05-07")
    assert not out.results[0].ok and "not the two opposite neighbours" in out.results[0].message


# -- AN / PN wrap ------------------------------------------------------------------------

def test_an_and_pn_wrap_past_100(t):
    st = t.position({"a": {"chips": ["05-05", "10-10"], "an": 95, "pn": 98}})
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "10-10 -> 11-10"]))
    a = out.state["players"]["a"]
    assert a["an"] == 95 + 23 - 100 and a["pn"] == 98 + 6 + 3 - 100


def test_an_reaching_exactly_100_stays_100(t):
    st = t.position({"a": {"chips": ["05-05", "10-10"], "an": 77, "pn": 91}})
    out = t.week(t.orders(st, a=["05-05 -> 05-06", "10-10 -> 11-10"]))
    a = out.state["players"]["a"]
    assert a["an"] == 100 and a["pn"] == 100


# -- order of play -------------------------------------------------------------------------

def order_game(t, pn_b, pn_c):
    st = t.position({
        "v": {"chips": ["05-06", "22-22"], "pn": 5},
        "b": {"chips": ["05-05", "20-05"], "pn": pn_b, "an": 1},
        "c": {"chips": ["05-07", "20-20"], "pn": pn_c, "an": 1},
    })
    return t.week(t.orders(st, b=["05-05 -> 05-06", "20-05 -> 21-05"],
                           c=["05-07 -> 05-06", "20-20 -> 21-20"]))


def test_order_of_play_decides_who_gets_the_field(t):
    out = order_game(t, pn_b=80, pn_c=40)
    assert out.state["players"]["b"]["chips"][0] == "05-06"
    assert out.state["players"]["c"]["chips"][0] == "05-07"
    out = order_game(t, pn_b=40, pn_c=80)
    assert out.state["players"]["b"]["chips"][0] == "05-05"
    assert out.state["players"]["c"]["chips"][0] == "05-06"


def test_equal_pn_older_player_first(t):
    out = order_game(t, pn_b=50, pn_c=50)  # b joined before c (number 2 < 3)
    assert out.state["players"]["b"]["chips"][0] == "05-06"
    assert out.state["players"]["c"]["chips"][0] == "05-07"


def test_order_fixed_at_start_of_update(t):
    # b moves first (PN 60) and its PN drops below c's: c still moves after b
    st = t.position({
        "b": {"chips": ["05-05", "20-05"], "pn": 60},
        "c": {"chips": ["05-07", "20-20"], "pn": 59},
    })
    out = t.week(t.orders(st, b=["05-05 -> 05-06", "20-05 -> 21-05"],
                          c=["05-07 -> 05-06", "20-20 -> 21-20"]))
    # b got there first, so c's chip 1 makes an encounter with b there
    assert out.state["players"]["c"]["chips"][0] == "05-06"
    assert "encounter on 05-06 with b" in t.text(out.notices[0].data)
