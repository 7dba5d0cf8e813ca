"""Press over SMTP (issue 18.1): PRESS TO <handle> ... / PRESS TO ALL, the
message, ENDPRESS, in a mail to the game's address.  The server relays it to
the named players of that game only, from the game's address, and tells the
sender who received it; the GM's settings press=on|off|broadcast and
anonymous=on|off; the GM's copy and `pbm game press`; the hourly limit."""

from __future__ import annotations

import json
import smtplib

import pytest

from tests.harness import PbmServer

PW = {"alice": "alice-secret-1", "bob": "bob-secret-22", "carol": "carol-secret-3",
      "dave": "dave-secret-44", "erin": "erin-secret-5"}
GM_PW = "gm-secret-99"
GM = "gm@example.org"


def addr(who: str) -> str:
    return f"{who}@example.org"


def ring_and_other(pbm: PbmServer, *accounts: str) -> None:
    """Accounts for ``accounts`` (passwords from PW) and the GM; game ring:
    alice, bob, carol; game other: dave."""
    for who in accounts:
        pbm.secrets.add(PW[who])
        pbm.cli("account", "add", who, addr(who), "--password", PW[who])
    pbm.register("gm", GM_PW, email=GM)
    pbm.new_game("giveaway", "ring")
    pbm.new_game("giveaway", "other")
    for who in ("alice", "bob", "carol"):
        pbm.cli("game", "add-player", "ring", who)
    pbm.cli("game", "add-player", "other", "dave")
    pbm.settle()


def setup(pbm: PbmServer) -> None:
    """ring: alice, bob, carol; other: dave; erin has an account but plays in
    neither: she observes ring (`observe ring` to pbm@)."""
    ring_and_other(pbm, *PW)
    watch = pbm.flat(pbm.mail(addr("erin"), "pbm", f"observe ring\n$${PW['erin']}$$"))
    assert "you now observe ring" in watch, watch
    pbm.settle()


def say(pbm: PbmServer, who: str, body: str, to: str = "ring") -> str:
    reply = pbm.mail(addr(who), to, f"{body}\n$${PW[who]}$$", subject="press")
    pbm.settle()
    return pbm.flat(reply)


def press_mails(pbm: PbmServer, to: str) -> list:
    """The relayed press (and GM copies) in ``to``'s mailbox, not the replies."""
    return [m for m in pbm.inbox(to)
            if ": press from " in str(m["Subject"]) or str(m["Subject"]).endswith(": anonymous press")]


def raw_text(msg) -> str:
    """Every header and the text of a mail, to look for what must not be there."""
    return "\n".join(f"{k}: {v}" for k, v in msg.items()) + "\n" + PbmServer.text(msg)


def test_press_reaches_the_named_players_of_that_game_only(pbm):
    setup(pbm)
    body = ("GIVE 3 TO bob\n"
            "PRESS TO bob\n"
            "Bob, shall we ring with carol?\n"
            "\n"
            "GIVE 3 TO carol\n"
            "-- \n"
            "alice (alice@example.org)\n"
            "ENDPRESS")
    reply = say(pbm, "alice", body)
    assert "ok (line 2): sent to bob" in reply, reply
    # the block's lines are not orders: only line 1's GIVE is held
    assert "GIVE 3 TO bob" in reply and "line 5" not in reply, reply
    assert pbm.sql("SELECT lines FROM orders")[0][0] in (["GIVE 3 TO bob"], '["GIVE 3 TO bob"]')
    [got] = press_mails(pbm, addr("bob"))
    text = pbm.text(got)
    assert got["From"].addresses[0].addr_spec == "ring@pbm.test"
    assert "alice" in got["From"].addresses[0].display_name and "alice" in str(got["Subject"])
    assert got["Auto-Submitted"] == "auto-generated" and got["X-Loop"] == "pbm@pbm.test"
    # the message as written, blank line, signature and all; the address withheld
    assert ("press| Bob, shall we ring with carol?\npress|\npress| GIVE 3 TO carol\npress| -- \n"
            "press| alice ((address withheld))") in text, text
    assert "alice@example.org" not in raw_text(got)
    for other in ("carol", "dave", "erin", "alice"):
        assert press_mails(pbm, addr(other)) == [], other
    # PRESS TO ALL: every other player of ring, nobody of another game, no observer
    reply = say(pbm, "alice", "PRESS TO ALL\nA word to everyone.\nENDPRESS")
    assert "sent to all 2 other players of ring: bob, carol" in reply, reply
    assert len(press_mails(pbm, addr("bob"))) == 2 and len(press_mails(pbm, addr("carol"))) == 1
    assert press_mails(pbm, addr("dave")) == [] and press_mails(pbm, addr("erin")) == []
    assert press_mails(pbm, addr("alice")) == []
    assert pbm.sql("SELECT sender, recipient_count, to_all FROM press ORDER BY id") == [
        ("alice", 1, False), ("alice", 2, True)]


