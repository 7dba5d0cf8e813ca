"""Hostile mail, round two (issue 26, items 7 to 10), by mail through a real
`pbm serve`: a DMARC pass counts only for the From domain and a From whose
name is another address carries no password; press cannot pass for the
server or smuggle orders into a reply; the unproven-reply budget is per
source; a region is no time zone; a forged From lifts no bounce hold; a
fullwidth abbreviation meets its ASCII twin."""

from __future__ import annotations

import smtplib

from tests.harness import PbmServer, wait_until
from tests.reliability.test_takeover import desk_mail
from tests.server.test_bounces import bounce_reply, outbox_status
from tests.server.test_press import ring_and_other

GM = "gm@example.org"
PW = {"alice": "alice-secret-1", "bob": "bob-secret-22", "carol": "carol-secret-3", "dave": "dave-secret-44"}


def addr(who: str) -> str:
    return f"{who}@example.org"


def accounts(pbm: PbmServer, *who: str) -> None:
    for name in who:
        pbm.secrets.add(PW[name])
        pbm.cli("account", "add", name, addr(name), "--password", PW[name])


def send_raw(pbm: PbmServer, from_header: str, envelope: str, to: str, body: str, mid: str,
             extra: str = "") -> None:
    raw = (f"From: {from_header}\r\nTo: {to}\r\nSubject: orders\r\nMessage-ID: {mid}\r\n{extra}"
           f"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n").encode()
    with smtplib.SMTP("127.0.0.1", pbm.port) as smtp:
        smtp.sendmail(envelope, [to], raw)
    pbm.settle()


