"""Build glue that pyproject.toml cannot express: the repository keeps
``templates/`` and ``migrations/`` at the top (see docs/packaging.md), and the
wheel maps them into the package as ``pbm_server.templates`` and
``pbm_server.migrations``, where the server finds them with importlib.resources.
Every other piece of metadata lives in pyproject.toml."""

from pathlib import Path

from setuptools import find_packages, setup

MAPPED = {
    "pbm_server.templates": "templates",
    "pbm_server.migrations": "migrations",
    "pbm_server.migrations.versions": "migrations/versions",  # Alembic's scripts (no __init__.py needed)
}
# one folder of templates per game (and server/): data folders, named so that
# setuptools ships them without a warning; a new game's folder is picked up too
MAPPED.update(
    {
        f"pbm_server.templates.{folder.name}": f"templates/{folder.name}"
        for folder in sorted(Path("templates").iterdir())
        if folder.is_dir() and not folder.name.startswith(("_", "."))
    }
)

setup(
    packages=find_packages(include=["pbm_server", "pbm_server.*", "games", "games.*"]) + sorted(MAPPED),
    package_dir=MAPPED,
    package_data={
        **{name: ["*.txt", "*.html", "*.css", "*.xml"] for name in MAPPED if name.startswith("pbm_server.templates")},
        "pbm_server.migrations": ["script.py.mako"],
    },
)
