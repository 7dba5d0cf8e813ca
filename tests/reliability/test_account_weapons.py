"""Issue 26, items 3-6 and part of 10: account mail as a weapon, over SMTP.

* fan-out: one mail of many ``forgot`` or ``email`` lines reaches no more
  addresses than PBM_MAX_NOTICES_PER_MAIL, code mails to one address are
  limited per hour, repeated lines for one handle do one thing;
* lockouts: guesses from another address never block the owner, guesses
  under a forged From of the owner's address are answered with an unlock
  code only the owner receives; recovery codes are not voided by guesses;
* registration: another player's address-change request to the same address
  does not shadow a newcomer's code;
* a move of an account can be undone from the old address for 7 days;
* ``forgot X`` answers alike whether X exists or not.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from games.names import name_key

START = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)
RESET_LINE = re.compile(r"reset (\w+) ([0-9A-Z]{5}-[0-9A-Z]{5}) NEWPASSWORD")
UNDO_LINE = re.compile(r"undo (\w+) ([0-9A-Z]{5}-[0-9A-Z]{5}) NEWPASSWORD")
UNLOCK_LINE = re.compile(r"^\s*unlock ([0-9A-Z]{5}-[0-9A-Z]{5})\s*$", re.M)
CONFIRM_LINE = re.compile(r"^\s*confirm ([0-9A-Z]{5}-[0-9A-Z]{5})\s*$", re.M)


def add_accounts(pbm, handles: list[str]) -> None:
    """Accounts written straight into the table (their passwords are never used here)."""
    for h in handles:
        pbm.execute("INSERT INTO accounts (handle, handle_key, handle_skeleton, email, password_hash, created_at) "
                    "VALUES (:h, :k, :s, :e, '!none', :t)", h=h, k=h.lower(), s=name_key(h), e=f"{h}@players.test",
                    t=START.replace(tzinfo=None))


def mails_with(pbm, addr: str, subject_part: str) -> list:
    pbm.settle()
    return [m for m in pbm.inbox(addr) if subject_part in str(m["Subject"])]


def sent_to_others_than(pbm, sender: str) -> list[str]:
    pbm.settle()
    return [r for rcpts, _ in pbm.sink.all() for r in rcpts if r != sender]


# -- item 3: fan-out ----------------------------------------------------------------------
def test_forgot_lines_reach_no_more_players_than_the_notice_budget(pbm):
    handles = [f"p{i:04d}" for i in range(30)]
    add_accounts(pbm, handles)
    stranger = "mallory@evil.test"
    lines = [f"forgot {h}" for h in handles] + ["forgot p0000"] * 5
    text = pbm.flat(pbm.mail(stranger, "pbm", "\n".join(lines)))
    out = sent_to_others_than(pbm, stranger)
    assert len(out) == 20, len(out)  # PBM_MAX_NOTICES_PER_MAIL; the old code sent 30
    assert sorted(out) == sorted(f"{h}@players.test" for h in handles[:20])
    # the lines not carried out say so, and why
    refused = re.findall(r"REFUSED \(line (\d+)\): not carried out: this mail has caused 20 mails to other "
                         r"addresses already, and one mail may cause at most 20", text)
    # the reply shows the first 5 refusals of a kind, then counts the rest (issue 28, item 2)
    assert [int(n) for n in refused] == list(range(21, 26))
    assert "... and 5 more lines refused the same way (up to line 30), not shown" in text, text
    assert text.count("'forgot p0000' was done by an earlier line of this mail") == 5


def test_address_change_lines_send_one_mail_and_a_few_an_hour(pbm):
    mallory = pbm.register("mallory", "mallory-pw-1")
    victim = "victim@outside.test"
    body = "$$mallory-pw-1$$\n" + "\n".join([f"email mallory {victim}"] * 299)
    text = pbm.flat(pbm.mail(mallory, "pbm", body))
    assert len(mails_with(pbm, victim, "confirm your new address")) == 1  # the old code sent 299
    assert text.count("'email mallory' was done by an earlier line of this mail") == 5  # then counted:
    assert "... and 293 more lines refused the same way (up to line 300), not shown" in text, text[-3000:]
    # more such mails: at most PBM_ACCOUNT_MAILS_PER_HOUR (3) code mails reach that address in the hour
    for _ in range(4):
        text = pbm.flat(pbm.mail(mallory, "pbm", f"email mallory {victim}\n$$mallory-pw-1$$"))
    assert "3 codes were mailed to victim@outside.test within the hour, so no more is sent" in text
    assert len(mails_with(pbm, victim, "confirm your new address")) == 3


# -- item 4: lockouts as a weapon ----------------------------------------------------------
def test_guesses_from_another_address_never_block_the_owner(pbm):
    sol = pbm.register("sol", "sol-secret-1")
    mallory = pbm.register("mallory", "mallory-pw-1")
    pbm.mail(sol, "pbm", "curio challenge sol mallory $$sol-secret-1$$")
    for i in range(8):
        text = pbm.flat(pbm.mail(mallory, "pbm", f"curio move 101 sol guess-{i:03d} a2-a3"))
    assert "Too many failed password attempts for sol or from mallory@example.org" in text
    # sol's own move from sol's address goes through (the old code refused it for 60 s and more)
    text = pbm.flat(pbm.mail(sol, "pbm", "curio move 101 sol sol-secret-1 a2-a3"))
    assert "Too many" not in text and "REFUSED" not in text, text
    # the audit log names the address the guesses came from
    rows = pbm.sql("SELECT actor, detail FROM audit_log WHERE action = 'failed password check'")
    assert rows and all(actor == mallory and "sol" in detail and mallory in detail for actor, detail in rows)


def test_a_forged_owner_address_blocks_but_the_owner_gets_through_with_the_unlock_code(pbm):
    bob = pbm.register("bob", "bob-secret-1")
    pbm.new_game("giveaway", "gift")
    for i in range(5):  # mallory forges bob's From
        pbm.send(bob, "gift", f"JOIN\n$$bad-guess-{i}$$")
    text = pbm.flat(pbm.mail(bob, "gift", "JOIN\n$$bob-secret-1$$"))
    assert "Too many failed password attempts for bob from bob@example.org" in text
    assert "An unlock code has been mailed to this address" in text
    assert pbm.sql("SELECT count(*) FROM memberships")[0][0] == 0
    (unlock_mail,) = mails_with(pbm, bob, "failed password attempts")
    code = UNLOCK_LINE.search(pbm.text(unlock_mail)).group(1)
    # a forger without the code stays blocked, wrong unlock code or not
    text = pbm.flat(pbm.mail(bob, "gift", "JOIN\n$$bob-secret-1$$\n$$unlock AAAAA-BBBBB$$"))
    assert "not the one mailed to this address" in text and pbm.sql("SELECT count(*) FROM memberships")[0][0] == 0
    # the owner, with the code, is through (the code is never repeated in a reply)
    reply = pbm.mail(bob, "gift", f"JOIN\n$$bob-secret-1$$\n$$unlock {code}$$")
    pbm.secrets.discard(f"unlock {code}")  # the harness takes $$...$$ for a password; the unlock mail holds it
    assert "Too many" not in pbm.flat(reply) and code not in pbm.text(reply)
    assert pbm.sql("SELECT count(*) FROM memberships")[0][0] == 1
    # no second unlock mail while the first code is open
    pbm.mail(bob, "gift", "JOIN\n$$bob-secret-1$$")
    assert len(mails_with(pbm, bob, "failed password attempts")) == 1


def test_forged_gm_guesses_do_not_lock_the_gm_out(pbm):
    gm = pbm.gm_address
    pbm.cli("account", "add", "--gm", "boss", "--password", "gm-secret9")
    pbm.secrets.add("gm-secret9")
    for i in range(5):
        pbm.send(gm, "pbm", f"game new giveaway g{i}\n$$wrong-gm-{i}$$", subject="desk")
    text = pbm.flat(pbm.mail(gm, "pbm", "game new giveaway real\n$$gm-secret9$$", subject="desk"))
    assert "Too many failed password attempts for boss" in text
    code = UNLOCK_LINE.search(pbm.text(mails_with(pbm, gm, "failed password attempts")[0])).group(1)
    text = pbm.flat(pbm.mail(gm, "pbm", f"game new giveaway real\n$$gm-secret9$$\n$$unlock {code}$$", subject="desk"))
    pbm.secrets.discard(f"unlock {code}")
    assert "REFUSED" not in text, text
    assert pbm.sql("SELECT name FROM games") == [("real",)]


def test_recovery_codes_survive_other_peoples_guesses(pbm):
    bob = pbm.register("bob", "bob-secret-1")
    for _ in range(3):
        pbm.mail("mallory@evil.test", "pbm", "forgot bob")
    codes = [RESET_LINE.search(pbm.text(m)).group(2) for m in mails_with(pbm, bob, "a code to reset")]
    assert len(codes) == 3
    # three forged mails of five bad reset lines each
    for n in range(3):
        pbm.send(bob, "pbm", "\n".join(f"reset bob AAAA{n}-BBBB{i} forged-pw-{i}" for i in range(5)))
    pbm.settle()
    # bob asks for a fourth code: none is sent, and it is true that the others still work
    text = pbm.flat(pbm.mail(bob, "pbm", "forgot bob"))
    assert "the codes already mailed still work" in text
    pbm.secrets.add("bob-new-secret-2")
    text = pbm.flat(pbm.mail(bob, "pbm", f"reset bob {codes[0]} bob-new-secret-2"))
    assert "your password is changed" in text, text


# -- item 5: registration interference -----------------------------------------------------
def test_an_address_change_request_does_not_shadow_a_registration(pbm):
    newbie = "newbie@example.org"
    pbm.secrets.add("newbie-pw-1")
    code = pbm.code_in(pbm.mail(newbie, "pbm", "register newbie newbie-pw-1"))
    mallory = pbm.register("mallory", "mallory-pw-1")
    assert "a code went to" in pbm.flat(pbm.mail(mallory, "pbm", f"email mallory {newbie}\n$$mallory-pw-1$$"))
    # newbie registers again meanwhile (a second request of his own): both codes stay good
    pbm.mail(newbie, "pbm", "register newbie newbie-pw-1")
    text = pbm.flat(pbm.mail(newbie, "pbm", f"confirm {code}"))
    assert "you are registered as newbie" in text, text
    assert pbm.sql("SELECT handle FROM accounts WHERE email = :e", e=newbie) == [("newbie",)]


# -- item 6: a stolen password moves the account ------------------------------------------
def test_a_move_can_be_undone_from_the_old_address(pbm):
    dave = pbm.register("dave", "dave-secret-1")
    thief = "thief@evil.test"
    # the thief, with dave's sniffed password, forges dave's From and confirms from their own address
    pbm.send(dave, "pbm", f"email dave {thief}\n$$dave-secret-1$$")
    (code_mail,) = mails_with(pbm, thief, "confirm your new address")
    pbm.mail(thief, "pbm", f"confirm {CONFIRM_LINE.search(pbm.text(code_mail)).group(1)}")
    assert pbm.sql("SELECT email FROM accounts WHERE handle = 'dave'") == [(thief,)]
    (told,) = mails_with(pbm, dave, "has moved")
    undo_code = UNDO_LINE.search(pbm.text(told)).group(2)
    # within the window a forgotten-password code goes to both addresses
    pbm.mail(thief, "pbm", "forgot dave")
    assert len(mails_with(pbm, dave, "a code to reset")) == 1
    assert len(mails_with(pbm, thief, "a code to reset")) == 1
    # dave undoes the move and chooses a new password; the thief's knowledge is worthless
    pbm.secrets.add("dave-secret-2")
    text = pbm.flat(pbm.mail(dave, "pbm", f"undo dave {undo_code} dave-secret-2"))
    assert "the account dave is back at this address" in text, text
    assert pbm.sql("SELECT email FROM accounts WHERE handle = 'dave'") == [(dave,)]
    assert "does not match" in pbm.flat(pbm.mail(dave, "pbm", "timezone\n$$dave-secret-1$$"))
    assert "your time zone is" in pbm.flat(pbm.mail(dave, "pbm", "timezone\n$$dave-secret-2$$"))
    # the thief's reset code died with the undo; the undo code works once
    thief_code = RESET_LINE.search(pbm.text(mails_with(pbm, thief, "a code to reset")[0])).group(2)
    assert "REFUSED" in pbm.flat(pbm.mail(thief, "pbm", f"reset dave {thief_code} thief-pw-99"))
    assert "REFUSED" in pbm.flat(pbm.mail(dave, "pbm", f"undo dave {undo_code} dave-secret-3"))
    pbm.secrets.update({"thief-pw-99", "dave-secret-3"})
    assert not pbm.leaked_secrets()


# -- item 10: probing handles ---------------------------------------------------------------
def test_forgot_answers_alike_for_known_and_unknown_handles(pbm):
    pbm.register("alice", "alice-secret-1")

    def answer(handle: str) -> str:
        text = pbm.flat(pbm.mail("prober@evil.test", "pbm", f"forgot {handle}"))
        return text.split("Your commands:")[1].split("mail \"help\"")[0].replace(handle, "X")

    assert answer("alice") == answer("alicf")


def test_many_guessing_addresses_slow_the_account_for_others_only(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_AUTH_ACCOUNT_MAX_FAILURES"] = "3"
    pbm.start()
    sol = pbm.register("sol", "sol-secret-1")
    pbm.register("mallory", "mallory-pw-1")
    pbm.mail(sol, "pbm", "curio challenge sol mallory $$sol-secret-1$$")
    for i in range(3):  # one guess each from three addresses: no address reaches its own limit
        text = pbm.flat(pbm.mail(f"guesser{i}@evil.test", "pbm", f"curio move 101 sol guess-{i:03d} a2-a3"))
        assert "do not match" in text
    text = pbm.flat(pbm.mail("guesser9@evil.test", "pbm", "curio move 101 sol guess-999 a2-a3"))
    assert "Many failed password attempts for sol from other addresses" in text
    # the account's own address is not slowed
    text = pbm.flat(pbm.mail(sol, "pbm", "curio move 101 sol sol-secret-1 a2-a3"))
    assert "REFUSED" not in text and "Many failed" not in text, text
