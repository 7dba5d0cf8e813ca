"""Tally's mail syntax: JOIN, ADD <1-9>, SECRET <word>."""

from __future__ import annotations

from games.base import Command, Line

COMMANDS = "JOIN, ADD <1-9> or SECRET <word>"


def parse_line(line: Line) -> Command:
    words = line.text.split()
    name = words[0].lower() if words else ""
    if name == "join" and len(words) == 1:
        return Command(line, "join")
    if name == "add" and len(words) == 2 and words[1] in set("123456789"):
        return Command(line, "add", {"n": int(words[1])})
    if name == "secret" and len(words) == 2:
        return Command(line, "secret", {"word": words[1]})
    return Command(line, "error", error=f"expected {COMMANDS}")
