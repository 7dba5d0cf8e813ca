"""A poison mail (issue 26.1): a mail whose handling kills its process (as the
OOM killer killed the back end on a From of 10,000 encoded words) was taken
again by every restarted back end, forever.  Each start of a mail's handling
is counted and committed first (inbox.tries); a mail started twice and never
finished is set aside with a GM notice instead of being taken a third time.

PBM_FAILPOINT ``sigkill:SUBJECT`` makes the back end SIGKILL itself when it
starts on a mail with that Subject: a real kill, as the OOM killer's."""

from __future__ import annotations

import pytest

from tests.harness import wait_until


@pytest.mark.process
def test_a_mail_that_kills_its_back_end_twice_is_set_aside(pbm_stopped):
    pbm = pbm_stopped
    pbm.env["PBM_FAILPOINT"] = "sigkill:poison"
    pbm.start()
    pbm.send("mallory@example.net", "pbm", "help", subject="poison")
    # killed on the first and second try; the third start sets it aside
    wait_until(lambda: pbm.sql("SELECT status FROM inbox WHERE id = 1") == [("shunted",)], timeout=120,
               what="the poison mail set aside")
    ((note, tries),) = pbm.sql("SELECT note, tries FROM inbox WHERE id = 1")
    assert "its handling was started 2 times and never finished" in note and tries == 0
    (notice,) = pbm.wait_for("gm@example.org", 1, timeout=60)
    text = pbm.flat(notice)
    assert "Mail 1 could not be processed and was set aside" in text and "never finished" in text
    # the back end goes on with other mail
    reply = pbm.mail("carol@example.org", "pbm", "help", timeout=60)
    assert "the list of commands follows" in pbm.flat(reply)
    assert pbm.inbox("mallory@example.net") == []
    assert "started 2 times, never finished" in " ".join(r[0] for r in pbm.sql("SELECT detail FROM audit_log"))


def test_a_mail_started_twice_without_finishing_is_not_taken_a_third_time(pbm_stopped):
    """The same, in process: the two unfinished starts are written into the row."""
    pbm = pbm_stopped
    pbm.start("worker")
    pbm.send("dave@example.org", "pbm", "help")
    pbm.stop()
    assert pbm.sql("SELECT status, tries FROM inbox") == [("new", 0)]
    pbm.execute("UPDATE inbox SET tries = 2")
    pbm.start()
    wait_until(lambda: pbm.sql("SELECT status FROM inbox") == [("shunted",)], what="the mail set aside")
    assert "Mail 1 could not be processed and was set aside" in pbm.flat(pbm.wait_for("gm@example.org", 1)[0])
    assert pbm.inbox("dave@example.org") == []
    # `pbm mail retry` takes it again, with its count of tries back at 0
    pbm.cli("mail", "retry", "1")
    (reply,) = pbm.wait_for("dave@example.org", 1)
    assert "the list of commands follows" in pbm.flat(reply)
    assert pbm.sql("SELECT status, tries FROM inbox") == [("done", 1)]


def test_a_mail_started_once_before_is_handled(pbm_stopped):
    """One unfinished start (a back end killed for another reason) is no reason to set a mail aside."""
    pbm = pbm_stopped
    pbm.start("worker")
    pbm.send("erin@example.org", "pbm", "help")
    pbm.stop()
    pbm.execute("UPDATE inbox SET tries = 1")
    pbm.start()
    (reply,) = pbm.wait_for("erin@example.org", 1)
    assert "the list of commands follows" in pbm.flat(reply)
    assert pbm.sql("SELECT status, tries FROM inbox") == [("done", 2)]
