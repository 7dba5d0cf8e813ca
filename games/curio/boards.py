"""The numbered boards of one curio game, and the one place where the JSON
state is turned into objects and back.

State document (``pbm game export``)::

    {
      "version": 1,
      "defaults": {"base": 4, "rows": 5, "cols": 5, "num_pieces": 0, "turn": true,
                   "limit": true, "face": "large", "capture": "le", "draw_moves": 50},
      "next_board": 102,
      "boards": {
        "101": {
          "number": 101, "light": "alice", "dark": "bob",
          "setup": {... as defaults, num_pieces resolved ...},
          "seed": 123456789,            # the layout is derived from this alone
          "start": null,                # or an explicit start position (set-up games)
          "moves": ["d2-d3", "b4xd3"],  # as played; x marks a capture
          "position": {"to_move": "light", "ply": 2, "quiet": 0,
                       "pieces": {"a1": {"side": "light", "own": 4, "other": 1,
                                         "revealed": false}, ...}},
          "status": "active",           # active | finished | declined
          "winner": null, "reason": "",
          "draw_offer": null,           # "light" | "dark" while a draw is proposed
          "subscribers": ["carol"],
          "started": "2026-11-21T05:00:00+00:00",
          "ended": ""                   # when it finished or was declined (orders the ratings)
        }
      }
    }

``position`` is a cache of ``replay(setup, seed, moves, start)``; importing a
state checks that the two agree.  The record of a board is its seed (or start)
and its moves: every earlier position is replayed from them
(:meth:`Board.position_after`), so ``curio history`` and ``curio show
<board>#<n>`` need nothing else stored.  ``ended`` was added later: a state
without it loads with ``""``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from games.curio.model import (
    DARK,
    LIGHT,
    Position,
    Setup,
    position_problem,
    replay,
)

FIRST_BOARD = 101


def same_handle(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a.casefold() == b.casefold()


@dataclass
class Board:
    number: int
    light: str
    dark: str
    setup: Setup
    seed: int
    position: Position
    moves: list[str] = field(default_factory=list)
    start: dict[str, Any] | None = None
    status: str = "active"
    winner: str | None = None  # a handle
    reason: str = ""
    draw_offer: str | None = None  # the side that proposed
    subscribers: list[str] = field(default_factory=list)
    started: str = ""
    ended: str = ""  # ISO time the board finished or was declined; "" while active (or unknown)
    clock: int = 0  # the move clock in minutes (clock.py); 0: none
    clock_since: str = ""  # ISO time the clock of the player to move started
    reminded: bool = False  # the player to move was reminded of the clock

    @property
    def active(self) -> bool:
        return self.status == "active"

    def handle(self, side: str) -> str:
        return self.light if side == LIGHT else self.dark

    def side_of(self, handle: str | None) -> str | None:
        if same_handle(handle, self.light):
            return LIGHT
        if same_handle(handle, self.dark):
            return DARK
        return None

    def side(self, handle: str) -> str:
        """The side of one of this board's two players."""
        side = self.side_of(handle)
        if side is None:
            raise ValueError(f"{handle} does not play on board {self.number}")
        return side

    def title(self) -> str:
        return f"board {self.number}: {self.light} (Light) vs {self.dark} (Dark)"

    def summary(self) -> str:
        """One line for listings; nothing hidden in it."""
        pos = self.position
        if self.status == "declined":
            state = "declined"
        elif self.status == "finished":
            state = f"over after {pos.ply} moves: " + (
                f"{self.winner} won" if self.winner else "drawn")
        else:
            state = f"move {pos.ply + 1}, {self.handle(pos.to_move)} to move"
        return f"{self.number}  {self.light} (Light) vs {self.dark} (Dark): {state}"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number, "light": self.light, "dark": self.dark,
            "setup": self.setup.to_dict(), "seed": self.seed, "start": self.start,
            "moves": list(self.moves), "position": self.position.to_json(),
            "status": self.status, "winner": self.winner, "reason": self.reason,
            "draw_offer": self.draw_offer, "subscribers": list(self.subscribers),
            "started": self.started, "ended": self.ended,
            **({"clock": self.clock, "clock_since": self.clock_since, "reminded": self.reminded}
               if self.clock else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Board:
        setup = Setup.from_dict(d["setup"])
        return cls(
            number=int(d["number"]), light=d["light"], dark=d["dark"], setup=setup,
            seed=int(d.get("seed") or 0), position=Position.from_json(setup, d["position"]),
            moves=list(d.get("moves", [])), start=d.get("start"),
            status=d.get("status", "active"), winner=d.get("winner"),
            reason=d.get("reason", ""), draw_offer=d.get("draw_offer"),
            subscribers=list(d.get("subscribers", [])), started=d.get("started", ""),
            ended=d.get("ended") or "",
            clock=int(d.get("clock") or 0), clock_since=str(d.get("clock_since") or ""),
            reminded=bool(d.get("reminded", False)),
        )

    @property
    def first_side(self) -> str:
        """The side that made move 1."""
        return str((self.start or {}).get("to_move", LIGHT))

    def mover(self, n: int) -> str:
        """The side that made move ``n`` (1-based): the sides alternate."""
        return self.first_side if n % 2 == 1 else (DARK if self.first_side == LIGHT else LIGHT)

    def position_after(self, n: int) -> Position:
        """The position after move ``n`` (0: the start), replayed from the
        record (seed or start, and the moves).  ValueError if ``n`` is not
        0..len(moves)."""
        if not 0 <= n <= len(self.moves):
            raise ValueError(f"board {self.number} has moves 0 to {len(self.moves)}, not {n}")
        if n == len(self.moves):
            return self.position
        return replay(self.setup, self.seed, self.moves[:n], self.start)[-1]

    def check(self) -> None:
        """SetupError / IllegalMove / ValueError if the record does not hold together."""
        self.setup.validate()
        if same_handle(self.light, self.dark):
            raise ValueError("light and dark are the same player")
        if self.status not in ("active", "finished", "declined"):
            raise ValueError(f"unknown status {self.status!r}")
        if self.draw_offer not in (None, LIGHT, DARK):
            raise ValueError(f"draw_offer must be null, light or dark, not {self.draw_offer!r}")
        if self.start:
            problem = position_problem(Position.from_json(self.setup, self.start))
            if problem:
                raise ValueError(f"impossible start position: {problem}")
        final = replay(self.setup, self.seed, self.moves, self.start)[-1]
        if final.to_json() != self.position.to_json():
            raise ValueError("the stored position is not what seed/start and moves give")


@dataclass
class OpenChallenge:
    """A challenge waiting for an opponent (``curio challenge USERID``, listed
    by ``curio open``, taken by ``curio accept N``)."""

    number: int
    by: str  # the challenger's handle: they play Light and move first
    options: dict[str, Any]  # the -options given (as curio challenge parsed them)
    clock: int  # the move clock of the board it will start (minutes; 0: none)
    since: str  # ISO time

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "by": self.by, "options": dict(self.options), "clock": self.clock,
                "since": self.since}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OpenChallenge:
        return cls(int(d["number"]), str(d["by"]), dict(d.get("options") or {}), int(d.get("clock") or 0),
                   str(d.get("since") or ""))


