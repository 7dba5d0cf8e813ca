"""The suite's harness: an in-process server is woken after each in-process
CLI command (tests/harness.py, PbmServer._wake_server), so a test never
waits for the next poll to see what a command wrote -- the harness polls
only every 0.25 s (docs/testing.md)."""

from __future__ import annotations

import pytest

from tests.harness import PbmServer

# the harness's own way of driving the server: the same on either database
pytestmark = pytest.mark.dbneutral


def test_a_mail_stored_by_an_in_process_command_is_answered_without_waiting_for_a_poll(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.env["PBM_POLL_SECONDS"] = "600"  # a poll would come too late for the wait below
    pbm.start()
    msg = pbm.build("ann@example.org", "pbm", "help")
    done = pbm.cli("mail", "inject", input=bytes(msg))
    assert done.returncode == 0, done.stderr
    reply = pbm.reply_to(msg["Message-ID"], timeout=20)
    assert "help" in pbm.text(reply).lower()
