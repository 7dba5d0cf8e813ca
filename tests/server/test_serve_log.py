"""What `pbm serve` says when it starts: the listen address only where it listens."""
import pytest

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def start_line(pbm) -> str:
    lines = [ln for ln in pbm.serve_log().splitlines() if "pbm serve: " in ln]
    assert lines, pbm.serve_log()
    return lines[-1]


def test_a_back_end_without_the_listener_claims_no_listen_address(pbm_stopped):
    pbm = pbm_stopped
    pbm.start("listener")  # the worker, delivery and scheduler only, as a back end runs
    line = start_line(pbm)
    assert "worker, outbound, scheduler in this process; domain pbm.test" in line, line
    assert f":{pbm.port}" not in line and "listener" not in line, line
    # the HTTP side runs here too, and names its own address
    assert f"HTTP side on 127.0.0.1:{pbm.http_port}; worker" in line, line


def test_the_listener_names_its_address(pbm):
    line = start_line(pbm)
    assert (f"pbm serve: listener on 127.0.0.1:{pbm.port}; HTTP side on 127.0.0.1:{pbm.http_port}; "
            "worker, outbound, scheduler in this process; domain pbm.test") in line, line
