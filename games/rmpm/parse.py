"""Reading mail lines: JOIN, orders and GM commands.  Syntax only."""

from __future__ import annotations

import re

from games.base import Command, Line
from games.names import strip_bidi
from games.rmpm.board import DIR_NAMES, PARKING, direction, field_of, fmt, on_board_, parse_field
from games.rmpm.model import CARDS

F = r"(\d{1,2}-\d{1,2})"
SIDE = r"(u|r|d|l|up|right|down|left)"
_MOVE = re.compile(rf"^{F}\s*-+>\s*{F}$")
_FENCE = re.compile(rf"^F\s+{F}\s+\[?{SIDE}\]?\s*-+>\s*\[?{SIDE}\]?$", re.IGNORECASE)
_EXCH = re.compile(rf"^E\s+{F}\s*<-+>\s*{F}$", re.IGNORECASE)
_BUY = re.compile(rf"^BUY(?:\s+{F})?$", re.IGNORECASE)
_JOIN = re.compile(rf"^JOIN\s+(\S+)\s+{F}\s+{F}(?:\s+(.*))?$", re.IGNORECASE)
#: arrows of typography and phones, read as ->
_UNICODE_ARROWS = str.maketrans({"\u2192": "->", "\u27f6": "->", "\u2794": "->", "\u279c": "->", "\u21d2": "->"})
#: a move line whose arrow is written some other way (- >, =>, >, ...)
_ODD_ARROW = re.compile(rf"^{F}(?:\s*(?:-\s+>|=+>|>|-+|~+>)\s*|\s+){F}$")

ORDER_NAMES = ("move", "fence", "exchange", "buy", "use_mt", "leave", "cancel")

MOVE_EXAMPLE = "16-04 -> 16-05"
EXPECTED = (
    "expected a move line like 16-04 -> 16-05, F 15-04 u -> l, E 16-03 <-> 16-05, "
    "BUY, BUY 16-09, USE MT, LEAVE, CANCEL, or JOIN <abbr> <field> <field> <alias>"
)
GM_EXPECTED = (
    "expected GM CARD <abbr> <MT|SM|RM|DM> [n], GM KIOSK <amount>, GM BANK <+/-amount>, "
    "GM CAPITAL <abbr> <+/-amount>, GM OWN <field> <abbr|none> or GM BUSINESS <field> <text|none>"
)


def _side(s: str) -> str:
    return s[0].lower()


def _field_or_error(text: str, what: str) -> tuple[tuple[int, int] | None, str | None]:
    f = parse_field(text, on_board=False)
    if f is None:
        return None, f"{what} {text!r} is not a field; write row-column, e.g. 16-04"
    if not on_board_(f):
        return None, f"{what} {text} is off the board (rows and columns run 01 to 25)"
    return f, None


def parse_line(line: Line) -> Command:
    text = " ".join(line.text.translate(_UNICODE_ARROWS).split())
    up = text.upper()

    def err(msg: str, name: str = "error") -> Command:
        return Command(line=line, name=name, error=msg)

    m = _MOVE.match(text)
    if m:
        a, e = _field_or_error(m.group(1), "the chip's field")
        if e:
            return err(e, "move")
        assert a is not None
        b = field_of(m.group(2), on_board=False)
        d = direction(a, b)
        if d is None:
            return err(
                f"ambiguous move {fmt(a)} -> {fmt(b)}: the target must lie straight up, down, "
                f"left or right of the chip, e.g. {MOVE_EXAMPLE}",
                "move",
            )
        return Command(line=line, name="move", args={"from": fmt(a), "to": fmt(b)},
                       text=f"{fmt(a)} -> {fmt(b)}")
    m = _FENCE.match(text)
    if m:
        a, e = _field_or_error(m.group(1), "the fence's chip field")
        if e:
            return err(e, "fence")
        assert a is not None
        s1, s2 = _side(m.group(2)), _side(m.group(3))
        if s1 == s2:
            return err(f"the fence would stay on the {DIR_NAMES[s1]} side; give two different sides, "
                       "e.g. F 15-04 u -> l", "fence")
        return Command(line=line, name="fence", args={"at": fmt(a), "frm": s1, "to": s2},
                       text=f"F {fmt(a)} {s1} -> {s2}")
    if up.startswith("F ") and "->" in text:
        return err("expected F <field of your chip> <u|r|d|l> -> <u|r|d|l>, e.g. F 15-04 u -> l", "fence")
    m = _EXCH.match(text)
    if m:
        a, e = _field_or_error(m.group(1), "field")
        if e:
            return err(e, "exchange")
        assert a is not None
        b_, e = _field_or_error(m.group(2), "field")
        if e:
            return err(e, "exchange")
        assert b_ is not None
        b = b_
        d = direction(a, b)
        if d is None or d[1] != 2:
            return err(f"{fmt(a)} and {fmt(b)} are not the two opposite neighbours of one field; "
                       "e.g. E 16-03 <-> 16-05 (around a chip on 16-04)", "exchange")
        return Command(line=line, name="exchange", args={"a": fmt(a), "b": fmt(b)},
                       text=f"E {fmt(a)} <-> {fmt(b)}")
    if up.startswith("E ") and "<" in text:
        return err("expected E <field> <-> <field>, e.g. E 16-03 <-> 16-05", "exchange")
    m = _BUY.match(text)
    if m:
        if m.group(1):
            f, e = _field_or_error(m.group(1), "field")
            if e:
                return err(e, "buy")
            assert f is not None
            if f == PARKING:
                return err("the parking 13-13 cannot be bought", "buy")
            return Command(line=line, name="buy", args={"field": fmt(f)}, text=f"BUY {fmt(f)}")
        return Command(line=line, name="buy", args={"field": None}, text="BUY")
    if up.startswith("BUY"):
        return err("expected BUY or BUY <field>, e.g. BUY 16-09", "buy")
    if up in ("USE MT", "USE MT CARD"):
        return Command(line=line, name="use_mt", text="USE MT")
    if up.startswith("USE"):
        return err("expected USE MT (only the MT card can be played by mail)", "use_mt")
    if up == "LEAVE":
        return Command(line=line, name="leave", text="LEAVE")
    if up == "CANCEL":
        return Command(line=line, name="cancel", text="CANCEL")
    if up.startswith("JOIN"):
        return _parse_join(line, text)
    if up.startswith("GM"):
        return _parse_gm(line, text)
    if _ODD_ARROW.match(text):
        return err(f"write the arrow as ->, e.g. {MOVE_EXAMPLE}", "move")
    word = text.split()[0] if text else ""
    return err(f"unknown command {word!r}; {EXPECTED}")


