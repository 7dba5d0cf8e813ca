"""Rich Man - Poor Man (RMPM), the 1993-95 e-mail board game, as a pure
engine.  The rules object is :class:`games.rmpm.rules.RmpmRules`."""

from games.rmpm.rules import RmpmRules

RULES = RmpmRules()

__all__ = ["RULES", "RmpmRules"]
