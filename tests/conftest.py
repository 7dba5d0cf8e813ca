import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import harness
from tests.harness import PbmServer

_SHIFTED_CLOCK = Path(__file__).parent / "shifted_clock"


def pytest_configure(config):
    """Under PBM_TEST_REAL_CLOCK_AT the real clock of this process, of the
    xdist workers and of every subprocess starts at that moment and ticks on
    (tests/shifted_clock/sitecustomize.py): no test may notice the date."""
    if not (os.environ.get("PBM_TEST_REAL_CLOCK_AT") or os.environ.get("PBM_TEST_CLOCK_SHIFT_SECONDS")):
        return
    spec = importlib.util.spec_from_file_location("pbm_shifted_clock", _SHIFTED_CLOCK / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    shifted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shifted)  # starts the shift (once in each process)
    paths = [str(_SHIFTED_CLOCK), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    if paths.count(str(_SHIFTED_CLOCK)) == 1:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)


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
def served(tmp_path, request, start: bool, extra_env: dict | None = None) -> Iterator[PbmServer]:
    """A harness for one test; after it, no mail the server sent may hold a
    password the test used."""
    server = PbmServer(tmp_path, extra_env=extra_env, process=in_own_process(request),
                       http_side=request.node.get_closest_marker("http_side") is not None)
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
    with served(tmp_path, request, start=True) as server:
        yield server


@pytest.fixture
def pbm_stopped(tmp_path, request):
    """The same, not started: the test starts and stops it itself."""
    with served(tmp_path, request, start=False) as server:
        yield server
