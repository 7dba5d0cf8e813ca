"""Helpers for the Agora RPG engine tests: a table that plays mails through
RULES.parse / RULES.apply with scripted dice."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from games.agora_rpg import RULES
from games.base import Outcome
from tests.games import driver

MONDAY = datetime(2026, 11, 16, 9, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[3]


class ScriptedDice(random.Random):
    """A random stream whose randint returns the scripted values in order
    (and checks each is a possible roll)."""

    def __init__(self, values):
        super().__init__(0)
        self.values = list(values)
        self.asked: list[tuple[int, int]] = []

    def randint(self, a, b):
        if not self.values:
            raise AssertionError(f"an unscripted roll 1d{b} was made")
        v = self.values.pop(0)
        assert a <= v <= b, f"scripted {v} is not a roll of {a}..{b}"
        self.asked.append((a, b))
        return v


class Table(driver.Table):
    """One game of Agora RPG played through the Rules interface."""

    def __init__(self, **options):
        super().__init__(RULES, options, now=MONDAY, game_name="dungeon", seed=0)
        self.last: Outcome | None = None

    def mail(self, who, text, rolls=(), gm=False, authenticated=True, rng=None):
        """Send the lines of ``text`` as ``who``; returns the Results.  Every
        scripted roll must be used."""
        dice = rng if rng is not None else ScriptedDice(rolls)
        out = self.send(who, *text.strip().splitlines(), rng=dice, gm=gm, authenticated=authenticated)
        if isinstance(dice, ScriptedDice):
            assert dice.values == [], f"scripted rolls left over: {dice.values}"
        self.last = out
        return out.results

    def ok(self, who, text, rolls=(), **kw):
        """Like mail, but every line must be accepted; returns the messages."""
        results = self.mail(who, text, rolls, **kw)
        for r in results:
            assert r.ok, f"{r.text!r} refused: {r.message}"
        return [r.message for r in results]

    def refused(self, who, text, rolls=(), **kw):
        """One line that must be refused without changing the state."""
        before = self.state
        (r,) = self.mail(who, text, rolls, **kw)
        assert not r.ok, f"{text!r} was accepted: {r.message}"
        assert self.state == before
        return r.message

    def gm(self, text):
        return self.ok("gm", text, gm=True)

    def char(self, name):
        return self.state["characters"][name]

    def set(self, name, **attrs):
        """GM SET shortcuts: set(alice, tokens=3, location="Dungeon Level 2")."""
        for attr, value in attrs.items():
            self.gm(f"GM SET {name} {attr.replace('_', ' ')} = {value}")

    def later(self, **delta):
        self.now = self.now + timedelta(**delta)

    def week(self, rng=None):
        self.last = self.run(rng=rng or random.Random(0))
        return self.last


@pytest.fixture
def table():
    return Table()


@pytest.fixture
def make_table():
    return Table


@pytest.fixture
def render():
    """Render one of the game's templates the way the server will."""

    def _render(name, data):
        return driver.render("agora_rpg", name, data)

    return _render
