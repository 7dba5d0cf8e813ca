"""A curio board's move clock (pbmserv's timers): ``-clock=2d`` gives the
player to move two days for each move.  A reminder goes to them when the
time left falls to a quarter of the clock (at most a day before the end);
when it runs out the other player wins, at the server's next tick or when
they claim it (``curio claim BOARD USERID PASSWORD``).

Pure: the time always comes in as an argument.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from games.curio.boards import Board
from games.curio.model import SIDE_NAME, opponent

#: the longest clock (minutes): 60 days
MOST = 60 * 24 * 60
#: the shortest (minutes): one hour
LEAST = 60
#: the reminder comes at most this long before the time runs out
REMIND_BEFORE = timedelta(hours=24)

_PART = re.compile(r"([0-9]{1,5})\s*([dhm])", re.IGNORECASE)
_UNIT = {"d": 24 * 60, "h": 60, "m": 1}


def parse_clock(text: object) -> int:
    """``2d``, ``36h``, ``1d12h``, ``90m`` -> minutes; ``0``, ``none``, ``off``,
    ``""`` -> 0 (no clock).  ValueError saying what is accepted."""
    if isinstance(text, int) and not isinstance(text, bool):
        minutes = text
    else:
        t = str(text).strip().lower().replace(" ", "")
        if t in ("", "0", "none", "off", "no"):
            return 0
        parts = _PART.findall(t)
        if not parts or "".join(n + u for n, u in parts) != t:
            raise ValueError(f"{text!r} is not a move clock: write it like 2d, 36h or 1d12h (d days, h hours, m minutes)")
        minutes = sum(int(n) * _UNIT[u.lower()] for n, u in parts)
    if minutes == 0:
        return 0
    if not LEAST <= minutes <= MOST:
        raise ValueError(f"a move clock is from 1h to 60d, not {show_clock(minutes)}")
    return minutes


def show_clock(minutes: int) -> str:
    """2880 -> "2 days"; 2160 -> "1 day 12 hours"."""
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = [f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in ((days, "day"), (hours, "hour"), (mins, "minute")) if n]
    return " ".join(parts) or "0 minutes"


def show_moment(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def due(board: Board) -> datetime | None:
    """When the player to move runs out of time (None: no clock, or the board is over)."""
    if not board.clock or not board.active or not board.clock_since:
        return None
    return datetime.fromisoformat(board.clock_since) + timedelta(minutes=board.clock)


def remind_at(board: Board) -> datetime | None:
    end = due(board)
    if end is None:
        return None
    return end - min(REMIND_BEFORE, timedelta(minutes=board.clock) / 4)


def start(board: Board, now: datetime) -> None:
    """The clock of the player to move starts now (a new board, a move)."""
    if board.clock:
        board.clock_since = now.isoformat()
        board.reminded = False


def clock_line(board: Board) -> str:
    """What the board's mails say of its clock; "" without one."""
    if not board.clock:
        return ""
    line = f"Move clock: {show_clock(board.clock)} for each move."
    end = due(board)
    if end is not None:
        mover = board.position.to_move
        line += (f" {board.handle(mover)} ({SIDE_NAME[mover]}) has until {show_moment(end)} to move; "
                 f"after that {board.handle(opponent(mover))} wins on time.")
    return line


__all__ = ["clock_line", "due", "parse_clock", "remind_at", "show_clock", "show_moment", "start"]
