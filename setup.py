"""Build glue that pyproject.toml cannot express: the repository keeps
``templates/`` and ``migrations/`` at the top (see docs/packaging.md), and the
wheel maps them into the package as ``pbm_server.templates`` and
``pbm_server.migrations``, where the server finds them with importlib.resources.
Every other piece of metadata lives in pyproject.toml."""

from setuptools import find_packages, setup

MAPPED = {
    "pbm_server.templates": "templates",
    "pbm_server.migrations": "migrations",
}

setup(
    packages=find_packages(include=["pbm_server", "pbm_server.*", "games", "games.*"]) + sorted(MAPPED),
    package_dir=MAPPED,
    package_data={
        "pbm_server.templates": ["**/*.txt", "**/*.html"],
        "pbm_server.migrations": ["script.py.mako", "versions/*.py"],
    },
)
