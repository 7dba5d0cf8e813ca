"""What the Subject of a reply says: which game (and turn, or board) it is
about and what became of the mail, so that a player reading only the list
of mails knows whether anything was refused.

The scheme (docs/players.md, "Reading the server's mail"):

* head: ``NAME round 3`` for a game with turns (its turn word and the turn
  now open), ``NAME board 101`` for a thread inside a game (a curio board),
  ``NAME`` for another game, ``pbm-server`` for a mail to pbm@;
* what happened, after a colon:

  - orders kept for a turn: ``order held (2 lines)``;
  - refused lines: ``1 line REFUSED`` (before the rest: ``1 line REFUSED,
    order held (2 lines)``, ``2 lines REFUSED, 1 accepted``);
  - moves and other game commands: ``EXPLORE, MOVE accepted``;
  - pbm@ commands: their names, ``register, help``;
  - the password did not match: ``password not accepted, nothing done``;
  - the game is paused or over: ``paused, nothing done``;
  - nothing to read: ``no commands found``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from games import prefixed_kinds
from games.base import Result

SERVER_HEAD = "pbm-server"
#: at most this many command names in a Subject
MAX_NAMES = 3
MAX_SUBJECT = 90


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class SubjectFacts:
    """What the Subject of one reply is made from."""

    head: str = SERVER_HEAD
    #: the mail went to a game (its lines are game commands)
    game: bool = False
    #: the game's status when it is not running ("paused", "finished")
    halted: str | None = None
    bad_password: bool = False


def _names(results: Sequence[Result]) -> str:
    names: list[str] = []
    prefixed = prefixed_kinds()
    for r in results:
        words = r.text.split()
        if len(words) > 1 and words[0].lower() in prefixed:
            words = words[1:]  # pbmserv style: "KIND move 101 ..." (Rules.pbm_prefix)
        name = words[0] if words else "?"
        name = "".join(ch for ch in name if ch.isalnum() or ch in "-_")[:20] or "?"
        if name not in names:
            names.append(name)
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (", ..." if len(names) > MAX_NAMES else "")


def reply_subject(facts: SubjectFacts, results: Sequence[Result], orders: list[str] | None) -> str:
    refused = [r for r in results if not r.ok]
    accepted = [r for r in results if r.ok]
    if facts.bad_password:
        what = "password not accepted, nothing done"
    elif facts.halted:
        what = f"{facts.halted}, nothing done"
    elif not results:
        what = "no commands found"
    else:
        parts = []
        if refused:
            parts.append(plural(len(refused), "line") + " REFUSED")
        if orders is not None:
            parts.append(f"order held ({plural(len(orders), 'line')})" if orders else "no order held")
        elif accepted and facts.game:
            parts.append(f"{len(accepted)} accepted" if refused else f"{_names(accepted)} accepted")
        elif accepted:
            parts.append(_names(accepted))
        if refused and not facts.game:
            parts[0] += f" ({_names(refused)})"
        what = ", ".join(parts)
    subject = f"{facts.head}: {what}"
    return subject if len(subject) <= MAX_SUBJECT else subject[: MAX_SUBJECT - 3] + "..."
