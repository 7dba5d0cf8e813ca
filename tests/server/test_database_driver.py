"""A postgresql:// URL on an install without the [postgres] extra (issue 27):
`pbm serve` says in one line what to install, exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import ROOT

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

# a Python start-up hook that makes psycopg impossible to import, as on a
# plain `pip install .` (the driver is only in the [postgres] extra)
NO_PSYCOPG = '''\
import sys


class NoPsycopg:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg2"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoPsycopg())
'''


def test_serve_without_the_postgres_driver_names_the_extra_in_one_line(tmp_path: Path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(NO_PSYCOPG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBM_") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join([str(hook), str(ROOT)]),
               PBM_DATABASE_URL="postgresql://pbm:s3cret-pw@127.0.0.1:5432/pbm",
               PBM_LISTEN="127.0.0.1:2599")
    done = subprocess.run([sys.executable, "-m", "pbm_server.running.cli", "serve"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "pbm: PBM_DATABASE_URL: cannot open postgresql://pbm:***@127.0.0.1:5432/pbm: "
        "the PostgreSQL driver (psycopg) is not installed: pip install 'pbm-server[postgres]'"]
