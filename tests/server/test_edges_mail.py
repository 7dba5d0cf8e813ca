"""Edges of mail a player meets (issue 27, items 4 to 7), over real SMTP to a
real server: an out-of-office answer that comes back to a return path is not
a bounce; press to a player whose mail is held says so; References stay
short and GM subjects fold and cut at words; a PGP clear-signed mail and a
forward of an old order are read for their text."""

from __future__ import annotations

import json
import re
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from tests.harness import PbmServer, wait_until
from tests.server.test_bounces import bounce_reply, outbox_status, send_raw
from tests.server.test_press import PW, addr, say, setup

ANN = "ann@players.example"


def out_of_office(frm: str, to: str, subject: str, headers: dict[str, str]) -> bytes:
    """An autoresponder's answer, as a mail client or an MTA's vacation
    service sends it: to the return path, with the marks RFC 3834 asks for
    (or the older ones some senders still use instead)."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = frm, to, subject
    for k, v in headers.items():
        msg[k] = v
    msg.set_content("I am on holiday until the 3rd and will read your mail when I am back.\n")
    return msg.as_bytes()


def test_out_of_office_answers_to_the_return_path_never_hold_the_address(pbm: PbmServer):
    answers = [
        ("Out of office: help", {"Auto-Submitted": "auto-replied"}),
        ("Automatic reply: your mail", {"X-Autoreply": "yes"}),
        ("Away", {"Precedence": "auto_reply"}),
        ("Abwesenheitsnotiz", {}),
    ]
    replies = [pbm.mail(ANN, "pbm", "help", subject=f"help {i}") for i in range(len(answers))]
    for reply, (subject, headers) in zip(replies, answers, strict=True):
        path = pbm.sink.return_path(reply["Message-ID"])
        # the null sender RFC 3834 asks an autoresponder to use
        send_raw(pbm, "", path, out_of_office(ANN, path, subject, headers))
    pbm.settle()
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0] == 0, what="all read")
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM bounces")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0
    assert all(outbox_status(pbm, r["Message-ID"]) == "sent" for r in replies)
    rows = pbm.sql("SELECT status, note FROM inbox WHERE note LIKE '%return path%' ORDER BY id")
    assert len(rows) == len(answers)
    for status, note in rows:
        assert status == "dropped", rows
        assert note.startswith("an auto-reply (") and "not a bounce, not counted toward a hold" in note, note
    assert pbm.inbox(pbm.gm_address) == []  # nothing to tell the GM
    # ann still gets her mail: a fifth reply goes out
    assert pbm.mail(ANN, "pbm", "games", subject="still here")

    # a real bounce still counts, also one in an MTA's own format that says Auto-Submitted
    last = pbm.mail(ANN, "pbm", "help", subject="one more")
    bounce_reply(pbm, last)
    wait_until(lambda: outbox_status(pbm, last["Message-ID"]) == "bounced", what="the DSN counted")
    exim = pbm.mail(ANN, "pbm", "help", subject="and one more")
    path = pbm.sink.return_path(exim["Message-ID"])
    send_raw(pbm, "", path, out_of_office("Mail Delivery System <Mailer-Daemon@mx.players.example>", path,
                                          "Mail delivery failed: returning message to sender",
                                          {"Auto-Submitted": "auto-replied"}))
    wait_until(lambda: outbox_status(pbm, exim["Message-ID"]) == "bounced", what="the MTA's bounce counted")


def test_a_null_sender_mail_that_is_no_known_bounce_is_not_counted(pbm: PbmServer):
    reply = pbm.mail(ANN, "pbm", "help")
    path = pbm.sink.return_path(reply["Message-ID"])
    send_raw(pbm, "", path, out_of_office(ANN, path, "Re: help", {}))
    pbm.settle()
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0] == 0, what="read")
    assert outbox_status(pbm, reply["Message-ID"]) == "sent"
    assert pbm.sql("SELECT count(*) FROM bounces")[0][0] == 0
    note = pbm.sql("SELECT note FROM inbox ORDER BY id DESC LIMIT 1")[0][0]
    assert "neither a delivery-status report nor a known bounce format" in note, note


def hold(pbm: PbmServer, who: str) -> None:
    """Three of the server's mails to ``who`` bounce: the address is held."""
    for i in range(3):
        bounce_reply(pbm, pbm.mail(addr(who), "pbm", "help", subject=f"help {i}"))
    wait_until(lambda: pbm.sql("SELECT count(*) FROM mail_holds WHERE address = :a", a=addr(who))[0][0] == 1,
               what=f"{who}'s address held")
    pbm.settle()


