"""Giveaway's mail syntax: JOIN, LEAVE and GIVE <n> TO <handle>."""

from __future__ import annotations

import re

from games.base import Command, Line

GIVE_SYNTAX = "expected GIVE <n> TO <handle>, e.g. GIVE 2 TO alice"
COMMANDS = "GIVE <n> TO <handle>, JOIN or LEAVE"
_GIVE = re.compile(r"^give\s+(?P<n>\S+)\s+(?:points?\s+)?to\s+(?P<to>\S+)\s*$", re.IGNORECASE)
_INT = re.compile(r"^[+-]?\d+$")
_NUMBERISH = re.compile(r"^[+-]?\d*[.,/]\d*$")
MAX_GIFT = 10**9


def parse_line(line: Line) -> Command:
    text = line.text.strip()
    words = text.split()
    if not words:
        return Command(line, "?", error=f"empty line: expected {COMMANDS}")
    word = words[0].lower()
    if word == "give":
        return parse_give(line, text)
    if word in ("join", "leave"):
        if len(words) > 1:
            return Command(line, word, error=f"{word.upper()} takes nothing after it: write just {word.upper()}")
        return Command(line, word)
    shown = words[0] if len(words[0]) <= 30 else words[0][:30] + "..."
    return Command(line, "?", error=f"unknown command {shown!r}: expected {COMMANDS}")


def _shown(word: str) -> str:
    return repr(word if len(word) <= 30 else word[:30] + "...")


def give_mistake(words: list[str]) -> str:
    """What is wrong with a GIVE line the pattern did not match, naming the
    word at fault."""
    rest = words[1:]
    if rest and rest[0].lower() in ("to", "point", "points"):
        return f"the number of points is missing before {_shown(rest[0])}"
    if len(rest) >= 2 and rest[1].lower() in ("point", "points"):
        rest = [rest[0]] + rest[2:]
    if len(rest) < 2:
        return "TO and the handle of the receiver are missing" if rest else "the points and the receiver are missing"
    if rest[1].lower() != "to":
        if len(rest) == 2:
            return f"TO is missing before {_shown(rest[1])}"
        return f"{_shown(rest[1])} where TO belongs"
    if len(rest) < 3:
        return "the handle of the receiver is missing after TO"
    return f"{_shown(' '.join(rest[3:]))} after the handle: one gift per line, nothing after it"


def parse_give(line: Line, text: str) -> Command:
    m = _GIVE.match(text)
    if not m:
        return Command(line, "give", error=f"{give_mistake(text.split())}; {GIVE_SYNTAX}")
    n_text, to = m.group("n"), m.group("to").rstrip(".,;:!")
    if not to:
        return Command(line, "give", error=GIVE_SYNTAX)
    if not _INT.match(n_text):
        if _NUMBERISH.match(n_text):
            return Command(line, "give", error=f"whole points only (rule 3): {n_text!r} is not a whole number; {GIVE_SYNTAX}")
        return Command(line, "give", error=f"{n_text!r} is not a number of points; {GIVE_SYNTAX}")
    n = int(n_text)
    if n < 0:
        return Command(line, "give", error="you cannot give negative points (rule 3): give 1 or more")
    if n == 0:
        return Command(line, "give", error="a gift is at least 1 point: leave out gifts of 0")
    if n > MAX_GIFT:
        return Command(line, "give", error=f"{n} points is far more than anybody holds")
    return Command(line, "give", args={"amount": n, "to": to})