@dataclass
class CurioState:
    defaults: Setup = field(default_factory=Setup)
    next_board: int = FIRST_BOARD
    boards: dict[int, Board] = field(default_factory=dict)
    #: the default move clock of a new board (minutes; the game option ``clock``)
    clock: int = 0
    #: challenges waiting for an opponent, and the number of the next one
    open_challenges: list[OpenChallenge] = field(default_factory=list)
    next_open: int = 1

    def to_state(self) -> dict[str, Any]:
        return {
            "version": 1,
            "defaults": dataclasses.asdict(self.defaults),
            "next_board": self.next_board,
            "boards": {str(n): b.to_json() for n, b in sorted(self.boards.items())},
            **({"clock": self.clock} if self.clock else {}),
            **({"open": [c.to_json() for c in self.open_challenges], "next_open": self.next_open} if self.next_open > 1 else {}),
        }

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> CurioState:
        boards = {int(k): Board.from_json(v) for k, v in d.get("boards", {}).items()}
        nxt = int(d.get("next_board", FIRST_BOARD))
        return cls(Setup.from_dict(d.get("defaults", {})), max([nxt, *(n + 1 for n in boards)]), boards,
                   clock=int(d.get("clock") or 0), open_challenges=[OpenChallenge.from_json(c) for c in d.get("open") or []],
                   next_open=int(d.get("next_open") or 1))

    def players(self) -> list[str]:
        names = {b.handle(s) for b in self.boards.values() if b.active for s in (LIGHT, DARK)}
        return sorted(names, key=str.casefold)


__all__ = ["FIRST_BOARD", "Board", "CurioState", "OpenChallenge", "same_handle"]