def test_press_to_a_player_whose_mail_is_held_says_so(pbm: PbmServer):
    setup(pbm)
    hold(pbm, "carol")
    before = pbm.sql("SELECT count(*) FROM outbox WHERE to_addr = :a", a=addr("carol"))[0][0]

    answer = say(pbm, "alice", "PRESS TO bob carol\nMeet me at the well.\nENDPRESS")
    assert "sent to bob; not to carol: carol's mail is held" in answer, answer
    assert "bounced repeatedly" in answer and "not kept to be sent later" in answer
    assert "sent to bob and carol" not in answer

    answer = say(pbm, "alice", "PRESS TO ALL\nHello all.\nENDPRESS")
    assert "sent to the 1 other players of ring whose mail is not held: bob" in answer, answer
    assert "not to carol: carol's mail is held" in answer

    answer = say(pbm, "alice", "PRESS TO carol\nOnly for you.\nENDPRESS")
    assert "REFUSED" in answer and "carol's mail is held" in answer and "nothing was sent" in answer, answer

    # bob got both messages, carol's outbox holds nothing new, the GM's copy names bob only
    bob_press = [m for m in pbm.inbox(addr("bob")) if ": press from alice" in str(m["Subject"])]
    assert len(bob_press) == 2
    assert pbm.sql("SELECT count(*) FROM outbox WHERE to_addr = :a", a=addr("carol"))[0][0] == before
    # SQLite gives a JSON column's text, PostgreSQL the decoded value
    recorded = [json.loads(r) if isinstance(r, str) else r for (r,) in pbm.sql("SELECT recipients FROM press ORDER BY id")]
    assert recorded == [["bob"], ["bob"]]


def references(msg: EmailMessage) -> list[str]:
    return str(msg.get("References", "")).split()


def test_references_keep_the_root_and_the_last_few_ids(pbm: PbmServer):
    first = pbm.send(ANN, "pbm", "help", subject="help")
    wait_until(lambda: pbm.replies_to(first), what="the first reply")
    reply = pbm.replies_to(first)[0]
    assert references(reply) == [first]
    for i in range(7):
        # the player answers the last reply, as a mail client does (RFC 5322 3.6.4)
        refs = " ".join([*references(reply), reply["Message-ID"]])
        mine = pbm.send(ANN, "pbm", "games", subject=f"Re: help {i}",
                        headers={"In-Reply-To": reply["Message-ID"], "References": refs})
        wait_until(lambda m=mine: pbm.replies_to(m), what=f"reply {i}")
        previous, reply = reply, pbm.replies_to(mine)[0]
        got = references(reply)
        assert len(got) == len(set(got)), got  # no id twice
        assert got[0] == first and got[-1] == mine, got  # the root, and the mail answered last
        assert len(got) <= 5, got
        assert previous["Message-ID"] in got  # the mail it answered, which answered the player's


LONG = "a-player-with-a-remarkably-long-mailbox-name@players.example.org"


def raw_subject(pbm: PbmServer, to: str, words: str) -> tuple[list[str], str]:
    """The Subject field of the mail to ``to`` whose Subject holds ``words``:
    its lines as sent, and its value as a reader sees it."""
    for rcpts, raw in list(pbm.sink.handler.messages):
        if to in rcpts:
            head = raw.split(b"\r\n\r\n", 1)[0].decode()
            field = re.search(r"^Subject:[^\r\n]*(?:\r\n[ \t][^\r\n]*)*", head, re.M)
            assert field is not None
            value = str(BytesParser(policy=policy.default).parsebytes(raw, headersonly=True)["Subject"])
            if words in value:
                return field.group(0).split("\r\n"), value
    raise AssertionError(f"no mail to {to} about {words!r}")


