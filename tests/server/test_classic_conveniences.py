"""What players of the classic servers expect (issue 28, items 12-14), over
real SMTP: njudge's `summary`, `who` and `info` at pbm@, the GM's
replacement player and a full game's waiting list; Eressea's order template
at the end of each turn report and the CHECK mail that checks orders without
submitting them."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from tests.server import weeks
from tests.server.weeks import PW, addr, send


def flat_mail(pbm, handle: str, to: str, body: str) -> str:
    return pbm.flat(pbm.mail(addr(handle), to, body + f"\n$${PW[handle]}$$"))


def game_mails(pbm, who: str, game: str, words: str) -> list:
    pbm.settle()
    return [m for m in pbm.inbox(addr(who)) if f"<{game}@pbm.test>" in str(m["From"]) and words in str(m["Subject"])]


# -- 13: summary, who, info ------------------------------------------------------------
def test_summary_gives_every_week_its_scores_and_report(pbm):
    weeks.rmpm(pbm)  # two weeks run: ann moved in week 2
    text = flat_mail(pbm, "bob", "pbm", "summary world")
    assert "the game world so far follows" in text, text
    assert "WEEK 1 (processed" in text and "WEEK 2 (processed" in text, text
    assert "Scores: " in text and "ann " in text and "bob " in text, text
    assert text.index("WEEK 1") < text.index("WEEK 2")
    assert "RICH MAN - POOR MAN: THE BOARD AFTER THE UPDATE OF WEEK 2" in text
    # refusals: a game without processed turns, a missing name, a player's password
    pbm.new_game("giveaway", "fresh")
    assert "no round of fresh has been processed yet" in flat_mail(pbm, "bob", "pbm", "summary fresh")
    assert "expected: summary NAME, e.g. summary g1" in flat_mail(pbm, "bob", "pbm", "summary")
    assert "this needs your password" in pbm.flat(pbm.mail(addr("bob"), "pbm", "summary world"))
    # help lists the new commands (it reads the registry)
    help_text = pbm.flat(pbm.mail(addr("bob"), "pbm", "help"))
    assert "summary NAME" in help_text and "who NAME" in help_text and "info NAME" in help_text


def test_who_lists_the_players_and_their_last_orders_without_addresses(pbm):
    weeks.players(pbm, "ann", "bob", "cat")
    pbm.new_game("giveaway", "gift")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "JOIN")
    send(pbm, "ann", "gift", "GIVE 3 TO bob")
    text = pbm.text(pbm.mail("stranger@example.org", "pbm", "who gift"))
    assert "gift: who plays" in text and "3 players" in text, text
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert "last orders" in lines["ann"] and "UTC" in lines["ann"], text
    assert "no orders yet" in lines["bob"] and "(no orders yet for round 1)" in lines["bob"], text
    assert "@example.org" not in text.split("pbm-server")[0]  # no player's address
    assert "there is no game named nowhere" in pbm.flat(pbm.mail("stranger@example.org", "pbm", "who nowhere"))


def test_info_is_the_text_the_gm_sets(pbm):
    weeks.players(pbm, "ann")
    pbm.new_game("giveaway", "gift")
    assert "The game master has set no information text for gift." in flat_mail(pbm, "ann", "pbm", "info gift")
    out = pbm.cli("game", "info", "gift", "Friendly game; house rule: no alliances before round 3.").stdout
    assert "gift: info set" in out
    text = pbm.flat(pbm.mail("stranger@example.org", "pbm", "info gift"))
    assert "Friendly game; house rule: no alliances before round 3." in text, text
    pbm.cli("game", "info", "gift", "none")
    assert "set no information text" in pbm.flat(pbm.mail("stranger@example.org", "pbm", "info gift"))
    assert pbm.cli("game", "info", "nowhere", "x", check=False).returncode != 0


def test_gm_hands_a_dropped_players_position_to_a_new_account(pbm):
    weeks.rmpm(pbm)  # ann and bob on the board after two weeks
    weeks.players(pbm, "cat")
    before = pbm.state("world")["players"]["bob"]
    out = pbm.cli("game", "replace", "world", "bob", "cat").stdout
    assert "world: cat now plays the position of bob" in out, out
    state = pbm.state("world")
    assert "bob" not in state["players"] and state["players"]["cat"] == before
    pbm.settle()
    [told] = game_mails(pbm, "cat", "world", "you take over bob's position")
    assert "it is yours" in pbm.flat(told)
    assert game_mails(pbm, "bob", "world", "your position was handed on")
    assert game_mails(pbm, "ann", "world", "cat replaces bob")
    # the new player's orders are taken; the old one's are not
    text = flat_mail(pbm, "cat", "world", "01-06 -> 01-07")
    assert "you are not in this game" not in text and "a move needs two lines" in text, text
    assert "you are not in this game" in flat_mail(pbm, "bob", "world", "01-06 -> 01-07")
    assert "who plays" in pbm.flat(pbm.mail(addr("ann"), "pbm", "who world"))
    refused = pbm.cli("game", "replace", "world", "bob", "cat", check=False)
    assert refused.returncode != 0 and "bob does not play in world" in refused.stdout + refused.stderr
    assert pbm.sql("SELECT count(*) FROM memberships m JOIN accounts a ON a.id = m.account_id "
                   "WHERE a.handle = 'bob' AND m.left_at IS NULL")[0][0] == 0


def test_a_join_to_a_full_game_waits_and_gets_the_seat_that_frees(pbm):
    weeks.players(pbm, "ann", "bob", "cat", "dan")
    pbm.new_game("giveaway", "gift", seats=2)
    send(pbm, "ann", "gift", "JOIN")
    send(pbm, "bob", "gift", "JOIN")
    text = flat_mail(pbm, "cat", "gift", "JOIN")
    assert "gift is full (2 of 2 seats taken), so you are on its waiting list, number 1" in text, text
    text = flat_mail(pbm, "dan", "gift", "JOIN")
    assert "waiting list, number 2" in text, text
    assert "Waiting for a seat: 1. cat, 2. dan" in pbm.flat(pbm.mail(addr("ann"), "pbm", "who gift"))
    # bob leaves: cat, first on the list, gets the seat and is told
    send(pbm, "bob", "gift", "LEAVE")
    pbm.settle()
    [seated] = game_mails(pbm, "cat", "gift", "a seat is yours")
    assert "your waiting JOIN (JOIN) was sent to the game" in pbm.flat(seated)
    players = [p["handle"] for p in pbm.state("gift")["players"]] + list(pbm.state("gift").get("joins", {}))
    assert "cat" in [p.lower() for p in players], pbm.state("gift")
    assert "Waiting for a seat: 1. dan" in pbm.flat(pbm.mail(addr("ann"), "pbm", "who gift"))


# -- 14: order template and CHECK ------------------------------------------------------
def test_each_rmpm_report_ends_with_the_players_orders_to_send_back(pbm):
    weeks.rmpm(pbm)
    reports = game_mails(pbm, "ann", "world", "report of week 2")
    assert reports, [m["Subject"] for m in pbm.inbox(addr("ann"))]
    text = pbm.text(reports[-1])
    tail = text[text.index("YOUR ORDERS FOR WEEK 3"):]
    assert "send them back to world@pbm.test" in " ".join(tail.split())
    # last week's moves were carried out: their chips have left 01-05 and 25-10, so no line repeats them
    assert "01-05 -> 01-06" not in tail and "your orders of week 2 were carried out" in " ".join(tail.split()), tail
    bob = pbm.text(game_mails(pbm, "bob", "world", "report of week 2")[-1])
    assert "(no orders from you for week 2" in " ".join(bob.split()), bob
    assert "01-05 -> 01-06" not in bob[bob.index("YOUR ORDERS FOR WEEK 3"):]  # never another's orders
    # the history keeps the public report without anyone's orders
    history = pbm.flat(pbm.mail(addr("bob"), "pbm", f"history world 2\n$${PW['bob']}$$"))
    assert "YOUR ORDERS FOR WEEK" not in history


def test_each_agora_report_ends_with_an_order_template(pbm):
    weeks.agora(pbm)
    [report] = game_mails(pbm, "ann", "town", "report for week")[-1:]
    text = pbm.text(report)
    tail = " ".join(text[text.index("YOUR ORDERS FOR WEEK 2"):].split())
    assert "send them back to town@pbm.test" in tail and ("ATTACK" in tail or "EXPLORE" in tail or "MOVE" in tail), tail


def test_check_says_what_would_be_accepted_and_changes_nothing(pbm):
    weeks.rmpm(pbm)
    send(pbm, "ann", "world", "01-06 -> 01-07")
    held = pbm.sql("SELECT lines FROM orders WHERE handle = 'ann' AND turn = 3")[0][0]
    version = pbm.sql("SELECT version FROM games WHERE name = 'world'")[0][0]
    outbox = pbm.sql("SELECT count(*) FROM outbox")[0][0]
    reply = pbm.mail(addr("ann"), "world", f"CHECK\n01-06 => 02-06\n24-10 -> 23-10\n$${PW['ann']}$$")
    text = pbm.flat(reply)
    assert "CHECK" in str(reply["Subject"]), reply["Subject"]
    assert "were checked, not submitted. Nothing was changed" in text, text
    assert "would be refused" in text and "01-06 => 02-06" in text, text
    pbm.settle()
    assert pbm.sql("SELECT lines FROM orders WHERE handle = 'ann' AND turn = 3")[0][0] == held
    assert pbm.sql("SELECT version FROM games WHERE name = 'world'")[0][0] == version
    assert pbm.sql("SELECT count(*) FROM outbox")[0][0] == outbox + 1  # the reply only
    assert "would be refused: write the arrow as ->" in text, text


def test_check_of_a_good_order_holds_nothing(pbm):
    weeks.players(pbm, "ann", "bob", "cat")
    pbm.new_game("giveaway", "gift")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "JOIN")
    text = flat_mail(pbm, "ann", "gift", "CHECK\nGIVE 3 TO bob")
    assert "would be accepted" in text and "would be refused" not in text, text
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 0
    assert "no orders yet for round 1" in pbm.flat(pbm.mail(addr("bob"), "pbm", "who gift")).split("ann")[1]
    # without CHECK the same line is held
    assert "order held" in str(pbm.mail(addr("ann"), "gift", f"GIVE 3 TO bob\n$${PW['ann']}$$")["Subject"])
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 1


# -- 12: curio's move clock and open challenges -----------------------------------------
T0 = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def curio_mail(pbm, handle: str, line: str) -> str:
    return pbm.flat(pbm.mail(addr(handle), "pbm", f"{line}\n$${PW[handle]}$$"))


def curio_mails(pbm, who: str, words: str) -> list:
    return [m for m in pbm.inbox(addr(who)) if words in str(m["Subject"])]


def wait_subject(pbm, who: str, words: str) -> list:
    """The mails to ``who`` whose Subject has ``words``, once there is one (the scheduler's tick sends them)."""
    deadline = time.monotonic() + 60  # a loaded CI machine (both passes side by side) has taken over 30 s
    while time.monotonic() < deadline:
        found = curio_mails(pbm, who, words)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no mail to {who} about {words!r}: {[str(m['Subject']) for m in pbm.inbox(addr(who))]}")


def test_the_move_clock_reminds_the_player_to_move_and_the_other_wins_on_time(pbm_stopped):
    pbm = pbm_stopped
    pbm.set_clock(T0)
    pbm.start()
    weeks.players(pbm, "ann", "bob")
    pbm.new_game("curio", "curio", clock="2d")  # the game's default clock for its boards
    text = curio_mail(pbm, "ann", "curio challenge -base=3 -cols=3 ann bob")
    assert "board 101: ann (Light) vs bob (Dark)" in text, text
    assert "Move clock: 2 days for each move. ann (Light) has until 2026-11-26 12:00 UTC to move" in text, text
    pbm.settle()
    [told] = curio_mails(pbm, "bob", "Curio board 101: new game")
    assert "Move clock: 2 days for each move" in pbm.flat(told)
    # a quarter of the clock (12 hours) before it runs out: one reminder to ann
    pbm.set_clock(T0 + timedelta(hours=36, minutes=1))
    [reminder] = wait_subject(pbm, "ann", "reminder")
    assert "Curio board 101: reminder, your move clock runs out 2026-11-26 12:00 UTC" in str(reminder["Subject"])
    assert "after that bob wins on time" in pbm.flat(reminder)
    time.sleep(1.5)  # more ticks: still one reminder
    assert len(curio_mails(pbm, "ann", "reminder")) == 1
    # the clock runs out: bob wins, both are told, the board is over
    pbm.set_clock(T0 + timedelta(days=2, minutes=1))
    [lost] = wait_subject(pbm, "ann", "lost on time")
    assert "ann's move clock on board 101 ran out: bob wins on time." in pbm.flat(lost)
    pbm.settle()
    assert curio_mails(pbm, "bob", "Curio board 101: won on time")
    board = pbm.state("curio")["boards"]["101"]
    assert board["status"] == "finished" and board["winner"] == "bob" and "ran out of time" in board["reason"]


def test_claim_a_win_on_time_and_the_challenge_option_clock(pbm_stopped):
    pbm = pbm_stopped
    pbm.set_clock(T0)
    pbm.start("scheduler")  # no ticks: the clock runs out unnoticed until bob claims
    weeks.players(pbm, "ann", "bob")
    text = curio_mail(pbm, "ann", "curio challenge -base=3 -cols=3 -clock=1d ann bob")
    assert "Move clock: 1 day for each move. ann (Light) has until 2026-11-25 12:00 UTC" in text, text
    assert "not a move clock" in curio_mail(pbm, "ann", "curio challenge -clock=soon ann bob")
    text = pbm.flat(pbm.mail(addr("bob"), "pbm", f"curio claim 101 bob {PW['bob']}"))
    assert "ann has until 2026-11-25 12:00 UTC to move on board 101: the clock has not run out" in text, text
    pbm.set_clock(T0 + timedelta(days=1, minutes=5))
    text = pbm.flat(pbm.mail(addr("ann"), "pbm", f"curio claim 101 ann {PW['ann']}"))
    assert "it is your move on board 101" in text, text
    text = pbm.flat(pbm.mail(addr("bob"), "pbm", f"curio claim 101 bob {PW['bob']}"))
    assert "accepted: board 101 won on time" in text and PW["bob"] not in text, text
    pbm.settle()
    assert curio_mails(pbm, "ann", "Curio board 101: lost on time")
    assert pbm.state("curio")["boards"]["101"]["winner"] == "bob"


def test_an_open_challenge_waits_in_curio_open_until_someone_accepts(pbm):
    weeks.players(pbm, "ann", "bob", "cat")
    text = curio_mail(pbm, "ann", "curio challenge -base=3 -cols=3 ann")
    assert "open challenge 1: it waits in 'curio open' until someone accepts it with 'curio accept 1'" in text, text
    text = pbm.flat(pbm.mail(addr("cat"), "pbm", "curio open"))
    assert "1. ann (plays Light)" in text and "options -base=3 -cols=3" in text, text
    assert "there is no open challenge 7" in curio_mail(pbm, "bob", "curio accept 7")
    assert "is your own" in curio_mail(pbm, "ann", "curio accept 1")
    text = curio_mail(pbm, "bob", "curio accept 1")
    assert "board 101: ann (Light) vs bob (Dark), ann moves first" in text, text
    pbm.settle()
    [told] = curio_mails(pbm, "ann", "Curio board 101: bob accepted your open challenge")
    assert "you play Light" in pbm.flat(told) or "ann (Light)" in pbm.flat(told)
    assert "No open challenge is waiting" in pbm.flat(pbm.mail(addr("cat"), "pbm", "curio open"))
    assert "there is no open challenge 1" in curio_mail(pbm, "cat", "curio accept 1")
    assert pbm.state("curio")["boards"]["101"]["dark"] == "bob"
