"""Account recovery and moves by mail to pbm@DOMAIN, over real SMTP:
forgot / reset (a one-time code to the registered address only), and
email / confirm (moving an account to a new address)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

RESET_LINE = re.compile(r"reset (\w+) ([0-9A-Z]{5}-[0-9A-Z]{5}) NEWPASSWORD")
CONFIRM_LINE = re.compile(r"^\s*confirm ([0-9A-Z]{5}-[0-9A-Z]{5})\s*$", re.M)


def code_mails(pbm, addr: str, what: str) -> list:
    return [m for m in pbm.inbox(addr) if what in str(m["Subject"])]


def reset_code(pbm, addr: str, count: int = 1) -> str:
    pbm.settle()
    mails = code_mails(pbm, addr, "a code to reset")
    assert len(mails) == count, [m["Subject"] for m in pbm.inbox(addr)]
    found = RESET_LINE.search(pbm.text(mails[-1]))
    assert found, pbm.text(mails[-1])
    return found.group(2)


def test_forgot_mails_the_code_to_the_registered_address_only(pbm):
    alice = pbm.register("alice", "wonderland1")
    pbm.secrets.update({"new-secret-9", "mallory-pw1"})
    reply = pbm.text(pbm.mail("mallory@evil.example", "pbm", "forgot alice"))
    # issue 26: the same answer whether the handle exists or not
    assert ("if alice is the handle of an account here, a one-time code went to the address registered for it "
            "(not to this one)") in " ".join(reply.split())
    assert alice not in reply  # the registered address is not revealed
    code = reset_code(pbm, alice)
    mail = code_mails(pbm, alice, "a code to reset")[0]
    assert "from another address" in pbm.flat(mail) and "within 1 hour" in pbm.flat(mail)
    # only a hash is stored
    stored = pbm.sql("SELECT purpose, email, code_hash FROM confirmations")
    assert [(p, e) for p, e, _ in stored] == [("reset", alice)]
    assert code not in stored[0][2] and code.replace("-", "") not in stored[0][2]

    # the code is useless from another address, even with the code in hand
    text = pbm.flat(pbm.mail("mallory@evil.example", "pbm", f"reset alice {code} mallory-pw1"))
    assert "REFUSED" in text and "must come from the address registered for alice" in text
    # a wrong code from the right address: refused, the right one still works
    text = pbm.flat(pbm.mail(alice, "pbm", "reset alice AAAAA-BBBBB new-secret-9"))
    # issue 26: a wrong code voids nothing, so no count of tries left
    assert "not the code that was mailed (the code mailed still works" in text and "nothing was changed" in text
    text = pbm.flat(pbm.mail(alice, "pbm", f"reset alice {code} short"))
    assert "at least 6 characters" in text and "the code still works" in text
    reply = pbm.mail(alice, "pbm", f"reset alice {code} new-secret-9")
    assert "your password is changed" in pbm.flat(reply)
    assert code not in pbm.text(reply) and "new-secret-9" not in pbm.text(reply)
    # the code works once
    text = pbm.flat(pbm.mail(alice, "pbm", f"reset alice {code} other-secret-8"))
    assert "no code is open for this account" in text
    pbm.secrets.add("other-secret-8")

    # the new password works, the old one does not
    pbm.new_game("giveaway", "ring")
    assert "does not match" not in pbm.flat(pbm.mail(alice, "ring", "JOIN\n$$new-secret-9$$"))
    assert "does not match the account alice" in pbm.flat(pbm.mail(alice, "ring", "LEAVE\n$$wonderland1$$"))
    # the code went to alice's address and to nobody else
    for rcpts, msg in pbm.sink.all():
        if alice not in rcpts:
            assert code not in pbm.text(msg), rcpts
    actions = [r[0] for r in pbm.sql("SELECT action FROM audit_log ORDER BY id")]
    assert "forgot" in actions and "password reset" in actions


def test_forgot_from_the_own_address_and_its_limit(pbm):
    bob = pbm.register("bob", "builder-pw1")
    for n in range(1, 4):
        text = pbm.flat(pbm.mail(bob, "pbm", "forgot bob"))
        assert "a one-time code is on its way to you in a separate mail; it expires in 1 hour" in text
        reset_code(pbm, bob, count=n)
    text = pbm.flat(pbm.mail(bob, "pbm", "forgot bob"))
    # issue 26: the limit is per address and hour (PBM_ACCOUNT_MAILS_PER_HOUR), and it is true
    # that the codes mailed still work: a new code no longer voids the ones before it
    assert "REFUSED" in text and "3 codes were mailed to this address within the hour" in text
    assert "the codes already mailed still work" in text
    assert len(code_mails(pbm, bob, "a code to reset")) == 3
    first = RESET_LINE.search(pbm.text(code_mails(pbm, bob, "a code to reset")[0])).group(2)
    last = reset_code(pbm, bob, count=3)
    pbm.secrets.update({"fresh-pass77", "fresh-pass78"})
    assert "your password is changed" in pbm.flat(pbm.mail(bob, "pbm", f"reset bob {first} fresh-pass77"))
    # the owner is through: the other codes are done with
    assert "no code is open" in pbm.flat(pbm.mail(bob, "pbm", f"reset bob {last} fresh-pass78"))


def test_forgot_refusals(pbm):
    pbm.register("gm", "gm-password-1", email=pbm.gm_address)
    # issue 26: an unknown handle (and the GM's, asked from elsewhere) is answered like a known one
    text = pbm.flat(pbm.mail("x@example.org", "pbm", "forgot nobody"))
    assert "if nobody is the handle of an account here, a one-time code went" in text and "REFUSED" not in text
    text = pbm.flat(pbm.mail("x@example.org", "pbm", "forgot"))
    assert "expected: forgot HANDLE" in text
    text = pbm.flat(pbm.mail("x@example.org", "pbm", "forgot gm"))
    assert "if gm is the handle of an account here, a one-time code went" in text
    text = pbm.flat(pbm.mail(pbm.gm_address, "pbm", "forgot gm"))
    assert "game master's password is set on the server's command line" in text
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 0
    text = pbm.flat(pbm.mail("x@example.org", "pbm", "reset gm"))
    assert "expected: reset HANDLE CODE NEWPASSWORD" in text


def test_a_reset_code_expires_after_an_hour(pbm_stopped):
    pbm = pbm_stopped
    start = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    pbm.set_clock(start)
    pbm.start()
    carol = pbm.register("carol", "carol-pass-1")
    pbm.mail(carol, "pbm", "forgot carol")
    code = reset_code(pbm, carol)
    pbm.set_clock(start + timedelta(minutes=61))
    pbm.secrets.add("late-pass-22")
    text = pbm.flat(pbm.mail(carol, "pbm", f"reset carol {code} late-pass-22"))
    assert "no code is open for this account at this address (a code expires after 1 hour" in text
    assert pbm.sql("SELECT count(*) FROM audit_log WHERE action = 'password reset'")[0][0] == 0


def test_moving_an_account_to_a_new_address(pbm):
    old = pbm.register("dora", "explorer-99")
    new = "dora@new.example"
    # without the password: refused
    text = pbm.flat(pbm.mail(old, "pbm", f"email dora {new}"))
    assert "this needs your password" in text
    text = pbm.flat(pbm.mail(old, "pbm", "email dora not-an-address\n$$explorer-99$$"))
    assert "'not-an-address' is not an e-mail address" in text
    pbm.register("eve", "eve-pass-12")
    text = pbm.flat(pbm.mail(old, "pbm", "email eve eve2@example.org\n$$explorer-99$$"))
    assert "you can move only your own account" in text
    text = pbm.flat(pbm.mail(old, "pbm", "email dora eve@example.org\n$$explorer-99$$"))
    assert "registered to another account already" in text
    text = pbm.flat(pbm.mail(old, "pbm", "email dora dora@pbm.test\n$$explorer-99$$"))
    assert "an address of this server" in text
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 0

    text = pbm.flat(pbm.mail(old, "pbm", f"email dora {new}\n$$explorer-99$$"))
    assert f"a code went to {new}" in text and "until then it stays at this address" in text
    pbm.settle()
    (code_mail,) = pbm.inbox(new)
    code = CONFIRM_LINE.search(pbm.text(code_mail)).group(1)
    assert code not in text
    # the code from another address does nothing
    assert "nothing to confirm for this address" in pbm.flat(pbm.mail("mallory@evil.example", "pbm", f"confirm {code}"))
    assert pbm.sql("SELECT email FROM accounts WHERE handle = 'dora'")[0][0] == old

    text = pbm.flat(pbm.mail(new, "pbm", f"confirm {code}"))
    assert "the account dora now belongs to this address" in text
    assert pbm.sql("SELECT email FROM accounts WHERE handle = 'dora'")[0][0] == new
    pbm.settle()
    told = [m for m in pbm.inbox(old) if "has moved" in str(m["Subject"])]
    assert len(told) == 1 and f"was moved to {new}" in pbm.flat(told[0])
    # the account answers at the new address, no longer at the old one
    assert "your time zone is UTC" in pbm.flat(pbm.mail(new, "pbm", "timezone\n$$explorer-99$$"))
    assert "No account is registered for dora@example.org" in pbm.flat(pbm.mail(old, "pbm", "timezone\n$$explorer-99$$"))
    moved = pbm.sql("SELECT detail FROM audit_log WHERE action = 'email moved'")
    assert moved == [(f"dora: {old} -> {new}",)]
