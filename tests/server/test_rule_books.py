"""``help KIND`` over SMTP is each game's rule book, and every kind does what
its rule book says about leaving: LEAVE where the rules allow it, a clear
refusal with the reason where they do not (issues 17 and 18.6)."""

from __future__ import annotations

from games import KINDS
from games.agora_rpg.engine import ENCOUNTERS
from games.curio.model import CAPTURE_RULES
from games.giveaway.model import START_HOLDING
from games.helptext import MAX_LINE
from games.rmpm.engine import ACTION_TABLE
from games.sequence.model import SEVEN_POINTS, TWENTY_FOUR_POINTS


def flat(text: str) -> str:
    return " ".join(text.split())


def rule_book(text: str, title: str) -> str:
    """The help section of a reply (from its underlined title on)."""
    head = f"{title}\n{'=' * len(title)}\n"
    assert head in text, text
    return text.split(head, 1)[1]


# -- help KIND --------------------------------------------------------------------------


def test_help_kind_answers_with_the_engines_tables(pbm):
    sender = "reader@example.org"
    texts = {}
    for kind in KINDS:
        reply = pbm.mail(sender, "pbm", f"help {kind}")
        text = pbm.text(reply)
        assert "ok (line 1): the rules and commands of" in text
        texts[kind] = text
        # the whole text part fits a terminal: prose at 72, nothing over 78
        wide = [line for line in text.splitlines() if len(line) > MAX_LINE]
        assert wide == [], f"help {kind}: lines over {MAX_LINE} columns: {wide}"

    rmpm = rule_book(texts["rmpm"], "Rich Man - Poor Man (rmpm)")
    for row in ACTION_TABLE:
        rng = str(row.low) if row.low == row.high else f"{row.low}-{row.high}"
        assert any(line.startswith(f"  {rng} ") for line in rmpm.splitlines()), rng
    assert "  1-10    V pays 500 WCU to A." in rmpm
    assert "MN = (fields moved - 1) x 4 + the direction's code" in flat(rmpm)

    agora = rule_book(texts["agora_rpg"], "Agora: The Role-Playing Game (agora_rpg)")
    for low, high, _, _ in ENCOUNTERS:
        rng = str(low) if low == high else f"{low}-{high}"
        assert any(line.startswith(f"  {rng} ") for line in agora.splitlines()), rng
    assert "  91-100  a monster, level N+1" in agora

    curio = flat(rule_book(texts["curio"], "Curio (curio)"))
    for code, rule in CAPTURE_RULES.items():
        assert f"-capture_{code}" in curio and rule.words in curio
    assert "After a capture the capturing piece turns round" in curio

    giveaway = flat(rule_book(texts["giveaway"], "Giveaway (giveaway)"))
    assert f"Everybody holds {START_HOLDING} points in round 1" in giveaway
    assert "no ring A > B > C > A: rule 6, B gives A 1" in giveaway

    sequence = flat(rule_book(texts["sequence"], "The Fourth Game (sequence)"))
    assert f"A play scores {SEVEN_POINTS} x its multiplier" in sequence
    assert f"{TWENTY_FOUR_POINTS} x its multiplier if it is a multiple of 24" in sequence


def test_help_for_an_unknown_kind_names_the_kinds(pbm):
    text = pbm.flat(pbm.mail("reader@example.org", "pbm", "help chess"))
    assert "REFUSED (line 1): there is no game kind 'chess'; kinds: " + ", ".join(KINDS) in text


# -- leaving, kind by kind ----------------------------------------------------------------


def test_rmpm_leave_takes_the_player_off_the_board_at_the_update(pbm):
    players = {"alice": ("alice-secret-1", "JOIN bd 01-05 25-10 blue dragon"),
               "bob": ("bob-secret-22", "JOIN ir 01-20 25-20 Irata")}
    emails = {h: pbm.register(h, pw) for h, (pw, _) in players.items()}
    pbm.new_game("rmpm", "world")
    for h, (pw, join) in players.items():
        assert "accepted" in pbm.flat(pbm.mail(emails[h], "world", f"$${pw}$$\n{join}"))
    pbm.run_turn("world")

    # LEAVE with other orders is refused: it must be alone
    text = pbm.flat(pbm.mail(emails["alice"], "world", "$$alice-secret-1$$\nLEAVE\nBUY"))
    assert "REFUSED (line 2): LEAVE must be the only order of the mail" in text
    text = pbm.flat(pbm.mail(emails["alice"], "world", "$$alice-secret-1$$\nLEAVE"))
    assert ("accepted: you leave the game at the update of week 2: your chips are removed, your fields "
            "become unowned and your money leaves the game") in text
    assert "alice" in pbm.state("world")["players"]  # not before the update
    pbm.run_turn("world")
    assert "alice" not in pbm.state("world")["players"]
    assert "bob" in pbm.state("world")["players"]