# -- item 7: DMARC alignment, and a From whose name is another address -------------------------
def test_a_dmarc_pass_counts_only_for_the_from_domain(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_TRUSTED_AUTHSERV_ID"] = "mx.pbm.test"
    pbm.start()
    pbm.cli("account", "add", "--gm", "boss", "--password", "gm-secret9")
    pbm.secrets.add("gm-secret9")
    # our MTA saw DMARC pass for the domain it read in the From: evil.example, not example.org
    text = desk_mail(pbm, ["mx.pbm.test; dmarc=pass header.from=evil.example"])
    assert "could not be verified (DMARC passed for evil.example, not for example.org" in text, text
    text = desk_mail(pbm, ["mx.pbm.test; dmarc=pass"])
    assert "DMARC passed without naming the domain it checked" in text, text
    assert pbm.sql("SELECT count(*) FROM games")[0][0] == 0
    text = desk_mail(pbm, ["mx.pbm.test; dmarc=pass header.from=example.org"])
    assert "could not be verified" not in text and "REFUSED" not in text, text
    assert pbm.sql("SELECT name FROM games") == [("g9",)]


def test_a_from_whose_name_is_another_address_is_read_as_its_addr_spec_and_carries_no_password(pbm):
    accounts(pbm, "alice")
    pbm.new_game("giveaway", "ring")
    pbm.cli("game", "add-player", "ring", "alice")
    pbm.settle()
    # mallory writes alice's address as the name: the mail is mallory's, her password is not taken
    send_raw(pbm, "alice@example.org <mallory@evil.example>", "mallory@evil.example", "ring@pbm.test",
             f"GIVE 3 TO alice\n$${PW['alice']}$$", "<from-1@evil.example>")
    (reply,) = pbm.replies_to("<from-1@evil.example>")
    assert reply["To"] == "mallory@evil.example"
    text = pbm.flat(reply)
    assert "could not be verified (its From shows the address alice@example.org as the sender's name, but the " \
           "mail is from mallory@evil.example)" in text, text
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 0
    assert not [m for m in pbm.inbox(addr("alice")) if m["In-Reply-To"] == "<from-1@evil.example>"]
    # a quoted name that is an address is refused alike; a plain name is fine
    send_raw(pbm, '"alice@example.org" <alice@example.org.evil.example>', "x@evil.example", "ring@pbm.test",
             f"GIVE 3 TO alice\n$${PW['alice']}$$", "<from-2@evil.example>")
    (reply,) = pbm.replies_to("<from-2@evil.example>")
    assert "could not be verified" in pbm.flat(reply)
    # nor can the addr-spec hide past the end of what is read of a long From
    send_raw(pbm, "alice@example.org" + "\r\n " * 1100 + "<mallory@evil.example>", "mallory@evil.example",
             "ring@pbm.test", f"GIVE 3 TO alice\n$${PW['alice']}$$", "<from-4@evil.example>")
    (reply,) = pbm.replies_to("<from-4@evil.example>")
    assert "could not be verified (its From header is longer than 2000 characters)" in pbm.flat(reply)
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 0
    send_raw(pbm, "Alice A. <alice@example.org>", "alice@example.org", "ring@pbm.test",
             f"GIVE 3 TO alice\n$${PW['alice']}$$", "<from-3@example.org>")
    (reply,) = pbm.replies_to("<from-3@example.org>")
    assert "could not be verified" not in pbm.flat(reply), pbm.flat(reply)


# -- item 8: press -------------------------------------------------------------------------------
def _ring(pbm: PbmServer) -> None:
    """ring: alice, bob, carol; other: dave (as in tests/server/test_press.py)."""
    ring_and_other(pbm, "alice", "bob", "carol", "dave")


def _press_to(pbm: PbmServer, who: str) -> list:
    return [m for m in pbm.inbox(addr(who)) if ": press from " in str(m["Subject"])]


def _message_lines(text: str) -> list[str]:
    lines = text.split("\n")
    start = lines.index("----- message -----")
    end = len(lines) - 1 - lines[::-1].index("----- end of message -----")
    return lines[start + 1 : end]


def test_press_cannot_pass_for_the_server(pbm):
    _ring(pbm)
    fake = ("Thanks for the chat.\n"
            "----- end of message -----\n"
            "Note from the server: your orders were lost. Mail ring@pbm.test again with:\n"
            "GIVE 3 TO alice")
    reply = pbm.mail(addr("alice"), "ring", f"PRESS TO bob\n{fake}\nENDPRESS\n$${PW['alice']}$$", subject="press")
    assert "sent to bob" in pbm.flat(reply)
    pbm.settle()
    [got] = _press_to(pbm, "bob")
    text = pbm.text(got)
    # the server's own frame line appears once as a line of its own; the fake one is marked
    assert [ln for ln in text.split("\n") if ln == "----- end of message -----"] == ["----- end of message -----"]
    inside = _message_lines(text)
    assert len(inside) == 5 and all(ln.startswith("press| ") for ln in inside), inside  # a long line wrapped
    assert "press| ----- end of message -----" in inside and "press| GIVE 3 TO alice" in inside


def test_an_order_planted_in_press_and_pasted_back_is_never_run(pbm):
    _ring(pbm)
    body = f"PRESS TO bob\nDeal? Then send:\nGIVE 3 TO alice\nENDPRESS\n$${PW['alice']}$$"
    reply = pbm.mail(addr("alice"), "ring", body, subject="press")
    assert "sent to bob" in pbm.flat(reply)
    pbm.settle()
    [got] = _press_to(pbm, "bob")
    # bob pastes the message into a new mail (no "> ", no References) with his password
    pasted = "\n".join(_message_lines(pbm.text(got)))
    assert "GIVE 3 TO alice" in pasted
    back = pbm.flat(pbm.mail(addr("bob"), "ring", f"{pasted}\n$${PW['bob']}$$", subject="re: press"))
    assert "ok (line" not in back, back
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 0
    # the same order written by bob himself is his
    back = pbm.flat(pbm.mail(addr("bob"), "ring", f"GIVE 3 TO alice\n$${PW['bob']}$$", subject="orders"))
    assert pbm.sql("SELECT count(*) FROM orders")[0][0] == 1, back


def test_handles_that_imitate_the_server_are_refused(pbm):
    for i, fake in enumerate(("GameMaster", "G4meMaster", "postmaster", "pbm", "Server2", "admin", "ALL")):
        reply = pbm.mail(f"imp{i}@example.net", "pbm", f"register {fake} imp-secret-99", subject="register")
        flat = pbm.flat(reply)
        assert f"'{fake}' cannot be a handle: it looks like" in flat and "a name the server speaks with" in flat, flat
    assert pbm.sql("SELECT count(*) FROM confirmations")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM accounts")[0][0] == 0


def test_press_to_a_handle_answers_alike_whether_it_exists_or_not(pbm):
    _ring(pbm)

    def refusal(name: str) -> str:
        flat = pbm.flat(pbm.mail(addr("alice"), "ring", f"PRESS TO {name}\nhi\nENDPRESS\n$${PW['alice']}$$"))
        return flat[flat.index("REFUSED"):].replace(name, "NAME")

    # dave has an account (he plays elsewhere); zed has none: the answers are the same
    assert refusal("dave") == refusal("zed")
    assert "there is no player called 'NAME' in ring; nothing was sent" in refusal("zed")


def test_press_with_many_password_marks_to_many_players_is_masked_once_and_sent(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_PRESS_PER_HOUR"] = "1000"
    pbm.start()
    _ring(pbm)
    extra = [f"p{i:02d}" for i in range(20)]
    for name in extra:
        pbm.cli("account", "add", name, f"{name}@example.org", "--password", f"{name}-secret-1")
        pbm.cli("game", "add-player", "ring", name)
    # as many marks as a mail may hold beside the password (the classify stage reads at most 100)
    marks = " ".join(f"$$mark{i:03d}xx$$" for i in range(99))
    reply = pbm.mail(addr("alice"), "ring", f"PRESS TO ALL\n{marks}\nENDPRESS\n$${PW['alice']}$$", subject="press")
    assert "sent to all 22 other players of ring" in pbm.flat(reply), pbm.flat(reply)
    pbm.settle()
    for who in ("bob", "p07", "p19"):
        [got] = [m for m in pbm.inbox(f"{who}@example.org") if ": press from " in str(m["Subject"])]
        text = pbm.text(got)
        assert "mark" not in text and text.count("$$****$$") == 99
        assert PW["alice"] not in text


# -- item 9: the unproven-reply budget is per source ---------------------------------------------
def test_a_flood_of_forged_registrations_silences_nobody_else(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_UNAUTHENTICATED_REPLIES_PER_HOUR"] = "8"
    pbm.env["PBM_UNAUTHENTICATED_REPLIES_PER_DOMAIN_PER_HOUR"] = "3"
    pbm.start()
    # a flood from one domain uses up that domain's budget and the global one
    for i in range(6):
        pbm.send(f"bot{i}@flood.example", "pbm", "help")
    pbm.settle()
    helped = [i for i in range(6) if pbm.inbox(f"bot{i}@flood.example")]
    assert helped == [0, 1, 2], helped
    for i in range(6):
        pbm.send(f"x{i}@other{i}.example", "pbm", "help")
    pbm.settle()
    assert sum(1 for i in range(6) if pbm.inbox(f"x{i}@other{i}.example")) == 5  # 8 in all
    # a newcomer still gets a code, even from the flooded domain, and the confirm is answered
    for who, domain in (("newbie", "example.org"), ("newer", "flood.example")):
        email = f"{who}@{domain}"
        reply = pbm.mail(email, "pbm", f"register {who} {who}-secret-1", subject="register")
        done = pbm.flat(pbm.confirm(email, reply))
        assert f"registered as {who}" in done, done
    # a second code to the same address within the hour is budgeted like any reply
    again = pbm.send("late@flood.example", "pbm", "register late late-secret-1")
    pbm.settle()
    assert pbm.replies_to(again)  # the first code to this address
    again = pbm.send("late@flood.example", "pbm", "register late late-secret-1")
    pbm.settle()
    assert not pbm.replies_to(again)
    assert "not answered" in pbm.sql("SELECT note FROM inbox ORDER BY id DESC LIMIT 1")[0][0]


# -- item 10 ---------------------------------------------------------------------------------------
def test_a_region_is_no_time_zone(pbm):
    accounts(pbm, "alice")
    for name in ("America", "Europe/", "../../etc/passwd"):
        flat = pbm.flat(pbm.mail(addr("alice"), "pbm", f"timezone {name}\n$${PW['alice']}$$"))
        assert "REFUSED" in flat and "nothing was changed" in flat, flat
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'shunted'")[0][0] == 0
    assert "America/New_York" in pbm.flat(pbm.mail(addr("alice"), "pbm", f"timezone America/New_York\n$${PW['alice']}$$"))


def test_a_forged_from_does_not_lift_a_bounce_hold(pbm):
    pbm.secrets.add("ann-secret-1")
    pbm.cli("account", "add", "ann", "ann@players.example", "--password", "ann-secret-1")
    replies = [pbm.mail("ann@players.example", "pbm", "help", subject=f"help {i}") for i in range(3)]
    for reply in replies:
        bounce_reply(pbm, reply)
        wait_until(lambda r=reply: outbox_status(pbm, r["Message-ID"]) == "bounced", what="the bounce")
    wait_until(lambda: pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 1, what="the hold")
    # anyone can write ann's address in a From: that lifts nothing
    pbm.send("ann@players.example", "pbm", "help", subject="forged")
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 1
    # her password does, and the reply says so
    back = pbm.mail("ann@players.example", "pbm", "games\n$$ann-secret-1$$", subject="back")
    assert "you get the server's mail again" in pbm.flat(back)
    assert pbm.sql("SELECT count(*) FROM mail_holds")[0][0] == 0


def test_a_fullwidth_abbreviation_looks_like_its_ascii_twin(pbm):
    accounts(pbm, "alice", "bob")
    pbm.new_game("rmpm", "world")
    text = pbm.text(pbm.mail(addr("alice"), "world", f"$${PW['alice']}$$\nJOIN bd 01-05 25-10 blue dragon"))
    assert "accepted: you join as bd" in text, text
    flat = pbm.flat(pbm.mail(addr("bob"), "world", f"$${PW['bob']}$$\nJOIN \uff42\uff44 01-06 25-11 Irata"))
    assert "REFUSED" in flat and "looks like the existing abbreviation 'bd'" in flat, flat
    assert len(pbm.state("world")["players"]) == 1
