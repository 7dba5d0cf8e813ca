"""The Fourth Game's engine, called directly (no server)."""

from __future__ import annotations

import copy
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.base import ALL_PLAYERS, Actor, Context, GameError, Line, Outcome
from games.sequence import RULES
from games.sequence.model import EACH, pieces_from_email, points_for
from games.sequence.view import FULL_REPORT_PLAYERS
from tests.games import driver
from tests.games.driver import lines

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

NOW = datetime(2007, 12, 7, 12, 0, tzinfo=UTC)
SEVENS = "7,1 " * 10  # ten pieces of value 7, multiplier 1


class Table(driver.Table):
    """A game and the mails sent to it, in order."""

    fresh_rng = True

    def __init__(self, **options):
        self.emails: dict[str, str] = {}
        super().__init__(RULES, options, now=NOW, game_name="four")

    def email(self, handle: str) -> str:
        return self.emails.get(handle) or f"{handle}@example.org"

    def apply(self, sender, *texts, **kw) -> Outcome:
        """Every mail: the server writes only the entries it names (see
        check_entries)."""
        out = super().apply(sender, *texts, **kw)
        check_entries(self.state, out)
        return out

    def join(self, handle, email=None, now=NOW) -> Outcome:
        if email:
            self.emails[handle] = email
        out = self.send(handle, "JOIN", now=now)
        assert out.results[0].ok, out.results[0].message
        return out

    def set_pieces(self, handle, pairs: str) -> Outcome:
        out = self.send("gm", f"SET PIECES {handle} {pairs}", gm=True)
        assert out.results[0].ok, out.results[0].message
        return out

    def play(self, handle, text, now=NOW):
        """Send one play; return its Result."""
        return self.send(handle, text, now=now).results[0]

    def score(self, handle) -> int:
        return self.state["players"][handle]["score"]

    @property
    def total(self) -> int:
        plays = plays_of(self.state)
        return int(plays[-1].split()[4]) if plays else 0

    def end(self) -> Outcome:
        return self.run(now=NOW + timedelta(days=1))


def plays_of(state: dict) -> list[str]:
    """The encoded plays of a state, oldest first (they are kept by number)."""
    return [state["plays"][str(n)] for n in range(1, len(state["plays"]) + 1)]


def check_entries(given: dict, out: Outcome) -> None:
    """What ``Outcome.changed_entries`` promises the server: the new state is
    the given one with just those entries of ``players`` and ``plays``
    changed (new keys last), every other part shared; nothing changed: the
    given state itself."""
    changed = out.changed_entries
    if given.get("version") == 1:  # the first shape is written whole
        return
    assert changed is not None, "a mail wrote the whole state"
    assert set(changed) <= {"players", "plays"}
    if not any(changed.values()):
        assert out.state is given
        return
    for field, value in out.state.items():
        if field not in changed:
            assert value is given[field], f"{field} is not the given one"
    assert set(out.state) == set(given)
    for field, keys in changed.items():
        before, after = given[field], out.state[field]
        assert list(after)[: len(before)] == list(before)  # kept their places
        assert {k for k in after if k not in before} <= set(keys)
        for key in after:
            if key not in keys:
                assert after[key] is before[key]
            else:
                assert after[key] != before.get(key), f"{field}[{key}] named but not changed"


def first_shape(state: dict) -> dict:
    """``state`` as the game stored it before plays were entries (version 1):
    the plays a list, the running figures kept beside them."""
    plays = plays_of(state)
    last = plays[-1].split() if plays else None
    scoring = [n for n, p in enumerate(plays, start=1) if int(p.split()[5])]
    done = sorted((max(p["played"]), h) for h, p in state["players"].items() if all(p["played"]))
    old = {k: v for k, v in copy.deepcopy(state).items() if k != "plays"}
    old.update(version=1, plays=plays, total=int(last[4]) if last else 0, last=last[0] if last else None,
               last_scoring=scoring[-1] if scoring else 0,
               finishers=[[h, int(plays[n - 1].split()[5])] for n, h in done])
    return old


def table_with(*handles: str, pieces: str | None = None, **options) -> Table:
    t = Table(**options)
    for h in handles:
        t.join(h)
        if pieces:
            t.set_pieces(h, pieces)
    return t


# -- pieces -------------------------------------------------------------------


def test_seed_example_pieces_from_address():
    pieces = pieces_from_email("dklein00@gmail.com")
    assert [(p.value, p.multiplier) for p in pieces] == [
        (4, 1), (11, 2), (12, 3), (5, 4), (9, 5),
        (6, 0), (6, 0), (6, 0), (6, 0), (6, 0),
    ]


def test_short_local_part_continues_with_domain_letters():
    # "j2x" gives j, x; then the domain: m, a, i
    assert [p.value for p in pieces_from_email("J2X@mail.example")[:5]] == [10, 24, 13, 1, 9]
    # fewer than five letters in all: repeat them
    assert [p.value for p in pieces_from_email("b1@c.9")[:5]] == [2, 3, 2, 3, 2]


def test_join_gives_the_pieces_of_the_address_and_shows_them():
    t = Table()
    out = t.join("dk", email="dklein00@gmail.com")
    assert out.joined == ["dk"]
    assert out.results[0].message == "accepted: you are player 1; your pieces are below"
    me = out.sections[0].data["me"]
    assert [(p["number"], p["value"], p["multiplier"]) for p in me["pieces"][:5]] == [
        (1, 4, 1), (2, 11, 2), (3, 12, 3), (4, 5, 4), (5, 9, 5)]
    assert t.state["players"]["dk"]["pieces"][5:] == [[6, 0]] * 5


