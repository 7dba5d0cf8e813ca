"""Issue 14.1: a forged From takes nobody's role.  Registration proves the
sender controls the address (a code mailed there must come back), and the
game master's account is made on the command line only."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

GM = "gm@example.org"


def test_a_forged_gm_address_cannot_register_or_run_gm_commands(pbm):
    pbm.secrets.add("boss-pass1")
    text = pbm.flat(pbm.mail(GM, "pbm", "register boss boss-pass1"))
    assert "REFUSED" in text and "pbm account add --gm" in text
    assert not re.search(r"confirm [0-9A-Z]{5}-[0-9A-Z]{5}", text)  # no code was offered
    # the forged GM's next step, a GM command with the chosen password, does nothing
    text = pbm.flat(pbm.mail(GM, "pbm", "game new giveaway pwned\n$$boss-pass1$$"))
    assert "nothing was done" in text
    assert pbm.sql("SELECT count(*) FROM accounts")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM games")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 0


def test_the_gm_account_is_made_on_the_command_line(pbm):
    out = pbm.cli("account", "add", "--gm", "boss", "--password", "gm-secret9")
    assert "boss <gm@example.org> registered" in out.stdout
    pbm.secrets.add("gm-secret9")
    text = pbm.flat(pbm.mail(GM, "pbm", "game new giveaway g1\n$$gm-secret9$$", subject="desk"))
    assert "REFUSED" not in text, text
    assert pbm.sql("SELECT name FROM games") == [("g1",)]
    bad = pbm.cli("account", "add", "--gm", "boss2", "other@example.org", "--password", "gm-secret9", check=False)
    assert bad.returncode == 2 and "PBM_GM_ADDRESS" in bad.stderr


def test_a_forged_from_cannot_claim_a_players_address(pbm):
    victim = "vera@example.org"
    pbm.secrets.add("evil-pass1")
    pbm.send(victim, "pbm", "register mallory evil-pass1")  # forged: Mallory never sees the reply
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM accounts")[0][0] == 0
    (code_mail,) = pbm.inbox(victim)
    code = pbm.code_in(code_mail)
    assert "If you did not ask for this, ignore this mail" in pbm.flat(code_mail)
    # the code went to the address it proves and to nobody else
    others = [m for rcpts, m in pbm.sink.all() if victim not in rcpts]
    assert all(code not in pbm.text(m) for m in others)
    # guessing: wrong codes are refused (issue 26: they no longer void the request, which would let
    # anyone forging the address kill its owner's code; 50 bits and one try per mail make guessing futile)
    for _ in range(5):
        text = pbm.flat(pbm.mail(victim, "pbm", "confirm AAAAA-AAAAA"))
        assert "REFUSED" in text and "not the code" in text
    assert pbm.sql("SELECT count(*) FROM accounts")[0][0] == 0
    assert pbm.sql("SELECT attempts FROM confirmations") == [(5,)]
    # vera never confirms mallory's request; she registers for real and is not locked out
    assert pbm.register("vera", "vera-pass1", email=victim) == victim
    assert pbm.sql("SELECT handle, email FROM accounts") == [("vera", victim)]


def test_a_code_expires_after_a_day_and_is_stored_only_as_a_hash(pbm_stopped):
    pbm = pbm_stopped
    start = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
    pbm.set_clock(start)
    pbm.start()
    pbm.secrets.add("late-pass1")
    reply = pbm.mail("lea@example.org", "pbm", "register lea late-pass1")
    code = pbm.code_in(reply)
    (stored,) = pbm.sql("SELECT code_hash FROM confirmations")[0]
    assert code not in stored and code.replace("-", "") not in stored
    pbm.set_clock(start + timedelta(hours=25))
    text = pbm.flat(pbm.mail("lea@example.org", "pbm", f"confirm {code}"))
    assert "nothing to confirm" in text and "24 hours" in text
    assert pbm.sql("SELECT count(*) FROM accounts")[0][0] == 0


def test_a_code_typed_loosely_still_confirms(pbm):
    pbm.secrets.add("loose-pass1")
    reply = pbm.mail("lou@example.org", "pbm", "register lou loose-pass1")
    code = pbm.code_in(reply).lower().replace("-", " ")
    text = pbm.flat(pbm.mail("lou@example.org", "pbm", f"confirm {code.replace(' ', '')}"))
    assert "registered as lou" in text


def desk_mail(pbm, auth_results: list[str]) -> str:
    """The GM's `game new giveaway g9` with these Authentication-Results
    headers (the GM's password is gm-secret9): the one reply, its words."""
    msg = pbm.build(GM, "pbm", "game new giveaway g9\n$$gm-secret9$$", subject="desk")
    for value in auth_results:
        msg["Authentication-Results"] = value
    pbm.send_message(msg)
    pbm.settle()
    (reply,) = pbm.replies_to(msg["Message-ID"])
    return pbm.flat(reply)


def test_a_from_that_fails_dmarc_at_our_mta_is_never_authenticated(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_TRUSTED_AUTHSERV_ID"] = "mx.pbm.test"
    pbm.start()
    pbm.cli("account", "add", "--gm", "boss", "--password", "gm-secret9")
    pbm.secrets.add("gm-secret9")
    # forged: our MTA found DMARC failing; a header from elsewhere claiming a pass does not help
    text = desk_mail(pbm, ["mx.pbm.test; dmarc=fail (p=reject) header.from=example.org",
                            "evil.example; dmarc=pass header.from=example.org"])
    assert "could not be verified (DMARC fail for example.org)" in text
    # no header of our MTA at all: the mail did not come through it
    text = desk_mail(pbm, ["evil.example; dmarc=pass header.from=example.org"])
    assert "no Authentication-Results from mx.pbm.test" in text
    assert pbm.sql("SELECT count(*) FROM games")[0][0] == 0
    # the real GM's mail, verified by our MTA, works
    text = desk_mail(pbm, ["mx.pbm.test 1; spf=pass smtp.mailfrom=gm@example.org; dkim=pass header.d=example.org; "
                            "dmarc=pass header.from=example.org"])
    assert "could not be verified" not in text and "REFUSED" not in text
    assert pbm.sql("SELECT name FROM games") == [("g9",)]


def test_alignment_rules_without_a_dmarc_policy():
    from pbm_server.mail.senderauth import unverified_reason

    ours = "mx.example.net"
    assert unverified_reason(["mx.example.net; dmarc=none; dkim=pass header.d=mail.example.org"], ours, "a@example.org") is None
    assert unverified_reason(["mx.example.net; spf=pass smtp.mailfrom=bounce@example.org"], ours, "a@example.org") is None
    assert unverified_reason(["mx.example.net; dkim=pass header.d=other.example; spf=fail smtp.mailfrom=x@example.org"],
                             ours, "a@example.org") == "neither SPF nor DKIM passed for example.org"
    assert unverified_reason(["MX.example.net (comment; with semicolon); dmarc=pass header.from=example.org"], ours,
                             "a@example.org") is None
    # a DMARC pass counts for the domain it names only (issue 26.7)
    assert unverified_reason(["mx.example.net; dmarc=pass header.from=evil.example"], ours, "a@example.org") == (
        "DMARC passed for evil.example, not for example.org, the domain of the From address")
    assert unverified_reason([], ours, "a@example.org") == "the mail carries no Authentication-Results from mx.example.net"