def test_refusals_name_the_fault_and_send_nothing(pbm):
    setup(pbm)
    reply = say(pbm, "alice", "PRESS TO bob zed\nhello\nENDPRESS")
    assert "REFUSED (line 1): there is no player called 'zed' in ring" in reply, reply
    assert "accepted here: ALL, or handles of the players of ring: bob, carol" in reply, reply
    reply = say(pbm, "alice", "PRESS TO dave\nhello\nENDPRESS")
    # dave has an account but plays elsewhere: answered alike (no probing for accounts)
    assert "there is no player called 'dave' in ring; nothing was sent" in reply, reply
    reply = say(pbm, "alice", "PRESS TO bob\n\n\nENDPRESS")
    assert "the message is empty" in reply, reply
    # dave plays in another game; erin only watches ring
    reply = say(pbm, "dave", "PRESS TO ALL\nhello ring\nENDPRESS")
    assert "you are not a player of ring" in reply, reply
    reply = say(pbm, "erin", "PRESS TO bob\nhello\nENDPRESS")
    assert "you are not a player of ring" in reply, reply
    # without the password
    reply = pbm.flat(pbm.mail(addr("alice"), "ring", "PRESS TO bob\nhello\nENDPRESS", subject="press"))
    assert "press needs your password" in reply, reply
    # press goes to a game's address, not to pbm@
    reply = say(pbm, "alice", "PRESS TO bob\nhello\nENDPRESS", to="pbm")
    assert "press goes to the game's address" in reply and "unknown command" not in reply, reply
    pbm.settle()
    for who in PW:
        assert press_mails(pbm, addr(who)) == [], who
    assert pbm.sql("SELECT count(*) FROM press")[0][0] == 0


def test_missing_endpress_is_refused_naming_its_line(pbm):
    setup(pbm)
    reply = say(pbm, "alice", "GIVE 3 TO bob\nPRESS TO bob\nmeet me\nGIVE 3 TO carol")
    assert "REFUSED (line 2)" in reply and "begun at line 2" in reply and "has no ENDPRESS line" in reply, reply
    assert "the lines after line 2 were not read" in reply
    # the order before the block holds; the unfinished block's lines are not orders
    assert "GIVE 3 TO carol" not in reply, reply
    # the JSON column reads back as text on SQLite, as a list on PostgreSQL
    assert [r[0] if isinstance(r[0], list) else json.loads(r[0]) for r in pbm.sql("SELECT lines FROM orders")] == [["GIVE 3 TO bob"]]
    # a block cut short by the next PRESS TO: neither message mixes into the other
    reply = say(pbm, "alice", "PRESS TO ALL\nfor all\nPRESS TO bob\nonly for bob\nENDPRESS")
    assert "no ENDPRESS line before the next PRESS TO at line 3" in reply, reply
    assert "ok (line 3): sent to bob" in reply, reply
    [got] = press_mails(pbm, addr("bob"))
    assert "only for bob" in pbm.text(got) and "for all" not in pbm.text(got)
    assert press_mails(pbm, addr("carol")) == []
    # an ENDPRESS alone, a PRESS line without TO
    reply = say(pbm, "alice", "ENDPRESS\nPRESS bob hello")
    assert "ENDPRESS without a PRESS TO line before it" in reply, reply
    assert "expected PRESS TO <handle> [<handle> ...] or PRESS TO ALL" in reply, reply