def test_join_and_play_in_one_mail():
    t = table_with("bob")
    out = t.send("ann", "JOIN", "MAIL EACH", "Piece 1: 1, 1", "PIECES")
    assert [r.ok for r in out.results] == [True, True, True, True]
    assert t.state["players"]["ann"]["mail"] == "each"
    assert plays_of(t.state) == ["ann 1 +1 1 1 0"]


def test_join_refusals():
    t = Table(max_players=2)
    t.join("ann")
    again = t.send("ann", "JOIN")
    assert not again.results[0].ok
    assert again.results[0].message == "you have joined this game already"
    stranger = t.send(None, "JOIN")
    assert "has no account" in stranger.results[0].message
    nopw = t.send("bob", "JOIN", authenticated=False)
    assert "this needs your password" in nopw.results[0].message
    t.join("bob")
    full = t.send("cid", "JOIN")
    assert full.results[0].message == "the game is full: it takes at most 2 players"
    assert list(t.state["players"]) == ["ann", "bob"]


# -- plays and scoring --------------------------------------------------------------


def test_negative_play_with_the_seed_pieces():
    t = Table()
    t.join("dk", email="dklein00@gmail.com")
    t.join("bob")
    t.set_pieces("bob", "12,2 " + "1,1 " * 9)
    r = t.play("dk", "Piece 3: -12, 3")
    assert r.ok
    assert r.message == "accepted: play 1, total -12, no multiple of 7 or 24; your score 0, 9 pieces left"
    assert t.total == -12
    r = t.play("bob", "Piece 1: -12, 2")  # -24: a multiple of 24 scores 10 x 2
    assert r.message == (
        "accepted: play 2, total -24 = -1 x 24, scores 20; your score 20, 9 pieces left"
    )
    assert t.score("bob") == 20
    r = t.play("dk", "Piece 6: -6, 0")  # -30: no multiple
    assert t.total == -30 and t.score("dk") == 0
    r = t.play("bob", "Piece 2: +1, 1")  # -29
    r = t.play("dk", "Piece 1: 4, 1")  # -25
    r = t.play("bob", "piece 3: -1, 1")  # -26
    r = t.play("dk", "Piece 4: -5, 4")  # -31
    r = t.play("bob", "Piece 4: +1, 1")  # -30
    r = t.play("dk", "Piece 5: -9, 5")  # -39
    r = t.play("bob", "Piece 5: -1, 1")  # -40
    r = t.play("dk", "Piece 2: 11, 2")  # -29
    r = t.play("bob", "Piece 6: +1, 1")  # -28 = -4 x 7
    assert r.message.startswith("accepted: play 12, total -28 = -4 x 7, scores 5;")
    assert t.score("bob") == 25


def test_multiple_of_7_of_24_and_of_both():
    t = table_with("ann", "bob")
    t.set_pieces("ann", "7,2 24,3 84,1 " + "1,1 " * 7)
    t.set_pieces("bob", "84,4 1,1 " + "1,1 " * 8)
    assert t.play("ann", "Piece 1: 7, 2").message.startswith(
        "accepted: play 1, total 7 = 1 x 7, scores 10;")          # 5 x 2
    assert t.play("bob", "Piece 2: -1, 1").ok                     # 6
    assert t.play("ann", "Piece 2: -24, 3").message.startswith(
        "accepted: play 3, total -18, no multiple")              # -18
    assert t.play("bob", "Piece 3: 1, 1").ok                      # -17
    assert t.play("ann", "Piece 3: 84, 1").message.startswith(
        "accepted: play 5, total 67, no multiple")
    # a plain multiple of 24 (not of 7)
    t2 = table_with("ann", "bob")
    t2.set_pieces("ann", "24,3 " + "1,1 " * 9)
    assert t2.play("ann", "Piece 1: 24, 3").message.startswith(
        "accepted: play 1, total 24 = 1 x 24, scores 30;")        # 10 x 3
    # 168 = 24 x 7 = 7 x 24: both
    t3 = table_with("ann", "bob")
    t3.set_pieces("ann", "84,1 " + "1,1 " * 9)
    t3.set_pieces("bob", "84,4 " + "1,1 " * 9)
    assert t3.play("ann", "Piece 1: 84, 1").message.startswith(
        "accepted: play 1, total 84 = 12 x 7, scores 5;")
    assert t3.play("bob", "Piece 1: 84, 4").message.startswith(
        "accepted: play 2, total 168 = 24 x 7 = 7 x 24, scores 60;")  # 5x4 + 10x4
    assert (t3.score("ann"), t3.score("bob")) == (5, 60)
    assert t.score("ann") == 10 and t2.score("ann") == 30


def test_zero_total_is_a_multiple_of_both():
    t = table_with("ann", "bob")
    t.set_pieces("ann", "5,1 " * 10)
    t.set_pieces("bob", "5,2 " * 10)
    t.play("ann", "Piece 1: 5, 1")
    r = t.play("bob", "Piece 1: -5, 2")
    assert t.total == 0
    assert r.message.startswith("accepted: play 2, total 0 = 0 x 7 = 0 x 24, scores 30;")
    assert t.score("bob") == 30


