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
  - pbm@ commands: their names and what they answered, ``register, help``,
    ``status of ann``, ``observe ring2``; after refused lines ``1 line
    REFUSED (observe), answered: observe ring2``;
  - a mail of press only: ``your press sent to bob`` (the relayed mails
    say ``press from ann``);
  - the password did not match: ``password not accepted, nothing done``;
  - the game is paused or over: ``paused, nothing done``;
  - nothing to read: ``no commands found``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from games import prefixed_kinds
from games.base import Result
from pbm_server.mail.compose import cut_words

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


#: pbm@ commands whose first word after the name says what they answer
#: (a game's or a player's name, a kind): ``status ring2``, ``observe ring2``.
#: No other command's words are shown: they may hold a code or a password.
SHOWN_ARGUMENT = {"status", "history", "observe", "unobserve", "help", "summary", "who", "info", "forgot"}
#: the longest "press from HANDLE sent to ..." in a Subject
PRESS_WORDS = 50


def _word(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum() or ch in "-_")[:20]


def _name(r: Result, who: str | None, detail: bool) -> str:
    """What one line was, in a Subject: its command's name; with ``detail``
    (an answered pbm@ command or press) what it answered: ``status of ann``,
    ``observe ring2``, ``your press sent to bob``."""
    words = r.text.split()
    if len(words) > 1 and words[0].lower() in prefixed_kinds():
        words = words[1:]  # pbmserv style: "KIND move 101 ..." (Rules.pbm_prefix)
    name = _word(words[0]) if words else ""
    if name.upper() == "PRESS":
        if not detail:
            return "press"
        # "your": the reply goes to the writer; "press from HANDLE" is the
        # Subject of the relayed mails, which this must not pass for
        said = "your press"
        if r.message.startswith("sent to "):
            said += " " + r.message.split(";", 1)[0].split(":", 1)[0]
        return cut_words(said, PRESS_WORDS)
    if not detail or name.lower() not in SHOWN_ARGUMENT:
        return name or "?"
    arg = _word(words[1]) if len(words) > 1 else ""
    if name.lower() in ("status", "history"):
        if arg:
            return f"{name} of {arg}"
        return f"{name} of {who}" if who else name
    return f"{name} {arg}" if arg else name


def _names(results: Sequence[Result], who: str | None = None, detail: bool = False) -> str:
    names: list[str] = []
    for r in results:
        name = _name(r, who, detail)
        if name not in names:
            names.append(name)
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (", ..." if len(names) > MAX_NAMES else "")


#: game commands whose success is not "accepted": a challenge is made by
#: the sender, and only the opponent can accept it
DONE_WORDS = {"challenge": "challenge sent"}


def _done(accepted: Sequence[Result]) -> str:
    """``EXPLORE, MOVE accepted``; ``challenge sent`` (a challenge is not
    accepted until the opponent accepts it)."""
    names = [n.strip() for n in _names(accepted).split(",")]
    own = [DONE_WORDS[n.lower()] for n in names if n.lower() in DONE_WORDS]
    rest = [n for n in names if n.lower() not in DONE_WORDS]
    return ", ".join(([", ".join(rest) + " accepted"] if rest else []) + own)


def reply_subject(facts: SubjectFacts, results: Sequence[Result], orders: list[str] | None,
                  who: str | None = None) -> str:
    """The Subject of a reply; ``who``: the sender's handle, if known
    (``pbm-server: status of ann``)."""
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
            parts.append(f"{len(accepted)} accepted" if refused else _done(accepted))
        elif accepted:
            parts.append(("answered: " if refused else "") + _names(accepted, who, detail=True))
        if refused and not facts.game:
            parts[0] += f" ({_names(refused)})"
        what = ", ".join(parts)
    subject = f"{facts.head}: {what}"
    return subject if len(subject) <= MAX_SUBJECT else subject[: MAX_SUBJECT - 3] + "..."
