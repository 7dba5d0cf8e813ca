"""Tally's state is plain JSON: {"round": n, "tally": {handle: n}, "secrets": {handle: word}}."""

from __future__ import annotations

from typing import Any

from games.base import GameError, State


def validated(data: dict[str, Any]) -> State:
    if not isinstance(data, dict) or set(data) != {"round", "tally", "secrets"}:
        raise GameError("a tally state has exactly the fields round, tally and secrets")
    tally, secrets = data["tally"], data["secrets"]
    if not isinstance(data["round"], int) or not isinstance(tally, dict) or not isinstance(secrets, dict):
        raise GameError("round is a number, tally and secrets are objects")
    if not all(isinstance(v, int) for v in tally.values()):
        raise GameError("tally: whole numbers only")
    return data
