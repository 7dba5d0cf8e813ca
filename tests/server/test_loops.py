"""Automatic mail is recorded and never answered (RFC 3834 and common practice)."""


import pytest

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

CASES = [
    ({"Auto-Submitted": "auto-replied"}, None, "Auto-Submitted"),
    ({"Precedence": "bulk"}, None, "Precedence: bulk"),
    ({"Precedence": "junk"}, None, "Precedence: junk"),
    ({"List-Id": "<games.lists.example.org>"}, None, "mailing-list headers"),
    ({}, "", "null envelope sender"),
    ({}, "MAILER-DAEMON@example.org", "mailer daemon"),
    ({"X-Loop": "pbm@pbm.test"}, None, "X-Loop names us"),
]


@pytest.mark.parametrize("headers, envelope_from, reason", CASES)
def test_automatic_mail_gets_no_answer(pbm, headers, envelope_from, reason):
    frm = "MAILER-DAEMON@example.org" if envelope_from == "MAILER-DAEMON@example.org" else "robot@example.org"
    msg = pbm.build(frm, "pbm", "help", headers=headers)
    pbm.send_message(msg, mail_from=envelope_from)
    pbm.settle()
    (status, note), = pbm.sql("SELECT status, note FROM inbox")
    assert status == "dropped" and reason in note
    assert pbm.all_sent() == []


def test_mail_from_our_own_domain_is_a_loop(pbm):
    pbm.send("ring@pbm.test", "pbm", "help")
    pbm.settle()
    assert pbm.sql("SELECT status FROM inbox")[0][0] == "dropped"
    assert pbm.all_sent() == []


def test_auto_submitted_no_is_a_person(pbm):
    reply = pbm.mail("person@example.org", "pbm", "help", subject="help")
    assert "register HANDLE PASSWORD" in pbm.flat(reply)


def test_replies_to_one_address_are_rate_limited(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_REPLY_LIMIT_PER_HOUR"] = "3"
    pbm.start()
    for _ in range(5):
        pbm.send("chatty@example.org", "pbm", "help")
    pbm.settle()
    got = pbm.inbox("chatty@example.org")
    assert len(got) == 3
    assert "will not answer this address again" in pbm.flat(got[-1])
    notes = [r[0] for r in pbm.sql("SELECT note FROM inbox WHERE note IS NOT NULL")]
    assert len(notes) == 2 and all("limit 3" in n for n in notes)


def test_a_player_proving_their_password_is_always_answered(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_REPLY_LIMIT_PER_HOUR"] = "3"
    pbm.start()
    email = pbm.register("busy", "busy-player1")
    for _ in range(5):
        pbm.send(email, "pbm", "games\n$$busy-player1$$")
    pbm.settle()
    assert len(pbm.inbox(email)) == 7  # the code, the confirmation, five answers
