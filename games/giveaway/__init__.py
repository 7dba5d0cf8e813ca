"""Giveaway (aka Order From Chaos), v0.02 rules of 1997: every round each
player gives away every point held; equal gifts passed round a circle of
players form co-operation rings that multiply them.  docs/games/giveaway.md."""

from games.giveaway.rules import GiveawayRules

RULES = GiveawayRules()

__all__ = ["RULES", "GiveawayRules"]
