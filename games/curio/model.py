"""Curio's domain model: squares, two-faced pieces, the setup and positions.

Everything here is pure and integer-only.  A :class:`Position` is immutable
in use: :meth:`Position.play` returns a new one.  The rules read next to the
game's page (docs/games/curio.md):

* every piece has two faces; ``own`` points at its owner, ``other`` at the
  opponent.  A player sees the ``own`` face of their pieces and the ``other``
  face of the enemy's; once a piece has turned (after a capture) both players
  know both faces (``revealed``).
* a piece moves like a chess queen, 1 up to its range (its ``own`` face, or
  without limit under ``-no_limit``), never through another piece.
* it may land on an enemy piece the capture rule allows (default ``le``: the
  face the mover sees on the target is <= the mover's own face); after a
  capture it turns around (``-turn``, the default).
* the winner captures all of the opponent's royal pieces (those holding the
  base number).
"""

from __future__ import annotations

import collections
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

LIGHT, DARK = "light", "dark"
SIDES = (LIGHT, DARK)
SIDE_NAME = {LIGHT: "Light", DARK: "Dark"}

DIRECTIONS = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))


def opponent(side: str) -> str:
    return DARK if side == LIGHT else LIGHT


class SetupError(ValueError):
    """A board setup that cannot be played (the message says why)."""


class IllegalMove(ValueError):
    """A move the rules do not allow (the message says why, from the mover's view)."""


# -- capture rules -----------------------------------------------------------

@dataclass(frozen=True)
class CaptureRule:
    code: str  # "le", "gt_total", ...
    words: str  # for messages: "lesser or equal"
    total: bool  # compare the sum of both faces instead of the visible faces
    allows: Callable[[int, int], bool]  # (attacker value, target value)


CAPTURE_RULES: dict[str, CaptureRule] = {
    r.code: r
    for r in (
        CaptureRule("lt", "lesser", False, lambda a, t: t < a),
        CaptureRule("le", "lesser or equal", False, lambda a, t: t <= a),
        CaptureRule("gt", "greater", False, lambda a, t: t > a),
        CaptureRule("ge", "greater or equal", False, lambda a, t: t >= a),
        CaptureRule("lt_total", "lesser total", True, lambda a, t: t < a),
        CaptureRule("le_total", "lesser or equal total", True, lambda a, t: t <= a),
        CaptureRule("gt_total", "greater total", True, lambda a, t: t > a),
        CaptureRule("ge_total", "greater or equal total", True, lambda a, t: t >= a),
        CaptureRule("any", "any", False, lambda a, t: True),
    )
}

FACES = ("large", "small", "random")


# -- setup ---------------------------------------------------------------------

def triangular(n: int) -> int:
    return n * (n + 1) // 2


