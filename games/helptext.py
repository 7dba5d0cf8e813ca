"""Formatting for the games' rule books (``help KIND``).

Each game's ``help.py`` builds its text from the engine's own tables with
these helpers, so every rule book looks alike: prose wrapped at
:data:`WIDTH` columns, tables and command lists indented, and no line over
:data:`MAX_LINE` columns (a mail client shows 78 without folding).  Pure
functions, no I/O.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from games.base import Option

#: prose is wrapped at this column
WIDTH = 72
#: no line of a rule book is longer than this, tables included
MAX_LINE = 78

#: how a game's commands are sent, the same words in every rule book
HOW_TO_SEND = ("Mail them to the game's address with your password between double dollar signs "
               "anywhere in the mail ($$password$$).")


def para(text: str, indent: str = "", width: int = WIDTH) -> str:
    """One paragraph of prose, wrapped; ``indent`` starts every line."""
    return textwrap.fill(" ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def bullet(text: str, mark: str = "- ", indent: str = "  ") -> str:
    """A list item: ``mark`` on the first line, continuation lines aligned after it."""
    return textwrap.fill(" ".join(text.split()), width=WIDTH, initial_indent=indent + mark,
                         subsequent_indent=indent + " " * len(mark), break_long_words=False,
                         break_on_hyphens=False)


def heading(title: str) -> str:
    """A heading, underlined with dashes."""
    return f"{title}\n{'-' * len(title)}"


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None, indent: str = "  ",
          gap: str = "  ") -> str:
    """Rows of columns, left-aligned; the last column wraps so no line passes
    :data:`MAX_LINE` (its continuation lines start under it)."""
    body = [list(map(str, r)) for r in rows]
    if header is not None:
        body.insert(0, list(header))
    cols = max(len(r) for r in body)
    body = [r + [""] * (cols - len(r)) for r in body]
    widths = [max(len(r[i]) for r in body) for i in range(cols - 1)]
    lead = len(indent) + sum(w + len(gap) for w in widths)
    room = max(MAX_LINE - lead, 20)
    out = []
    for n, r in enumerate(body):
        left = indent + "".join(cell.ljust(w) + gap for cell, w in zip(r, widths, strict=False))
        last = textwrap.wrap(r[-1], width=room, break_long_words=False, break_on_hyphens=False) or [""]
        out.append((left + last[0]).rstrip())
        out.extend((" " * lead + more).rstrip() for more in last[1:])
        if header is not None and n == 0:
            out.append((indent + gap.join("-" * w for w in [*widths, max(len(x) for x in last)])).rstrip())
    return "\n".join(out)


def commands(rows: Sequence[tuple[str, str]], indent: str = "  ", column: int = 26) -> str:
    """A command list: the syntax, then what it does; a syntax too long for
    its column puts the explanation on the next line."""
    out = []
    lead = " " * (len(indent) + column)
    for syntax, text in rows:
        if not text:
            out.append(textwrap.fill(syntax, width=MAX_LINE, initial_indent=indent,
                                     subsequent_indent=indent + "    ", break_long_words=False,
                                     break_on_hyphens=False))
            continue
        words = textwrap.wrap(text, width=MAX_LINE - len(lead) - 2, break_long_words=False,
                              break_on_hyphens=False) or [""]
        if len(syntax) < column - 1:
            out.append((indent + syntax.ljust(column) + words[0]).rstrip())
        else:
            out.append(indent + syntax)
            out.append((lead + words[0]).rstrip())
        out.extend(lead + w for w in words[1:])
    return "\n".join(out)


def document(*blocks: str) -> str:
    """Blocks joined by blank lines, ending in a newline."""
    return "\n\n".join(b.strip("\n") for b in blocks if b.strip()) + "\n"


def long_lines(text: str, limit: int = MAX_LINE) -> list[str]:
    """The lines of ``text`` longer than ``limit`` (the rule books have none)."""
    return [line for line in text.splitlines() if len(line) > limit]


def options(opts: Sequence[Option], intro: str = "") -> str:
    """The game's options (set by the game master when the game is made),
    each with its default, from the Rules' own ``options``."""
    rows = []
    for o in opts:
        default = o.default
        shown = "none" if default is None or default == "" else str(default).lower() if isinstance(default, bool) \
            else str(default)
        rows.append((f"{o.name} (default {shown})", o.help))
    text = intro or ("Options the game master may set when the game is made (ask the GM which "
                     "ones this game uses):")
    return para(text) + "\n" + commands(rows, column=30)
