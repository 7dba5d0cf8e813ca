"""Curio: two-faced pieces, hidden values, many numbered boards per game.
The rules object is :class:`games.curio.rules.CurioRules`."""

from games.curio.rules import CurioRules

RULES = CurioRules()

__all__ = ["RULES", "CurioRules"]