def test_anonymous_press_hides_the_sender_from_recipients_not_from_the_gm(pbm):
    setup(pbm)
    out = pbm.cli("game", "set", "ring", "anonymous=on").stdout
    assert "press=on anonymous=on" in out, out
    reply = say(pbm, "alice", "PRESS TO bob carol\nSomeone is watching you.\nENDPRESS")
    assert "sent to bob and carol (anonymous press" in reply, reply
    for who in ("bob", "carol"):
        [got] = press_mails(pbm, addr(who))
        seen = raw_text(got)
        assert "Someone is watching you." in seen
        assert "alice" not in seen.lower(), seen
    [copy] = press_mails(pbm, GM)
    assert "alice" in str(copy["Subject"]) and "It is anonymous" in pbm.flat(copy), pbm.text(copy)
    assert "to bob, carol" in pbm.flat(copy)
    listed = pbm.cli("game", "press", "ring").stdout
    assert "from alice to bob, carol [anonymous]" in listed and "Someone is watching you." in listed, listed


def test_gm_copy_and_listing(pbm):
    setup(pbm)
    say(pbm, "alice", "PRESS TO carol\nGrüße, Carol: 3 for you.\nENDPRESS")
    [copy] = press_mails(pbm, GM)
    text = pbm.flat(copy)
    assert "A copy for the game master: press in ring from alice, to carol." in text, text
    assert "Grüße, Carol: 3 for you." in text
    assert copy["From"].addresses[0].addr_spec == "ring@pbm.test"
    listed = pbm.cli("game", "press", "ring").stdout
    assert "ring: press=on anonymous=off; 1 message" in listed and "from alice to carol" in listed, listed
    assert "  Grüße, Carol: 3 for you." in listed
    assert "1 message" not in pbm.cli("game", "press", "other").stdout
    # the game master may write to the players of any game (named as such), even when press is off
    pbm.cli("game", "set", "ring", "press=off", "anonymous=on")
    t = pbm.flat(pbm.mail(GM, "ring", f"PRESS TO bob\nPlease send your orders.\nENDPRESS\n$${GM_PW}$$", subject="gm"))
    assert "ok (line 1): sent to bob" in t, t
    pbm.settle()
    [got] = [m for m in press_mails(pbm, addr("bob")) if "game master" in str(m["Subject"])]
    assert "Press in ring from the game master, to you:" in pbm.flat(got) and "Please send your orders." in pbm.text(got)
    assert len(press_mails(pbm, GM)) == 1  # no copy of the GM's own press
    # --last N: the newest N messages only
    everything = pbm.cli("game", "press", "ring").stdout
    assert "from alice to carol" in everything and "Please send your orders." in everything, everything
    newest = pbm.cli("game", "press", "ring", "--last", "1").stdout
    assert "Please send your orders." in newest and "from alice to carol" not in newest, newest


def test_broadcast_only_and_press_off(pbm):
    setup(pbm)
    t = pbm.flat(pbm.mail(GM, "pbm", f"game set ring press=broadcast\n$${GM_PW}$$", subject="desk"))
    assert "press=broadcast" in t and "REFUSED" not in t, t
    reply = say(pbm, "alice", "PRESS TO bob\nprivately\nENDPRESS")
    assert "ring takes broadcast press only: write PRESS TO ALL" in reply, reply
    reply = say(pbm, "alice", "PRESS TO ALL\nto all\nENDPRESS")
    assert "sent to all 2 other players" in reply, reply
    assert [pbm.text(m).count("privately") for m in press_mails(pbm, addr("bob"))] == [0]
    t = pbm.flat(pbm.mail(GM, "pbm", f"game set ring press=whisper\n$${GM_PW}$$", subject="desk"))
    assert "REFUSED" in t and "expected press=on" in t and "press=broadcast" in t, t
    pbm.cli("game", "set", "ring", "press=off")
    reply = say(pbm, "alice", "PRESS TO ALL\nanyone there?\nENDPRESS")
    assert "the game master has turned press off in ring; nothing was sent" in reply, reply
    pbm.settle()
    assert len(press_mails(pbm, addr("bob"))) == 1 and len(press_mails(pbm, addr("carol"))) == 1
    assert pbm.sql("SELECT count(*) FROM press")[0][0] == 1


