"""Password guessing (issue 14, item 2): one password per account per mail,
failed checks throttled per account and per sender address in the database
(so across restarts), the owner told once about a lockout, and a refused
check changes nothing whatever the password."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

ALICE_PW = "alice-secret-1"
MALLORY_PW = "mallory-secret-2"
START = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)


def state(pbm, game: str) -> dict:
    return json.loads(pbm.cli("game", "export", game).stdout)


def test_only_the_first_password_of_a_mail_is_checked(pbm):
    alice = pbm.register("alice", ALICE_PW)
    pbm.new_game("giveaway", "gift")
    guesses = "\n".join(f"$$guess-{i:04d}$$" for i in range(40))
    # the right password after wrong ones: not checked, so nothing is done
    reply = pbm.flat(pbm.mail(alice, "gift", f"{guesses}\n$${ALICE_PW}$$\nJOIN"))
    assert "does not match the account alice" in reply and "nothing was done" in reply
    assert "Only the first $$password$$ of a mail is checked" in reply
    assert pbm.sql("SELECT count(*) FROM memberships")[0][0] == 0


def test_many_password_lines_cannot_change_a_password(pbm):
    alice = pbm.register("alice", ALICE_PW)
    lines = [f"password alice guess-{i:04d} taken-over-{i:04d}" for i in range(120)]
    lines.insert(60, f"password alice {ALICE_PW} taken-over-right")
    pbm.secrets.add("taken-over-right")
    reply = pbm.flat(pbm.mail(alice, "pbm", "\n".join(lines)))
    assert "your password is changed" not in reply
    assert "Only one password per account is checked in one mail" in reply
    # the old password still works, the one in the right line does not
    assert "registered as" not in reply
    ok = pbm.flat(pbm.mail(alice, "pbm", f"password alice {ALICE_PW} alice-secret-9"))
    pbm.secrets.add("alice-secret-9")
    assert "your password is changed" in ok


def test_failed_checks_are_throttled_per_account_across_restarts(pbm_stopped):
    pbm = pbm_stopped
    pbm.set_clock(START)
    pbm.env["PBM_AUTH_LOCKOUT_LEVEL"] = "2"
    pbm.start()
    alice = pbm.register("alice", ALICE_PW)
    pbm.register("mallory", MALLORY_PW)
    pbm.new_game("giveaway", "gift")

    # five wrong guesses (alice's From is forged by the guesser)
    for i in range(5):
        reply = pbm.flat(pbm.mail(alice, "gift", f"$$wrong-guess-{i}$$\nJOIN"))
        assert "does not match the account alice" in reply
    # now even the right password is not checked: refused, nothing done
    reply = pbm.flat(pbm.mail(alice, "gift", f"$${ALICE_PW}$$\nJOIN"))
    assert "Too many failed password attempts for alice" in reply
    assert "until 2026-05-04 10:01 UTC" in reply
    assert "does not match" not in reply  # it was not checked, so it says so and no more
    assert pbm.sql("SELECT count(*) FROM memberships")[0][0] == 0
    # the count lives in the database: a restart does not forget it
    pbm.stop()
    pbm.start()
    reply = pbm.flat(pbm.mail(alice, "gift", f"$${ALICE_PW}$$\nJOIN"))
    assert "Too many failed password attempts for alice" in reply
    # another account is not affected
    reply = pbm.flat(pbm.mail("mallory@example.org", "gift", f"$${MALLORY_PW}$$\nJOIN"))
    assert "accepted" in reply

    # the block passes; five more failures make the second block: a lockout,
    # and alice is told once
    pbm.set_clock(START + timedelta(minutes=2))
    for i in range(5):
        pbm.mail(alice, "gift", f"$$wrong-again-{i}$$\nJOIN")
    pbm.settle()
    told = [m for m in pbm.inbox(alice) if "failed password attempts" in m["Subject"]]
    assert len(told) == 1
    assert "many wrong passwords for your account alice" in pbm.flat(told[0])
    assert "until 2026-05-04 10:04 UTC" in pbm.flat(pbm.mail(alice, "gift", f"$${ALICE_PW}$$\nJOIN"))
    # the third block: no second mail to alice
    pbm.set_clock(START + timedelta(minutes=7))
    for i in range(5):
        pbm.mail(alice, "gift", f"$$wrong-third-{i}$$\nJOIN")
    pbm.settle()
    assert len([m for m in pbm.inbox(alice) if "failed password attempts" in m["Subject"]]) == 1

    # once the block is over, the right password works again
    pbm.set_clock(START + timedelta(hours=2))
    assert "accepted" in pbm.flat(pbm.mail(alice, "gift", f"$${ALICE_PW}$$\nJOIN"))


def test_failed_checks_are_throttled_per_sender(pbm_stopped):
    pbm = pbm_stopped
    pbm.set_clock(START)
    pbm.start()
    names = ["bob", "carol", "dave", "erin", "frank"]
    for n in names:
        pbm.register(n, f"{n}-secret-77")
    mallory = pbm.register("mallory", MALLORY_PW)
    pbm.mail("bob@example.org", "pbm", "curio challenge bob carol $$bob-secret-77$$")
    before = state(pbm, "curio")
    # one guess at each of five accounts, all from mallory's address
    for n in names:
        reply = pbm.flat(pbm.mail(mallory, "pbm", f"curio resign 101 {n} guess-for-{n}"))
        assert "do not match; nothing was done" in reply
    # mallory's address is now throttled: not even her own password is checked
    reply = pbm.flat(pbm.mail(mallory, "pbm", "curio resign 101 bob bob-secret-77"))
    assert "Too many failed password attempts for" in reply and f"or from {mallory}: no password is checked" in reply
    assert state(pbm, "curio") == before
    # bob himself, from his own address, is not throttled (one failure only)
    reply = pbm.flat(pbm.mail("bob@example.org", "pbm", "curio resign 101 bob bob-secret-77"))
    assert "Too many" not in reply and "do not match" not in reply
    assert state(pbm, "curio") != before


def test_a_right_guess_from_another_address_looks_like_a_wrong_one(pbm_stopped):
    """The throttle must not tell a guesser which guess was right: the right
    password from an address that is not the account's counts as a failure."""
    pbm = pbm_stopped
    pbm.set_clock(START)
    pbm.start()
    alice = pbm.register("alice", ALICE_PW)
    pbm.register("bob", "bob-secret-77")
    mallory = pbm.register("mallory", MALLORY_PW)
    pbm.mail(alice, "pbm", f"curio challenge alice bob $${ALICE_PW}$$")
    guesses = ["guess-aaaa1", "guess-bbbb2", ALICE_PW, "guess-cccc3", "guess-dddd4"]
    for guess in guesses:
        reply = pbm.flat(pbm.mail(mallory, "pbm", f"curio resign 101 alice {guess}"))
        assert "do not match; nothing was done" in reply and "Too many" not in reply
    reply = pbm.flat(pbm.mail(mallory, "pbm", "curio resign 101 alice guess-eeee5"))
    assert "Too many failed password attempts" in reply
    # issue 26: mallory's guesses block mallory's address, never alice's own
    reply = pbm.flat(pbm.mail(alice, "pbm", f"curio resign 101 alice {ALICE_PW}"))
    assert "Too many" not in reply and "do not match" not in reply
