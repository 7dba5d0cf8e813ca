"""Giveaway (aka Order From Chaos), v0.02 rules of 1997.

Every round each player gives away every point held; equal gifts passed round
a circle of players form co-operation rings that multiply them.  See
docs/games/giveaway.md for the rules as this server plays them.
"""

from games.giveaway.rules import GiveawayRules

RULES = GiveawayRules()

__all__ = ["RULES", "GiveawayRules"]