def test_gm_subjects_fold_at_spaces_and_are_cut_after_a_word(pbm: PbmServer):
    for i in range(3):
        bounce_reply(pbm, pbm.mail(LONG, "pbm", "help", subject=f"help {i}"))
    wait_until(lambda: pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 1, what="the hold")
    pbm.settle()
    lines, value = raw_subject(pbm, pbm.gm_address, "pbm-server: a-player")  # the hold notice
    assert not lines[0].rstrip().endswith(":"), lines  # not folded right after "pbm-server:"
    assert value.startswith(f"pbm-server: {LONG} is") and value.endswith("..."), value
    whole = f"{LONG} is on hold: mail to it bounced repeatedly.".split()
    assert all(w in whole for w in value[len("pbm-server: "):-3].split()), value  # no word cut

    # a game's notice with a long Subject: folded only between words, the game's name kept with its first word
    pbm.new_game("giveaway", "ring")
    reply = pbm.mail(pbm.gm_address, "pbm", "help")
    assert reply is not None
    for _, raw in list(pbm.sink.handler.messages):
        head = raw.split(b"\r\n\r\n", 1)[0].decode()
        for field in re.finditer(r"^Subject:[^\r\n]*(?:\r\n[ \t][^\r\n]*)*", head, re.M):
            parts = field.group(0).split("\r\n")
            assert not any(p.rstrip().endswith(":") for p in parts[:-1]), parts
            # longer than 78 only for one word too long to fold (kept with "NAME:" before it)
            assert all(len(p) <= 78 or len(p.split()) <= 3 for p in parts), parts


#: a clear-signed mail (RFC 4880 7): the signed text ends with the signer's
#: signature, whose "-- " line the signing dash-escaped
SIGNED = (
    "-----BEGIN PGP SIGNED MESSAGE-----\n"
    "Hash: SHA256\n"
    "\n"
    "GIVE 3 TO bob\n"
    "$${pw}$$\n"
    "- -- \n"
    "Alice, who signs her orders\n"
    "-----BEGIN PGP SIGNATURE-----\n"
    "\n"
    "iHUEARYIAB0WIQRk3T0d8E7mFzL1VQ2nq5rYk2h3wAUCZ0Jx8gAKCRCnq5rYk2h3\n"
    "wNq5AP9n0cG2yW3yYb8pZkU2xR6eQfM1l2k3j4h5g6f7e8d9cAEA3v4t5r6q7p8o\n"
    "=Ab3C\n"
    "-----END PGP SIGNATURE-----\n"
)


def test_a_pgp_clear_signed_order_is_read_for_its_signed_text(pbm: PbmServer):
    setup(pbm)
    answer = say(pbm, "alice", SIGNED.format(pw=PW["alice"]))
    assert "REFUSED" not in answer, answer
    assert "GIVE 3 TO bob" in answer
    assert "signed with PGP" in answer and "did not check the signature" in answer
    assert "Hash:" not in answer and "PGP SIGNATURE" not in answer and "Alice, who signs" not in answer


FORWARDS = {
    "mutt": """\
----- Forwarded message from Alice <alice@example.org> -----

Date: Mon, 23 Nov 2026 10:00:00 +0000
From: Alice <alice@example.org>
To: ring@pbm.test
Subject: orders

GIVE 3 TO bob

----- End forwarded message -----
""",
    "gmail": """\
---------- Forwarded message ---------
From: Alice <alice@example.org>
Date: Mon, 23 Nov 2026 at 10:00
Subject: orders
To: <ring@pbm.test>


GIVE 3 TO bob
""",
}


def test_a_forwarded_old_order_is_read_and_its_header_lines_are_skipped(pbm: PbmServer):
    setup(pbm)
    for client, body in FORWARDS.items():
        answer = say(pbm, "alice", body)
        assert "REFUSED" not in answer, (client, answer)
        assert "GIVE 3 TO bob" in answer and "forwards a mail" in answer, (client, answer)
        assert "> Date" not in answer and "> From" not in answer and "> Subject" not in answer, (client, answer)
        assert "Forwarded message" not in answer and "REFUSED" not in answer, (client, answer)


def test_a_password_at_the_end_of_a_very_long_line_counts(pbm):
    """A line is read up to 500 characters (nobody types a longer command),
    but a $$password$$ past them -- a client that does not wrap, or a
    flowed paragraph joined into one line -- still counts, and the cut
    never goes through it (half a password would be a stray $$)."""
    pbm.new_game("giveaway", "ring")
    chatter = "hello, I would like to join this game please, " * 12
    assert len(chatter) > 500
    for handle, line in (("ann", f"{chatter}$$ann-pass-77$$"), ("bob", chatter[:495] + " $$bob-pass-77$$")):
        email = pbm.register(handle, f"{handle}-pass-77")
        reply = pbm.flat(pbm.mail(email, "ring", f"JOIN\n{line}"))
        assert "ok (line 1): accepted" in reply, reply
        assert "REFUSED (line 2): unknown command 'hello,'" in reply  # the long line is read as a command
        assert f"{handle}-pass-77" not in reply and "$$" not in reply
