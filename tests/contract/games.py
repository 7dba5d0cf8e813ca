"""The games the contract suite runs, and each one's scenario.

A game's scenario is ``SCENARIO`` in its own folder, ``games/<kind>/scenario.py``
(a :class:`games.scenario.Scenario`); nothing here names a game.  The suite
plays it on the driver :class:`tests.games.driver.Table`.
"""

from __future__ import annotations

import importlib
from typing import Any

from games import KINDS, get_rules
from games.base import Rules
from games.scenario import Probe, Scenario
from tests.games.driver import Table

#: games that exist only in the tests (never in games.KINDS): kind -> package
TEST_ONLY: dict[str, str] = {"tally": "tests.contract.toygame"}

#: every game the contract suite runs: the server's games, then the test-only ones
CONTRACT_KINDS: list[str] = [*KINDS, *TEST_ONLY]


class MissingScenario(AssertionError):
    """A game without ``scenario.py`` (or without ``SCENARIO`` in it)."""


def package_of(kind: str) -> str:
    return TEST_ONLY[kind] if kind in TEST_ONLY else KINDS[kind]


def rules_of(kind: str) -> Rules[Any]:
    """The rules of a registered kind (its import error propagates) or of a test-only game."""
    if kind in TEST_ONLY:
        rules: Rules[Any] = importlib.import_module(TEST_ONLY[kind]).RULES
        return rules
    return get_rules(kind)


def scenario_of(kind: str) -> Scenario:
    """``SCENARIO`` of the game's ``scenario.py``; MissingScenario says which file to write."""
    module = package_of(kind) + ".scenario"
    path = module.replace(".", "/") + ".py"
    howto = (f"{kind} has no scenario: write {path} with SCENARIO = games.scenario.Scenario(play, samples=..., "
             f"parser_lines=...) (see docs/architecture-games.md)")
    try:
        found = getattr(importlib.import_module(module), "SCENARIO", None)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise MissingScenario(howto) from None
    if not isinstance(found, Scenario):
        raise MissingScenario(howto)
    return found


def play(kind: str, seed: int = 1) -> tuple[Table, Probe]:
    table = Table(rules_of(kind), seed=seed)
    return table, scenario_of(kind).play(table)
