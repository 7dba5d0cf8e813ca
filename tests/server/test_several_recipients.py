"""One mail to several of our addresses: each recipient is handled on its own,
exactly once (issue 27), and answered on its own when the mail proved its
sender; a mail that proved nothing gets one answer for all of them (issue 41:
tests/reliability/test_hostile_fanout.py)."""

import smtplib

import pytest

from pbm_server.mail.mailtext import dedup_key, read_mail
from pbm_server.store.models import INBOX_RAW
from tests.harness import wait_until


def _members(pbm, game: str) -> list[str]:
    return [r[0] for r in pbm.sql(
        "SELECT a.handle FROM memberships m JOIN accounts a ON a.id = m.account_id "
        "JOIN games g ON g.id = m.game_id WHERE g.name = :game ORDER BY a.handle", game=game)]


def _last_id(pbm) -> int:
    return pbm.sql("SELECT coalesce(max(id), 0) FROM inbox")[0][0]


def _statuses_after(pbm, last: int) -> list[str]:
    return [r[0] for r in pbm.sql("SELECT status FROM inbox WHERE id > :last ORDER BY id", last=last)]


def _ann_and_games(pbm, **games: str):
    """Games (name=kind), ann registered, and her JOIN mail (not sent yet)."""
    for name, kind in games.items():
        pbm.new_game(kind, name)
    pbm.register("ann", "ann-pass1")
    msg = pbm.build("ann@example.org", "ring1", "JOIN\n$$ann-pass1$$")
    msg.replace_header("To", ", ".join(pbm.address(g) for g in games))
    return msg


def _send_and_wait(pbm, msg, *rcpts: str, replies: int) -> str:
    mid = pbm.send_message(msg, rcpts=[pbm.address(r) for r in rcpts])
    wait_until(lambda: len(pbm.replies_to(mid)) >= replies, what=f"{replies} replies to {mid}")
    pbm.settle()
    return mid


def test_a_join_to_two_games_joins_both_and_answers_from_each(pbm):
    msg = _ann_and_games(pbm, seq1="sequence", ring1="giveaway")
    mid = _send_and_wait(pbm, msg, "seq1", "ring1", replies=2)
    assert _members(pbm, "seq1") == ["ann"] and _members(pbm, "ring1") == ["ann"]
    replies = pbm.replies_to(mid)
    assert sorted(m["From"].addresses[0].username for m in replies) == ["ring1", "seq1"]


def test_a_redelivery_to_both_is_a_duplicate_for_each_and_a_new_recipient_is_not(pbm):
    msg = _ann_and_games(pbm, ring1="giveaway", ring2="giveaway", ring3="giveaway")
    last = _last_id(pbm)
    mid = _send_and_wait(pbm, msg, "ring1", "RING2", replies=2)
    # the sender's MTA sends it again (say it missed our 250), and once more
    # to a third game only: the first two are copies, the third is new
    pbm.send_message(msg, rcpts=[pbm.address("ring2"), pbm.address("ring1")])
    pbm.send_message(msg, rcpts=[pbm.address("ring3")])
    pbm.settle()
    assert _statuses_after(pbm, last) == ["done", "done", "duplicate", "duplicate", "done"]
    assert [_members(pbm, g) for g in ("ring1", "ring2", "ring3")] == [["ann"]] * 3
    assert len(pbm.replies_to(mid)) == 3


def test_a_redelivery_of_a_mail_handled_before_the_upgrade_is_still_a_duplicate(pbm):
    # rows handled before one row per recipient carry the mail's key without
    # a recipient; a copy of such a mail arriving after the upgrade is one
    msg = _ann_and_games(pbm, ring1="giveaway")
    last = _last_id(pbm)
    mid = _send_and_wait(pbm, msg, "ring1", replies=1)
    (row_id, raw, sender), = pbm.sql(f"SELECT id, {INBOX_RAW} AS raw, mail_from FROM inbox WHERE id > :last",
                                      last=last)
    pbm.execute("UPDATE inbox SET dedup_key = :key WHERE id = :id",
                key=dedup_key(bytes(raw), read_mail(bytes(raw), sender).message_id), id=row_id)
    pbm.send_message(msg)
    pbm.settle()
    assert _statuses_after(pbm, last) == ["done", "duplicate"]
    assert len(pbm.replies_to(mid)) == 1


def test_the_same_address_twice_in_one_envelope_is_one_recipient(pbm):
    msg = _ann_and_games(pbm, ring1="giveaway")
    last = _last_id(pbm)
    mid = _send_and_wait(pbm, msg, "ring1", "Ring1", replies=1)
    assert len(pbm.replies_to(mid)) == 1
    assert _statuses_after(pbm, last) == ["done"]


def test_postmaster_and_pbm_in_one_mail_each_keep_their_meaning(pbm):
    msg = pbm.build("pat@example.org", "pbm", "help")
    mid = _send_and_wait(pbm, msg, "postmaster", "pbm", replies=1)
    # pbm@ answers the help; postmaster@ forwards the mail to the GM and answers nothing
    replies = pbm.replies_to(mid)
    assert len(replies) == 1 and replies[0]["To"] == "pat@example.org"
    forwarded = pbm.wait_for("gm@example.org", 1)
    assert "Mail to postmaster@" in pbm.flat(forwarded[0])
    notes = [r[0] or "" for r in pbm.sql("SELECT note FROM inbox")]
    assert any("forwarded to the GM" in n for n in notes)


@pytest.mark.process  # SIGKILL
def test_several_recipients_stored_by_a_killed_server_are_each_handled_once(pbm_stopped):
    pbm = pbm_stopped
    pbm.start()
    msg = _ann_and_games(pbm, ring1="giveaway", seq1="sequence")
    pbm.stop()
    pbm.start("worker")  # listener only: stored and 250 given, nothing handled
    last = _last_id(pbm)
    mid = pbm.send_message(msg, rcpts=[pbm.address("seq1"), pbm.address("ring1")])
    assert _statuses_after(pbm, last) == ["new", "new"]
    pbm.stop(kill=True)
    pbm.start()
    pbm.settle()
    pbm.stop()
    pbm.start()  # a second restart handles nothing again
    pbm.settle()
    assert len(pbm.replies_to(mid)) == 2
    assert _members(pbm, "seq1") == ["ann"] and _members(pbm, "ring1") == ["ann"]


def test_a_mail_takes_at_most_100_recipients_and_the_next_is_deferred(pbm):
    # each recipient of ours is an inbox row (the mail's bytes stored once): past 100
    # the listener answers 452 (RFC 5321: the client sends the rest in another transaction)
    for i in range(99):
        pbm.new_game("giveaway", f"r{i:02d}")
    ours = [f"pbm@{pbm.domain}"] + [f"r{i:02d}@{pbm.domain}" for i in range(99)]
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=30) as smtp:
        smtp.ehlo()
        smtp.mail("many@example.org")
        for rcpt in ours:
            assert smtp.rcpt(rcpt)[0] == 250
        code, text = smtp.rcpt(f"postmaster@{pbm.domain}")
        assert code == 452 and b"at most 100" in text, (code, text)
        assert smtp.rcpt(ours[5])[0] == 250  # one already taken is no new recipient
        msg = pbm.build("many@example.org", "pbm", "games")
        code, _ = smtp.data(msg.as_bytes())
        assert code == 250
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == 100