@pytest.fixture
def limited(tmp_path):
    server = PbmServer(tmp_path, extra_env={"PBM_PRESS_PER_HOUR": "3"})
    try:
        server.start()
        yield server
        server.stop()
        assert not server.leaked_secrets()
    finally:
        server.close()


def test_hourly_press_limit_per_sender(limited):
    pbm = limited
    setup(pbm)
    assert "sent to all 2 other players" in say(pbm, "alice", "PRESS TO ALL\none\nENDPRESS")
    assert "sent to bob" in say(pbm, "alice", "PRESS TO bob\ntwo\nENDPRESS")
    # a third mail to two players would make 4: refused whole, nothing sent
    reply = say(pbm, "alice", "PRESS TO bob carol\nthree\nENDPRESS")
    assert "too much press: you have had 3 press mails relayed in the last hour" in reply, reply
    assert "beyond the limit of 3 an hour" in reply
    assert len(press_mails(pbm, addr("carol"))) == 1 and len(press_mails(pbm, addr("bob"))) == 2
    # the limit is the sender's: bob may still write
    assert "sent to alice" in say(pbm, "bob", "PRESS TO alice\nhi\nENDPRESS")


def test_press_text_decoded_and_password_never_relayed(pbm):
    """A quoted-printable, format=flowed body in ISO-8859-1 is relayed as the
    player wrote it; a $$password$$ inside the block counts and is masked."""
    setup(pbm)
    raw = (
        "From: alice@example.org\r\nTo: ring@pbm.test\r\nSubject: hi\r\n"
        "Message-ID: <flowed-1@example.org>\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=iso-8859-1; format=flowed\r\n"
        "Content-Transfer-Encoding: quoted-printable\r\n\r\n"
        "PRESS TO bob\r\n"
        "Ein sehr langer Satz f=FCr Bob, den der Client =\r\n"
        "umbrochen hat \r\n"
        "und weiter.\r\n"
        f"$${PW['alice']}$$\r\n"
        "ENDPRESS\r\n"
    ).encode("latin-1")
    with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
        smtp.sendmail("alice@example.org", ["ring@pbm.test"], raw)
    pbm.settle()
    [reply] = pbm.replies_to("<flowed-1@example.org>")
    assert "sent to bob" in pbm.flat(reply), pbm.text(reply)
    [got] = press_mails(pbm, addr("bob"))
    text = pbm.text(got)
    assert "Ein sehr langer Satz für Bob, den der Client umbrochen hat und weiter." in text, text
    assert PW["alice"] not in text and "$$****$$" in text


def test_a_mail_of_many_blocks_is_answered_within_bounds():
    """A hostile mail of 2,000 press blocks: 50 are answered, the rest is
    not read (and nothing of it is left to be read as orders)."""
    from pbm_server.play.press import MAX_BLOCKS, extract

    body = "\n".join(f"PRESS TO p{i}\nhello {i}\nENDPRESS" for i in range(2000))
    rest, blocks, _ = extract(body)
    assert len(blocks) == MAX_BLOCKS + 1
    assert blocks[0].handles == ["p0"] and blocks[0].body == ["hello 0"] and blocks[0].error is None
    assert f"more than {MAX_BLOCKS} press blocks in one mail" in (blocks[-1].error or "")
    assert not rest.strip() and rest.count("\n") == body.count("\n")
