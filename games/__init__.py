"""Game packages, one folder per kind.  The server knows a game only through
:class:`games.base.Rules`; this registry maps a kind name to its package."""

from __future__ import annotations

import importlib

from games.base import Rules

#: kind -> module that exposes ``RULES``
KINDS: dict[str, str] = {
    "rmpm": "games.rmpm",
    "curio": "games.curio",
    "giveaway": "games.giveaway",
    "agora_rpg": "games.agora_rpg",
    "sequence": "games.sequence",
}


def get_rules(kind: str) -> Rules:
    """The rules object of ``kind``; KeyError for an unknown kind."""
    if kind not in KINDS:
        raise KeyError(kind)
    return importlib.import_module(KINDS[kind]).RULES


def available_kinds() -> list[str]:
    """Kinds whose package imports (a game still being written is skipped)."""
    out = []
    for kind in KINDS:
        try:
            get_rules(kind)
        except (ImportError, AttributeError):
            continue
        out.append(kind)
    return out
