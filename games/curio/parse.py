"""Parsing curio's pbmserv-style command lines (syntax only; never raises).

    curio challenge [-options] <userid1> <userid2>
    curio challenge [-options] <userid>   (an open challenge: waits for anyone)
    curio open                   /  curio accept <n>  /  curio cancel <n>
    curio claim <board> <userid> <password>   (a win on time: the clock ran out)
    curio move <board> <userid> <password> <from>-<to>[#<move number>]
    curio move <board> <userid> <password> resign|propose|accept|reject   (pbmserv)
    curio resign <board> <userid> <password>
    curio draw <board> <userid> <password> [propose|accept|reject]
    curio show <board>[#<move>]
    curio showas <userid> <password> <board>[#<move>]
    curio history <board>
    curio games <userid>         (without a userid: the same as boards)
    curio ratings
    curio subscribe <board>      /  curio unsubscribe <board>
    curio boards

The leading ``curio`` may be left out in mail to a curio game's own address.
Keywords and option names are case-insensitive.  The password of a line is
never echoed: ``Command.text`` has it replaced by ``****``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from games.base import Command, Line
from games.curio.clock import parse_clock
from games.curio.model import CAPTURE_RULES

USAGE = {
    "challenge": "curio challenge [-options] <userid1> <userid2>, e.g. curio challenge -rows=6 -clock=2d alice bob "
                 "(one userid, your own: an open challenge that waits in 'curio open' for anyone to accept)",
    "move": "curio move <board> <userid> <password> <from>-<to>[#<move number>] (or resign, "
            "propose, accept, reject in place of the move), e.g. curio move 101 alice PASSWORD d2-d4#1",
    "resign": "curio resign <board> <userid> <password>, e.g. curio resign 101 alice PASSWORD",
    "draw": "curio draw <board> <userid> <password> [propose|accept|reject], "
            "e.g. curio draw 101 alice PASSWORD propose",
    "show": "curio show <board>[#<n>] (#n: the position after move n, from your side), "
            "e.g. curio show 101 or curio show 101#7",
    "showas": "curio showas <userid> <password> <board>[#<n>], e.g. curio showas alice PASSWORD 101",
    "history": "curio history <board> (every move, who made it, the captures), e.g. curio history 101",
    "games": "curio games <userid> (that player's boards, opponents, whose move), e.g. curio games alice",
    "ratings": "curio ratings (the Elo table over finished boards)",
    "subscribe": "curio subscribe <board>, e.g. curio subscribe 101",
    "unsubscribe": "curio unsubscribe <board>, e.g. curio unsubscribe 101",
    "boards": "curio boards",
    "open": "curio open (the challenges waiting for an opponent)",
    "accept": "curio accept <n> (take open challenge n from 'curio open'), e.g. curio accept 1",
    "cancel": "curio cancel <n> (take back your open challenge n), e.g. curio cancel 1",
    "claim": "curio claim <board> <userid> <password> (the win when your opponent's move clock has run out), "
             "e.g. curio claim 101 alice PASSWORD",
}
#: the answer to LEAVE in a curio game: there is none, a board is resigned
LEAVE_REFUSAL = (
    "curio has no LEAVE: each board is a game of its own between two players; to stop "
    "playing a board, resign it: curio resign <board> <userid> <password> (before the "
    "first move this declines the challenge); 'curio boards' lists the boards"
)
#: words a player may write for leaving; all get LEAVE_REFUSAL
LEAVE_WORDS = ("leave", "quit", "withdraw", "signoff", "sign-off")

ALIASES = {"list": "boards", "observe": "subscribe", "watch": "subscribe",
           "resigns": "resign", "rating": "ratings", "moves": "history"}
DRAW_ACTIONS = {"propose": "propose", "offer": "propose", "accept": "accept", "agree": "accept",
                "reject": "reject", "decline": "reject", "refuse": "reject"}

FLAGS: dict[str, tuple[str, object]] = {
    "turn": ("turn", True), "no_turn": ("turn", False),
    "limit": ("limit", True), "no_limit": ("limit", False),
    "face_large": ("face", "large"), "face_small": ("face", "small"),
    "face_random": ("face", "random"),
    **{f"capture_{code}": ("capture", code) for code in CAPTURE_RULES},
}
CREDENTIALS = ("move", "resign", "draw", "showas", "claim")
VALUED = ("base", "rows", "cols", "num_pieces", "draw_moves")
OPTION_LIST = "-" + ", -".join([f"{v}=N" for v in VALUED] + list(FLAGS))

_MOVE = re.compile(r"^([a-z][0-9]{1,2})[-x:]?([a-z][0-9]{1,2})(?:#([0-9]+))?$", re.IGNORECASE)
_TOKEN = re.compile(r"\S+")


class _Line:
    """A line split into tokens that remembers where each token stands, so a
    password can be masked in place."""

    def __init__(self, line: Line):
        self.line = line
        self.spans = [(m.group(), m.span()) for m in _TOKEN.finditer(line.text)]
        self.start = 1 if self.spans and self.spans[0][0].lower() == "curio" else 0
        self.words = [t for t, _ in self.spans[self.start:]]

    def masked(self, *indexes: int) -> str:
        """The line with the words at ``indexes`` (counted after ``curio``) as
        ****, and every other word equal to one of them (a password that is
        also the board number must not show as the board number)."""
        text = self.line.text
        secret = {self.words[i] for i in indexes if 0 <= i < len(self.words)}
        every = [i for i, word in enumerate(self.words) if word in secret]
        for i in sorted(every, reverse=True):
            if 0 <= i < len(self.words):
                a, b = self.spans[self.start + i][1]
                text = text[:a] + "****" + text[b:]
        return text

    def cut(self) -> str:
        """The line up to the command word, for lines we cannot read (the rest
        might hold a password)."""
        keep = [t for t, _ in self.spans[: self.start + 1]]
        more = len(self.spans) > self.start + 1
        return " ".join(keep) + (" ..." if more else "")


def _all_but_board(tl: _Line, name: str) -> tuple[int, ...]:
    """Word indexes to mask in a malformed line that carries a password
    somewhere: everything after the command word but a leading board number."""
    keep_board = name != "showas" and len(tl.words) > 1 and _board(tl.words[1]) is not None
    return tuple(range(2 if keep_board else 1, len(tl.words)))


def _board(word: str) -> int | None:
    word = word.lstrip("#")
    return int(word) if word.isdigit() and len(word) < 9 else None


def _board_at(words: list[str]) -> tuple[int, int | None] | None:
    """``101``, ``101#7`` or ``101 #7``: (board, move or None); None if not that."""
    text = "".join(words)
    board, sep, at = text.lstrip("#").partition("#")
    number = _board(board)
    if number is None or (len(words) > 1 and not words[1].startswith("#")):
        return None
    if not sep:
        return number, None
    return (number, int(at)) if at.isdigit() and len(at) < 9 else None


