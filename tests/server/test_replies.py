"""Reading what players write: a reply holds the player's lines and a quote of
the server's mail, in the style of the player's mail client.

The corpus: the server's real mails (rendered by a running `pbm serve` and
taken from the relay sink), quoted the way each client quotes them
(tests/server/reply_styles.py), with the player's lines top-posted,
bottom-posted or between the quoted parts.  Every case must read exactly the
player's lines.  Then, over SMTP: a bottom-posted reply runs its commands, a
reply whose quote the server cannot recognise does not re-run the quoted held
orders, format=flowed is decoded, a Subject repeating a body line runs once,
and an unreadable line is masked only in its own echo."""

from __future__ import annotations

import json
import smtplib
from email.utils import make_msgid

import pytest

from pbm_server.mail.mailtext import command_lines, decode_flowed, read_mail
from pbm_server.mail.replies import SentMail
from tests.harness import PbmServer, wait_until
from tests.server.reply_styles import STYLES, gt

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

PW = {"alice": "alice-gives-5x", "bob": "bob-gives-3x", "carol": "carol-gives-5x"}


def addr(handle: str) -> str:
    return f"{handle}@example.org"


@pytest.fixture(scope="module")
def server_mails(tmp_path_factory):
    """Two real mails of the server: bob's answer from a giveaway game (his
    commands echoed, the orders it now holds) and an answer from pbm@ (a
    command echoed and a section)."""
    server = PbmServer(tmp_path_factory.mktemp("replies"))
    try:
        server.start()
        gift = join_gift(server, "GIVE 2 TO carol", "GIVE 1 TO alice")
        assert "The orders the server now holds" in server.text(gift)
        games = server.mail(addr("bob"), "pbm", "games", subject="list")
        assert "Games" in server.text(games)
        mails = {"gift": SentMail.from_raw(gift.as_bytes()), "pbm": SentMail.from_raw(games.as_bytes())}
        server.stop()
        assert not server.leaked_secrets()
    finally:
        server.close()
    return mails


#: what the player types under each server mail
OWN = {
    "gift": ["GIVE 1 TO carol", "GIVE 2 TO alice", f"$${PW['bob']}$$"],
    "pbm": ["games", "help giveaway"],
    # the player re-sends exactly the orders the server echoed and holds
    "gift-resend": ["GIVE 2 TO carol", "GIVE 1 TO alice"],
}
CASES = [(style, own) for style in STYLES for own in OWN]


