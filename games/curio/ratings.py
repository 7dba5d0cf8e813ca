"""Elo ratings of curio players, derived from the finished boards alone.

Nothing about ratings is stored: they are recomputed from the game record
whenever they are shown, so a corrected or imported record gives corrected
ratings, and anyone can check them by hand.

* Every player starts at :data:`START` (1500).
* Only boards with a result count: status ``finished`` (a win, a loss or a
  draw).  A declined challenge or a running board does not.
* Boards are taken in the order they ended (``Board.ended``, then the board
  number; boards recorded before ``ended`` existed come first, by number).
* After each board both players move by ``K * (score - expected)`` with
  ``K`` = :data:`K` (32), score 1 for a win, 0.5 for a draw, 0 for a loss, and
  ``expected = 1 / (1 + 10 ** ((opponent - own) / 400))``.
* Ratings are kept exact while computing and shown rounded to whole points.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from games.curio.boards import Board

START = 1500
K = 32


@dataclass
class Rating:
    """One player's rating and record over the rated boards."""

    handle: str
    value: float = START
    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def shown(self) -> int:
        """The rating as mails show it: rounded to a whole point (halves up)."""
        return int(self.value + 0.5)

    def describe(self, name: bool = True) -> str:
        """``alice 1516 (3 rated boards)`` or ``bob 1500 (no rated boards yet)``
        (without the handle if not ``name``)."""
        lead = f"{self.handle} {self.shown}" if name else str(self.shown)
        if not self.games:
            return f"{lead} (no rated boards yet)"
        return f"{lead} ({self.games} rated board{'s' if self.games != 1 else ''})"


def expected(own: float, other: float) -> float:
    """The score ``own`` is expected to make against ``other``."""
    return 1.0 / (1.0 + float(10.0 ** ((other - own) / 400.0)))


def rated(boards: Iterable[Board]) -> list[Board]:
    """The boards that count, in the order they are rated."""
    done = [b for b in boards if b.status == "finished"]
    return sorted(done, key=lambda b: (b.ended, b.number))


class Ratings:
    """Everyone's rating after the finished ``boards`` (handles compared
    without regard to case, shown as first written)."""

    def __init__(self, boards: Iterable[Board]):
        self._by_key: dict[str, Rating] = {}
        #: handle (casefolded) -> (board, the rating right after it), in the order rated
        self._after: dict[str, list[tuple[Board, float]]] = {}
        self.boards = rated(boards)
        for board in self.boards:
            light, dark = self.of(board.light), self.of(board.dark)
            if board.winner is None:
                score = 0.5
            else:
                score = 1.0 if board.side_of(board.winner) == "light" else 0.0
            e = expected(light.value, dark.value)
            light.value, dark.value = light.value + K * (score - e), dark.value - K * (score - e)
            for r, s in ((light, score), (dark, 1.0 - score)):
                if s == 1.0:
                    r.wins += 1
                elif s == 0.0:
                    r.losses += 1
                else:
                    r.draws += 1
            self._by_key[board.light.casefold()] = light
            self._by_key[board.dark.casefold()] = dark
            self._after.setdefault(board.light.casefold(), []).append((board, light.value))
            self._after.setdefault(board.dark.casefold(), []).append((board, dark.value))

    def of(self, handle: str) -> Rating:
        """The player's rating (a new Rating at START for a player with no rated board)."""
        return self._by_key.get(handle.casefold()) or Rating(handle)

    def history(self, handle: str) -> list[tuple[Board, float]]:
        """The player's rating right after each of their rated boards, in the
        order rated (the figures ``curio ratings`` showed after each one)."""
        return list(self._after.get(handle.casefold(), []))

    def table(self) -> list[Rating]:
        """Every rated player, best first (ties by handle)."""
        return sorted(self._by_key.values(), key=lambda r: (-r.value, r.handle.casefold()))

    def text(self) -> str:
        """The ``curio ratings`` table."""
        n = len(self.boards)
        head = (f"Elo ratings over {n} finished board{'s' if n != 1 else ''} "
                f"(everyone starts at {START}, K={K}, a draw counts half).")
        rows = self.table()
        if not rows:
            return head + "\nNo board has finished yet: every player stands at " + str(START) + "."
        width = max(6, *(len(r.handle) for r in rows))
        lines = [head, "", f"  #  {'Player':<{width}}  Rating  Boards  Won  Drawn  Lost"]
        for i, r in enumerate(rows, 1):
            lines.append(f"{i:>3}  {r.handle:<{width}}  {r.shown:>6}  {r.games:>6}  {r.wins:>3}  "
                         f"{r.draws:>5}  {r.losses:>4}")
        return "\n".join(lines)


__all__ = ["K", "START", "Rating", "Ratings", "expected", "rated"]
