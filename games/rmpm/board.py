"""The 25x25 board of Rich Man - Poor Man: field numbers and fence sections.

Fields are ``(row, col)`` tuples, 1-based, 01-01 upper left, 01-25 upper
right; in mails and in the state they are written ``RR-CC``.  A fence section
lies on the border between two neighbouring fields; the crosses around the
board are the edge, not fences.  Internally a fence is ``(row, col, "r")``
(between a field and its right neighbour) or ``(row, col, "d")`` (between a
field and the field below).
"""

from __future__ import annotations

import re
from typing import Any

SIZE = 25
PARKING = (13, 13)
#: direction letter -> (drow, dcol, MN code)
DIRS = {"u": (-1, 0, 0), "r": (0, 1, 1), "d": (1, 0, 2), "l": (0, -1, 3)}
DIR_NAMES = {"u": "up", "r": "right", "d": "down", "l": "left"}
RING = [2, 3, 4, 5, 6, 5, 4, 3, 2, 3, 4, 5, 6]

Field = tuple[int, int]

_FIELD_RE = re.compile(r"^(\d{1,2})-(\d{1,2})$")


_NAMES = {(r, c): f"{r:02d}-{c:02d}" for r in range(1, SIZE + 1) for c in range(1, SIZE + 1)}
_FIELDS = {name: f for f, name in _NAMES.items()}


def fmt(f: Field) -> str:
    name = _NAMES.get(f)
    return name if name is not None else f"{f[0]:02d}-{f[1]:02d}"


def field_of(text: str, on_board: bool = True) -> Field:
    """The field of a line the parser accepted (ValueError if it is none)."""
    f = parse_field(text, on_board)
    if f is None:
        raise ValueError(f"not a field: {text!r}")
    return f


def parse_field(text: str, on_board: bool = True) -> Field | None:
    """``"16-4"`` or ``"16-04"`` -> (16, 4); None if malformed (or off the
    board when ``on_board``)."""
    f = _FIELDS.get(text)
    if f is not None:
        return f
    m = _FIELD_RE.match(text.strip())
    if not m:
        return None
    f = (int(m.group(1)), int(m.group(2)))
    if on_board and not on_board_(f):
        return None
    return f


def on_board_(f: Field) -> bool:
    return 1 <= f[0] <= SIZE and 1 <= f[1] <= SIZE


def is_edge(f: Field) -> bool:
    return f[0] in (1, SIZE) or f[1] in (1, SIZE)


def step(f: Field, d: str) -> Field:
    dr, dc, _ = DIRS[d]
    return (f[0] + dr, f[1] + dc)


def direction(a: Field, b: Field) -> tuple[str, int] | None:
    """Direction letter and distance from a to b, None unless b lies straight
    up, right, down or left of a."""
    if a == b:
        return None
    if a[0] == b[0]:
        return ("r" if b[1] > a[1] else "l", abs(b[1] - a[1]))
    if a[1] == b[1]:
        return ("d" if b[0] > a[0] else "u", abs(b[0] - a[0]))
    return None


def side_fence(f: Field, d: str) -> tuple[int, int, str] | None:
    """The fence position on side ``d`` of field f; None at the board edge."""
    n = step(f, d)
    if not on_board_(n):
        return None
    if d == "r":
        return (f[0], f[1], "r")
    if d == "l":
        return (n[0], n[1], "r")
    if d == "d":
        return (f[0], f[1], "d")
    return (n[0], n[1], "d")


def default_number(r: int, c: int) -> int:
    return RING[min(r - 1, c - 1, SIZE - r, SIZE - c)]


def fence_key(fence: tuple[int, int, str]) -> str:
    return f"{fmt((fence[0], fence[1]))} {fence[2]}"


def parse_fence_key(text: str) -> tuple[int, int, str] | None:
    parts = text.split()
    if len(parts) != 2 or parts[1] not in ("r", "d"):
        return None
    f = parse_field(parts[0])
    if f is None:
        return None
    fence = (f[0], f[1], parts[1])
    if side_fence(f, parts[1]) is None:
        return None
    return fence