def test_consecutive_plays_by_one_player_do_not_score():
    t = table_with("ann", "bob", pieces=SEVENS)
    assert t.play("ann", "Piece 1: 7, 1").message.startswith("accepted: play 1, total 7 = 1 x 7, scores 5")
    r = t.play("ann", "Piece 2: 7, 1")
    assert r.message.startswith(
        "accepted: play 2, total 14 = 2 x 7, no points: nobody played between")
    # two plays in one mail: the second one does not score either
    out = t.send("ann", "Piece 3: 7, 1", "Piece 4: 7, 1")
    assert [r.ok for r in out.results] == [True, True]
    assert t.score("ann") == 5
    t.play("bob", "Piece 1: 7, 1")  # 35
    assert t.play("ann", "Piece 5: 7, 1").message.startswith("accepted: play 6, total 42 = 6 x 7, scores 5")
    assert (t.score("ann"), t.score("bob")) == (10, 5)
    # the history says why each play scored or not
    notes = [p["note"] for p in RULES.view(t.state, None)[0].data["plays"]]
    assert notes == ["scores 5"] + ["no points: nobody played between"] * 3 + ["scores 5"] * 2


def test_multiplier_zero_scores_nothing():
    t = table_with("ann", "bob")
    t.set_pieces("ann", "7,0 " * 10)
    r = t.play("ann", "Piece 1: 7, 0")
    assert r.message.startswith("accepted: play 1, total 7 = 1 x 7, no points: multiplier 0")
    assert points_for(7, 0, True) == 0 and points_for(168, 2, True) == 30


# -- refusals -----------------------------------------------------------------------


def test_refused_plays_give_the_reason_and_change_nothing():
    t = Table()
    t.join("dk", email="dklein00@gmail.com")
    assert t.play("dk", "Piece 3: 12, 3").ok
    before = copy.deepcopy(t.state)
    out = t.send(
        "dk",
        "Piece 3: 12, 3",       # used
        "Piece 11: 6, 0",       # unknown
        "Piece 2: 12, 2",       # wrong value
        "Piece 2: -11, 3",      # wrong multiplier
        "Piece 2 12 2 extra",   # unreadable
    )
    assert [r.message for r in out.results] == [
        "piece 3 is used already (play 1); pieces left: 1, 2, 4, 5, 6, 7, 8, 9, 10",
        "there is no piece 11: your pieces are numbered 1 to 10",
        "piece 2 has the sequence value 11, not 12: play it as Piece 2: 11, 2 or Piece 2: -11, 2",
        "piece 2 has the point multiplier 2, not 3: play it as Piece 2: -11, 2",
        ("cannot read this play: expected Piece <n>: [+|-]<value>, <multiplier>, "
         "e.g. Piece 3: 12, 3 or Piece 6: -6, 0"),
    ]
    assert not any(r.ok for r in out.results)
    assert t.state == before
    assert out.notices == []


def test_the_same_piece_twice_in_one_mail():
    t = table_with("ann", "bob", pieces=SEVENS)
    out = t.send("ann", "Piece 1: 7, 1", "Piece 1: 7, 1")
    assert out.results[0].ok
    assert out.results[1].message.startswith("piece 1 is used already (play 1)")
    assert t.total == 7


def test_not_a_player_or_no_password():
    t = table_with("ann")
    r = t.send("zed", "Piece 1: 26, 1").results[0]
    assert r.message == "you are not a player of this game: send JOIN first"
    r = t.send("ann", "Piece 1: 1, 1", authenticated=False).results[0]
    assert r.message.startswith("this needs your password")
    assert plays_of(t.state) == []


def test_late_plays_are_refused():
    t = table_with("ann", "bob", pieces=SEVENS)
    t.play("ann", "Piece 1: 7, 1")
    t.end()
    out = t.send("bob", "Piece 1: 7, 1", "JOIN")
    assert [r.message for r in out.results] == [
        "the game is over: the deadline has passed and plays no longer count"] * 2
    assert plays_of(t.state) == ["ann 1 +7 1 7 5"]
    with pytest.raises(GameError):
        RULES.run_turn(t.state, Context(now=NOW, rng=random.Random(1)))


def test_closes_option_refuses_plays_arriving_after_the_deadline():
    t = table_with("ann", pieces=SEVENS, closes="2007-12-08T05:00:00-05:00")
    assert t.state["options"]["closes"] == "2007-12-08T10:00:00+00:00"
    deadline = datetime(2007, 12, 8, 10, 0, tzinfo=UTC)
    assert t.play("ann", "Piece 1: 7, 1", now=deadline - timedelta(seconds=1)).ok
    r = t.play("ann", "Piece 2: 7, 1", now=deadline)
    assert r.message == (
        "the game closed at 2007-12-08 10:00 UTC: plays after the deadline do not count")
    assert t.total == 7


# -- parsing ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Piece 3: 12, 3",
    "Piece Number 3: 12, 3",
    "piece number 3:12,3.",
    "PIECE #3 : +12 , 3",
    "Piece No. 3: 12, 3",
    "Piece 3. 12, 3",
    "Piece 3 12 3",
    "  Piece   3:   12,3  ",
])
def test_lenient_play_lines(text):
    (cmd,) = RULES.parse([Line(1, text)])
    assert cmd.ok, cmd.error
    assert (cmd.name, cmd.args) == ("play", {"piece": 3, "sign": "+", "value": 12, "multiplier": 3})


