"""The suite's harness: a server whose port was taken between the moment it
was picked and the moment the server binds it (by a server of the other
suite running beside this one in CI) starts on new ports, instead of the
test failing with "address already in use"."""

from __future__ import annotations

import smtplib
import socket

import pytest

# the harness's own start-up: what it shows is decided before the server
# touches its database (.ci/run runs it in the SQLite pass only; docs/testing.md)
pytestmark = pytest.mark.dbneutral


@pytest.mark.parametrize("own_process", [False, True], ids=["in-process", "own-process"])
def test_a_port_taken_before_the_server_binds_it_is_picked_again(pbm_stopped, own_process):
    pbm = pbm_stopped
    pbm.process = own_process
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", pbm.port))
        squatter.listen()
        taken = pbm.port
        pbm.start()
        assert pbm.port != taken
        with smtplib.SMTP("127.0.0.1", pbm.port, timeout=10) as smtp:
            code, _ = smtp.ehlo("test.example")
        assert code == 250
    if own_process:
        # the first `pbm serve` said why it stopped, in one line, and no traceback
        log = (pbm.tmp / "serve.log").read_text()
        assert f"pbm: PBM_LISTEN: cannot listen on 127.0.0.1:{taken}: Address already in use" in log, log
        assert "Traceback" not in log
