"""The Fourth Game's state: JSON document <-> :class:`Game`, and the check
of an imported document (every running figure must follow from the plays).
A document of the first shape (version 1: ``plays`` a list, the running
figures stored) is checked as such and imported in the current shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from games.base import GameError, State

from .model import LEGACY_FIELDS, MAIL_CHOICES, PIECES_PER_PLAYER, STATE_VERSION, Game, Play, Player, points_for


def load(state: State) -> Game:
    return Game.from_state(state)


def dump(game: Game) -> State:
    return game.to_state()


def validated(data: dict[str, Any]) -> State:
    """``data``, in the current shape, if it is a consistent state; GameError
    naming what is not."""
    try:
        check_state(data)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise GameError(f"not a valid sequence game state: {exc}") from None
    return Game.from_state(data).to_state()


def plays_in_order(state: dict[str, Any]) -> list[str]:
    """The encoded plays, oldest first, of either shape: a mapping must have
    exactly the keys 1 to its length."""
    plays = state["plays"]
    if state["version"] == 1:
        if not isinstance(plays, list):
            raise ValueError("plays must be a list in a version 1 state")
        return list(plays)
    if not isinstance(plays, dict):
        raise ValueError("plays must map play numbers to plays")
    expected = {str(n) for n in range(1, len(plays) + 1)}
    if set(plays) != expected:
        stray = sorted(set(plays) - expected)
        raise ValueError(f"plays must be numbered 1 to {len(plays)}, not {', '.join(stray[:5])}")
    return [plays[str(n)] for n in range(1, len(plays) + 1)]


def check_state(state: dict[str, Any]) -> None:
    """Raise ValueError naming the first thing in ``state`` that does not
    follow from its plays: the running figures must be what replaying the
    plays from the start gives."""
    if state.get("version") not in (1, STATE_VERSION):
        raise ValueError(f"version must be 1 or {STATE_VERSION}")
    players = {h: Player.from_json(h, d) for h, d in state["players"].items()}
    for handle, p in players.items():
        if len(p.pieces) != PIECES_PER_PLAYER or len(p.played) != PIECES_PER_PLAYER:
            raise ValueError(f"{handle}: ten pieces needed")
        if any(piece.value < 0 or piece.multiplier < 0 for piece in p.pieces):
            raise ValueError(f"{handle}: values and multipliers cannot be negative")
        if p.mail not in MAIL_CHOICES:
            raise ValueError(f"{handle}: mail must be one of {', '.join(MAIL_CHOICES)}")
        datetime.fromisoformat(p.digest_at)
    total, last, last_scoring = 0, None, 0
    scores = {h: 0 for h in players}
    played = {h: [0] * PIECES_PER_PLAYER for h in players}
    finishers = []
    for number, text in enumerate(plays_in_order(state), start=1):
        play = Play.decode(number, text)
        where = f"play {number} ({text!r})"
        if play.handle not in players:
            raise ValueError(f"{where}: {play.handle} is not a player")
        if not 1 <= play.piece <= PIECES_PER_PLAYER:
            raise ValueError(f"{where}: no piece {play.piece}")
        piece = players[play.handle].piece(play.piece)
        if abs(play.value) != piece.value or play.multiplier != piece.multiplier:
            raise ValueError(f"{where}: {play.handle}'s piece {play.piece} is {piece}")
        if played[play.handle][play.piece - 1]:
            raise ValueError(f"{where}: piece {play.piece} was played before")
        total += play.value
        if play.total != total:
            raise ValueError(f"{where}: total {play.total}, the plays give {total}")
        points = points_for(total, play.multiplier, eligible=last != play.handle)
        if play.points != points:
            raise ValueError(f"{where}: {play.points} points, the rules give {points}")
        played[play.handle][play.piece - 1] = number
        scores[play.handle] += points
        if points:
            last_scoring = number
        if all(played[play.handle]):
            finishers.append([play.handle, points])
        last = play.handle
    for bonus in state["bonuses"]:
        scores[bonus["handle"]] += bonus["points"]
    if state["version"] == 1:  # the running figures were stored
        expected = {"total": total, "last": last, "last_scoring": last_scoring, "finishers": finishers}
        for key, value in expected.items():
            if state[key] != value:
                raise ValueError(f"{key} is {state[key]!r}, the plays give {value!r}")
    else:
        stray = [key for key in LEGACY_FIELDS if key in state]
        if stray:
            raise ValueError(f"{', '.join(stray)}: not kept in a version {STATE_VERSION} state")
    for handle, p in players.items():
        if p.played != played[handle]:
            raise ValueError(f"{handle}: played is {p.played}, the plays give {played[handle]}")
        if p.score != scores[handle]:
            raise ValueError(f"{handle}: score {p.score}, the plays give {scores[handle]}")
