import pytest

from tests.harness import PbmServer


@pytest.fixture
def pbm(tmp_path):
    """A running `pbm serve` with a real relay sink; see tests/harness.py."""
    server = PbmServer(tmp_path)
    try:
        server.start()
        yield server
        server.stop()
        leaks = server.leaked_secrets()
        assert not leaks, f"passwords appear in mails the server sent: {leaks}"
    finally:
        server.close()


@pytest.fixture
def pbm_stopped(tmp_path):
    """The same, not started: the test starts and stops it itself."""
    server = PbmServer(tmp_path)
    try:
        yield server
        server.stop()
        leaks = server.leaked_secrets()
        assert not leaks, f"passwords appear in mails the server sent: {leaks}"
    finally:
        server.close()
