"""Helpers for the rmpm engine tests: build positions, send mails, run weeks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from games.rmpm import RULES
from games.rmpm.model import Game
from tests.games import driver
from tests.games.driver import render


class Table(driver.Table):
    """The rmpm tests pass states around: ``mail`` and ``week`` take the state
    to work on and return the Outcome."""

    fresh_rng = True

    def __init__(self) -> None:
        super().__init__(RULES, now=datetime(2026, 1, 3, 3, 0, tzinfo=UTC), game_name="world")

    def position(self, players: dict, **kw) -> dict:
        """A state from a short description: handle -> dict(abbr, chips, an, pn,
        capital, ...).  Player numbers follow the dict order unless given."""
        doc = {"players": {}}
        for n, (h, p) in enumerate(players.items(), 1):
            q = {"number": n, "abbr": (h * 2)[:2], "alias": h, "an": 1, "pn": 50, "capital": 10000}
            q.update(p)
            doc["players"][h] = q
        doc.update(kw)
        return RULES.import_state(doc)

    def mail(self, state, handle, *lines, **kw):
        self.state = state
        return self.apply(handle, *lines, **kw)

    def orders(self, state, **by_handle):
        """Send one order mail per handle; every line must be accepted."""
        for h, lines in by_handle.items():
            out = self.mail(state, h, *lines)
            bad = [r for r in out.results if not r.ok]
            assert not bad, [(r.text, r.message) for r in bad]
            state = out.state
        return state

    def week(self, state):
        self.state = state
        return self.run()

    def game(self, state) -> Game:
        return Game(state)

    def p(self, state, handle) -> dict:
        return state["players"][handle]

    @staticmethod
    def row(text: str, number: str) -> str:
        """The moves-table line of a player number in a rendered report,
        with runs of blanks squeezed."""
        start = text.index("MOVES DURING LAST BOARD UPDATE")
        for line in text[start:].splitlines():
            if line.startswith(number + " "):
                return " ".join(line.split())
        raise AssertionError(f"no row {number}")

    def text(self, data) -> str:
        return render("rmpm", "report.txt", data)

    def server_text(self, data) -> str:
        return render("rmpm", "report.txt", data)

    def html(self, data) -> str:
        return render("rmpm", "report.txt", data, html=True)


@pytest.fixture
def t() -> Table:
    return Table()
