"""Curio: two-faced pieces, hidden values, many numbered boards per game.

Modules: ``model`` (squares, pieces, setup, positions, replay), ``boards``
(numbered boards and the JSON state), ``view`` (what each viewer may see),
``commands`` (pbmserv-style line syntax), ``rules`` (CurioRules).
"""

from games.curio.model import replay
from games.curio.rules import CurioRules

RULES = CurioRules()

__all__ = ["RULES", "CurioRules", "replay"]
