"""Rich Man - Poor Man (RMPM), the 1993-95 e-mail board game, as a pure engine.

``board`` (numbers, fences), ``model`` (players, Bank, Kiosk, state <-> objects),
``orders`` (mail syntax), ``engine`` (the weekly update and the action table),
``report`` (what players see), ``rules`` (the server interface).
"""

from games.rmpm.rules import RmpmRules

RULES = RmpmRules()

__all__ = ["RULES", "RmpmRules"]