def test_negative_play_line_and_unreadable_lines():
    (neg,) = RULES.parse([Line(1, "Piece 6: -6, 0")])
    assert neg.args == {"piece": 6, "sign": "-", "value": 6, "multiplier": 0}
    (glued,) = RULES.parse([Line(1, "Piece 36, 0")])
    assert glued.error.startswith("cannot read this play")
    (other,) = RULES.parse([Line(1, "GIVE 2 TO bob")])
    assert other.error == (
        "unknown command 'GIVE': expected JOIN, Piece <n>: [+|-]<value>, <multiplier>, "
        "PIECES, MAIL EACH, MAIL DIGEST, MAIL NONE")
    (mail,) = RULES.parse([Line(1, "mail weekly")])
    assert mail.error.startswith("expected MAIL EACH")
    (setp,) = RULES.parse([Line(1, "SET PIECES ann 1,1 2,2")])
    assert setp.error.startswith("2 pieces given, ten needed")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=6))
def test_parse_never_raises(texts):
    given = lines(*texts)
    driver.check_commands(RULES, given, RULES.parse(given))


# -- bonuses, winner, tie ---------------------------------------------------------------


def round_robin(t: Table, handles: list[str], pieces_per_player: int = 10) -> None:
    for n in range(1, pieces_per_player + 1):
        for h in handles:
            value, mult = t.state["players"][h]["pieces"][n - 1]
            r = t.play(h, f"Piece {n}: {value}, {mult}")
            assert r.ok, r.message


def test_both_bonuses_and_the_final_report():
    t = table_with("ann", "bob", "cid", "dot", pieces=SEVENS)
    t.set_pieces("ann", "7,1 " * 9 + "7,0")  # ann's tenth play cannot score
    round_robin(t, ["ann", "bob", "cid", "dot"])
    # every total is a multiple of 7 (5 points); play 24 (dot) is 168: 15 points
    assert [t.score(h) for h in ("ann", "bob", "cid", "dot")] == [45, 50, 50, 60]
    out = t.end()
    assert out.turn_done and out.finished
    # first half = 2 finishers: ann (tenth play did not score: no bonus) and bob;
    # cid finished third: no bonus although the tenth play scored; dot made the
    # last scoring play (play 40): +70
    assert out.state["bonuses"] == [
        {"handle": "bob", "points": 40,
         "reason": "among the first half to use all ten pieces; tenth play scored",
         "line": "  bob +40: among the first half to use all ten pieces; tenth play scored"},
        {"handle": "dot", "points": 70, "reason": "the last play that scored (play 40)",
         "line": "  dot +70: the last play that scored (play 40)"},
    ]
    (report,) = out.notices
    assert report.to == [ALL_PLAYERS] and report.template == "report.txt"
    assert report.kind == "report"
    data = report.data
    assert len(data["plays"]) == 40 and data["plays"][23]["total"] == 168
    assert [(r["handle"], r["score"]) for r in data["standings"]] == [
        ("dot", 130), ("bob", 90), ("cid", 50), ("ann", 45)]
    assert data["winner"] == "dot" and data["tied"] == []


def test_last_scoring_bonus_skips_plays_that_did_not_score():
    t = table_with("ann", "bob", pieces=SEVENS)
    t.set_pieces("bob", "1,1 " * 10)
    t.play("ann", "Piece 1: 7, 1")   # 7: scores
    t.play("bob", "Piece 1: 1, 1")   # 8
    out = t.end()
    assert [(b["handle"], b["points"]) for b in out.state["bonuses"]] == [("ann", 70)]
    assert out.notices[0].data["winner"] == "ann"


def test_tie_goes_to_who_reached_the_score_first():
    t = table_with("ann", "bob", "cid", pieces=SEVENS)  # ann joined first
    t.play("bob", "Piece 1: 7, 1")   # 7: bob 5 (play 1)
    t.play("ann", "Piece 1: 7, 1")   # 14: ann 5 (play 2)
    t.play("cid", "Piece 1: 7, 1")   # 21: cid 5, the last scoring play: +70
    out = t.end()
    assert [(r["handle"], r["score"]) for r in out.notices[0].data["standings"]] == [
        ("cid", 75), ("bob", 5), ("ann", 5)]


def test_tie_for_the_win_after_the_bonus():
    t = table_with("bob", "ann", pieces=SEVENS)  # bob joined first
    t.set_pieces("ann", "7,16 " * 10)
    t.play("bob", "Piece 1: 7, 1")   # 7: bob 5
    t.play("ann", "Piece 1: 7, 16")  # 14: ann 80 (play 2)
    t.play("bob", "Piece 2: 7, 1")   # 21: bob 10, the last scoring play: +70 = 80
    out = t.end()
    data = out.notices[0].data
    assert [(r["handle"], r["score"]) for r in data["standings"]] == [("ann", 80), ("bob", 80)]
    assert data["winner"] == "ann" and data["tied"] == ["bob"]


def large_game(players: int, plays: int, active: int | None = None) -> tuple[Table, Outcome]:
    """``players`` players with ten 7s each (every play scores 5, a total of
    168 = 24 x 7 scores 15); ``plays`` plays go round the first ``active``
    players in join order; then the deadline."""
    handles = [f"p{i:03d}" for i in range(players)]
    active = active or players
    t = table_with(*handles, pieces=SEVENS)
    for k in range(plays):
        assert t.play(handles[k % active], f"Piece {k // active + 1}: 7, 1").ok
    return t, t.end()


