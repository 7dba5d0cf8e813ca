"""Two weeks of a four-player Rich Man - Poor Man game, entirely by mail over
SMTP against a real `pbm serve`; the checks are what the players read."""

from __future__ import annotations

import re

PLAYERS = {
    # handle: (password, JOIN line)
    "alice": ("alice-secret-1", "JOIN bd 01-05 25-10 blue dragon"),
    "bob": ("bob-secret-22", "JOIN ir 01-06 25-11 Irata"),
    "carol": ("carol-secret-333", "JOIN mb 05-01 10-25 mibo"),
    "dave": ("dave-secret-4444", "JOIN dp 01-20 25-20 daleus"),
}


def squeeze(line: str) -> str:
    return " ".join(line.split())


def moves_row(text: str, number: str) -> str:
    start = text.index("MOVES DURING LAST BOARD UPDATE")
    for line in text[start:].splitlines():
        if line.startswith(number + " "):
            return squeeze(line)
    raise AssertionError(f"no moves row {number} in:\n{text}")


def board_row(text: str, row: int) -> tuple[str, str]:
    """The number line and the chip line of a board row in a report."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("+") and line.endswith(f"+ {row:02d}"):
            return line, lines[i + 1]
    raise AssertionError(f"no board row {row}")


def cell(line: str, col: int) -> str:
    return line[3 * (col - 1) + 1: 3 * (col - 1) + 3]


def report_for(pbm, email: str, week: int):
    for m in pbm.inbox(email):
        if f"report of week {week}" in str(m["Subject"]):
            return m
    raise AssertionError(f"{email} has no report of week {week}")


def test_two_weeks_by_mail(pbm):
    emails = {h: pbm.register(h, pw) for h, (pw, _) in PLAYERS.items()}
    pbm.new_game("rmpm", "world")

    # -- joining ---------------------------------------------------------------
    reply = pbm.mail(emails["alice"], "world", "JOIN bd 01-05 25-10 blue dragon")  # no password
    assert "REFUSED" in pbm.text(reply) and "this needs your password" in pbm.flat(reply)
    for h, (pw, join) in PLAYERS.items():
        text = pbm.text(pbm.mail(emails[h], "world", f"$${pw}$$\n{join}"))
        abbr = join.split()[1]
        assert f"accepted: you join as {abbr}" in text, text
    text = pbm.text(pbm.mail(emails["bob"], "world", "$$bob-secret-22$$\n01-06 -> 02-06\n25-11 -> 24-11"))
    assert "REFUSED" in text and "your chips are placed at the update of week 1" in text

    # -- week 1: the chips enter the board ----------------------------------------
    pbm.run_turn("world")  # returns once the outbox is drained
    rep = pbm.text(report_for(pbm, emails["dave"], 1))
    assert "NEW ON THE BOARD:" in rep
    assert "01 bd blue dragon: chips on 01-05 25-10, AN 1, PN 4" in rep
    assert "04 dp daleus: chips on 01-20 25-20, AN 1, PN 4" in rep
    nums, chips = board_row(rep, 1)
    assert [cell(chips, c) for c in (5, 6, 20)] == ["bd", "ir", "dp"]
    html = pbm.html(report_for(pbm, emails["dave"], 1))
    assert html is not None and len(re.findall(r'title="\d\d-\d\d number', html)) == 625
    assert 'title="01-05 number 2, chips: bd"' in html

    # -- week 2: orders, pre-analysis, a refused mail ----------------------------------
    text = pbm.text(pbm.mail(emails["alice"], "world",
                             "$$alice-secret-1$$\n01-05 -> 01-06\n25-10 -> 24-10\nBUY"))
    flat = squeeze(text)
    assert "Pre-analysis" in text
    assert "encounter on 01-06 with ir (Irata), AN 6: ir pays 500 WCU to bd" in flat
    assert "bought 01-06 for 500 WCU" in flat
    assert "Your chips would end on 01-06 and 23-10: MN 5, AN 6, PN 10, capital 10000 WCU." in flat

    text = pbm.text(pbm.mail(emails["bob"], "world", "$$bob-secret-22$$\n01-06 -> 02-06\n25-11 -> 24-11"))
    flat = squeeze(text)
    assert "accepted; now: chip 2 moves 3 up to 22-11 (number 5)" in flat
    assert "players with a higher PN move first this week" in flat
    assert "Before you (1): bd (PN 4)." in flat

    pbm.mail(emails["carol"], "world", "$$carol-secret-333$$\n05-01 -> 05-02\n10-25 -> 10-24")
    text = pbm.text(pbm.mail(emails["carol"], "world",
                             "$$carol-secret-333$$\n05-01 -> 04-01\n10-25 -> 10-24\nE 05-01 <-> 05-03"))
    flat = squeeze(text)
    assert "REFUSED" in text and "not the opposite neighbours of one of your chips" in flat
    assert "your previous orders stay in force" in flat
    held = text[text.index("The orders the server now holds"):]
    assert "05-01 -> 05-02" in held and "05-01 -> 04-01" not in held

    # the game master pays into the kiosk (from the command line)
    assert "accepted: the kiosk now holds 3000 WCU" in pbm.cli("game", "do", "world", "GM KIOSK 3000").stdout

    # nobody else has seen alice's orders before the update
    assert not any("01-05 -> 01-06" in pbm.text(m) for m in pbm.inbox(emails["bob"]))

    pbm.run_turn("world")
    for h in PLAYERS:
        rep = pbm.text(report_for(pbm, emails[h], 2))
        assert moves_row(rep, "01") == "01 bd blue dragon 01-05 25-10 01-06 23-10 5 6 10"
        assert moves_row(rep, "02") == "02 ir Irata 01-06 25-11 02-06 22-11 10 11 12"
        assert moves_row(rep, "03") == "03 mb mibo 05-01 10-25 05-02 10-22 12 13 12"
        assert moves_row(rep, "04") == "04 dp daleus 01-20 25-20 01-20 25-20 - 1 4"
    rep = pbm.text(report_for(pbm, emails["bob"], 2))
    assert "01 bd: encounter on 01-06 with ir (Irata), AN 6: ir pays 500 WCU to bd" in rep
    assert "01 bd: bought 01-06 for 500 WCU" in rep
    nums, chips = board_row(rep, 1)
    assert cell(nums, 6) == "$2" and cell(chips, 6) == "bd" and cell(chips, 5) == "  "
    own = rep[rep.index("FIELD OWNERSHIP"):]
    assert "\n01 01-06\n" in own
    inv = rep[rep.index("INVENTORY OF THE PLAYERS"):rep.index("Bank:")]
    wcu = {squeeze(ln).split()[1]: int(squeeze(ln).split()[2]) for ln in inv.splitlines()
           if ln.strip() and ln.strip()[0].isdigit()}
    assert wcu == {"bd": 10000, "ir": 9500, "mb": 10000, "dp": 10000}
    assert "Bank: 500 wcu" in rep and "Kiosk: 3000 wcu" in rep
    assert "BLUE DRAGON AND MIBO AND DALEUS ARE CHAMPIONS OF THE WEEK" in rep
    html = pbm.html(report_for(pbm, emails["bob"], 2))
    assert 'title="01-06 number 2, owned by bd, chips: bd"' in html

    # the GM's view of the game is the same report
    shown = pbm.cli("game", "show", "world").stdout
    assert "01 bd blue dragon" in shown and "Bank: 500 wcu" in shown
