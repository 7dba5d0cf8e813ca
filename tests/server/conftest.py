"""Fixtures of the server tests."""

from tests.server.browser import _chromium, browser, screenshots  # noqa: F401  (fixtures, offered here by name)