def _where(where: tuple[int, int | None]) -> dict[str, int]:
    board, at = where
    return {"board": board} if at is None else {"board": board, "at": at}


def masked(line: Line) -> str:
    """The line with any inline password replaced by ****."""
    return _Line(line).cut()


def parse_line(line: Line) -> Command:
    tl = _Line(line)
    if not tl.words:
        return Command(line, "error", error="expected a curio command: " + ", ".join(USAGE))
    name = tl.words[0].lower()
    name = ALIASES.get(name, name)
    if name in ("open", "accept", "cancel") and (name == "open" or len(tl.words) == 2):
        return _open(line, tl, name)
    if name in DRAW_ACTIONS and name != "draw":
        # "curio accept 101 bob PASSWORD" is read as "curio draw 101 bob PASSWORD accept"
        words = ["draw", *tl.words[1:4], name]
        if len(tl.words) != 4:
            return Command(line, "draw", error=f"expected {USAGE['draw']}",
                           text=tl.masked(*_all_but_board(tl, "draw")))
        return _draw(line, tl, words, masked=tl.masked(3))
    args = tl.words[1:]
    if name in LEAVE_WORDS:
        # the rest of the line may hold a password: echo only the command word
        return Command(line, "leave", error=LEAVE_REFUSAL, text=tl.cut())

    def bad(why: str = "", mask: tuple[int, ...] = ()) -> Command:
        lead = f"{why}; expected " if why else "expected "
        if name in CREDENTIALS or name in ("show", "subscribe", "unsubscribe", "boards", "history",
                                           "games", "ratings"):
            mask = _all_but_board(tl, name)  # a misplaced password could be anywhere
        return Command(line, name, error=lead + USAGE[name], text=tl.masked(*mask))

    if name == "challenge":
        return _challenge(line, tl, args, bad)
    if name == "move":
        masked = tl.masked(3)
        if len(args) < 4:
            return bad("incomplete move", (3,))
        board = _board(args[0])
        if board is None:
            return bad("the word after move must be the board number", (3,))
        word = args[3].lower() if len(args) == 4 else ""
        # pbmserv's own forms: curio move <board> <userid> <password> resign|propose|accept|reject
        if word in ("resign", "resigns"):
            return Command(line, "resign", {"board": board}, credentials=(args[1], args[2]), text=masked)
        if word in DRAW_ACTIONS:
            return Command(line, "draw", {"board": board, "action": DRAW_ACTIONS[word], "explicit": True},
                           credentials=(args[1], args[2]), text=masked)
        m = _MOVE.match("".join(args[3:]))
        if not m:
            # never echo the word: if the userid was left out, it is the password
            return bad("the last word is not a move like d2-d4", (3,))
        number = int(m.group(3)) if m.group(3) else None
        return Command(line, "move", {"board": board, "move": f"{m.group(1).lower()}-{m.group(2).lower()}",
                                      "number": number},
                       credentials=(args[1], args[2]), text=masked)
    if name in ("resign", "claim"):
        if len(args) != 3:
            return bad(mask=(3,))
        board = _board(args[0])
        if board is None:
            return bad(f"the word after {name} must be the board number", (3,))
        return Command(line, name, {"board": board}, credentials=(args[1], args[2]),
                       text=tl.masked(3))
    if name == "draw":
        return _draw(line, tl, tl.words, masked=tl.masked(3))
    if name == "showas":
        if len(args) not in (3, 4):
            return bad(mask=(2,))
        where = _board_at(args[2:])
        if where is None:
            return bad("the board number comes last, with #n for the position after move n", (2,))
        return Command(line, name, _where(where), credentials=(args[0], args[1]), text=tl.masked(2))
    if name == "show":
        where = _board_at(args) if len(args) in (1, 2) else None
        if where is None:
            return bad("write the board number, and #n for the position after move n")
        return Command(line, name, _where(where))
    if name == "history":
        if len(args) != 1 or _board(args[0]) is None:
            return bad()
        return Command(line, name, {"board": _board(args[0])})
    if name == "games":
        if not args:
            return Command(line, "boards")  # pbmserv's bare "games": every running board
        if len(args) != 1:
            return bad("name one player")
        return Command(line, name, {"userid": args[0]}, accounts=[args[0]])
    if name == "ratings":
        if args:
            return bad("ratings takes nothing after it")
        return Command(line, name)
    if name in ("subscribe", "unsubscribe"):
        if len(args) != 1 or _board(args[0]) is None:
            return bad()
        return Command(line, name, {"board": _board(args[0])})
    if name == "boards":
        if args:
            return bad("boards takes nothing after it")
        return Command(line, name)
    return Command(line, "unknown", error=(
        f"unknown curio command {tl.words[0]!r}; expected one of " + ", ".join(USAGE)
        + " (e.g. " + USAGE["move"].split("e.g. ")[1] + ")"), text=tl.cut())


