"""Fixtures of the reliability tests: see docs/reliability.md."""

import pytest

from tests.conftest import in_own_process
from tests.harness import PbmServer


@pytest.fixture
def make_server(tmp_path, request):
    """A factory of `pbm serve` harnesses (not started); all closed at the end."""
    made = []

    def make(name: str = "a", **kw) -> PbmServer:
        d = tmp_path / name
        d.mkdir()
        kw.setdefault("process", in_own_process(request))
        server = PbmServer(d, **kw)
        made.append(server)
        return server

    yield make
    for server in reversed(made):
        server.close()
