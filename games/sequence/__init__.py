"""The Fourth Game (``sequence``): a public number-sequence game for up to 250
players, played by mail until a deadline.  See docs/games/sequence.md."""

from .rules import SequenceRules

RULES = SequenceRules()

__all__ = ["RULES", "SequenceRules"]