def _parse_join(line: Line, text: str) -> Command:
    usage = "expected JOIN <abbr> <edge field> <edge field> <alias>, e.g. JOIN bd 01-05 25-10 blue dragon"
    m = _JOIN.match(text)
    if not m:
        return Command(line=line, name="join", error=usage)
    abbr = m.group(1)
    if len(abbr) != 2 or not abbr.isalnum():
        return Command(line=line, name="join",
                       error=f"the abbreviation must be exactly 2 letters or digits, got {abbr!r}; {usage}")
    fields = []
    for g in (2, 3):
        f, e = _field_or_error(m.group(g), "start field")
        if e:
            return Command(line=line, name="join", error=e)
        assert f is not None
        if not (f[0] in (1, 25) or f[1] in (1, 25)):
            return Command(line=line, name="join",
                           error=f"start field {fmt(f)} is not on the edge: chips enter on row 01 or 25 "
                                 "or column 01 or 25")
        fields.append(f)
    if fields[0] == fields[1]:
        return Command(line=line, name="join", error=f"your two chips need two different start fields; {usage}")
    # a right-to-left override would turn the alias around in every report
    alias = " ".join(strip_bidi(m.group(4) or "").split())
    if not alias:
        return Command(line=line, name="join", error=f"the alias is missing; {usage}")
    if len(alias) > 30:
        return Command(line=line, name="join", error="the alias may be at most 30 characters long")
    return Command(line=line, name="join",
                   args={"abbr": abbr.lower(), "fields": [fmt(f) for f in fields], "alias": alias},
                   text=f"JOIN {abbr.lower()} {fmt(fields[0])} {fmt(fields[1])} {alias}")


def _amount(s: str, signed: bool) -> int | None:
    if signed and re.fullmatch(r"[+-]?\d{1,9}", s):
        return int(s)
    if not signed and re.fullmatch(r"\d{1,9}", s):
        return int(s)
    return None


def _parse_gm(line: Line, text: str) -> Command:
    parts = text.split()
    if len(parts) < 2:
        return Command(line=line, name="gm", error=GM_EXPECTED)
    sub = parts[1].upper()
    args = parts[2:]

    def bad(usage: str) -> Command:
        return Command(line=line, name="gm_" + sub.lower(), error=f"expected {usage}")

    if sub == "CARD":
        usage = "GM CARD <abbr> <MT|SM|RM|DM> [n], e.g. GM CARD bd MT 2 (n may be negative)"
        if len(args) not in (2, 3) or args[1].upper() not in CARDS:
            return bad(usage)
        n = _amount(args[2], True) if len(args) == 3 else 1
        if n is None or n == 0:
            return bad(usage)
        return Command(line=line, name="gm_card", args={"abbr": args[0].lower(), "card": args[1].upper(), "n": n})
    if sub == "KIOSK":
        usage = "GM KIOSK <amount>, e.g. GM KIOSK 3000"
        n = _amount(args[0], False) if len(args) == 1 else None
        if not n:
            return bad(usage)
        return Command(line=line, name="gm_kiosk", args={"amount": n})
    if sub == "BANK":
        usage = "GM BANK <+/-amount>, e.g. GM BANK +5000"
        n = _amount(args[0], True) if len(args) == 1 else None
        if not n:
            return bad(usage)
        return Command(line=line, name="gm_bank", args={"amount": n})
    if sub == "CAPITAL":
        usage = "GM CAPITAL <abbr> <+/-amount>, e.g. GM CAPITAL bd -500"
        n = _amount(args[1], True) if len(args) == 2 else None
        if not n:
            return bad(usage)
        return Command(line=line, name="gm_capital", args={"abbr": args[0].lower(), "amount": n})
    if sub == "OWN":
        usage = "GM OWN <field> <abbr|none>, e.g. GM OWN 16-09 bd"
        if len(args) != 2:
            return bad(usage)
        f = parse_field(args[0])
        if f is None:
            return bad(usage)
        if f == PARKING:
            return Command(line=line, name="gm_own", error="the parking 13-13 cannot be owned")
        who = args[1].lower()
        return Command(line=line, name="gm_own", args={"field": fmt(f), "abbr": None if who == "none" else who})
    if sub == "BUSINESS":
        usage = "GM BUSINESS <field> <text|none>, e.g. GM BUSINESS 14-11 Fence Vaulting Poles"
        if len(args) < 2:
            return bad(usage)
        f = parse_field(args[0])
        if f is None:
            return bad(usage)
        btext = " ".join(args[1:])
        return Command(line=line, name="gm_business",
                       args={"field": fmt(f), "text": None if btext.lower() == "none" else btext[:200]})
    return Command(line=line, name="gm", error=f"unknown GM command {parts[1]!r}; {GM_EXPECTED}")
