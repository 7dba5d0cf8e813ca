"""The worker's memory of game states, so a mail does not decode its game's
whole JSON document again when nothing changed since the last one.

An entry is (database, game id, version) -> the state document as the game's
rules returned it.  Versions only grow (pbm_server/play/gamestate.py bumps the
version on every change, rollback included), so an entry can only be wrong
if it was made from a transaction that did not commit: entries are therefore
*staged* while a mail is processed and kept only once its transaction has
committed (:meth:`StateCache.keep`); a rolled-back mail's stage is dropped.

The documents are shared, never copied: the rules never change the state they
are given (tests/games/driver.py checks every game), and what they return is
exactly what JSON reads back (checked there too).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pbm_server.store.models import Game

Key = tuple[int, int]


class StateCache:
    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._states: OrderedDict[int, tuple[int, dict[str, Any]]] = OrderedDict()
        self._staged: dict[int, tuple[int, dict[str, Any]]] = {}
        #: per game: the rules' scratch (games.base.Context.memo)
        self._memos: dict[int, dict[str, Any]] = {}
        self.hits = self.misses = 0

    def memo(self, game: Game) -> dict[str, Any]:
        """The rules' scratch mapping for ``game`` (kept while the game's
        state is, whatever its version: the rules check what they find)."""
        return self._memos.setdefault(game.id, {})

    def state(self, game: Game) -> dict[str, Any]:
        """``game``'s state at its version: from memory when we have that
        version, else loaded from the row (once)."""
        found = self._states.get(game.id)
        if found is not None and found[0] == game.version:
            self._states.move_to_end(game.id)
            self.hits += 1
            return found[1]
        self.misses += 1
        state: dict[str, Any] = game.state
        self._staged[game.id] = (game.version, state)
        return state

    def stale(self, games: list[Game]) -> list[Game]:
        """Those of ``games`` whose states at their versions are not here."""
        return [g for g in games if (found := self._states.get(g.id)) is None or found[0] != g.version]

    def stage(self, game: Game) -> None:
        """Remember ``game``'s new state once the transaction commits."""
        self._staged[game.id] = (game.version, game.state)

    def keep(self) -> None:
        """The transaction committed: the staged states are the database's."""
        for game_id, entry in self._staged.items():
            self._states[game_id] = entry
            self._states.move_to_end(game_id)
        self._staged.clear()
        while len(self._states) > self.size:
            gone, _ = self._states.popitem(last=False)
            self._memos.pop(gone, None)

    def drop(self) -> None:
        """The transaction rolled back: forget what it staged."""
        self._staged.clear()
