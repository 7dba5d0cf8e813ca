"""The Giveaway engine, played through RULES.parse / apply / run_turn."""

from __future__ import annotations

from datetime import UTC

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.base import ALL_PLAYERS, NO_PASSWORD, GameError, Line
from games.giveaway import RULES
from games.giveaway.state import load
from tests.games.driver import check_commands
from tests.games.giveaway.helpers import Table, ctx, lines, report_text, scores

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


def give_all(table: Table, orders: dict[str, list[str]]) -> None:
    for handle, gifts in orders.items():
        out = table.send(handle, *gifts)
        assert all(r.ok for r in out.results), [r.message for r in out.results]


# -- rings -------------------------------------------------------------------------
def test_seed_rule6_example_ring_ab_valid_and_no_ring_abc():
    t = Table("Alice", "Bob", "Carol")
    t.holdings(Alice=1, Bob=2, Carol=1)
    give_all(t, {"Alice": ["GIVE 1 TO Bob"], "Bob": ["GIVE 1 TO Alice", "GIVE 1 TO Carol"], "Carol": ["GIVE 1 TO Alice"]})
    out = t.run()
    assert scores(out) == {"Alice": 3, "Bob": 2, "Carol": 1}
    data = out.notices[0].data
    assert data["rings"] == ["Alice > Bob > Alice: 2 players passing 1 point, each receives 2 instead of 1", "    (+1)."]
    assert data["broken"] == ["Alice > Bob > Carol > Alice (1 point): broken by Bob gives 1 to Alice."]
    assert (t.holding("Alice"), t.holding("Bob"), t.holding("Carol")) == (6, 5, 4)


def test_three_player_ring_triples_the_gifts():
    t = Table("Alice", "Bob", "Carol")
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"]})
    out = t.run()
    assert scores(out) == {"Alice": 9, "Bob": 9, "Carol": 9}
    assert [t.holding(h) for h in ("Alice", "Bob", "Carol")] == [12, 12, 12]
    assert out.turn_done and not out.finished
    assert t.state["round"] == 2


def test_two_player_ring_beside_an_outsider():
    t = Table("Alice", "Bob", "Carol")
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Alice"], "Carol": ["GIVE 3 TO Alice"]})
    assert scores(t.run()) == {"Alice": 9, "Bob": 6, "Carol": 0}


def test_six_player_ring():
    names = ["Alice", "Bob", "Carol", "Dave", "Eve", "Fred"]
    t = Table(*names)
    give_all(t, {h: [f"GIVE 3 TO {names[(i + 1) % 6]}"] for i, h in enumerate(names)})
    out = t.run()
    assert scores(out) == {h: 18 for h in names}
    assert out.notices[0].data["rings"][0].startswith("Alice > Bob > Carol > Dave > Eve > Fred > Alice: 6 players")


def test_one_extra_gift_breaks_a_ring():
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.holdings(Alice=4)
    give_all(
        t,
        {
            "Alice": ["GIVE 3 TO Bob", "GIVE 1 TO Carol"],
            "Bob": ["GIVE 3 TO Carol"],
            "Carol": ["GIVE 3 TO Dave"],
            "Dave": ["GIVE 3 TO Alice"],
        },
    )
    out = t.run()
    assert scores(out) == {"Alice": 3, "Bob": 3, "Carol": 4, "Dave": 3}
    data = out.notices[0].data
    assert data["rings"] == []
    assert data["broken"] == ["Alice > Bob > Carol > Dave > Alice (3 points): broken by Alice gives 1 to", "    Carol."]