class Board:
    """Field numbers and fences.  Chips and ownership live in the game."""

    def __init__(self, numbers: list[list[int]], fences: set[tuple[int, int, str]]):
        self.numbers = numbers  # numbers[r-1][c-1]
        self.fences = fences

    @classmethod
    def default(cls) -> Board:
        numbers = [[default_number(r, c) for c in range(1, SIZE + 1)] for r in range(1, SIZE + 1)]
        fences = {(r, 13, "r") for r in range(1, SIZE + 1)}
        return cls(numbers, fences)

    def copy(self) -> Board:
        return Board([list(row) for row in self.numbers], set(self.fences))

    # -- state ------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {
            "numbers": ["".join(str(n) for n in row) for row in self.numbers],
            "fences": sorted(fence_key(f) for f in self.fences),
        }

    @classmethod
    def from_state(cls, numbers: list[Any], fences: list[Any]) -> Board:
        """Build from the state form; raises ValueError naming the problem."""
        if not isinstance(numbers, list) or len(numbers) != SIZE:
            raise ValueError(f"numbers: expected {SIZE} rows")
        rows = []
        for i, row in enumerate(numbers, 1):
            if isinstance(row, str):
                row = row.replace(" ", "")
                vals = [int(ch) for ch in row if ch.isdigit()] if row.isdigit() else None
            elif isinstance(row, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in row):
                vals = list(row)
            else:
                vals = None
            if vals is None or len(vals) != SIZE:
                raise ValueError(f"numbers: row {i} must hold {SIZE} numbers")
            if any(v < 2 or v > 6 for v in vals):
                raise ValueError(f"numbers: row {i} has a number outside 2..6")
            rows.append(vals)
        if not isinstance(fences, list):
            raise ValueError("fences: expected a list like [\"08-13 r\", \"09-13 d\"]")
        fs = set()
        for item in fences:
            fence = parse_fence_key(item) if isinstance(item, str) else None
            if fence is None:
                raise ValueError(
                    f"fences: bad entry {item!r}; expected \"RR-CC r\" (right side) "
                    "or \"RR-CC d\" (below), not on the board edge"
                )
            fs.add(fence)
        return cls(rows, fs)

    # -- queries ----------------------------------------------------------
    def number(self, f: Field) -> int:
        return self.numbers[f[0] - 1][f[1] - 1]

    def fence_at(self, f: Field, d: str) -> bool:
        pos = side_fence(f, d)
        return pos is not None and pos in self.fences

    def blocked(self, f: Field, d: str) -> str | None:
        """Why a chip on f cannot step in direction d ("edge"/"fence"), or None."""
        n = step(f, d)
        if not on_board_(n):
            return "edge"
        if self.fence_at(f, d):
            return "fence"
        return None

    # -- changes ----------------------------------------------------------
    def turn_fence(self, f: Field, frm: str, to: str) -> None:
        new = side_fence(f, to)
        if new is None:
            raise ValueError(f"the {DIR_NAMES[to]} side of {fmt(f)} is the board edge")
        self.fences.discard(side_fence(f, frm))
        self.fences.add(new)

    def exchange(self, a: Field, b: Field) -> None:
        na, nb = self.number(a), self.number(b)
        self.numbers[a[0] - 1][a[1] - 1] = nb
        self.numbers[b[0] - 1][b[1] - 1] = na


# -- board files ------------------------------------------------------------

BOARD_FILE_HELP = (
    "a board file has up to 25 number rows (25 digits 2-6 each, spaces allowed), "
    "FENCE RR-CC <r|d|u|l> lines, or NO FENCES; # starts a comment"
)


def parse_board_file(text: str) -> Board:
    """Read a board file (see docs/games/rmpm.md); ValueError names the line."""
    board = Board.default()
    rows: list[list[int]] = []
    fences: set[tuple[int, int, str]] = set()
    fence_lines = False
    no_fences = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        up = line.upper()
        if up in ("NO FENCES", "NOFENCES"):
            no_fences = True
            continue
        if up.startswith("FENCE"):
            parts = line.split()
            f = parse_field(parts[1]) if len(parts) == 3 else None
            side = parts[2].lower() if len(parts) == 3 else ""
            if f is None or side not in DIRS:
                raise ValueError(f"board file line {n}: expected FENCE RR-CC <r|d|u|l>, e.g. FENCE 08-13 r")
            pos = side_fence(f, side)
            if pos is None:
                raise ValueError(f"board file line {n}: the {DIR_NAMES[side]} side of {fmt(f)} is the board edge")
            fences.add(pos)
            fence_lines = True
            continue
        digits = line.replace(" ", "").replace("\t", "")
        if not digits.isdigit():
            raise ValueError(f"board file line {n}: {BOARD_FILE_HELP}")
        vals = [int(ch) for ch in digits]
        if len(vals) != SIZE or any(v < 2 or v > 6 for v in vals):
            raise ValueError(f"board file line {n}: a number row needs {SIZE} digits from 2 to 6")
        rows.append(vals)
    if rows:
        if len(rows) != SIZE:
            raise ValueError(f"board file: {len(rows)} number rows, expected {SIZE} (or none for the default)")
        board.numbers = rows
    if fence_lines or no_fences:
        board.fences = fences
    return board
