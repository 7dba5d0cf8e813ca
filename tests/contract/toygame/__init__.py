"""Tally, a toy game that exists only in the tests: it proves a game written
by copying the shape of ``games/<kind>/`` runs through the contract suite
with no other change.  It is not in ``games.KINDS``: the server never sees it."""

from tests.contract.toygame.rules import TallyRules

RULES = TallyRules()

__all__ = ["RULES", "TallyRules"]