def test_a_large_game_mails_each_player_their_own_part_of_the_final_report():
    t, out = large_game(FULL_REPORT_PLAYERS + 1, 60, active=20)
    # the whole report is kept, for history and observers, and goes to nobody
    assert out.record is not None and out.record.template == "report.txt"
    assert len(out.record.data["plays"]) == 60
    assert RULES.public_reports(out.state, [out.record])[0].data["plays"] == out.record.data["plays"]
    assert sorted(n.to for n in out.notices) == [[f"p{i:03d}"] for i in range(FULL_REPORT_PLAYERS + 1)]
    assert {n.template for n in out.notices} == {"own_report.txt"}
    assert RULES.public_reports(out.state, out.notices) == []  # a player's part is theirs
    # 20 players play, three rounds: p003 made plays 4, 24 (168: 15 points)
    # and 44, and reached 25 before p007 (48: 336); p019 made play 60, the
    # last that scored (+70)
    parts = {n.to[0]: n.data for n in out.notices}
    first = render("own_report.txt", parts["p003"]).splitlines()
    assert "51 players made 60 plays; the final total is 420 = 60 x 7." in first
    assert "The winner is p019 with 85 points." in first
    plays = first.index("  Play Player       Piece Value Mult  Total  Result")
    assert first[plays + 1:plays + 5] == [
        "     4 p003             1    +7    1     28  scores 5",
        "    24 p003             2    +7    1    168  scores 15",
        "    44 p003             3    +7    1    308  scores 5",
        "You scored 25: place 2 of 51."]
    assert "  p019 +70: the last play that scored (play 60)" in first
    assert "  +40: nobody (first half to use all ten pieces, tenth play scored)" in first
    # the top of the standings and, below it, the player's own place
    last = render("own_report.txt", parts["p050"]).splitlines()
    assert "You made no play." in last and "You scored 0: place 51 of 51." in last
    table = last[last.index("Final standings: the top 10 and you") + 2:]
    assert table[0] == "    1. p019                     85" and table[10:12] == [
        "  ...", "   51. p050                      0"]
    assert 'mail "history four" to pbm@pbm.test for it.' in last
    # status after the deadline: the viewer's part, or the short form
    (mine,) = RULES.view(t.state, "p050")
    assert mine.template == "own_report.txt" and mine.data["place"] == 51
    (public,) = RULES.view(t.state, None)
    text = render(public.template, public.data)
    assert "Your plays" not in text and "    1. p019                     85" in text.splitlines()
    assert all(len(line) <= 78 for part in parts.values() for line in render("own_report.txt", part).splitlines())


def test_a_players_part_of_a_large_game_gives_the_bonuses_in_short():
    _, out = large_game(FULL_REPORT_PLAYERS + 1, 50, active=5)  # five players use all ten pieces
    parts = {n.to[0]: render("own_report.txt", n.data).splitlines() for n in out.notices}
    mine = parts["p004"]
    assert mine[mine.index("You scored 160: place 1 of 51.") - 2:mine.index("Bonuses") + 4] == [
        "  p004 +40: among the first half to use all ten pieces; tenth play scored",
        "  p004 +70: the last play that scored (play 50)",
        "You scored 160: place 1 of 51.",
        "",
        "Bonuses",
        "-------",
        "  +40 each to 5 players (first half to use all ten pieces, tenth play scored)",
        "  p004 +70: the last play that scored (play 50)",
    ]
    assert "  p004 +40: among the first half to use all ten pieces; tenth play scored" not in parts["p000"]
    assert "  p000 +40: among the first half to use all ten pieces; tenth play scored" in parts["p000"]


def test_a_players_part_of_the_final_report_does_not_grow_with_the_game():
    sizes, whole = {}, {}
    for players, plays in ((FULL_REPORT_PLAYERS + 1, 60), (150, 400)):
        _, out = large_game(players, plays)
        assert out.record is not None
        sizes[players] = max(len(render("own_report.txt", n.data)) for n in out.notices)
        whole[players] = len(render("report.txt", out.record.data))
    assert whole[150] > 4 * whole[FULL_REPORT_PLAYERS + 1]
    assert sizes[150] < sizes[FULL_REPORT_PLAYERS + 1] + 200, sizes


def test_a_game_of_50_players_still_mails_everyone_the_whole_report():
    _, out = large_game(FULL_REPORT_PLAYERS, 10)
    (report,) = out.notices
    assert out.record is None and report.to == [ALL_PLAYERS] and report.template == "report.txt"
    assert len(report.data["plays"]) == 10


def test_game_master_sets_pieces():
    t = table_with("ann", "bob")
    out = t.set_pieces("ann", "1,1 2,2 3,3 4,4 5,5 6,6 7,7 8,8 9,9 10,10")
    assert out.audit == [
        "GM set the pieces of ann in four: 1,1 2,2 3,3 4,4 5,5 6,6 7,7 8,8 9,9 10,10"]
    assert out.notices[0].to == ["ann"]
    assert t.state["players"]["ann"]["pieces"][9] == [10, 10]
    r = t.send("bob", "SET PIECES ann " + "1,1 " * 10).results[0]
    assert r.message == "only the game master may set a player's pieces"
    assert t.play("ann", "Piece 10: 10, 10").ok
    r = t.send("gm", "SET PIECES ann " + "1,1 " * 10, gm=True).results[0]
    assert r.message == "ann has played already; pieces can only be set before the first play"
    r = t.send("gm", "SET PIECES zed " + "1,1 " * 10, gm=True).results[0]
    assert r.message == "zed is not a player of this game"


# -- announcements ------------------------------------------------------------------