@dataclass(frozen=True)
class Setup:
    """The options a board is played with (all of the help page's options,
    plus ``draw_moves``: moves without a capture before the game is drawn,
    0 for never)."""

    base: int = 4
    rows: int = 5
    cols: int = 5
    num_pieces: int = 0  # 0: one piece of each kind (the base's triangular number)
    turn: bool = True
    limit: bool = True
    face: str = "large"
    capture: str = "le"
    draw_moves: int = 50

    @property
    def pieces_per_side(self) -> int:
        return self.num_pieces or triangular(self.base)

    @property
    def rule(self) -> CaptureRule:
        return CAPTURE_RULES[self.capture]

    def validate(self) -> Setup:
        if not 1 <= self.base <= 9:
            raise SetupError(f"-base must be 1 to 9, not {self.base}")
        if not 4 <= self.rows <= 26:
            raise SetupError(
                f"-rows must be 4 to 26, not {self.rows} (each side needs two rows of its own)"
            )
        if not 1 <= self.cols <= 26:
            raise SetupError(f"-cols must be 1 to 26, not {self.cols}")
        kinds = triangular(self.base)
        if self.num_pieces < 0 or self.num_pieces % kinds:
            raise SetupError(
                f"-num_pieces must be a multiple of {kinds} (the number of different "
                f"pieces with -base={self.base}), not {self.num_pieces}"
            )
        if self.pieces_per_side > 2 * self.cols:
            raise SetupError(
                f"cannot lay out {self.pieces_per_side} pieces per side on two rows of "
                f"{self.cols} squares (at most {2 * self.cols} fit): use more -cols, "
                f"a smaller -base or fewer -num_pieces"
            )
        if self.face not in FACES:
            raise SetupError(f"face must be one of {', '.join(FACES)}, not {self.face!r}")
        if self.capture not in CAPTURE_RULES:
            raise SetupError(
                f"capture must be one of {', '.join(CAPTURE_RULES)}, not {self.capture!r}"
            )
        if self.draw_moves < 0:
            raise SetupError(f"-draw_moves must be 0 (never) or more, not {self.draw_moves}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base, "rows": self.rows, "cols": self.cols,
            "num_pieces": self.pieces_per_side, "turn": self.turn, "limit": self.limit,
            "face": self.face, "capture": self.capture, "draw_moves": self.draw_moves,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Setup:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)

    def flags(self) -> str:
        """The setup as challenge options, e.g. ``-base=4 -rows=5 ... -capture_le``."""
        return " ".join([
            f"-base={self.base}", f"-rows={self.rows}", f"-cols={self.cols}",
            f"-num_pieces={self.pieces_per_side}",
            "-turn" if self.turn else "-no_turn",
            "-limit" if self.limit else "-no_limit",
            f"-face_{self.face}", f"-capture_{self.capture}",
            f"-draw_moves={self.draw_moves}",
        ])

    def piece_kinds(self) -> list[tuple[int, int]]:
        """Every pair i <= j of 1..base, repeated to make up num_pieces."""
        kinds = [(i, j) for i in range(1, self.base + 1) for j in range(i, self.base + 1)]
        return kinds * (self.pieces_per_side // len(kinds))


#: the standard setup of the help page (the defaults of a game's options)
DEFAULT_SETUP = Setup()


# -- squares and pieces -------------------------------------------------------------

_SQUARE = re.compile(r"^([a-z])([1-9][0-9]?)$")


@dataclass(frozen=True, order=True)
class Square:
    file: int  # 0 = a
    rank: int  # 0 = rank 1, Light's home row

    @classmethod
    def parse(cls, text: str) -> Square:
        m = _SQUARE.match(text.strip().lower())
        if not m:
            raise ValueError(f"{text!r} is not a square like d2")
        return cls(ord(m.group(1)) - ord("a"), int(m.group(2)) - 1)

    @property
    def name(self) -> str:
        return f"{chr(ord('a') + self.file)}{self.rank + 1}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Piece:
    side: str
    own: int  # the face pointing at its owner: its range, what its owner sees
    other: int  # the face pointing at the opponent: what the opponent sees
    revealed: bool = False  # turned at least once: both players know both faces

    @property
    def total(self) -> int:
        return self.own + self.other

    def is_royal(self, base: int) -> bool:
        return base in (self.own, self.other)

    def face_toward(self, side: str) -> int:
        """The face pointing at ``side``'s end of the table."""
        return self.own if side == self.side else self.other

    def faces_seen_by(self, viewer: str | None) -> tuple[int, ...]:
        """What ``viewer`` (a side, or None for an observer) knows of the faces:
        the face toward the viewer first (for an observer: the owner's face first)."""
        if viewer is None:
            return (self.own, self.other) if self.revealed else ()
        near = self.face_toward(viewer)
        far = self.other if viewer == self.side else self.own
        return (near, far) if self.revealed else (near,)

    def turned(self) -> Piece:
        return Piece(self.side, self.other, self.own, True)

    def to_json(self) -> dict[str, Any]:
        return {"side": self.side, "own": self.own, "other": self.other, "revealed": self.revealed}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Piece:
        return cls(d["side"], int(d["own"]), int(d["other"]), bool(d.get("revealed", False)))


@dataclass(frozen=True)
class Move:
    frm: Square
    to: Square
    capture: bool = False

    _RE = re.compile(r"^([a-z][0-9]{1,2})\s*[-x:]?\s*([a-z][0-9]{1,2})$", re.IGNORECASE)

    @classmethod
    def parse(cls, text: str) -> Move:
        m = cls._RE.match(text.strip())
        if not m:
            raise ValueError(f"{text!r} is not a move like d2-b4")
        return cls(Square.parse(m.group(1)), Square.parse(m.group(2)))

    @property
    def plain(self) -> str:
        return f"{self.frm}-{self.to}"

    def __str__(self) -> str:
        return f"{self.frm}{'x' if self.capture else '-'}{self.to}"


# -- positions -------------------------------------------------------------------


def layout(setup: Setup, seed: int) -> dict[Square, Piece]:
    """The starting layout, derived only from ``seed``: for each side the
    pieces are shuffled onto its home row first, then onto random squares of
    the row in front of it; each faces its owner as ``setup.face`` says."""
    rng = random.Random(seed)
    pieces: dict[Square, Piece] = {}
    for side in SIDES:
        kinds = setup.piece_kinds()
        rng.shuffle(kinds)
        home, front = (0, 1) if side == LIGHT else (setup.rows - 1, setup.rows - 2)
        squares = [Square(f, home) for f in range(setup.cols)]
        front_row = [Square(f, front) for f in range(setup.cols)]
        if len(kinds) <= setup.cols:
            squares = sorted(rng.sample(squares, len(kinds)))
        else:
            squares += sorted(rng.sample(front_row, len(kinds) - setup.cols))
        for sq, (low, high) in zip(squares, kinds, strict=False):
            if setup.face == "large":
                own, other = high, low
            elif setup.face == "small":
                own, other = low, high
            else:
                own, other = (high, low) if rng.randrange(2) else (low, high)
            pieces[sq] = Piece(side, own, other)
    return pieces


@dataclass(frozen=True)
class Position:
    setup: Setup
    pieces: dict[Square, Piece] = field(hash=False)
    to_move: str = LIGHT
    ply: int = 0  # moves played so far
    quiet: int = 0  # moves since the last capture

    @classmethod
    def initial(cls, setup: Setup, seed: int) -> Position:
        return cls(setup, layout(setup, seed))

    # -- geometry
    def on_board(self, sq: Square) -> bool:
        return 0 <= sq.file < self.setup.cols and 0 <= sq.rank < self.setup.rows

    def squares(self) -> Iterator[Square]:
        for rank in range(self.setup.rows):
            for f in range(self.setup.cols):
                yield Square(f, rank)

    def side_pieces(self, side: str) -> list[tuple[Square, Piece]]:
        return sorted((sq, p) for sq, p in self.pieces.items() if p.side == side)

    def count(self, side: str) -> int:
        return sum(1 for p in self.pieces.values() if p.side == side)

    def royals(self, side: str) -> int:
        return sum(1 for p in self.pieces.values() if p.side == side and p.is_royal(self.setup.base))

    # -- the rules of movement
    def reach(self, piece: Piece) -> int:
        """How far ``piece`` may move: its owner's face, or the board under -no_limit."""
        return piece.own if self.setup.limit else max(self.setup.rows, self.setup.cols)

    def can_capture(self, attacker: Piece, target: Piece) -> bool:
        rule = self.setup.rule
        if rule.total:
            return rule.allows(attacker.total, target.total)
        return rule.allows(attacker.own, target.face_toward(attacker.side))

    def check(self, side: str, move: Move) -> Move:
        """The move as played (with ``capture`` set), or IllegalMove saying why.
        Reasons only name what the mover can see."""
        setup = self.setup
        for sq in (move.frm, move.to):
            if not self.on_board(sq):
                last = Square(setup.cols - 1, setup.rows - 1)
                raise IllegalMove(f"{sq} is off the board (a1 to {last})")
        piece = self.pieces.get(move.frm)
        if piece is None:
            raise IllegalMove(f"there is no piece on {move.frm}")
        if piece.side != side:
            raise IllegalMove(f"the piece on {move.frm} is not yours")
        df, dr = move.to.file - move.frm.file, move.to.rank - move.frm.rank
        if df == dr == 0:
            raise IllegalMove("a piece must move at least one square")
        if df and dr and abs(df) != abs(dr):
            raise IllegalMove(
                f"{move.frm} to {move.to} is not a straight line (pieces move like a queen)"
            )
        distance = max(abs(df), abs(dr))
        if setup.limit and distance > piece.own:
            raise IllegalMove(
                f"the piece on {move.frm} shows you {piece.own}, so it moves at most "
                f"{piece.own} square{'s' if piece.own != 1 else ''}; {move.to} is {distance} away"
            )
        step_f, step_r = (df > 0) - (df < 0), (dr > 0) - (dr < 0)
        for k in range(1, distance):
            sq = Square(move.frm.file + k * step_f, move.frm.rank + k * step_r)
            if sq in self.pieces:
                raise IllegalMove(f"the way from {move.frm} to {move.to} is blocked on {sq}")
        target = self.pieces.get(move.to)
        if target is None:
            return Move(move.frm, move.to, False)
        if target.side == side:
            raise IllegalMove(f"{move.to} holds one of your own pieces")
        if not self.can_capture(piece, target):
            rule = setup.rule
            if rule.total:
                raise IllegalMove(
                    f"the piece on {move.frm} may not capture the piece on {move.to}: with "
                    f"-capture_{rule.code} the totals of both faces decide"
                )
            raise IllegalMove(
                f"the piece on {move.frm} (showing you {piece.own}) may capture only pieces "
                f"of {rule.words} value; the piece on {move.to} shows you "
                f"{target.face_toward(side)}"
            )
        return Move(move.frm, move.to, True)

    def legal_moves(self, side: str | None = None) -> list[Move]:
        side = side or self.to_move
        moves = []
        for sq, piece in self.side_pieces(side):
            reach = self.reach(piece)
            for step_f, step_r in DIRECTIONS:
                for k in range(1, reach + 1):
                    to = Square(sq.file + k * step_f, sq.rank + k * step_r)
                    if not self.on_board(to):
                        break
                    target = self.pieces.get(to)
                    if target is None:
                        moves.append(Move(sq, to))
                        continue
                    if target.side != side and self.can_capture(piece, target):
                        moves.append(Move(sq, to, True))
                    break
        return moves

    def play(self, move: Move) -> Position:
        """The position after ``move`` by the side to move (checked first)."""
        move = self.check(self.to_move, move)
        pieces = dict(self.pieces)
        piece = pieces.pop(move.frm)
        if move.capture and self.setup.turn:
            piece = piece.turned()
        pieces[move.to] = piece
        return replace(
            self, pieces=pieces, to_move=opponent(self.to_move), ply=self.ply + 1,
            quiet=0 if move.capture else self.quiet + 1,
        )

    def capture_possible(self) -> bool:
        """Could any piece ever capture any enemy piece?  Faces change only by
        capturing, so if no pair of pieces passes the capture rule now, none
        ever will (where the pieces stand is not considered)."""
        for attacker in self.pieces.values():
            for target in self.pieces.values():
                if target.side != attacker.side and self.can_capture(attacker, target):
                    return True
        return False

    def result(self) -> tuple[str | None, str] | None:
        """None while the game goes on, else (winning side or None for a draw, reason)."""
        for side in SIDES:
            if self.royals(side) == 0:
                return opponent(side), f"{SIDE_NAME[opponent(side)]} captured all royal pieces"
        if self.count(LIGHT) == 1 and self.count(DARK) == 1:
            return None, "each side has only one piece left"
        if not self.capture_possible():
            return None, "no capture is possible any more"
        if self.setup.draw_moves and self.quiet >= self.setup.draw_moves:
            return None, f"{self.quiet} moves in a row without a capture"
        if not self.legal_moves(self.to_move):
            return None, f"{SIDE_NAME[self.to_move]} has no legal move"
        return None

    # -- JSON
    def to_json(self) -> dict[str, Any]:
        return {
            "to_move": self.to_move, "ply": self.ply, "quiet": self.quiet,
            "pieces": {sq.name: p.to_json() for sq, p in sorted(self.pieces.items())},
        }

    @classmethod
    def from_json(cls, setup: Setup, d: dict[str, Any]) -> Position:
        pieces = {Square.parse(k): Piece.from_json(v) for k, v in d["pieces"].items()}
        return cls(setup, pieces, d.get("to_move", LIGHT), int(d.get("ply", 0)), int(d.get("quiet", 0)))


def position_problem(pos: Position) -> str | None:
    """What makes a hand-written position impossible under its setup (a face
    outside 1..base, a pair of faces no piece has, more pieces than the setup
    gives a side, a piece off the board); None if it could occur."""
    setup = pos.setup
    kinds = collections.Counter(setup.piece_kinds())
    seen: dict[str, collections.Counter[tuple[int, int]]] = {LIGHT: collections.Counter(), DARK: collections.Counter()}
    for sq, piece in sorted(pos.pieces.items()):
        if not pos.on_board(sq):
            return f"the piece on {sq} is off the {setup.cols}x{setup.rows} board"
        if piece.side not in seen:
            return f"the piece on {sq} belongs to {piece.side!r}, not light or dark"
        for face in (piece.own, piece.other):
            if not 1 <= face <= setup.base:
                return f"the piece on {sq} has a face {face}: with -base={setup.base} faces run 1 to {setup.base}"
        kind = (min(piece.own, piece.other), max(piece.own, piece.other))
        seen[piece.side][kind] += 1
        if seen[piece.side][kind] > kinds[kind]:
            return (f"{piece.side} has more {kind[0]}/{kind[1]} pieces than the setup gives a side "
                    f"({kinds[kind]}); the piece on {sq} is one too many")
    for side, counted in seen.items():
        if sum(counted.values()) > setup.pieces_per_side:
            return f"{side} has {sum(counted.values())} pieces; the setup gives a side {setup.pieces_per_side}"
    return None


def replay(setup: Setup, seed: int, moves: list[str], start: dict[str, Any] | None = None) -> list[Position]:
    """Every position of a game, from its start (the stored ``seed``'s layout,
    or an explicit ``start`` position) through each move in ``moves``.  Pure:
    the same arguments always give the same positions.  IllegalMove if a move
    does not fit."""
    pos = Position.from_json(setup, start) if start else Position.initial(setup, seed)
    positions = [pos]
    for i, text in enumerate(moves, 1):
        try:
            pos = pos.play(Move.parse(text))
        except (IllegalMove, ValueError) as e:
            raise IllegalMove(f"move {i} ({text}): {e}") from None
        positions.append(pos)
    return positions
