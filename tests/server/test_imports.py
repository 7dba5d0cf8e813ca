"""The server's modules import on their own, and none of them imports itself
through others (an import circle makes the order of imports matter: a module
then sees a half-made neighbour)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pbm_server

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

ROOT = Path(pbm_server.__file__).parent


def module_names() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The pbm_server modules ``name`` imports, anywhere in its text (also
    inside functions), with the packages Python runs on the way."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # "from pkg import mod" imports the module pkg.mod
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            parts = target.split(".")
            # importing a.b.c runs a and a.b first
            for i in range(1, len(parts) + 1):
                candidate = ".".join(parts[:i])
                if candidate in known and candidate != name:
                    found.add(candidate)
    # a module's own packages run before it does
    parts = name.split(".")
    found.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_import_circle_among_server_modules():
    modules = module_names()
    known = set(modules)
    graph = {name: imports_of(name, path, known) for name, path in modules.items()}
    # the walk sees the edges a reader sees
    assert "pbm_server.commands.registry" in graph["pbm_server.commands.info"]
    assert "pbm_server.pipeline.worker" in graph["pbm_server.running.server"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


#: run in one fresh interpreter: it imports the outside libraries the project
#: uses, then forks once per module (two at a time), and the child imports that one module with
#: nothing of pbm_server or games loaded yet. A fork costs milliseconds where a
#: fresh interpreter per module cost 0.7 s (70 s for the suite on a slow machine).
FORK_IMPORTER = r"""
import importlib, os, sys, traceback
names = sys.argv[1:]
for library in sorted(set(sys.stdin.read().split())):
    try:
        importlib.import_module(library)
    except Exception:
        pass
assert not [m for m in sys.modules if m.split(".")[0] in ("pbm_server", "games", "templates")]
running = {}
codes = {}
def reap():
    pid, status = os.wait()
    codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
for name in names:
    if len(running) == 2:
        reap()
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(1)
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(0)
    running[pid] = name
while running:
    reap()
for name in names:
    print(name, codes[name])
"""

OWN = ("pbm_server", "games", "templates", "tests")


def outside_libraries() -> set[str]:
    """The outside modules pbm_server and games import anywhere."""
    found: set[str] = set()
    for base in (ROOT, ROOT.parent / "games"):
        for path in base.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    found.add(node.module)
    return {name for name in found if name.split(".")[0] not in OWN}


def test_every_server_module_imports_on_its_own():
    names = list(module_names())
    proc = subprocess.run([sys.executable, "-c", FORK_IMPORTER, *names], input=" ".join(outside_libraries()),
                          capture_output=True, text=True, cwd=ROOT.parent, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert list(results) == names
    failed = [name for name, code in results.items() if code != "0"]
    assert not failed, f"these modules fail to import on their own: {failed}\n{proc.stderr}"


def test_the_fork_importer_reports_a_module_that_fails_alone(tmp_path):
    # a package whose module needs a neighbour imported first fails alone and passes in company
    pkg = tmp_path / "halfmade"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "first.py").write_text("import halfmade.second\nVALUE = 1\n")
    (pkg / "second.py").write_text("from halfmade.first import VALUE\n")
    proc = subprocess.run([sys.executable, "-c", FORK_IMPORTER, "halfmade.first", "halfmade.second"], input="",
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    results = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert results == {"halfmade.first": "1", "halfmade.second": "0"}
    assert "ImportError" in proc.stderr


#: pbm_server's packages, lowest first: each imports only its own modules and those of packages before it
LAYERS = ["base", "store", "mail", "accounts", "play", "commands", "pipeline", "web", "running"]


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_lives_in_a_layer_package():
    loose = [name for name in module_names() if name != "pbm_server" and layer_of(name) not in LAYERS]
    assert not loose, f"modules outside the layer packages {LAYERS}: {loose}"


def test_layers_import_only_downward():
    modules = module_names()
    known = set(modules)
    upward = []
    for name, path in modules.items():
        here = layer_of(name)
        if here is None:
            continue
        for target in imports_of(name, path, known):
            there = layer_of(target)
            if there is not None and LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"{name} -> {target}")
    assert not upward, "imports that go up a layer: " + "; ".join(sorted(upward))
