"""What a game's test scenario is written against.

Every game folder has a ``scenario.py`` exposing ``SCENARIO``, a
:class:`Scenario`: a short game the contract tests play on a :class:`Table`
(``play``), and the sample lines the tests mutate and fuzz.  ``play`` sends
mails and runs turns (every line it sends must be accepted) and returns a
:class:`Probe`: mails that must be refused in the position reached, that
position, and whether something was hidden from someone on the way.

This module and the scenarios are pure like the rest of ``games``: the
table does the work.  The tests' driver ``tests/games/driver.Table``
satisfies :class:`Table`; ``games`` never imports from ``tests``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from games.base import Outcome, Rules, State


class Table(Protocol):
    """One game in memory, played the way the server would play it."""

    @property
    def rules(self) -> Rules[Any]: ...

    @property
    def state(self) -> State:
        """The state after the last mail or turn kept."""
        ...

    def password(self, handle: str) -> str:
        """The account password of ``handle`` (for inline ``userid password`` lines)."""
        ...

    def send(self, sender: str | None, *texts: str, authenticated: bool | None = None, gm: bool = False) -> Outcome:
        """A mail of ``texts`` from ``sender`` (None: no account), applied and kept.
        ``authenticated``: whether it proved the password (None: the table's
        default); ``gm``: from the GM."""
        ...

    def run(self) -> Outcome:
        """Run the turn and keep its state."""
        ...


@dataclass(frozen=True)
class Refusal:
    """A mail every line of which must be refused (and change nothing)."""

    sender: str | None
    lines: tuple[str, ...]
    authenticated: bool | None = None  # None: as the table's senders are
    gm: bool = False


@dataclass(frozen=True)
class Probe:
    """What a scenario reached."""

    refusals: tuple[Refusal, ...]
    #: the position the refusals are made in
    at: State
    #: the scenario reaches a position where someone may not see something
    hides: bool = False


@dataclass(frozen=True)
class Scenario:
    """``SCENARIO`` of ``games/<kind>/scenario.py``."""

    play: Callable[[Table], Probe]
    #: lines the game reads, mutated and mailed at every position of the
    #: scenario; ``{pw:handle}`` stands for that account's password
    samples: tuple[str, ...]
    #: lines the game reads, mutated for its parser alone (inline passwords
    #: are any word, e.g. ``pw``)
    parser_lines: tuple[str, ...]


def accepted(table: Table, sender: str | None, *texts: str, authenticated: bool | None = None,
             gm: bool = False) -> Outcome:
    """Send a mail every line of which must be accepted."""
    out = table.send(sender, *texts, authenticated=authenticated, gm=gm)
    bad = [(r.text, r.message) for r in out.results if not r.ok]
    if bad:
        raise AssertionError(f"{table.rules.kind} scenario: refused {bad}")
    return out