def test_each_play_is_announced_to_players_who_chose_each():
    t = table_with("ann", "bob", "cid", "dot", pieces=SEVENS)
    assert t.send("bob", "MAIL EACH").results[0].message == (
        "accepted: you will get a mail for every play")
    t.send("cid", "MAIL NONE")
    t.send("ann", "mail each")
    out = t.send("ann", "Piece 1: 7, 1")
    (notice,) = out.notices  # ann made the play: she has the reply
    assert notice.to == ["bob"] and notice.template == "play.txt"
    assert notice.subject == "four: play 1, total 7"
    assert notice.data["play"]["handle"] == "ann" and notice.data["play"]["points"] == 5
    assert [(r["handle"], r["score"]) for r in notice.data["standings"]] == [
        ("ann", 5), ("bob", 0), ("cid", 0), ("dot", 0)]
    out = t.send("bob", "Piece 1: 7, 1")
    assert [n.to for n in out.notices] == [["ann"]]
    # a refused play announces nothing
    assert t.send("bob", "Piece 1: 7, 1").notices == []


def test_the_index_kept_between_mails_gives_what_a_fresh_look_gives():
    """The players who chose MAIL EACH are kept in the server's scratch
    (Context.memo) from mail to mail: the announcements are the same as when
    every mail starts with nothing in memory, also after a digest run wrote
    the state whole and when a mail refers to an older state."""
    script = [("ann", "JOIN"), ("bob", "JOIN"), ("cid", "JOIN"), ("bob", "MAIL EACH"), ("dot", "JOIN"),
              ("cid", "MAIL EACH"), ("ann", "Piece 1: 1, 1"), ("dot", "MAIL EACH"), ("bob", "MAIL NONE"),
              ("eve", "JOIN", "MAIL EACH", "Piece 2: 22, 2"), ("cid", "Piece 1: 3, 1"), ("tick", ""),
              ("bob", "MAIL EACH", "Piece 1: 2, 1"), ("ann", "Piece 2: 14, 2")]
    runs = []
    for memo in ({}, None):
        state = RULES.new_game({}, Context(now=NOW, rng=random.Random(1)))
        seen, kept = [], state
        for k, (handle, *texts) in enumerate(script):
            now = NOW + timedelta(minutes=40 * k)
            if handle == "tick":
                out = RULES.tick(state, Context(now=now, rng=random.Random(1), game_name="four"))
                assert out is not None and out.notices
                state = out.state
                continue
            ctx = Context(now=now, rng=random.Random(1), game_name="four",
                          actor=Actor(handle, f"{handle}@example.org", True), memo=memo if memo is not None else {})
            out = RULES.apply(state, RULES.parse(lines(*texts)), ctx)
            assert all(r.ok for r in out.results), [r.message for r in out.results]
            seen.append([(n.to, n.data) for n in out.notices])
            state = out.state
            if k == 6:
                kept = state
        if memo is not None:  # carried from mail to mail, not made again
            assert memo[EACH][0] is state["players"]
        # a mail applied to an older state (a rolled-back mail's successor)
        ctx = Context(now=NOW, rng=random.Random(1), game_name="four", actor=Actor("dot", "", True),
                      memo=memo if memo is not None else {})
        seen.append([(n.to, n.data) for n in RULES.apply(kept, RULES.parse(lines("Piece 3: 20, 3")), ctx).notices])
        runs.append(seen)
    assert runs[0] == runs[1]
    plays = [notices for notices in runs[0] if notices]
    assert [[to for to, _ in notices] for notices in plays] == [
        [["bob", "cid"]], [["cid", "dot"]], [["dot", "eve"]], [["cid", "dot", "eve"]], [["bob", "cid", "dot", "eve"]],
        [["bob", "cid"]]]
    assert [r["handle"] for r in plays[-2][0][1]["standings"]][:1] == ["ann"]


def test_digest_at_most_every_hour_and_only_when_something_happened():
    t = table_with("ann", "bob", "cid", pieces=SEVENS)  # all joined at NOW: digest by default
    t.send("cid", "MAIL NONE")
    def tick(minutes):
        return RULES.tick(t.state, t.ctx(None, now=NOW + timedelta(minutes=minutes)))
    assert tick(70) is None  # nothing happened yet
    t.play("ann", "Piece 1: 7, 1", now=NOW + timedelta(minutes=75))
    out = tick(76)
    # bob has not had a digest for an hour: it goes out now; ann made the only
    # play herself: nothing for her; cid chose none
    (digest,) = out.notices
    assert digest.to == ["bob"] and digest.template == "digest.txt"
    assert [p["number"] for p in digest.data["plays"]] == [1]
    assert digest.subject == "four: plays 1-1, total 7"
    t.state = out.state
    assert tick(77) is None
    t.play("bob", "Piece 1: 7, 1", now=NOW + timedelta(minutes=80))
    t.play("ann", "Piece 2: 7, 1", now=NOW + timedelta(minutes=90))
    # ann never had a digest: an hour since she joined has passed: play 2 is hers,
    # but bob's play 2 is news to her
    out = tick(91)
    assert [(n.to, [p["number"] for p in n.data["plays"]]) for n in out.notices] == [
        (["ann"], [2, 3])]
    t.state = out.state
    assert tick(135) is None  # bob: less than an hour since his digest at 76
    out = tick(136)
    # bob's own play 2 was not news (nothing was pending when he made it)
    assert [(n.to, [p["number"] for p in n.data["plays"]]) for n in out.notices] == [
        (["bob"], [3])]
    # the digest says what each play did
    assert out.notices[0].data["plays"][0]["line"] == (
        "     3 ann              2    +7    1     21  scores 5")


