"""Observers, over real SMTP: `observe NAME` / `unobserve NAME` to pbm@DOMAIN,
and for every game kind, an observer's mail has the public facts of a report
and nothing the rules hide (hidden gifts and orders, curio faces, players'
addresses), never orders, replies or press."""

from __future__ import annotations

import re

from games import get_rules
from games.curio.view import parse_ascii_board

OBS = "olga@example.org"
OBS_PW = "olga-pass-1"


def observer(pbm) -> str:
    return pbm.register("olga", OBS_PW, email=OBS)


def observe(pbm, name: str) -> str:
    return pbm.flat(pbm.mail(OBS, "pbm", f"observe {name}\n$${OBS_PW}$$"))


def game_mails(pbm, name: str) -> list:
    """The observer's mails from game NAME (not the replies from pbm@)."""
    pbm.settle()
    return [m for m in pbm.inbox(OBS) if f"<{name}@pbm.test>" in str(m["From"])]


def no_hidden(pbm, kind: str, name: str, mails: list) -> None:
    hidden = [h for h in get_rules(kind).hidden_from(pbm.state(name), None) if h]
    for m in mails:
        text = pbm.text(m) + (pbm.html(m) or "")
        assert not [h for h in hidden if h in text], (m["Subject"], hidden)


def test_observe_refusals_and_unobserve(pbm):
    alice = pbm.register("alice", "alice-pass-1")
    observer(pbm)
    pbm.new_game("giveaway", "ring")
    pbm.mail(alice, "ring", "JOIN\n$$alice-pass-1$$")
    text = pbm.flat(pbm.mail("stranger@example.org", "pbm", "observe ring"))
    assert "you are not registered: first send 'register HANDLE PASSWORD'" in text
    assert "this needs your password" in pbm.flat(pbm.mail(OBS, "pbm", "observe ring"))
    text = pbm.flat(pbm.mail(alice, "pbm", "observe ring\n$$alice-pass-1$$"))
    assert "you play in ring" in text and "you cannot observe your own game" in text
    assert "there is no game named nowhere" in observe(pbm, "nowhere")
    assert "expected: observe NAME" in observe(pbm, "")
    assert "you now observe ring" in observe(pbm, "ring")
    assert "you observe ring already" in observe(pbm, "ring")
    assert pbm.sql("SELECT count(*) FROM observers")[0][0] == 1
    text = pbm.text(pbm.mail(OBS, "pbm", "games"))
    assert "(you observe)" in text
    assert "You observe: ring" in pbm.flat(pbm.mail(OBS, "pbm", f"status\n$${OBS_PW}$$"))
    text = pbm.flat(pbm.mail(OBS, "pbm", f"unobserve ring\n$${OBS_PW}$$"))
    assert "you no longer observe ring" in text
    text = pbm.flat(pbm.mail(OBS, "pbm", f"unobserve ring\n$${OBS_PW}$$"))
    assert "you do not observe ring; the games you observe: none" in text
    assert pbm.sql("SELECT count(*) FROM observers")[0][0] == 0
    help_text = pbm.flat(pbm.mail(OBS, "pbm", "help"))
    assert "observe NAME" in help_text and "unobserve NAME" in help_text


def test_giveaway_observer_gets_the_round_report_never_the_held_gifts(pbm):
    pw = {"alice": "alice-pass-1", "bob": "bob-pass-22", "carol": "carol-pass-3"}
    emails = {h: pbm.register(h, p) for h, p in pw.items()}
    observer(pbm)
    pbm.new_game("giveaway", "ring")
    assert "you now observe ring" in observe(pbm, "ring")
    for h in pw:
        pbm.mail(emails[h], "ring", f"JOIN\n$${pw[h]}$$")
    pbm.mail(emails["alice"], "ring", "GIVE 2 TO bob\nGIVE 1 TO carol\n$$alice-pass-1$$")
    pbm.mail(emails["bob"], "ring", "GIVE 3 TO carol\n$$bob-pass-22$$")
    pbm.mail(emails["carol"], "ring", "GIVE 3 TO alice\n$$carol-pass-3$$")
    assert game_mails(pbm, "ring") == []  # orders make no mail for an observer
    pbm.run_turn("ring")
    (report,) = game_mails(pbm, "ring")
    assert str(report["Subject"]) == "[observer] ring: round 1 report"
    text = pbm.flat(report)
    # the public facts: every gift of the round played, the scores
    assert "alice held 3 and gave 2 to bob, 1 to carol." in text
    assert re.search(r"Player +Held +Received +Bonus +Score +Next", pbm.text(report))
    assert "You observe ring: this is what the public sees" in text

    # round 2: gifts held are hidden until the round is resolved
    assert "accepted" in pbm.flat(pbm.mail(emails["alice"], "ring", "GIVE 6 TO carol\n$$alice-pass-1$$"))
    assert get_rules("giveaway").hidden_from(pbm.state("ring"), None)  # something is hidden now
    mails = game_mails(pbm, "ring")
    assert len(mails) == 1
    no_hidden(pbm, "giveaway", "ring", mails)
    assert all(not pbm.text(m).count("GIVE 6") for m in pbm.inbox(OBS))


