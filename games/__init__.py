"""Game packages, one folder per kind.  The server knows a game only through
:class:`games.base.Rules`; this registry maps a kind name to its package."""

from __future__ import annotations

import importlib
from typing import Any

from games.base import Rules

#: kind -> module that exposes ``RULES``
KINDS: dict[str, str] = {
    "rmpm": "games.rmpm",
    "curio": "games.curio",
    "giveaway": "games.giveaway",
    "agora_rpg": "games.agora_rpg",
    "sequence": "games.sequence",
}


def get_rules(kind: str) -> Rules[Any]:
    """The rules object of ``kind``; KeyError for an unknown kind.  A game
    whose package fails to import raises that error: it is never skipped."""
    if kind not in KINDS:
        raise KeyError(kind)
    rules: Rules[Any] = importlib.import_module(KINDS[kind]).RULES
    return rules


def prefixed_kinds() -> list[str]:
    """Kinds whose lines may also be mailed to pbm@DOMAIN, each starting with
    the kind's name (pbmserv style: "curio move 101 ..."): Rules.pbm_prefix."""
    return [kind for kind in KINDS if get_rules(kind).pbm_prefix]