def test_pieces_query_shows_remaining_pieces_and_total():
    t = Table()
    t.join("dk", email="dklein00@gmail.com")
    t.play("dk", "Piece 3: 12, 3")
    out = t.send("dk", "PIECES", authenticated=False)
    assert out.results[0].message == "accepted: total 12, your score 0, 9 pieces left"
    me = out.sections[0].data["me"]
    assert [p["number"] for p in me["pieces"] if not p["played"]] == [1, 2, 4, 5, 6, 7, 8, 9, 10]
    assert me["next_scores"] is False


# -- state ----------------------------------------------------------------------------


def test_import_checks_the_state():
    t = table_with("ann", "bob", pieces=SEVENS)
    t.play("ann", "Piece 1: 7, 1")
    exported = json.loads(json.dumps(RULES.export_state(t.state)))
    assert RULES.import_state(exported) == t.state
    exported["plays"]["1"] = "ann 1 +7 1 7 10"
    with pytest.raises(GameError, match=r"play 1 \('ann 1 \+7 1 7 10'\): 10 points, the rules give 5"):
        RULES.import_state(exported)
    exported["plays"] = {"1": "ann 1 +6 1 6 0"}
    with pytest.raises(GameError, match="ann's piece 1 is value 7, multiplier 1"):
        RULES.import_state(exported)
    exported["plays"] = {"2": "ann 1 +7 1 7 5"}
    with pytest.raises(GameError, match="plays must be numbered 1 to 1, not 2"):
        RULES.import_state(exported)
    exported["plays"] = {"1": "ann 1 +7 1 7 5"}
    exported["total"] = 7
    with pytest.raises(GameError, match="total: not kept in a version 2 state"):
        RULES.import_state(exported)


def test_export_gives_the_plays_in_the_order_of_their_numbers():
    t = table_with("ann", "bob", pieces=SEVENS)
    round_robin(t, ["ann", "bob"])
    plays = t.state["plays"]
    assert len(plays) == 20
    scrambled = {**t.state, "plays": {k: plays[k] for k in sorted(plays)}}  # "1", "10", "2", ...
    assert list(scrambled["plays"])[:2] == ["1", "10"]
    exported = RULES.export_state(scrambled)
    assert list(exported["plays"]) == [str(n) for n in range(1, len(plays) + 1)] and exported == t.state
    assert RULES.export_state(json.loads(FIRST_SHAPE.read_text())) == RULES.import_state(
        json.loads(FIRST_SHAPE.read_text()))


def test_import_of_a_first_shape_document_checks_its_running_figures():
    """A version 1 document (plays a list, the running figures stored) is
    checked as such and imported in the current shape."""
    t = table_with("ann", "bob", pieces=SEVENS)
    t.play("ann", "Piece 1: 7, 1")
    old = first_shape(t.state)
    assert RULES.import_state(copy.deepcopy(old)) == t.state
    old["total"] = 8
    with pytest.raises(GameError, match="total is 8, the plays give 7"):
        RULES.import_state(old)
    old["total"] = 7
    old["plays"] = ["ann 1 +7 1 7 10"]
    with pytest.raises(GameError, match=r"play 1 \('ann 1 \+7 1 7 10'\): 10 points, the rules give 5"):
        RULES.import_state(old)


FIRST_SHAPE = Path(__file__).with_name("first_shape_state.json")


def test_a_stored_first_shape_state_plays_on_as_the_current_shape():
    """A game stored before plays were entries (the file was written by that
    code: 21 plays, two finishers) reads as it did: every question the server
    asks gets the same answer as of the same game in the current shape, a
    mail's first change writes it whole in the current shape, the deadline
    gives the same bonuses."""
    old = json.loads(FIRST_SHAPE.read_text())
    assert old["version"] == 1 and isinstance(old["plays"], list)
    new = RULES.import_state(copy.deepcopy(old))
    assert new["version"] == 2 and first_shape(new) == old
    for viewer in ("ann", "cid", None):
        assert RULES.view(old, viewer) == RULES.view(new, viewer)
        assert RULES.hidden_from(old, viewer) == RULES.hidden_from(new, viewer)
    assert RULES.players(old) == RULES.players(new) == ["ann", "bob", "cid", "dan"]
    assert RULES.standing(old, "dan") == RULES.standing(new, "dan") == [
        "10 pieces left, score 0, total 45; play whenever you like (plays take effect when they arrive)"]
    later = NOW + timedelta(hours=2)
    tick = RULES.tick(old, Context(now=later, rng=random.Random(1), game_name="four"))
    assert tick is not None and tick == RULES.tick(new, Context(now=later, rng=random.Random(1), game_name="four"))

    def mail(state, handle, text):
        ctx = Context(now=later, rng=random.Random(1), game_name="four", actor=Actor(handle, "", True))
        return RULES.apply(state, RULES.parse(lines(text)), ctx)

    value, mult = old["players"]["dan"]["pieces"][0]
    on_old, on_new = mail(old, "dan", f"Piece 1: -{value}, {mult}"), mail(new, "dan", f"Piece 1: -{value}, {mult}")
    assert on_old.results == on_new.results and on_old.notices == on_new.notices
    assert on_old.results[0].message.startswith(f"accepted: play 22, total {45 - value}")
    assert on_old.changed_entries is None and on_old.state == on_new.state  # written whole, now in shape 2
    assert on_new.changed_entries == {"players": ["dan"], "plays": ["22"]}
    asked = mail(old, "ann", "PIECES")  # nothing changed: nothing to write
    assert asked.state is old and asked.changed_entries == {}
    end = [RULES.run_turn(s, Context(now=later, rng=random.Random(1), game_name="four")) for s in (old, new)]
    assert end[0].state == end[1].state and end[0].notices == end[1].notices
    assert [(b["handle"], b["points"]) for b in end[0].state["bonuses"]] == [("ann", 40), ("bob", 40), ("bob", 70)]


