"""Agora: The Role-Playing Game (proto-contract v0.2, Agora nomic).  The rules
object is :class:`games.agora_rpg.rules.AgoraRules`; docs/games/agora_rpg.md."""

from games.agora_rpg.rules import AgoraRules

RULES = AgoraRules()

__all__ = ["RULES", "AgoraRules"]
