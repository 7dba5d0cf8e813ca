import pytest

from tests.harness import PbmServer


def in_own_process(request) -> bool:
    """Tests marked ``process`` get `pbm serve` and the CLI as subprocesses."""
    return request.node.get_closest_marker("process") is not None


@pytest.fixture
def pbm(tmp_path, request):
    """A running `pbm serve` with a real relay sink; see tests/harness.py."""
    server = PbmServer(tmp_path, process=in_own_process(request))
    try:
        server.start()
        yield server
        server.stop()
        leaks = server.leaked_secrets()
        assert not leaks, f"passwords appear in mails the server sent: {leaks}"
    finally:
        server.close()


@pytest.fixture
def pbm_stopped(tmp_path, request):
    """The same, not started: the test starts and stops it itself."""
    server = PbmServer(tmp_path, process=in_own_process(request))
    try:
        yield server
        server.stop()
        leaks = server.leaked_secrets()
        assert not leaks, f"passwords appear in mails the server sent: {leaks}"
    finally:
        server.close()