def test_curio_observer_sees_no_face_the_players_hide(pbm):
    pw = {"alice": "alice-secret-1", "bob": "bob-secret-2"}
    a, b = (pbm.register(h, p) for h, p in pw.items())
    observer(pbm)
    pbm.mail(a, "pbm", f"curio challenge -base=3 -cols=3 -draw_moves=8 alice bob\n$${pw['alice']}$$")
    assert "you now observe curio" in observe(pbm, "curio")
    assert "accepted" in pbm.flat(pbm.mail(a, "pbm", f"curio move 101 alice {pw['alice']} a2-a3"))
    assert "accepted" in pbm.flat(pbm.mail(b, "curio", f"move 101 bob {pw['bob']} c4-c3"))
    mails = game_mails(pbm, "curio")
    assert [str(m["Subject"]) for m in mails] == [
        "[observer] curio board 101: alice vs bob, after move 1",
        "[observer] curio board 101: alice vs bob, after move 2",
    ]
    for m in mails:
        text = pbm.text(m)
        assert "Curio board 101: alice (Light) vs bob (Dark), observer's view" in text
        assert "Last moves:" in text and "a2-a3" in text
        grid = parse_ascii_board(text)
        pieces = [t for t in grid.values() if t != "."]
        # no piece has turned yet: an observer sees no face at all
        assert pieces and all(t in ("[?]", "(?)") for t in pieces), grid
    no_hidden(pbm, "curio", "curio", mails)
    # the players' own boards show faces (what the observer's lacks)
    own = parse_ascii_board(pbm.text(pbm.inbox(a)[-1]))
    assert any(re.fullmatch(r"\[\d\]", t) for t in own.values())


def test_agora_observer_gets_the_weekly_report_not_the_replies(pbm):
    alice = pbm.register("alice", "alice-pass-1")
    observer(pbm)
    pbm.new_game("agora_rpg", "crawl")
    assert "you now observe crawl" in observe(pbm, "crawl")
    pbm.mail(alice, "crawl", "JOIN\nMOVE Town Square -> Dungeon Level 1\n$$alice-pass-1$$")
    assert game_mails(pbm, "crawl") == []
    pbm.run_turn("crawl")
    (report,) = game_mails(pbm, "crawl")
    assert "report for week 1" in str(report["Subject"])
    text = pbm.flat(report)
    assert "the Game Master's report for week 1" in text and "alice" in text
    no_hidden(pbm, "agora_rpg", "crawl", [report])


def test_rmpm_observer_gets_the_weekly_report_never_the_orders(pbm):
    pw = {"alice": "alice-secret-1", "bob": "bob-secret-22"}
    joins = {"alice": "JOIN bd 01-05 25-10 blue dragon", "bob": "JOIN ir 01-06 25-11 Irata"}
    emails = {h: pbm.register(h, p) for h, p in pw.items()}
    observer(pbm)
    pbm.new_game("rmpm", "world")
    assert "you now observe world" in observe(pbm, "world")
    for h in pw:
        pbm.mail(emails[h], "world", f"$${pw[h]}$$\n{joins[h]}")
    pbm.run_turn("world")
    (week1,) = game_mails(pbm, "world")
    text = pbm.text(week1)
    assert "NEW ON THE BOARD:" in text and "01 bd blue dragon: chips on 01-05 25-10" in " ".join(text.split())
    reply = pbm.flat(pbm.mail(emails["alice"], "world", "$$alice-secret-1$$\n01-05 -> 01-06\n25-10 -> 24-10"))
    assert "Pre-analysis" in reply
    held = get_rules("rmpm").hidden_from(pbm.state("world"), None)
    assert held  # alice's orders are held, hidden from the public
    mails = game_mails(pbm, "world")
    assert len(mails) == 1
    no_hidden(pbm, "rmpm", "world", mails)
    assert not any("Pre-analysis" in pbm.text(m) for m in pbm.inbox(OBS))


def test_sequence_observer_gets_each_play_but_no_address(pbm):
    players = {"ann": "ann@example.org", "dk": "dklein00@example.org"}
    for h, e in players.items():
        pbm.register(h, f"pw-{h}-77", email=e)
    observer(pbm)
    pbm.new_game("sequence", "four")
    for h, e in players.items():
        pbm.mail(e, "four", f"JOIN\n$$pw-{h}-77$$")
    assert "you now observe four" in observe(pbm, "four")
    reply = pbm.flat(pbm.mail(players["dk"], "four", "Piece Number 3: -12, 3.\n$$pw-dk-77$$"))
    assert "accepted: play 1, total -12" in reply
    (play,) = game_mails(pbm, "four")
    assert str(play["Subject"]) == "[observer] four: play 1, total -12"
    text = pbm.flat(play)
    assert "Play 1: dk played piece 3" in text and "Scores:" in text
    assert "You get a mail for every play" not in text  # that is for players
    no_hidden(pbm, "sequence", "four", [play])
    assert all("dklein00" not in pbm.text(m) and "ann@example.org" not in pbm.text(m) for m in pbm.inbox(OBS))
    # nobody else got a mail for the play (nobody asked for MAIL EACH)
    assert [m for m in pbm.inbox(players["ann"]) if "play 1" in str(m["Subject"])] == []
