from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.harness import PbmServer


def in_own_process(request) -> bool:
    """Tests marked ``process`` get `pbm serve` and the CLI as subprocesses."""
    return request.node.get_closest_marker("process") is not None


@contextmanager
def _server(tmp_path, request, start: bool) -> Iterator[PbmServer]:
    """A harness for one test; after it, no mail the server sent may hold a
    password the test used."""
    server = PbmServer(tmp_path, process=in_own_process(request))
    try:
        if start:
            server.start()
        yield server
        server.stop()
        leaks = server.leaked_secrets()
        assert not leaks, f"passwords appear in mails the server sent: {leaks}"
    finally:
        server.close()


@pytest.fixture
def pbm(tmp_path, request):
    """A running `pbm serve` with a real relay sink; see tests/harness.py."""
    with _server(tmp_path, request, start=True) as server:
        yield server


@pytest.fixture
def pbm_stopped(tmp_path, request):
    """The same, not started: the test starts and stops it itself."""
    with _server(tmp_path, request, start=False) as server:
        yield server
