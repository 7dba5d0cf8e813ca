"""docs/architecture.md names every module of the server and of games/ with its
one-line job, and nothing that is gone: the page cannot drift from the code."""

import re
from pathlib import Path

import pytest

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Every module, one line each"


def listed() -> list[str]:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert SECTION in page, f"docs/architecture.md has no section {SECTION!r}"
    section = page.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/]+\.py)` \| \S", section, re.M)


def modules() -> set[str]:
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pbm_server").rglob("*.py")}
    found |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "games").glob("*.py")}
    return {m for m in found if "/migrations/" not in m}


def test_every_module_is_listed_with_its_job_and_nothing_else():
    names = listed()
    assert len(names) == len(set(names)), "a module is listed twice"
    missing = sorted(modules() - set(names))
    gone = sorted(set(names) - modules())
    assert not missing, f"docs/architecture.md does not say what these modules do: {missing}"
    assert not gone, f"docs/architecture.md lists modules that do not exist: {gone}"