def quoted_text(mail: SentMail) -> list[str]:
    lines = list(mail.lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


@pytest.mark.parametrize("style, own", CASES, ids=[f"{s}:{o}" for s, o in CASES])
def test_corpus_reads_exactly_the_players_lines(server_mails, style, own):
    mail = server_mails[own.split("-")[0]]
    body, expected = STYLES[style](quoted_text(mail), OWN[own])
    got = [line.text for line in command_lines("\n".join(body), [mail], "pbm.test")]
    assert got == [e.strip() for e in expected if e.strip()], "\n".join(body)


def test_corpus_quotes_hold_the_servers_footer_and_commands(server_mails):
    """The corpus is only worth something if the quotes hold what breaks
    readers: the server's `-- ` footer and its indented held orders."""
    gift = quoted_text(server_mails["gift"])
    assert "-- " in gift
    assert "  GIVE 2 TO carol" in gift and "> GIVE 2 TO carol" in gift


def test_without_knowing_the_mail_marked_quotes_still_read_right(server_mails):
    """A reply whose References name no mail of ours (a client that drops
    them): every style that marks or introduces its quote still reads right."""
    mail = server_mails["gift"]
    for style in ("gmail-en-top", "thunderbird-bottom", "outlook-ru-top", "s-nail-bottom", "mutt-interleaved", "ios-top"):
        body, expected = STYLES[style](quoted_text(mail), OWN["gift"])
        assert [ln.text for ln in command_lines("\n".join(body), [], "pbm.test")] == expected, style


def test_flowed_text_is_joined_unstuffed_and_quoted_by_depth():
    text = "curio challenge -base=3 \n-no_turn alice bob $$pw$$\n From here\n>> deep \n>> er\n> -- \n-- \nsig"
    assert decode_flowed(text).split("\n") == [
        "curio challenge -base=3 -no_turn alice bob $$pw$$",
        "From here",
        "> > deep er",
        "> -- ",
        "-- ",
        "sig",
    ]
    assert decode_flowed("GIVE 2 TO \ncarol", delsp=True) == "GIVE 2 TOcarol"
    assert decode_flowed("GIVE 2 TO  \ncarol", delsp=True) == "GIVE 2 TO carol"


def test_flowed_mail_is_decoded_when_read():
    raw = (
        b"From: bob@example.org\r\nTo: pbm@pbm.test\r\nSubject: x\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=utf-8; format=flowed; delsp=yes\r\n\r\n"
        b"curio challenge -base=3 -cols=3  \r\n-no_turn alice bob\r\n"
    )
    assert [ln.text for ln in command_lines(read_mail(raw).body)] == ["curio challenge -base=3 -cols=3 -no_turn alice bob"]


# -- over SMTP, against the running server --------------------------------------------------------

def reply_to(pbm, frm: str, to: str, answered, body: str):
    """Send ``body`` as a reply to the server's mail ``answered``; return the server's answer."""
    ref = answered["Message-ID"]
    mid = pbm.send_message(pbm.build(frm, to, body, subject="Re: orders", headers={"In-Reply-To": ref, "References": ref}))
    wait_until(lambda: pbm.replies_to(mid), what=f"the answer to {mid}")
    return pbm.replies_to(mid)[0]


def join_gift(pbm, *orders: str):
    """alice, bob and carol in the giveaway game "gift"; bob's answer to his ``orders``."""
    for h in PW:
        pbm.register(h, PW[h])
    pbm.new_game("giveaway", "gift")
    for h in PW:
        pbm.mail(addr(h), "gift", f"$${PW[h]}$$\nJOIN")
    answer = pbm.mail(addr("bob"), "gift", "\n".join([f"$${PW['bob']}$$", *orders]))
    assert all(o in pbm.text(answer) for o in orders)
    return answer


def held_orders(pbm) -> list[str]:
    lines = pbm.sql("SELECT lines FROM orders WHERE handle = 'bob'")[0][0]
    return json.loads(lines) if isinstance(lines, str) else lines


def test_bottom_posted_reply_to_a_server_mail_runs_its_commands(pbm):
    first = join_gift(pbm, "GIVE 3 TO carol")
    quoted = ["On 23/11/2026 14:53, pbm-server wrote:"] + gt(pbm.text(first).rstrip("\n").split("\n"))
    body = "\n".join(["Hi,", ""] + quoted + ["", "GIVE 2 TO alice", "GIVE 1 TO carol", f"$${PW['bob']}$$", "", "-- ", "Bob"])
    answer = pbm.flat(reply_to(pbm, addr("bob"), "gift", first, body))
    assert "held no commands" not in answer
    assert "accepted" in answer and "REFUSED (line 1)" in answer  # "Hi," is a line of bob's, and no command
    assert [" ".join(x.split()) for x in held_orders(pbm)] == ["GIVE 2 TO alice", "GIVE 1 TO carol"]


@pytest.mark.parametrize("header", [
    ["От: pbm-server <pbm@pbm.test>", "Отправлено: 23 ноября 2026 г. 14:53", "Кому: bob@example.org", "Тема: Re: orders", ""],
    [],  # no header at all: only the server's knowledge of its own mail
], ids=["outlook-ru", "no-header"])
def test_unmarked_quote_does_not_rerun_the_quoted_held_orders(pbm, header):
    first = join_gift(pbm, "GIVE 3 TO carol")
    body = "\n".join([f"$${PW['bob']}$$", "GIVE 3 TO alice", ""] + header + pbm.text(first).split("\n"))
    answer = pbm.flat(reply_to(pbm, addr("bob"), "gift", first, body))
    assert "REFUSED" not in answer, answer
    assert "accepted: 3 points to alice" in answer
    assert "GIVE 3 TO carol" not in answer.split("The orders the server now holds")[1]


def test_flowed_curio_challenge_keeps_its_continuation_and_password(pbm):
    pbm.register("alice", PW["alice"])
    pbm.register("bob", PW["bob"])
    raw = (
        "From: alice@example.org\r\nTo: pbm@pbm.test\r\nSubject: challenge\r\n"
        f"Message-ID: {make_msgid(domain='example.org')}\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=UTF-8; format=flowed\r\nContent-Transfer-Encoding: 7bit\r\n\r\n"
        "curio challenge -base=3 -cols=3 -draw_moves=8 \r\n"
        f"-no_turn alice bob $${PW['alice']}$$\r\n"
    ).encode()
    with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
        smtp.sendmail("alice@example.org", ["pbm@pbm.test"], raw)
    answer = pbm.flat(pbm.wait_for(addr("alice"), 3)[-1])  # the code, the confirmation, this reply
    assert "accepted: board 101: alice (Light) vs bob (Dark)" in answer, answer
    assert "-no_turn" in answer  # the board's options, as the player asked
    assert "held no commands" not in answer and "REFUSED" not in answer


def test_subject_repeating_a_body_line_runs_once(pbm):
    answer = pbm.text(pbm.mail(addr("dora"), "pbm", "games", subject="games"))
    assert answer.count("> games") == 1
    assert answer.count("game(s) listed below") == 1


def test_unreadable_line_is_echoed_as_written(pbm):
    # issue 28.7: ordinary words are never masked (only passwords are)
    reply = pbm.mail(addr("erin"), "pbm", "what are the rules\nhelp", subject="what are the rules")
    text = pbm.text(reply)
    # the Subject says what happened, in the server's words
    assert reply["Subject"] == "pbm-server: 1 line REFUSED (what), answered: help"
    assert "> what are the rules" in text
    assert "****" not in text


def test_a_failed_line_masks_its_own_echo_and_no_handle_in_anyones_mail(pbm):
    """A mail with one good curio move and one line whose password is not
    checked: the opponent's board mail names the mover, and only the echo of
    the failed line in the sender's reply hides its words (issue 17.2)."""
    alice, bob = pbm.register("alice", "alice-pass-1"), pbm.register("bob", "bob-pass-22")
    pbm.mail(alice, "pbm", "curio challenge alice bob $$alice-pass-1$$")
    before = len(pbm.inbox(bob))
    reply = pbm.mail(alice, "pbm", "curio move 101 alice alice-pass-1 a2-a3\ncurio resign 101 alice wrong-pass-1")
    text = pbm.text(reply)
    assert "alice-pass-1" not in text and "wrong-pass-1" not in text
    assert "> curio resign 101 **** ****" in text  # the failed line's userid slot and password
    assert "curio move 101 alice **** a2-a3" in text  # the good line keeps its handle
    board = pbm.wait_for(bob, before + 1)[-1]
    board_text = pbm.text(board)
    assert "alice (Light)" in board_text and "****" not in board_text, board_text
