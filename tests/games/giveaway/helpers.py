"""Drive the Giveaway rules the way the server does, without the server."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from games.base import Actor, Context, Outcome
from games.giveaway import RULES
from games.giveaway.state import dump, load
from tests.games import driver
from tests.games.driver import lines  # noqa: F401  (the giveaway tests import it from here)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def ctx(handle: str | None = None, authenticated: bool = True, game: str = "gv", mail: bool = True) -> Context:
    """A mail from ``handle`` (None: an unregistered sender), or with mail=False a turn run."""
    actor = Actor(handle, f"{(handle or 'stranger').lower()}@example.org", authenticated) if mail else None
    return Context(now=NOW, rng=random.Random(1), actor=actor, game_name=game)


class Table(driver.Table):
    """A game in memory: ``send`` a mail's lines as a player, ``run`` a round."""

    fresh_rng = True

    def __init__(self, *handles: str, **options):
        super().__init__(RULES, options, now=NOW, game_name="gv")
        for h in handles:
            out = self.send(h, "JOIN")
            assert out.results[0].ok, out.results[0].message

    def holdings(self, **holding: int) -> None:
        # the state written whole first: joiners before round 1 are entries of "joins"
        self.state = dump(load(self.state))
        for p in self.state["players"]:
            if p["handle"] in holding:
                p["holding"] = holding[p["handle"]]

    def player(self, handle: str) -> dict:
        return next(p for p in dump(load(self.state))["players"] if p["handle"] == handle)

    def holding(self, handle: str) -> int:
        return self.player(handle)["holding"]


def scores(out: Outcome) -> dict[str, int]:
    """Score column of the report table, by handle."""
    table = out.notices[0].data["table"].splitlines()[1:]
    return {row.split()[0]: int(row.split()[4]) for row in table}


def report_text(out: Outcome) -> str:
    notice = out.notices[0]
    return driver.render("giveaway", notice.template, {**notice.data, "viewer": "x"})
