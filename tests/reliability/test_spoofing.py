"""Spoofing: a player's From address with a wrong password, or the right
password from another address, changes nothing and gets a refusal."""

from __future__ import annotations

import json

ALICE_PW = "alice-secret-1"
MALLORY_PW = "mallory-secret-2"


def flat(text: str) -> str:
    return " ".join(text.split())


def state(pbm, game: str) -> dict:
    return json.loads(pbm.cli("game", "export", game).stdout)


def test_wrong_password_or_wrong_address_changes_nothing(pbm):
    alice = pbm.register("alice", ALICE_PW)
    mallory = pbm.register("mallory", MALLORY_PW)
    pbm.new_game("giveaway", "gift")
    text = flat(pbm.text(pbm.mail(alice, "gift", f"$${ALICE_PW}$$\nJOIN")))
    assert "accepted" in text
    before = state(pbm, "gift")

    # alice's address, a wrong password
    text = flat(pbm.text(pbm.mail(alice, "gift", "$$not-her-password$$\nLEAVE")))
    assert "does not match the account alice" in text and "nothing was done" in text
    assert "not-her-password" not in text
    # alice's password, from mallory's address (mallory's own account)
    text = flat(pbm.text(pbm.mail(mallory, "gift", f"$${ALICE_PW}$$\nJOIN")))
    assert "does not match the account mallory" in text and "nothing was done" in text
    assert ALICE_PW not in text
    # alice's password from an address nobody registered
    text = flat(pbm.text(pbm.mail("eve@example.net", "gift", f"$${ALICE_PW}$$\nJOIN")))
    assert "No account is registered for eve@example.net" in text and "nothing was done" in text
    assert ALICE_PW not in text
    # a forged From with alice's address but another envelope sender changes nothing either
    msg = pbm.build(alice, "gift", "$$guess-1234$$\nLEAVE")
    mid = pbm.send_message(msg, mail_from="mallory@example.org")
    pbm.settle()
    (reply,) = pbm.replies_to(mid)
    assert "does not match the account alice" in flat(pbm.text(reply))
    assert state(pbm, "gift") == before

    # the password of alice's account cannot be changed from mallory's address
    text = flat(pbm.text(pbm.mail(mallory, "pbm", f"password alice {ALICE_PW} hijacked-99")))
    assert "do not match; nothing was changed" in text and ALICE_PW not in text and "hijacked-99" not in text
    # ... and alice's password still works, the attacker's does not
    text = flat(pbm.text(pbm.mail(alice, "gift", f"$${ALICE_PW}$$\nLEAVE")))
    assert "does not match" not in text
    text = flat(pbm.text(pbm.mail(alice, "pbm", "password alice hijacked-99 other-pass-77")))
    assert "do not match; nothing was changed" in text


def test_inline_credentials_from_another_address(pbm):
    alice = pbm.register("alice", ALICE_PW)
    pbm.register("bob", "bob-secret-3")
    mallory = pbm.register("mallory", MALLORY_PW)
    pbm.mail(alice, "pbm", f"curio challenge alice bob $${ALICE_PW}$$")
    before = state(pbm, "curio")
    # pbmserv-style "userid password" inline, right password, wrong sender
    text = flat(pbm.text(pbm.mail(mallory, "pbm", f"curio resign 101 alice {ALICE_PW}")))
    assert "do not match; nothing was done" in text and ALICE_PW not in text
    # right sender, wrong password
    text = flat(pbm.text(pbm.mail(alice, "pbm", "curio resign 101 alice wrong-pass-1")))
    assert "do not match; nothing was done" in text
    assert state(pbm, "curio") == before
