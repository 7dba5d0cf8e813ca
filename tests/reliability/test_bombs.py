"""Mail bombs (issue 14.4, docs/security.md "Mail bombs"): one mail, or a
stream of mails from made-up addresses, must not make the server send much
more mail than it got."""

from __future__ import annotations

import pytest

from games import KINDS

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

ALICE_PW = "alice-secret-14"


def players(pbm, *names: str) -> dict[str, str]:
    return {n: pbm.register(n, ALICE_PW if n == "alice" else f"{n}-secret-14") for n in names}


def test_a_challenge_without_a_password_mails_nobody(pbm):
    """Before: `curio challenge` needed no password, so a forged From with 300
    challenge lines mailed the victim 300 times."""
    addr = players(pbm, "alice", "bob")
    text = pbm.flat(pbm.mail(addr["alice"], "pbm", "\n".join(["curio challenge alice bob"] * 10)))
    # the first five refusals are echoed, the rest counted (issue 28.2)
    assert text.count("REFUSED") == 5 and "this needs your password" in text
    assert "... and 5 more lines refused the same way (up to line 10), not shown" in text
    pbm.settle()
    assert len(pbm.inbox(addr["bob"])) == 2  # the code and the confirmation, nothing more
    assert not pbm.state("curio")["boards"]
    # with the password the challenge works; at most five new boards per mail
    text = pbm.flat(pbm.mail(addr["alice"], "pbm", "\n".join(["curio challenge alice bob"] * 7) + f"\n$${ALICE_PW}$$"))
    assert text.count("ok (line") == 5 and "at most 5 new boards per mail" in text
    pbm.settle()
    assert len(pbm.inbox(addr["bob"])) == 2 + 5


def test_a_mail_makes_at_most_the_capped_number_of_mails_for_others(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_MAX_NOTICES_PER_MAIL"] = "2"
    pbm.start()
    addr = players(pbm, "alice", "bob", "carol", "dave")
    lines = ["curio challenge alice bob", "curio challenge alice carol", "curio challenge alice dave",
             "curio challenge alice bob", "curio challenge alice carol"]
    text = pbm.flat(pbm.mail(addr["alice"], "pbm", "\n".join(lines) + f"\n$${ALICE_PW}$$"))
    assert text.count("ok (line") == 5
    assert "3 more mails to other players were not sent: at most 2 per mail" in text
    pbm.settle()
    told = sum(len(pbm.inbox(addr[n])) - 2 for n in ("bob", "carol", "dave"))
    assert told == 2
    note = pbm.sql("SELECT note FROM inbox ORDER BY id DESC LIMIT 1")[0][0]
    assert "3 more mails to other players were not sent" in note


def test_a_reply_to_a_stranger_shows_a_repeated_section_once(pbm):
    """Before: 100 `help rmpm` lines (a 1 KB mail) got 100 copies of the rmpm
    rules back, sent to whatever address the From claims."""
    reply = pbm.mail("stranger@example.net", "pbm", "\n".join(["help rmpm"] * 100))
    text = pbm.text(reply)
    title = [ln for ln in text.splitlines() if ln.endswith("(rmpm)")]
    assert len(title) == 1, title
    assert len(text.encode()) < 64 * 1024


def test_a_reply_to_a_sender_without_a_password_is_bounded(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_MAX_UNAUTHENTICATED_REPLY_BYTES"] = "6000"
    pbm.start()
    alice = players(pbm, "alice")["alice"]
    kinds = list(KINDS)
    ask = "\n".join(f"help {k}" for k in kinds)
    text = pbm.text(pbm.mail("stranger@example.net", "pbm", ask))
    assert len(text.encode()) < 6000 + 1000  # the greeting and signature come on top
    assert "the rest was cut" in " ".join(text.split())
    assert "put your $$password$$ in the mail" in " ".join(text.split())
    # the answers to the lines alone (each unknown line gets the list of commands) are bounded too:
    # refusals of one kind are echoed five at a time, the rest counted (issue 28.2)
    text = pbm.text(pbm.mail("stranger@example.net", "pbm", "\n".join(f"frobnicate {i}" for i in range(100))))
    assert len(text.encode()) < 6000 + 1000
    assert "and 95 more lines refused the same way (up to line 100)" in " ".join(text.split())
    # answers that are not refusals are all echoed, and cut where the reply grows too long
    text = pbm.text(pbm.mail("stranger@example.net", "pbm", "\n".join(["games"] * 200)))
    assert len(text.encode()) < 6000 + 1000
    assert "were cut: the reply was too long for a mail without a password" in " ".join(text.split())
    # a sender who proves a password gets it all
    full = pbm.text(pbm.mail(alice, "pbm", ask + f"\n$${ALICE_PW}$$"))
    assert "the rest was cut" not in " ".join(full.split())
    assert all(f"({k})" in full for k in kinds)


def test_replies_to_unproven_senders_have_a_server_wide_budget(pbm_stopped):
    """An auto-responder answering from a new address each time gets past the
    per-address limit: all such replies together are limited per hour."""
    pbm = pbm_stopped
    pbm.env["PBM_UNAUTHENTICATED_REPLIES_PER_HOUR"] = "4"
    pbm.start()
    # register and confirm: the code's reply counts, the confirm proved a code (issue 26.9)
    alice = players(pbm, "alice")["alice"]
    robots = [f"robot{i}@example.net" for i in range(6)]
    for robot in robots:
        pbm.send(robot, "pbm", "help")
    pbm.settle()
    answered = [r for r in robots if pbm.inbox(r)]
    assert answered == robots[:3]
    notes = [n for (n,) in pbm.sql("SELECT note FROM inbox WHERE mail_from LIKE 'robot%' ORDER BY id")]
    assert all(n and "not answered" in n for n in notes[3:]), notes
    # the GM hears of it once
    quiet = [m for m in pbm.inbox("gm@example.org") if "stopped answering" in pbm.flat(m)]
    assert len(quiet) == 1
    # a player who proves her password is still answered
    assert "the list of commands follows" in pbm.flat(pbm.mail(alice, "pbm", f"help\n$${ALICE_PW}$$"))
