"""Giveaway's state: the JSON document <-> :class:`~games.giveaway.model.Game`
(the field mapping is ``Game.from_state`` / ``Game.to_state``), and the check
of an imported document."""

from __future__ import annotations

from typing import Any

from games.base import GameError, State
from games.giveaway.model import Game


def load(state: State) -> Game:
    return Game.from_state(state)


def dump(game: Game) -> State:
    return game.to_state()


def validated(data: dict[str, Any]) -> State:
    """The state in an imported document, its names spelled as registered;
    GameError naming what is wrong."""
    if not isinstance(data, dict):
        raise GameError("a giveaway state is a JSON object")
    return Game.from_state(data, check=True).to_state()
