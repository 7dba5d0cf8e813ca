"""Curio's state: the JSON document <-> :class:`~games.curio.boards.CurioState`
(field mapping in ``CurioState.to_state`` / ``from_state``), and the check of an
imported document: every board is replayed from its recorded moves."""

from __future__ import annotations

from typing import Any

from games.base import GameError, State
from games.curio.boards import CurioState
from games.curio.model import IllegalMove, SetupError


def load(state: State) -> CurioState:
    return CurioState.from_state(state)


def dump(game: CurioState) -> State:
    return game.to_state()


def validated(data: dict[str, Any]) -> State:
    """The state of a hand-written or exported document; GameError naming the problem."""
    try:
        return check(data).to_state()
    except ValueError as e:
        raise GameError(str(e)) from None


def check(d: dict[str, Any]) -> CurioState:
    """Load and check a hand-written or exported document; ValueError naming the problem."""
    if not isinstance(d, dict):
        raise ValueError("a curio state is a JSON object")
    try:
        state = CurioState.from_state(d)
        state.defaults.validate()
    except SetupError as e:
        raise ValueError(f"defaults: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"not a curio state: {e!r}") from None
    for number, board in state.boards.items():
        try:
            board.check()
        except (SetupError, IllegalMove, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"board {number}: {e}") from None
    return state