def test_giveaway_leave_before_round_one_takes_the_name_off_the_list(pbm):
    pws = {h: f"{h}-gives-33" for h in ("ann", "ben", "cat")}
    emails = {h: pbm.register(h, pw) for h, pw in pws.items()}
    pbm.new_game("giveaway", "gift")
    for h, pw in pws.items():
        assert "accepted" in pbm.flat(pbm.mail(emails[h], "gift", f"JOIN\n$${pw}$$"))
    text = pbm.flat(pbm.mail(emails["cat"], "gift", "LEAVE\n$$cat-gives-33$$"))
    assert "accepted: you have left the game before round 1" in text
    assert [p["handle"] for p in pbm.state("gift")["players"]] == ["ann", "ben"]
    text = pbm.flat(pbm.mail(emails["cat"], "gift", "LEAVE\n$$cat-gives-33$$"))
    assert "REFUSED (line 1): you are not playing in this game" in text


def test_agora_leave_destroys_the_character_and_a_quick_return_brings_no_tokens(pbm):
    email = pbm.register("alice", "dragon-slayer-7")
    pbm.new_game("agora_rpg", "crawl")
    assert "joins at the Town Square with 5 movement tokens" in pbm.flat(
        pbm.mail(email, "crawl", "JOIN\n$$dragon-slayer-7$$"))
    text = pbm.flat(pbm.mail(email, "crawl", "LEAVE\n$$dragon-slayer-7$$"))
    assert "accepted: alice leaves the game; everything alice held is gone" in text
    assert "alice" not in pbm.state("crawl")["characters"]
    text = pbm.flat(pbm.mail(email, "crawl", "JOIN\n$$dragon-slayer-7$$"))
    assert "joins at the Town Square with no movement tokens: alice left less than 7 days ago" in text


def test_curio_leave_is_refused_pointing_to_resign(pbm):
    pws = {"alice": "alice-secret-1", "bob": "bob-secret-2"}
    emails = {h: pbm.register(h, pw) for h, pw in pws.items()}
    reply = pbm.mail(emails["alice"], "pbm", "curio challenge alice bob\n$$alice-secret-1$$")
    assert "accepted: board 101" in pbm.flat(reply)
    before = pbm.state("curio")

    # to the game's address, and pbmserv-style to pbm@ with the password in the line
    text = pbm.flat(pbm.mail(emails["bob"], "curio", "LEAVE\n$$bob-secret-2$$"))
    assert ("REFUSED (line 1): curio has no LEAVE: each board is a game of its own between two players; "
            "to stop playing a board, resign it: curio resign <board> <userid> <password>") in text
    text = pbm.text(pbm.mail(emails["bob"], "pbm", "curio leave 101 bob bob-secret-2"))
    assert "curio has no LEAVE" in flat(text) and "bob-secret-2" not in text
    assert pbm.state("curio") == before

    # what the refusal points to works: resigning before the first move declines
    text = pbm.flat(pbm.mail(emails["bob"], "curio", "resign 101 bob bob-secret-2"))
    assert "accepted: challenge declined on board 101" in text


def test_sequence_has_no_leave_and_says_why(pbm):
    email = pbm.register("ann", "pw-ann-77", email="ann@example.org")
    pbm.new_game("sequence", "four")
    assert "accepted: you are player 1" in pbm.flat(pbm.mail(email, "four", "JOIN\n$$pw-ann-77$$"))
    before = pbm.state("four")
    text = pbm.flat(pbm.mail(email, "four", "LEAVE\n$$pw-ann-77$$"))
    assert ("REFUSED (line 1): the Fourth Game has no LEAVE: every play is public and stays in the "
            "running total") in text
    assert "send MAIL NONE to stop the mails about plays" in text
    assert pbm.state("four") == before