def reference(pieces: dict[str, list[list[int]]], plays: list[tuple[str, int, int]]) -> dict:
    """The game recomputed the slow, obvious way from the list of accepted
    plays (handle, piece, signed value): scan everything for every play."""
    scores = {h: 0 for h in pieces}
    totals, points_list = [], []
    for i, (handle, piece, _value) in enumerate(plays):
        total = sum(v for _, _, v in plays[: i + 1])
        earlier = [h for h, _, _ in plays[:i]]
        mine = [j for j, h in enumerate(earlier) if h == handle]
        eligible = not mine or any(h != handle for h in earlier[mine[-1] + 1:])
        mult = pieces[handle][piece - 1][1]
        pts = 0
        if eligible and total % 7 == 0:
            pts += 5 * mult
        if eligible and total % 24 == 0:
            pts += 10 * mult
        scores[handle] += pts
        totals.append(total)
        points_list.append(pts)
    return {"scores": scores, "totals": totals, "points": points_list}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_running_figures_match_a_replay_from_scratch(data):
    handles = ["ann", "bob", "cid"]
    t = Table()
    pieces = {}
    for h in handles:
        t.join(h)
        pairs = data.draw(st.lists(
            st.tuples(st.integers(0, 30), st.integers(0, 5)), min_size=10, max_size=10))
        t.set_pieces(h, " ".join(f"{v},{m}" for v, m in pairs))
        pieces[h] = [list(p) for p in pairs]
    accepted = []
    for _ in range(data.draw(st.integers(0, 30))):
        h = data.draw(st.sampled_from(handles))
        n = data.draw(st.integers(1, 11))
        sign = data.draw(st.sampled_from(["", "+", "-"]))
        value, mult = pieces[h][n - 1] if n <= 10 else (1, 1)
        value += data.draw(st.sampled_from([0, 0, 0, 1]))  # now and then a wrong value
        result = t.play(h, f"Piece {n}: {sign}{value}, {mult}")
        used = any(p == (h, n) for p in ((a, b) for a, b, _ in accepted))
        should = n <= 10 and not used and value == pieces[h][n - 1][0]
        assert result.ok == should, result.message
        if result.ok:
            accepted.append((h, n, -value if sign == "-" else value))
    ref = reference(pieces, accepted)
    assert {h: t.score(h) for h in handles} == ref["scores"]
    assert [int(p.split()[4]) for p in plays_of(t.state)] == ref["totals"]
    assert [int(p.split()[5]) for p in plays_of(t.state)] == ref["points"]
    assert t.total == (ref["totals"][-1] if accepted else 0)
    RULES.import_state(t.state)  # the state's own consistency check agrees
    out = t.end()
    RULES.import_state(out.state)
    scoring = [i for i, p in enumerate(ref["points"]) if p]
    if scoring:
        assert out.state["bonuses"][-1]["handle"] == accepted[scoring[-1]][0]


# -- texts ------------------------------------------------------------------------------


def render(template: str, data: dict) -> str:
    return driver.render("sequence", template, data)


def test_mails_render():
    t = table_with("bob", "ann", pieces=SEVENS)
    t.set_pieces("ann", "7,16 " * 10)
    t.send("ann", "MAIL EACH")
    t.play("bob", "Piece 1: 7, 1")
    play_notice = t.send("ann", "Piece 1: 7, 16").notices
    t.send("bob", "MAIL EACH")
    (play_notice,) = t.send("ann", "Piece 2: 7, 16").notices
    text = render("play.txt", play_notice.data)
    assert text.splitlines()[:2] == [
        "Play 3: ann played piece 2 (+7, multiplier 16).",
        "The total is now 21 = 3 x 7: no points: nobody played between.",
    ]
    assert "    1. ann                      80" in text.splitlines()
    pieces = t.send("bob", "PIECES").sections[0]
    text = render(pieces.template, pieces.data)
    assert "Total: 21 = 3 x 7 after 3 plays; 2 players." in text
    assert "  Piece  1: value  7, multiplier 1   (used in play 1)" in text.splitlines()
    assert "  Piece  2: value  7, multiplier 1" in text.splitlines()
    t.play("bob", "Piece 2: 7, 1")
    report = t.end().notices[0]
    text = render("report.txt", report.data)
    lines_ = text.splitlines()
    assert "     4 bob              2    +7    1     28  scores 5" in lines_
    assert "  bob +70: the last play that scored (play 4)" in lines_
    assert lines_[-2:] == [
        "The winner is ann with 80 points.",
        "bob also has 80 points; ann reached that score first.",
    ]
    assert all(len(line) <= 78 for line in lines_)
    view = RULES.view(t.state, "bob")[0]
    assert "The deadline has passed: the game is over." in render(view.template, view.data)


def test_final_report_html_is_escaped():
    t = table_with("ann", "bob", pieces=SEVENS)
    t.play("ann", "Piece 1: 7, 1")
    data = t.end().notices[0].data
    data["standings"][0]["handle"] = "<b>ann</b>"  # handles are plain, but never trusted
    html = driver.render("sequence", "report.txt", data, html=True)
    assert "<tr><td>1</td><td>ann</td><td>1</td><td>+7</td><td>1</td><td>7</td><td>scores 5</td></tr>" in html
    assert "&lt;b&gt;ann&lt;/b&gt;" in html
    assert "<li>ann +70: the last play that scored (play 1)</li>" in html
