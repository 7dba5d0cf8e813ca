"""Drive the Giveaway rules the way the server does, without the server."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from games.base import Actor, Context, Line, Outcome
from games.giveaway import RULES

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def ctx(handle: str | None = None, authenticated: bool = True, game: str = "gv", mail: bool = True) -> Context:
    """A mail from ``handle`` (None: an unregistered sender), or with mail=False a turn run."""
    actor = Actor(handle, f"{(handle or 'stranger').lower()}@example.org", authenticated) if mail else None
    return Context(now=NOW, rng=random.Random(1), actor=actor, game_name=game)


def lines(*texts: str) -> list[Line]:
    return [Line(i + 1, t) for i, t in enumerate(texts)]


class Table:
    """A game in memory: ``send`` a mail's lines as a player, ``run`` a round."""

    def __init__(self, *handles: str, **options):
        self.state = RULES.new_game(options, ctx(mail=False))
        for h in handles:
            out = self.send(h, "JOIN")
            assert out.results[0].ok, out.results[0].message

    def send(self, handle: str | None, *texts: str, authenticated: bool = True) -> Outcome:
        commands = RULES.parse(lines(*texts))
        before = repr(self.state)
        out = RULES.apply(self.state, commands, ctx(handle, authenticated))
        assert repr(self.state) == before, "apply changed the state it was given"
        assert len(out.results) == len(texts)
        self.state = out.state
        return out

    def holdings(self, **holding: int) -> None:
        for p in self.state["players"]:
            if p["handle"] in holding:
                p["holding"] = holding[p["handle"]]

    def run(self) -> Outcome:
        before = repr(self.state)
        out = RULES.run_turn(self.state, ctx(mail=False))
        assert repr(self.state) == before, "run_turn changed the state it was given"
        self.state = out.state
        return out

    def player(self, handle: str) -> dict:
        return next(p for p in self.state["players"] if p["handle"] == handle)

    def holding(self, handle: str) -> int:
        return self.player(handle)["holding"]


def scores(out: Outcome) -> dict[str, int]:
    """Score column of the report table, by handle."""
    table = out.notices[0].data["table"].splitlines()[1:]
    return {row.split()[0]: int(row.split()[4]) for row in table}


def report_text(out: Outcome) -> str:
    from pbm_server.compose import make_environment

    notice = out.notices[0]
    env = make_environment()
    return env.get_template(f"giveaway/{notice.template}").render(**notice.data, viewer="x")