def test_two_rings_sharing_a_gift_each_pay_their_bonus():
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.holdings(Alice=1, Bob=2, Carol=1, Dave=1)
    give_all(
        t,
        {
            "Alice": ["GIVE 1 TO Bob"],
            "Bob": ["GIVE 1 TO Carol", "GIVE 1 TO Dave"],
            "Carol": ["GIVE 1 TO Alice"],
            "Dave": ["GIVE 1 TO Alice"],
        },
    )
    out = t.run()
    assert scores(out) == {"Alice": 6, "Bob": 5, "Carol": 3, "Dave": 3}
    rings = " ".join(out.notices[0].data["rings"])
    assert "Alice > Bob > Carol > Alice" in rings and "Alice > Bob > Dave > Alice" in rings


# -- no order ------------------------------------------------------------------------
def test_no_order_forfeits_the_holding():
    t = Table("Alice", "Bob", "Carol", "Dave")
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"]})
    assert RULES.waiting_for(t.state) == ["Dave"]
    out = t.run()
    assert scores(out) == {"Alice": 9, "Bob": 9, "Carol": 9, "Dave": 0}
    assert t.holding("Dave") == 3
    assert "Dave held 3, sent no order and forfeited all of it." in out.notices[0].data["ledger"]


def test_no_order_split_option_shares_evenly_and_forfeits_the_rest():
    t = Table("Alice", "Bob", "Carol", "Dave", no_order="split")
    t.holdings(Dave=7)
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"]})
    out = t.run()
    assert scores(out) == {"Alice": 11, "Bob": 11, "Carol": 11, "Dave": 0}
    ledger = "\n".join(out.notices[0].data["ledger"])
    assert "Dave held 7 and sent no order: it was split evenly among the others, 1\n    forfeited." in ledger
    assert "Received 3 from Carol; 2 from split holdings; ring bonus 6." in ledger


# -- the end of the game -----------------------------------------------------------------
def test_first_score_of_100_wins():
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.holdings(Alice=100, Bob=40)
    give_all(
        t,
        {"Alice": ["GIVE 100 TO Bob"], "Bob": ["GIVE 40 TO Carol"], "Carol": ["GIVE 3 TO Alice"], "Dave": ["GIVE 3 TO Alice"]},
    )
    out = t.run()
    assert scores(out) == {"Alice": 6, "Bob": 100, "Carol": 40, "Dave": 0}
    assert out.finished and out.turn_done
    assert out.notices[0].data["winner"] == "Bob"
    assert out.notices[0].subject == "gv: round 1 report - Bob wins"
    assert t.state["winner"] == "Bob" and t.state["status"] == "over"
    with pytest.raises(GameError, match="over"):
        RULES.run_turn(t.state, ctx(mail=False))
    refused = t.send("Alice", "GIVE 6 TO Bob")
    assert refused.results[0].message == "the game is over: no more orders"


def test_tied_top_scores_drop_out_and_the_highest_unique_score_wins():
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.holdings(Alice=100, Bob=100, Carol=50)
    give_all(
        t,
        {"Alice": ["GIVE 100 TO Bob"], "Bob": ["GIVE 100 TO Carol"], "Carol": ["GIVE 50 TO Dave"], "Dave": ["GIVE 3 TO Alice"]},
    )
    out = t.run()
    assert scores(out) == {"Alice": 3, "Bob": 100, "Carol": 100, "Dave": 50}
    assert out.finished and out.notices[0].data["winner"] == "Dave"
    assert "Dave wins the game with 50 points." in " ".join(out.notices[0].data["notes"])


def test_when_every_score_is_tied_another_round_is_played():
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.holdings(Alice=100, Bob=100, Carol=5, Dave=5)
    give_all(
        t,
        {"Alice": ["GIVE 100 TO Bob"], "Bob": ["GIVE 100 TO Alice"], "Carol": ["GIVE 5 TO Dave"], "Dave": ["GIVE 5 TO Carol"]},
    )
    out = t.run()
    assert scores(out) == {"Alice": 200, "Bob": 200, "Carol": 10, "Dave": 10}
    assert not out.finished and out.notices[0].data["winner"] is None
    assert t.state["status"] == "playing" and t.state["round"] == 2
    assert t.holding("Alice") == 203
    assert "another round is played" in " ".join(out.notices[0].data["notes"])


