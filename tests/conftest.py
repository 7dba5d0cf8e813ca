from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests import harness
from tests.harness import PbmServer


def in_own_process(request) -> bool:
    """Tests marked ``process`` get `pbm serve` and the CLI as subprocesses."""
    return request.node.get_closest_marker("process") is not None


@pytest.fixture(autouse=True)
def _nodb_guard(request):
    """A test marked ``nodb`` (.ci/run leaves it out of the PostgreSQL pass)
    fails if it makes a test database after all."""
    if request.node.get_closest_marker("nodb") is None:
        yield
        return
    harness.nodb_test = request.node.nodeid
    try:
        yield
    finally:
        harness.nodb_test = None


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
