"""Agora RPG's state: the JSON document <-> :class:`~games.agora_rpg.model.World`
(field mapping in ``World.to_state`` / ``from_state``), and the check of an
imported document."""

from __future__ import annotations

from typing import Any

from games.agora_rpg.model import World
from games.base import GameError, State


def load(state: State) -> World:
    return World.from_state(state)


def dump(world: World) -> State:
    return world.to_state()


def validated(data: dict[str, Any]) -> State:
    """The state of an imported document; GameError naming what is wrong."""
    try:
        world = World.from_state(data)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise GameError(f"not an agora_rpg state: {exc!r}") from exc
    problems = world.problems()
    if problems:
        raise GameError("not a valid agora_rpg state: " + "; ".join(problems))
    return world.to_state()
