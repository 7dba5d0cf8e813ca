"""The smaller findings of issue 42, each as a player meets it in a reply."""

from __future__ import annotations

import re

from tests.harness import PbmServer
from tests.server import weeks
from tests.server.weeks import PW, addr, send


def test_status_says_the_links_lifetime_in_whole_lines(pbm: PbmServer):
    pbm.game_of_three()
    text = pbm.text(pbm.mail("ann@example.org", "pbm", "status ring1\n$$ann-pass-1$$"))
    para = text[text.index("Your own view of ring1"):].split("\n\n")[0]
    lines = para.split("\n")
    # one paragraph filled to the width, the link on a line of its own: no line cut short mid-sentence
    assert all(len(line) > 50 for line in lines[:-2]), lines
    assert "it stops working when you change your password" in " ".join(para.split())


def test_check_forecasts_without_saying_accepted_twice(pbm: PbmServer):
    weeks.rmpm(pbm)
    text = pbm.flat(pbm.mail(addr("ann"), "world", f"CHECK\n01-06 -> 01-07\n23-10 -> 22-10\n$${PW['ann']}$$"))
    assert "would be accepted" in text and "would be accepted: accepted" not in text, text
    assert "would be accepted: your orders would then be:" in text, text


def test_press_to_a_player_by_their_board_abbreviation(pbm: PbmServer):
    weeks.rmpm(pbm)  # ann plays as bd (blue dragon), bob as ir (Irata)
    text = pbm.flat(pbm.mail(addr("ann"), "world", f"PRESS TO ir\nshall we share the park?\nENDPRESS\n$${PW['ann']}$$"))
    assert "sent to ir" in text and "there is no player" not in text, text
    pbm.settle()
    press = [m for m in pbm.inbox(addr("bob")) if "press from ann" in str(m["Subject"])]
    assert len(press) == 1 and "shall we share the park?" in pbm.text(press[0])
    # a name nobody goes by is still refused, naming what would be accepted
    text = pbm.flat(pbm.mail(addr("ann"), "world", f"PRESS TO zz\nhello\nENDPRESS\n$${PW['ann']}$$"))
    assert "there is no player called 'zz' in world; nothing was sent" in text, text


def test_press_to_a_player_who_stopped_press_says_one_true_thing(pbm: PbmServer):
    pbm.game_of_three()
    assert "no more press" in pbm.text(pbm.mail("bob@example.org", "pbm", "unsubscribe ring1 press\n$$bob-pass-1$$"))
    text = pbm.flat(pbm.mail("ann@example.org", "ring1", "PRESS TO bob\nhello bob\nENDPRESS\n$$ann-pass-1$$"))
    assert "sent to bob" not in text and "mailed to nobody; not to bob: bob stopped press mail of ring1" in text, text
    text = pbm.flat(pbm.mail("ann@example.org", "ring1", "PRESS TO bob cat\nhello both\nENDPRESS\n$$ann-pass-1$$"))
    assert "sent to cat; not to bob: bob stopped press mail of ring1" in text, text
    text = pbm.flat(pbm.mail("ann@example.org", "ring1", "PRESS TO ALL\nhello all\nENDPRESS\n$$ann-pass-1$$"))
    assert re.search(r"sent to the 1 other players of ring1 who get its press: cat; not to bob", text), text


def test_sequence_join_and_pieces_in_one_mail_show_the_pieces_once(pbm: PbmServer):
    weeks.players(pbm, "ann")
    pbm.new_game("sequence", "four")
    text = pbm.text(send(pbm, "ann", "four", "JOIN", "PIECES"))
    assert "you are player 1" in text and text.count("Piece  1: value") == 1, text


def test_the_rmpm_order_template_holds_no_move_from_a_field_the_chips_left(pbm: PbmServer):
    weeks.rmpm(pbm)  # week 2: ann moved 01-05 -> 01-06 and 25-10 -> 24-10
    pbm.settle()
    report = [m for m in pbm.inbox(addr("ann")) if "report of week 2" in str(m["Subject"])][-1]
    text = pbm.text(report)
    template = text[text.index("YOUR ORDERS FOR WEEK 3"):].split("\n\n")[1]
    assert "01-05 ->" not in template and "25-10 ->" not in template, template
    assert "your orders of week 2 were carried out" in " ".join(template.split()), template


def test_a_curio_mail_with_a_move_clock_starts_with_one_full_stop(pbm: PbmServer):
    weeks.players(pbm, "ann", "bob")
    reply = pbm.mail(addr("ann"), "pbm", f"curio challenge -base=3 -cols=3 -clock=1d ann bob\n$${PW['ann']}$$")
    lead = re.search(r'<p class="next"[^>]*>(.*?)</p>', PbmServer.html(reply) or "", re.S)
    assert lead is not None, PbmServer.html(reply)
    assert lead.group(1).startswith("Your move on board 101") and "wins on time." in lead.group(1), lead.group(1)
    assert ".." not in lead.group(1), lead.group(1)
