"""What marks the server's mails: replies vs. notices (RFC 3834), threading."""

import pytest

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def test_reply_is_auto_replied_and_a_notice_to_another_player_auto_generated(pbm):
    alice = pbm.register("alice", "alice-pass1")
    bob = pbm.register("bob", "bob-pass22")
    mid = pbm.send(alice, "pbm", "curio challenge alice bob $$alice-pass1$$")
    reply = pbm.wait_for(alice, 3)[-1]  # the code, the confirmation, then this reply
    assert reply["In-Reply-To"] == mid and reply["Auto-Submitted"] == "auto-replied"
    notice = pbm.wait_for(bob, 3)[-1]  # the code, the confirmation, then the challenge
    assert "board 101" in pbm.flat(notice)
    assert notice["Auto-Submitted"] == "auto-generated"
    # bob sent nothing this answers: it names only the board's thread root (issue 17)
    assert notice["In-Reply-To"] == notice["References"] == "<game.curio.1.board.101@pbm.test>"
    for m in (reply, notice):
        assert m["Message-ID"] and m["From"].endswith("@pbm.test>")