def _open(line: Line, tl: _Line, name: str) -> Command:
    """``curio open``, ``curio accept N``, ``curio cancel N``: the open challenges."""
    if name == "open":
        if len(tl.words) != 1:
            return Command(line, "open", error=f"open takes nothing after it; expected {USAGE['open']}", text=tl.cut())
        return Command(line, "open")
    number = _board(tl.words[1])
    if number is None:  # the word might be a password written in the wrong place
        draw = f"; to accept a draw: {USAGE['draw']}" if name == "accept" else ""
        return Command(line, f"{name}_open", error=f"expected {USAGE[name]}{draw}", text=tl.masked(1))
    return Command(line, f"{name}_open", {"number": number})


def _draw(line: Line, tl: _Line, words: list[str], masked: str) -> Command:
    args = words[1:]
    hidden = tl.masked(*_all_but_board(tl, "draw"))
    if len(args) not in (3, 4):
        return Command(line, "draw", error=f"expected {USAGE['draw']}", text=hidden)
    board = _board(args[0])
    if board is None:
        return Command(line, "draw", error=f"the board number comes first; expected {USAGE['draw']}",
                       text=hidden)
    action = "propose"
    if len(args) == 4:
        action = DRAW_ACTIONS.get(args[3].lower(), "")
        if not action:
            return Command(line, "draw", error=f"{args[3]!r} is not propose, accept or reject; "
                                               f"expected {USAGE['draw']}", text=hidden)
    return Command(line, "draw", {"board": board, "action": action, "explicit": len(args) == 4},
                   credentials=(args[1], args[2]), text=masked)


def _challenge(line: Line, tl: _Line, args: list[str], bad: Callable[[str], Command]) -> Command:
    options: dict[str, object] = {}
    users: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if not word.startswith("-"):
            users.append(word)
            i += 1
            continue
        key, _, value = word.lstrip("-").partition("=")
        if not _:
            key, _, value = key.partition(":")
        key = key.lower()
        if key == "clock":
            try:
                options["clock"] = parse_clock(value)
            except ValueError as exc:
                return bad(str(exc))
        elif key in FLAGS and not value:
            field, val = FLAGS[key]
            options[field] = val
        elif key in VALUED:
            if not value and i + 1 < len(args) and args[i + 1].lstrip("-").isdigit():
                i += 1
                value = args[i]
            try:
                options[key] = int(value)
            except ValueError:
                return bad(f"-{key} needs a whole number, e.g. -{key}=5")
        else:
            return bad(f"unknown option {word!r} (options: {OPTION_LIST})")
        i += 1
    if len(users) not in (1, 2):
        return bad(f"name two players (or only yourself, for an open challenge), not {len(users)}")
    if len(users) == 2 and users[0].casefold() == users[1].casefold():
        return bad("the two players must be different")
    return Command(line, "challenge", {"options": options, "players": users}, accounts=list(users))
