"""Fixtures of the server tests."""

from tests.server.browser import browser, screenshots  # noqa: F401  (fixtures, offered here by name)
