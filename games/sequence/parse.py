"""Reading the Fourth Game's mail lines.  ``parse_line`` never raises."""

from __future__ import annotations

import re

from games.base import Command, Line

PLAY_SYNTAX = "Piece <n>: [+|-]<value>, <multiplier>, e.g. Piece 3: 12, 3 or Piece 6: -6, 0"
SET_SYNTAX = (
    "SET PIECES <handle> followed by ten <value>,<multiplier> pairs, e.g. "
    "SET PIECES alice 4,1 11,2 12,3 5,4 9,5 6,0 6,0 6,0 6,0 6,0"
)
#: the answer to LEAVE: the Fourth Game has none, by design
LEAVE_REFUSAL = (
    "the Fourth Game has no LEAVE: every play is public and stays in the running total, "
    "so a player cannot be taken out of the game; you may simply stop playing (pieces "
    "you do not play cost you nothing, your score stands until the deadline) and send "
    "MAIL NONE to stop the mails about plays"
)
#: words a player may write for leaving; all get LEAVE_REFUSAL
LEAVE_WORDS = ("leave", "quit", "withdraw", "resign", "signoff", "sign-off")

COMMANDS = (
    "JOIN, " + "Piece <n>: [+|-]<value>, <multiplier>, PIECES, "
    "MAIL EACH, MAIL DIGEST, MAIL NONE"
)

# "Piece 3: 12, 3", "Piece Number 3: 12, 3", "piece #6: -6, 0.", "PIECE 3 +12 3"
_PLAY = re.compile(
    r"""^piece\s*
        (?:(?:number|num\.?|no\.?|nr\.?)\s*)?   # "Piece Number 3", "Piece No. 3"
        \#?\s*(?P<piece>\d+)
        (?:\s*[:.]\s*|\s+)                      # ":" or "." or just a space
        (?P<sign>[+-])?\s*(?P<value>\d+)
        (?:\s*[,;]\s*|\s+)                      # "," or ";" or just a space
        (?P<multiplier>\d+)
        \s*\.?$""",
    re.IGNORECASE | re.VERBOSE,
)
_PAIR = re.compile(r"^(\d+)\s*[,/]\s*(\d+)$")
_MAX_NUMBER = 10**6  # larger numbers in a play line are certainly typos


def parse_line(line: Line) -> Command:
    text = " ".join(line.text.split())
    words = text.split(" ")
    keyword = words[0].lower().rstrip(".:!?") if words and words[0] else ""
    rest = words[1:]

    if keyword == "join":
        if rest:
            return Command(
                line, "join",
                error="expected JOIN alone: your pieces come from your e-mail address",
            )
        return Command(line, "join")

    if keyword in LEAVE_WORDS:
        return Command(line, "leave", error=LEAVE_REFUSAL)

    if keyword in ("pieces", "status") and (not rest or rest == ["?"]):
        return Command(line, "pieces")

    if keyword == "mail":
        choice = rest[0].lower().rstrip(".") if len(rest) == 1 else ""
        if choice in ("each", "digest", "none"):
            return Command(line, "mail", {"choice": choice})
        return Command(
            line, "mail",
            error="expected MAIL EACH (a mail per play), MAIL DIGEST (at most one "
            "mail an hour) or MAIL NONE (only the final report)",
        )

    if keyword == "setpieces" or (keyword == "set" and rest and rest[0].lower() == "pieces"):
        args = rest if keyword == "setpieces" else rest[1:]
        return _parse_set_pieces(line, args)

    if text.lower().startswith("piece"):
        match = _PLAY.match(text)
        if not match:
            return Command(line, "play", error=f"cannot read this play: expected {PLAY_SYNTAX}")
        numbers = [int(match[k]) for k in ("piece", "value", "multiplier")]
        if any(n > _MAX_NUMBER for n in numbers):
            return Command(line, "play", error=f"number too large: expected {PLAY_SYNTAX}")
        piece, value, multiplier = numbers
        sign = match["sign"] or "+"
        return Command(
            line, "play",
            {"piece": piece, "sign": sign, "value": value, "multiplier": multiplier},
        )

    shown = words[0][:30] if words and words[0] else ""
    return Command(line, "unknown", error=f"unknown command '{shown}': expected {COMMANDS}")


def _parse_set_pieces(line: Line, args: list[str]) -> Command:
    if not args:
        return Command(line, "setpieces", error=f"expected {SET_SYNTAX}")
    handle, pairs_text = args[0], " ".join(args[1:])
    # accept "4,1 11,2 ..." as well as "4, 1  11, 2 ..." and "4/1 11/2 ..."
    tokens = re.findall(r"\d+\s*[,/]\s*\d+|\S+", pairs_text)
    pieces = []
    for token in tokens:
        match = _PAIR.match(token)
        if not match:
            return Command(line, "setpieces", error=f"cannot read '{token[:20]}': expected {SET_SYNTAX}")
        value, multiplier = int(match[1]), int(match[2])
        if value > _MAX_NUMBER or multiplier > _MAX_NUMBER:
            return Command(line, "setpieces", error=f"number too large in '{token[:20]}'")
        pieces.append([value, multiplier])
    if len(pieces) != 10:
        return Command(
            line, "setpieces",
            error=f"{len(pieces)} pieces given, ten needed: expected {SET_SYNTAX}",
        )
    return Command(line, "setpieces", {"handle": handle, "pieces": pieces})
