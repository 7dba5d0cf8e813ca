"""A newcomer's first mails (issue 28, items 1, 2, 6, 7 and 8), over SMTP
against a real server: `help` and `status` at a game's address, a pbm@
command sent to a game and a game command sent to pbm@, a password anywhere
in a long mail with its refused lines echoed a few at a time, an HTML mail's
signature, echoes that mask passwords and only passwords, and the dead ends
that now say the way out."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage

import pytest

from tests.harness import PbmServer

PW = "wonderland-77"


def alice(pbm: PbmServer) -> str:
    return pbm.register("alice", PW)


def wait_reply(pbm: PbmServer, msg: EmailMessage) -> EmailMessage:
    """Send a message built by hand; its reply."""
    return pbm.reply_to(pbm.send_message(msg))


def html_mail(pbm: PbmServer, frm: str, to: str, html: str) -> EmailMessage:
    msg = pbm.build(frm, to, "")
    msg.set_content(html, subtype="html")
    return msg


# -- 1: help and status at a game's address; commands sent to the wrong address ----

def test_help_and_status_at_a_game_address_answer_there(pbm):
    me = alice(pbm)
    pbm.new_game("giveaway", "g1")
    answer = pbm.mail(me, "g1", "help")
    assert "g1@pbm.test" in str(answer["From"]), answer["From"]  # answered from the game's address
    reply = pbm.flat(answer)
    assert "unknown command" not in reply and "REFUSED" not in reply, reply
    assert "the rules and commands of Giveaway follow" in reply and "Giveaway (giveaway)" in reply, reply
    reply = pbm.flat(pbm.mail(me, "g1", f"status\n$${PW}$$"))
    assert "REFUSED" not in reply and "the state of g1 as you see it follows" in reply, reply
    # the Subject alone does it too
    reply = pbm.flat(pbm.mail(me, "g1", "", subject="help"))
    assert "the rules and commands of Giveaway follow" in reply, reply


def test_another_pbm_command_at_a_game_says_where_it_goes(pbm):
    me = alice(pbm)
    pbm.new_game("giveaway", "g1")
    reply = pbm.flat(pbm.mail(me, "g1", f"games\npassword alice {PW} newpass-99\n$${PW}$$"))
    assert "'games' is a command of pbm@pbm.test, not of the game g1: mail it to pbm@pbm.test" in reply, reply
    assert "> password alice **** ****" in reply, reply
    assert "'password' is a command of pbm@pbm.test" in reply, reply
    assert "unknown command" not in reply, reply
    assert not pbm.sql("SELECT * FROM audit_log WHERE action = 'password changed'")


def test_a_game_command_at_pbm_names_the_game_address(pbm):
    me = alice(pbm)
    pbm.new_game("giveaway", "ring2")
    reply = pbm.flat(pbm.mail(me, "pbm", f"join ring2\n$${PW}$$"))
    assert "mail JOIN to ring2@pbm.test" in reply, reply
    reply = pbm.flat(pbm.mail(me, "pbm", f"ring2 join\n$${PW}$$"))
    assert "mail JOIN to ring2@pbm.test" in reply, reply


# -- 2: a password anywhere in the mail; refused lines echoed a few at a time ------

def test_a_password_after_the_read_lines_counts_and_refusals_are_folded(pbm):
    me = alice(pbm)
    pbm.new_game("giveaway", "g1")
    junk = [f"frobnicate {i}" for i in range(2, 2600)]
    reply = pbm.mail(me, "pbm", "\n".join(["status g1", *junk, f"$${PW}$$"]))
    text = pbm.flat(reply)
    assert "the state of g1 as you see it follows" in text, text[:3000]
    assert "does not match" not in text and "needs your password" not in text
    assert text.count("unknown command 'frobnicate'") == 5, text[:3000]
    assert "... and 294 more lines refused the same way (up to line 300), not shown" in text, text[:3000]
    assert "a $$password$$ among them still counts" in text
    assert len(pbm.text(reply).encode()) < 12_000
    # a password in the lines past the ones read with care (2000) counts as well
    assert "frobnicate 2599" not in text


def test_a_lone_password_far_down_a_short_mail_counts(pbm):
    me = alice(pbm)
    pbm.new_game("giveaway", "g1")
    body = "status g1\n" + "\n" * 2500 + f"$${PW}$$\n"
    text = pbm.flat(pbm.mail(me, "pbm", body))
    assert "the state of g1 as you see it follows" in text, text[:2000]


# -- 6: an HTML-only mail's signature ------------------------------------------------

def test_an_html_signature_ends_the_commands(pbm):
    me = alice(pbm)
    pbm.new_game("giveaway", "g1")
    html = f'<div dir="ltr"><div>status g1</div><div>$${PW}$$</div>-- <br>Bob Smith</div>'
    text = pbm.flat(wait_reply(pbm, html_mail(pbm, me, "pbm", html)))
    assert "REFUSED" not in text and "'--'" not in text and "'Bob'" not in text, text
    assert "the state of g1 as you see it follows" in text, text
    html = f'<html><body><div><div>$${PW}$$</div><div>-- </div><div>Bob Smith</div></div></body></html>'
    text = pbm.flat(wait_reply(pbm, html_mail(pbm, me, "pbm", html)))
    assert "REFUSED" not in text and "'Bob'" not in text, text


# -- 7: masking what is a password, never ordinary words -----------------------------

def test_an_unknown_line_is_echoed_as_written(pbm):
    me = alice(pbm)
    text = pbm.flat(pbm.mail(me, "pbm", f"I want to join the game\n$${PW}$$"))
    assert "> I want to join the game" in text and "****" not in text, text
    # a $$ without its partner hides the word after it, not every word of the line
    text = pbm.flat(pbm.mail(me, "pbm", f"$$oops to\nI want to join the game\n$${PW}$$"))
    assert "> I want to join the game" in text and "password marks without a partner" in text, text
    # a mistyped password-taking command still hides its password
    text = pbm.flat(pbm.mail("newbie@example.org", "pbm", "regster newbie s3cret-words"))
    assert "> regster newbie ****" in text and "s3cret-words" not in text, text


def test_the_senders_password_written_without_marks_is_masked(pbm):
    me = alice(pbm)
    # no $$ at all, before any mail proved the password: the words are hashed
    text = pbm.text(pbm.mail(me, "pbm", f"pass {PW}"))
    assert "> pass ****" in text and PW not in text, text
    # after a mail that proved it: known at once, wherever it stands
    pbm.mail(me, "pbm", f"games\n$${PW}$$")
    text = pbm.text(pbm.mail(me, "pbm", f"hello there my secret is {PW} ok"))
    assert "> hello there my secret is **** ok" in text and PW not in text, text


# -- 8: dead ends --------------------------------------------------------------------

def test_a_wrong_password_names_forgot(pbm):
    me = alice(pbm)
    text = pbm.flat(pbm.mail(me, "pbm", "status\n$$not-my-password$$"))
    assert "nothing was done" in text and 'Mail "forgot alice" to pbm@pbm.test' in text, text


def test_a_mail_over_the_size_limit_is_told_the_limit(pbm):
    msg = pbm.build("x@example.org", "pbm", "help\n" + "x" * 1_100_000)
    with pytest.raises((smtplib.SMTPSenderRefused, smtplib.SMTPDataError)) as caught:
        pbm.send_message(msg)
    assert caught.value.smtp_code == 552
    said = caught.value.smtp_error.decode()
    assert "at most 1,048,576 bytes" in said, said


def test_orders_in_an_attachment_are_said_to_be_unread(pbm):
    me = alice(pbm)
    msg = pbm.build(me, "pbm", "")
    msg.add_attachment(f"status\n$${PW}$$\n", subtype="plain", filename="orders.txt")
    text = pbm.flat(wait_reply(pbm, msg))
    assert "The attachment orders.txt was not read" in text, text


def test_a_handle_with_an_accent_is_refused_with_the_reason_and_a_spelling(pbm):
    text = pbm.flat(pbm.mail("zoe@example.org", "pbm", "register zoë petals-42"))
    assert "handle is 2-32 ASCII letters" in text and "zoe would do" in text, text
    assert not pbm.sql("SELECT * FROM accounts")