def test_round_limit_ends_the_game_with_the_highest_unique_score():
    t = Table("Alice", "Bob", "Carol", "Dave", round_limit="1")
    give_all(
        t,
        {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Dave"], "Dave": ["GIVE 3 TO Bob"]},
    )
    out = t.run()
    assert scores(out) == {"Alice": 0, "Bob": 12, "Carol": 9, "Dave": 9}  # ring Bob-Carol-Dave
    assert out.finished and out.notices[0].data["winner"] == "Bob"
    assert "The round limit (1) is reached: Bob wins with 12 points" in " ".join(out.notices[0].data["notes"])


def test_round_limit_with_every_score_tied_ends_without_a_winner():
    t = Table("Alice", "Bob", "Carol", "Dave", round_limit="2")
    for _ in range(2):
        r = t.state["round"]
        h = t.holding("Alice")
        give_all(t, {"Alice": [f"GIVE {h} TO Bob"], "Bob": [f"GIVE {h} TO Alice"], "Carol": [f"GIVE {h} TO Dave"], "Dave": [f"GIVE {h} TO Carol"]})
        out = t.run()
        assert out.finished == (r == 2)
    assert scores(out) == {"Alice": 18, "Bob": 18, "Carol": 18, "Dave": 18}
    assert out.notices[0].data["winner"] is None
    assert "The game is over, without a winner." in report_text(out)


# -- orders --------------------------------------------------------------------------------
def test_lines_to_the_same_player_add_up_and_the_reply_shows_the_holding():
    t = Table("Alice", "Bob", "Carol")
    out = t.send("Alice", "GIVE 1 TO bob", "give 1 to CAROL", "Give 1 To Bob")
    assert [r.message for r in out.results] == ["accepted: 1 point to Bob", "accepted: 1 point to Carol", "accepted: 1 point to Bob"]
    assert out.orders == {"Alice": ["GIVE 2 TO Bob", "GIVE 1 TO Carol"]}
    assert out.sections[0].title == "Your order for round 1"
    assert out.sections[0].data == {"round": 1, "holding": 3, "lines": ["GIVE 2 TO Bob", "GIVE 1 TO Carol"], "total": 3, "held": True, "refused": False, "show_lines": False}


def test_the_last_valid_order_counts():
    t = Table("Alice", "Bob", "Carol")
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"]})
    second = t.send("Alice", "GIVE 2 TO Carol", "GIVE 1 TO Bob")
    assert second.orders == {"Alice": ["GIVE 2 TO Carol", "GIVE 1 TO Bob"]}
    refused = t.send("Alice", "GIVE 3 TO Carol", "GIVE 1 TO Bob")  # 4: refused, the second order stays
    assert not any(r.ok for r in refused.results)
    assert refused.orders == {"Alice": ["GIVE 2 TO Carol", "GIVE 1 TO Bob"]}
    assert scores(t.run()) == {"Alice": 3, "Bob": 1, "Carol": 5}


@pytest.mark.parametrize(
    "texts, messages",
    [
        (["GIVE 2 TO Bob"], ["your GIVE lines add up to 2 points, short of your holding of 3: an order must give away exactly 3 (rule 3)"]),
        (
            ["GIVE 2 TO Bob", "GIVE 2 TO Carol"],
            ["your GIVE lines add up to 4 points, more than your holding of 3: an order must give away exactly 3 (rule 3)"] * 2,
        ),
        (
            ["GIVE 2 TO Bob", "GIVE 1 TO zed"],
            [
                "not taken: a mail's GIVE lines are one order and another line of it was refused",
                "there is no player 'zed' in this game; you can give to: Bob, Carol, Dave",
            ],
        ),
        (["GIVE 3 TO alice"], ["you cannot give points to yourself (rule 3): give them to other players"]),
        (["GIVE -1 TO Bob", "GIVE 4 TO Carol"], ["you cannot give negative points (rule 3): give 1 or more", "not taken: a mail's GIVE lines are one order and another line of it was refused"]),
        (["GIVE 0 TO Bob", "GIVE 3 TO Carol"], ["a gift is at least 1 point: leave out gifts of 0", "not taken: a mail's GIVE lines are one order and another line of it was refused"]),
        (["GIVE 1.5 TO Bob"], ["whole points only (rule 3): '1.5' is not a whole number; expected GIVE <n> TO <handle>, e.g. GIVE 2 TO alice"]),
        (["GIVE two TO Bob"], ["'two' is not a number of points; expected GIVE <n> TO <handle>, e.g. GIVE 2 TO alice"]),
        (["GIVE 3 Bob"], ["TO is missing before 'Bob'; expected GIVE <n> TO <handle>, e.g. GIVE 2 TO alice"]),
        (["GIVE 3 TOO Bob"], ["'TOO' where TO belongs; expected GIVE <n> TO <handle>, e.g. GIVE 2 TO alice"]),
    ],
)
def test_refused_orders_say_why_and_keep_the_held_order(texts, messages):
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.send("Alice", "GIVE 3 TO Dave")
    out = t.send("Alice", *texts)
    assert [r.message for r in out.results] == messages
    assert not any(r.ok for r in out.results)
    assert out.orders == {"Alice": ["GIVE 3 TO Dave"]}
    assert out.sections[0].data["refused"] and out.sections[0].data["lines"] == ["GIVE 3 TO Dave"]
    assert RULES.waiting_for(t.state) == ["Bob", "Carol", "Dave"]


def test_a_refused_first_order_leaves_no_order():
    t = Table("Alice", "Bob", "Carol")
    out = t.send("Alice", "GIVE 4 TO Bob")
    assert out.orders == {}
    assert out.sections[0].data == {"round": 1, "holding": 3, "lines": [], "total": 0, "held": False, "refused": True, "show_lines": False}
    assert "Alice" in RULES.waiting_for(t.state)


def test_gifts_to_a_departed_player_are_refused():
    t = Table("Alice", "Bob", "Carol", "Dave")
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"], "Dave": ["GIVE 3 TO Alice"]})
    t.run()
    left = t.send("Dave", "LEAVE")
    assert left.results[0].message == "accepted: you have left the game; your 3 points are forfeited"
    assert left.left == ["Dave"]
    out = t.send("Alice", "GIVE 12 TO Dave")
    assert out.results[0].message == "Dave has left the game: give to players still in it"
    assert RULES.players(t.state) == ["Alice", "Bob", "Carol"]


def test_leaving_drops_the_orders_that_give_to_the_leaver():
    t = Table("Alice", "Bob", "Carol", "Dave")
    t.send("Alice", "GIVE 2 TO Dave", "GIVE 1 TO Bob")
    t.send("Bob", "GIVE 3 TO Carol")
    t.send("Dave", "GIVE 3 TO Bob")
    out = t.send("Dave", "LEAVE")
    assert out.results[0].message == "accepted: you have left the game before round 1"
    assert out.orders == {"Dave": [], "Alice": []}
    assert RULES.players(t.state) == ["Alice", "Bob", "Carol"]
    (notice,) = out.notices
    assert notice.to == ["Alice"] and notice.template == "dropped.txt"
    assert notice.data == {"game": "gv", "left": "Dave", "round": 1, "holding": 3}
    assert RULES.waiting_for(t.state) == ["Alice", "Carol"]
    assert t.state["orders"] == {"bob": [[3, "Carol"]]}


def test_leaving_below_three_players_ends_a_started_game():
    t = Table("Alice", "Bob", "Carol")
    give_all(t, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"]})
    t.run()
    out = t.send("Carol", "LEAVE")
    assert out.finished
    assert out.results[0].message.endswith("the game is over, too few players remain")
    over = [n for n in out.notices if n.template == "over.txt"]
    assert over and over[0].to == [ALL_PLAYERS]
    assert t.state["status"] == "over" and t.state["winner"] is None


# -- joining, who may send what ---------------------------------------------------------------
def test_join_only_before_round_one_is_resolved():
    t = Table("Alice", "Bob", "Carol")
    again = t.send("Alice", "JOIN")
    assert again.results[0].message == "you are already playing in this game"
    late = t.send("Dave", "JOIN")  # still before round 1: fine
    assert late.results[0].ok and late.joined == ["Dave"]
    give_all(t, {"Alice": ["GIVE 3 TO Dave"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"], "Dave": ["GIVE 3 TO Alice"]})
    t.run()
    too_late = t.send("Eve", "JOIN")
    assert not too_late.results[0].ok
    assert too_late.results[0].message == "round 1 has been played: players can join only before round 1 is resolved (this game is in round 2)"
    assert too_late.joined == []


def test_join_and_order_in_one_mail():
    t = Table("Alice", "Bob")
    out = t.send("Carol", "JOIN", "GIVE 3 TO Alice")
    assert [r.ok for r in out.results] == [True, True]
    assert out.orders == {"Carol": ["GIVE 3 TO Alice"]}


def test_a_join_is_one_entry_and_the_join_order_holds():
    t = Table("Alice", "Bob", "Carol")
    listed = t.state["players"]
    out = t.send("dave", "JOIN")
    assert out.results[0].message == "accepted: you are in the game with 3 points for round 1 (4 players so far; a round needs at least 3)"
    assert out.changed_entries == {"joins": ["dave"], "orders": []}
    assert out.state["players"] is listed  # the list is not rewritten
    assert list(out.state["joins"].values()) == ["Alice", "Bob", "Carol", "dave"]
    assert t.send("DAVE", "JOIN").results[0].message == "you are already playing in this game"
    # a LEAVE writes the game whole: the joiners go to the list, in join order
    left = t.send("Bob", "LEAVE")
    assert left.changed_entries is None and "joins" not in left.state
    assert [p["handle"] for p in t.state["players"]] == ["Alice", "Carol", "dave"]
    # whoever joins (or comes back) after that comes last
    t.send("Erin", "JOIN")
    back = t.send("Bob", "JOIN", "GIVE 2 TO erin", "GIVE 1 TO Alice")
    assert [r.ok for r in back.results] == [True, True, True]
    assert back.changed_entries == {"joins": ["bob"], "orders": ["bob"]}
    assert RULES.players(t.state) == ["Alice", "Carol", "dave", "Erin", "Bob"]
    assert RULES.waiting_for(t.state) == ["Alice", "Carol", "dave", "Erin"]
    assert "Round 1 has not been played yet: players may still JOIN (5 so far)." in RULES.view(t.state, None)[0].text
    # an order names joiners like everybody else, and a refusal lists them
    refused = t.send("Alice", "GIVE 3 TO nobody")
    assert refused.results[0].message == (
        "there is no player 'nobody' in this game; you can give to: Carol, dave, Erin, Bob")
    t.send("Alice", "GIVE 3 TO Bob")
    t.send("Carol", "GIVE 3 TO Erin")
    out = t.run()
    assert [p["handle"] for p in out.state["players"]] == ["Alice", "Carol", "dave", "Erin", "Bob"]
    assert "joins" not in out.state
    assert {h: t.holding(h) for h in ("Alice", "Bob", "Erin", "dave")} == {"Alice": 4, "Bob": 6, "Erin": 8, "dave": 3}


def test_a_state_stored_before_joins_were_entries_still_plays():
    """Every player in the list, no joins mapping: the shape of every state
    written before; it takes joins, and a round, as before."""
    t = Table()
    t.state = {"schema": 1, "options": {"no_order": "forfeit", "round_limit": 0}, "round": 1, "status": "joining",
               "players": [{"handle": h, "holding": 3, "active": True, "score": None, "left_round": None}
                           for h in ("Ann", "Ben")],
               "orders": {"ann": [[3, "Ben"]]}, "winner": None, "end_note": None, "last": None}
    assert RULES.players(t.state) == ["Ann", "Ben"]
    out = t.send("Cy", "JOIN", "GIVE 3 TO Ann")
    assert out.results[0].message.endswith("(3 players so far; a round needs at least 3)")
    assert out.changed_entries == {"joins": ["cy"], "orders": ["cy"]}
    t.send("Ben", "GIVE 3 TO Cy")
    report = report_text(t.run())
    assert "Ann held 3 and gave 3 to Ben." in report and "Cy held 3 and gave 3 to Ann." in report


def test_strangers_and_wrong_passwords_are_refused():
    t = Table("Alice", "Bob", "Carol")
    stranger = t.send(None, "JOIN")
    assert stranger.results[0].message.startswith("this address has no account: register first")
    nopw = t.send("Alice", "GIVE 3 TO Bob", authenticated=False)
    assert nopw.results[0].message == NO_PASSWORD
    assert nopw.orders == {}
    outsider = t.send("Zed", "GIVE 3 TO Bob")
    assert outsider.results[0].message == "you are not playing in this game: send JOIN first (before round 1 is resolved)"


def test_unknown_commands_are_refused_without_touching_the_order():
    t = Table("Alice", "Bob", "Carol")
    out = t.send("Alice", "Hello all", "GIVE 3 TO Bob", "JOIN now")
    assert [r.ok for r in out.results] == [False, True, False]
    assert out.results[0].message == "unknown command 'Hello': expected GIVE <n> TO <handle>, JOIN or LEAVE"
    assert out.results[2].message == "JOIN takes nothing after it: write just JOIN"
    assert out.orders == {"Alice": ["GIVE 3 TO Bob"]}


# -- turns and views ---------------------------------------------------------------------------
def test_a_round_needs_three_players():
    t = Table("Alice", "Bob")
    t.send("Alice", "GIVE 3 TO Bob")
    out = t.run()
    assert not out.turn_done and not out.finished
    (notice,) = out.notices
    assert notice.to == [ALL_PLAYERS] and notice.template == "waiting.txt"
    assert "a round needs at least 3 players and 2 have joined (Alice, Bob)" in notice.data["text"]
    assert t.state["round"] == 1 and t.state["orders"] == {"alice": [[3, "Bob"]]}


def test_report_lists_gifts_rings_scores_and_next_holdings():
    t = Table("Alice", "Bob", "Carol")
    t.holdings(Alice=1, Bob=2, Carol=1)
    give_all(t, {"Alice": ["GIVE 1 TO Bob"], "Bob": ["GIVE 1 TO Alice", "GIVE 1 TO Carol"], "Carol": ["GIVE 1 TO Alice"]})
    out = t.run()
    notice = out.notices[0]
    assert notice.to == [ALL_PLAYERS] and notice.kind == "report" and notice.template == "report.txt"
    text = report_text(out)
    assert "Bob held 2 and gave 1 to Alice, 1 to Carol.\n    Received 1 from Alice; ring bonus 1." in text
    assert "Alice > Bob > Carol > Alice (1 point): broken by Bob gives 1 to Alice." in text
    assert "Player  Held  Received  Bonus  Score  Next\nAlice      1         2      1      3     6" in text
    assert "Round 2: every player now holds" in text
    assert all(len(line) <= 78 for line in text.splitlines())


def test_view_shows_only_the_viewers_own_order():
    t = Table("Alice", "Bob", "Carol")
    t.send("Alice", "GIVE 3 TO Carol")
    t.send("Bob", "GIVE 2 TO Carol", "GIVE 1 TO Alice")
    bob = RULES.view(t.state, "Bob")
    assert "Orders received: 2 of 3." in bob[0].text
    assert bob[1].data["lines"] == ["GIVE 2 TO Carol", "GIVE 1 TO Alice"]
    everything = " ".join(s.text + repr(s.data) for s in bob)
    assert "GIVE 3 TO Carol" not in everything
    public = RULES.view(t.state, None)
    assert len(public) == 1 and "GIVE" not in public[0].text


def test_export_import_round_trip_and_bad_imports():
    t = Table("Alice", "Bob", "Carol")
    t.send("Alice", "GIVE 3 TO Carol")
    # the joiners are entries of "joins" in the stored state, players in the export
    assert "joins" in t.state and "joins" not in RULES.export_state(t.state)
    imported = RULES.import_state(RULES.export_state(t.state))
    assert load(imported) == load(t.state)
    assert [p["handle"] for p in imported["players"]] == ["Alice", "Bob", "Carol"]
    bad = RULES.export_state(t.state)
    bad["orders"]["alice"] = [[2, "Carol"]]
    with pytest.raises(GameError, match="does not add up"):
        RULES.import_state(bad)
    with pytest.raises(GameError, match="not a giveaway state"):
        RULES.import_state({"schema": 1})


def test_options_are_checked():
    assert RULES.new_game({}, ctx(mail=False))["options"] == {"no_order": "forfeit", "round_limit": 0}
    with pytest.raises(GameError, match="no_order must be 'forfeit' or 'split'"):
        RULES.new_game({"no_order": "keep"}, ctx(mail=False))
    with pytest.raises(GameError, match="round_limit"):
        RULES.new_game({"round_limit": "-2"}, ctx(mail=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=8))
def test_parse_never_raises_and_returns_one_command_per_line(texts):
    given = lines(*texts)
    check_commands(RULES, given, RULES.parse(given))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r"(?i)(give|join|leave)( [-+]?\d{0,3}(\.\d)?)?( to)?( [a-z]{0,5})?", fullmatch=True), max_size=6))
def test_apply_gives_one_result_per_command(texts):
    t = Table("Alice", "Bob", "Carol")
    out = RULES.apply(t.state, RULES.parse(lines(*texts)), ctx("Alice"))
    assert [r.line for r in out.results] == [Line(i + 1, x) for i, x in enumerate(texts)]


def render(section_or_notice) -> str:
    from pbm_server.mail.compose import make_environment

    env = make_environment()
    return env.get_template(f"giveaway/{section_or_notice.template}").render(**section_or_notice.data, viewer="x")


def test_every_mail_template_renders_what_the_player_needs():
    t = Table("Alice", "Bob", "Carol", "Dave")
    ack = t.send("Alice", "GIVE 2 TO Dave", "GIVE 1 TO Bob")
    assert render(ack.sections[0]) == (
        "It gives away 3 of the 3 points you hold, as it must.\n"
        "A later mail with GIVE lines replaces the whole order."
    )
    shown = render(RULES.view(t.state, "Alice")[1])
    assert shown.startswith("Your order for round 1:\n  GIVE 2 TO Dave\n  GIVE 1 TO Bob\n")
    refused = t.send("Bob", "GIVE 9 TO Alice")
    assert render(refused.sections[0]).startswith(
        "That order was refused: you have no order for round 1 yet.\n"
        "You hold 3 points: your GIVE lines must add up to exactly\n3, e.g. GIVE 3 TO someone."
    )
    left = t.send("Dave", "LEAVE")
    assert render(left.notices[0]).startswith(
        "Dave has left gv. Your order for round 1 gave points to\nDave, so it no longer holds"
    )
    small = Table("Alice", "Bob")
    waiting = small.run()
    assert "Round 1 of gv cannot be played yet" in render(waiting.notices[0])
    t3 = Table("Alice", "Bob", "Carol")
    give_all(t3, {"Alice": ["GIVE 3 TO Bob"], "Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 3 TO Alice"]})
    t3.run()
    over = t3.send("Bob", "LEAVE")
    assert "so the game ends here without a winner" in " ".join(render(over.notices[-1]).split())


def test_report_html_part_has_the_same_facts():
    from pbm_server.mail.compose import make_environment

    t = Table("Alice", "Bob", "Carol")
    t.holdings(Alice=1, Bob=2, Carol=1)
    give_all(t, {"Alice": ["GIVE 1 TO Bob"], "Bob": ["GIVE 1 TO Alice", "GIVE 1 TO Carol"], "Carol": ["GIVE 1 TO Alice"]})
    notice = t.run().notices[0]
    html = make_environment().get_template("giveaway/report.html").render(**notice.data, viewer="Bob")
    assert "<tr><td>Bob</td><td class=\"num\">2</td><td>gave 1 to Alice, 1 to Carol</td><td>1 from Alice</td>" in html
    assert "<li>Alice &gt; Bob &gt; Alice: 2 players passing 1 point, each receives 2 instead of 1 (+1).</li>" in html
    assert "<li>Alice &gt; Bob &gt; Carol &gt; Alice (1 point): broken by Bob gives 1 to Alice.</li>" in html


def test_a_hand_written_position_can_be_imported_and_played():
    state = RULES.import_state(
        {
            "round": 4,
            "players": [{"handle": "Alice", "holding": 5}, {"handle": "Bob"}, {"handle": "Carol", "holding": 4}],
            "orders": {"ALICE": [[5, "bob"]]},
        }
    )
    assert state["status"] == "playing" and state["options"] == {"no_order": "forfeit", "round_limit": 0}
    assert state["orders"] == {"alice": [[5, "Bob"]]}
    assert RULES.waiting_for(state) == ["Bob", "Carol"]
    t = Table()
    t.state = state
    give_all(t, {"Bob": ["GIVE 3 TO Carol"], "Carol": ["GIVE 4 TO Alice"]})
    out = t.run()
    assert out.notices[0].data["round"] == 4
    assert scores(out) == {"Alice": 4, "Bob": 5, "Carol": 3}
    with pytest.raises(GameError, match="gives to 'zed', not another active player"):
        RULES.import_state({"players": [{"handle": "Alice"}, {"handle": "Bob"}], "orders": {"alice": [[3, "zed"]]}})


def test_a_player_on_vacation_keeps_the_holding_instead_of_forfeiting():
    import random
    from dataclasses import replace as _replace
    from datetime import datetime

    from games.base import Actor, Context, Line
    from games.giveaway import RULES as R

    def c(handle):
        return Context(now=datetime(2026, 11, 21, tzinfo=UTC), rng=random.Random(1),
                       actor=Actor(handle=handle, email=f"{handle}@x", authenticated=True), game_name="g")

    state = R.new_game({o.name: o.default for o in R.options}, c(None))
    for h in ("ann", "ben", "cat"):
        state = R.apply(state, R.parse([Line(1, "JOIN")]), c(h)).state
    state = R.apply(state, R.parse([Line(1, "GIVE 3 TO ben")]), c("ann")).state
    state = R.apply(state, R.parse([Line(1, "GIVE 3 TO ann")]), c("ben")).state
    turn = _replace(c(None), absent=frozenset({"cat"}))
    out = R.run_turn(state, turn)
    report = out.notices[0].data
    text = str(report)
    assert "cat held 3, is away (ABSENT) and keeps it for the next round." in text
    from games.giveaway.model import Game as _Game

    holdings = {p.handle: p.holding for p in _Game.from_state(out.state).players}
    # cat received nothing, kept 3, and gets the usual 3: holds 6 in round 2;
    # without the vacation the 3 would have been forfeited (holding 3)
    assert holdings["cat"] == 6
    plain = R.run_turn(state, c(None))
    assert {p.handle: p.holding for p in _Game.from_state(plain.state).players}["cat"] == 3
