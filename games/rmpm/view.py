"""What players see: the ASCII board, the HTML grid and the report data."""

from __future__ import annotations

from typing import Any

from games.rmpm.board import PARKING, SIZE, Field, fmt
from games.rmpm.engine import FIELD_PRICE, UpdateResult
from games.rmpm.model import CARD_CODES, CARD_TEXT, Game

WIDTH = 3 * SIZE + 1


def _chip_label(game: Game, f: Field) -> str:
    hs = game.occupants(f)
    if not hs:
        return "  "
    first = hs[0]
    if all(h == first for h in hs):
        return game.players[first].abbr
    return "**"


def ascii_board(game: Game) -> str:
    """The board in the layout of the original reports: each field shows
    ``$`` if owned and its number, the chip alias below it (``**`` for two
    players); ``+`` between fields and ``++`` under a field are fences."""
    b = game.board
    fences = b.fences
    header = " " + " ".join(f"{c:02d}" for c in range(1, SIZE + 1))
    out = [header, "+" * WIDTH]
    for r in range(1, SIZE + 1):
        nums = ["+"]
        chips = ["+"]
        for c in range(1, SIZE + 1):
            f = (r, c)
            sep = "+" if c == SIZE or (r, c, "r") in fences else "|"
            nums.append(("$" if f in game.owners else " ") + str(b.number(f)) + sep)
            chips.append(_chip_label(game, f) + sep)
        out.append("".join(nums) + f" {r:02d}")
        out.append("".join(chips))
        if r < SIZE:
            line = ["+"]
            for c in range(1, SIZE + 1):
                line.append("++" if (r, c, "d") in fences else "--")
                if c == SIZE:
                    line.append("+")
                else:
                    touch = ((r, c, "r") in fences or (r + 1, c, "r") in fences
                             or (r, c, "d") in fences or (r, c + 1, "d") in fences)
                    line.append("+" if touch else "|")
            out.append("".join(line))
    out.append("+" * WIDTH)
    out.append(header)
    return "\n".join(out)


#: the chip colours of the HTML board (templates/boards.css: .c0 ... .c11),
#: given by player number; a legend under the board names them
COLOURS = 12


def colour_of(number: int) -> int:
    return (number - 1) % COLOURS


def legend(game: Game) -> list[dict[str, Any]]:
    """The players on the board with their chip colours, by number."""
    return [{"number": p.number, "abbr": p.abbr, "alias": p.alias, "colour": colour_of(p.number),
             "handle": p.handle.lower()}
            for p in sorted(game.players.values(), key=lambda q: q.number) if p.placed]


def _cell_chips(game: Game, f: Field) -> list[dict[str, Any]]:
    """One chip per player on a field, in player colour, by number."""
    on = sorted({game.players[h].number: game.players[h] for h in game.occupants(f)}.items())
    return [{"abbr": p.abbr, "colour": colour_of(n), "handle": p.handle.lower()} for n, p in on]


def html_grid(game: Game) -> list[list[dict[str, Any]]]:
    """Rows of cells for the HTML report: number, owner, chips, fences."""
    b = game.board
    rows = []
    for r in range(1, SIZE + 1):
        row = []
        for c in range(1, SIZE + 1):
            f = (r, c)
            owner = game.players.get(game.owners.get(f, ""))
            chip = _chip_label(game, f).strip()
            names = sorted({game.players[h].abbr for h in game.occupants(f)})
            title = fmt(f) + f" number {b.number(f)}"
            if f == PARKING:
                title += ", parking"
            if owner:
                title += f", owned by {owner.abbr}"
            if names:
                title += ", chips: " + " ".join(names)
            row.append({
                "handles": sorted({h.lower() for h in game.occupants(f)}),
                "chips": _cell_chips(game, f),
                "who": " ".join(names),
                "n": b.number(f),
                "own": owner.abbr if owner else "",
                "chip": chip,
                "two": chip == "**",
                "park": f == PARKING,
                "fr": (r, c, "r") in b.fences,
                "fd": (r, c, "d") in b.fences,
                "title": title,
            })
        rows.append(row)
    return rows


def _wrap_fields(fields: list[str], width: int = 70) -> list[str]:
    lines, cur = [], ""
    for f in fields:
        piece = f if not cur else cur + " , " + f
        if len(piece) > width and cur:
            lines.append(cur)
            cur = f
        else:
            cur = piece
    if cur:
        lines.append(cur)
    return lines


def status_data(game: Game) -> dict[str, Any]:
    """Everything of the report that describes the current position."""
    players = sorted(game.players.values(), key=lambda p: p.number)
    owned: dict[str, list[str]] = {}
    for f, h in sorted(game.owners.items()):
        owned.setdefault(h, []).append(fmt(f))
    ownership = []
    for p in players:
        if p.handle in owned:
            ownership.append({"number": p.number, "abbr": p.abbr, "lines": _wrap_fields(owned[p.handle])})
    inventory = []
    for p in players:
        if not p.placed:
            continue
        items = [{"code": CARD_CODES[k], "count": p.cards[k], "text": CARD_TEXT[k]}
                 for k in ("SM", "RM", "MT", "DM") if p.cards.get(k)]
        inventory.append({"number": p.number, "abbr": p.abbr, "alias": p.alias, "wcu": p.capital,
                          "cards": items, "an": p.an, "pn": p.pn,
                          "chips": " ".join(fmt(c) for c in p.fields)})
    businesses = []
    for f, text in sorted(game.businesses.items()):
        owner = game.players.get(game.owners.get(f, ""))
        businesses.append({"field": fmt(f), "owner": owner.number if owner else None,
                           "abbr": owner.abbr if owner else "-", "text": text})
    shared = []
    for r in range(1, SIZE + 1):
        for c in range(1, SIZE + 1):
            here = sorted({game.players[h].abbr for h in game.occupants((r, c))})
            if len(here) > 1:
                shared.append({"field": fmt((r, c)), "who": ", ".join(here)})
    chips_of = {p.handle.lower(): {"abbr": p.abbr, "fields": " ".join(fmt(c) for c in p.fields)}
                for p in players if p.placed}
    champs = game.champions()
    pending = [{"number": p.number, "abbr": p.abbr, "alias": p.alias,
                "start": " ".join(fmt(f) for f in p.start) if p.start else None}
               for p in players if not p.placed]
    return {
        "week": game.week,
        "board": ascii_board(game),
        "grid": html_grid(game),
        "ownership": ownership,
        "inventory": inventory,
        "businesses": businesses,
        "bank": game.bank,
        "kiosk": game.kiosk,
        "champions": [p.alias.upper() for p in champs],
        "champion_abbrs": [p.abbr for p in champs],
        "pending": pending,
        "players": len(game.active()),
        "shared": shared,
        "chips_of": chips_of,
        "legend": legend(game),
    }


def update_data(game: Game, upd: UpdateResult) -> dict[str, Any]:
    """The part of the report that tells what happened at the update; stored
    in the state so ``view`` can show the last report again."""
    rows = []
    happenings = []
    movers = sorted(upd.slots.values(), key=lambda s: s.player.number)
    idle = {p.handle for p in upd.idle}
    for p in sorted([s.player for s in movers] + list(upd.idle), key=lambda q: q.number):
        if p.handle in idle:
            rows.append({"number": p.number, "abbr": p.abbr, "alias": p.alias,
                         "old": " ".join(fmt(c) for c in p.fields), "interm": "",
                         "new": " ".join(fmt(c) for c in p.fields), "mn": "-", "an": p.an, "pn": p.pn})
        else:
            s = upd.slots[p.handle]
            rows.append({"number": p.number, "abbr": p.abbr, "alias": p.alias,
                         "old": " ".join(fmt(c) for c in s.old),
                         "interm": " ".join(fmt(c) for c in s.interm) if s.interm else "",
                         "new": " ".join(fmt(c) for c in s.new or []), "mn": s.mn_text, "an": p.an, "pn": p.pn})
    order = sorted(upd.slots.values(), key=lambda s: s.player.number)
    for s in order:
        lines = []
        for i in sorted(s.notes):
            for n in s.notes[i]:
                # (a BUY that failed is told among the events, after its encounter)
                if (n.startswith("not executed") or "cannot move" in n) and f"BUY {n}" not in s.events:
                    lines.append(n)
        lines.extend(s.events)
        if lines:
            happenings.append({"abbr": s.player.abbr, "number": s.player.number, "lines": lines})
    return {
        "week": upd.week,
        "moves": rows,
        "happenings": happenings,
        "left": [{"number": p.number, "abbr": p.abbr, "alias": p.alias} for p in upd.left],
        "placed": [{"number": p.number, "abbr": p.abbr, "alias": p.alias,
                    "chips": " ".join(fmt(c) for c in p.fields), "pn": p.pn} for p in upd.placed],
        "not_placed": [{"number": p.number, "abbr": p.abbr, "alias": p.alias, "why": why}
                       for p, why in upd.not_placed],
    }


def report_data(game: Game) -> dict[str, Any]:
    data = status_data(game)
    data["last"] = game.last or None
    data["price"] = FIELD_PRICE
    return data


#: up to this many players every report is the whole report; in a larger game
#: each player gets their own part of it (own_reports)
FULL_REPORT_PLAYERS = 50
#: the richest players listed in a player's own report, and lists cut at
TOP_SHOWN = 10


def _cut(items: list[Any], limit: int = TOP_SHOWN) -> tuple[list[Any], int]:
    return items[:limit], max(0, len(items) - limit)


def own_reports(data: dict[str, Any], handles: dict[int, str], game_name: str) -> list[tuple[str, dict[str, Any]]]:
    """(handle, data of templates/rmpm/own_report.txt) for every player on
    the board or waiting for it, in a large game: the board, their own move
    and what happened to them, their fields, businesses and inventory, the
    richest players and their own place.  Bounded whatever the number of
    players; the whole report (``data``) is kept for ``history``.
    ``handles``: player number -> handle."""
    last = data.get("last") or {}
    moves = {m["number"]: m for m in last.get("moves", [])}
    happened = {h["number"]: h["lines"] for h in last.get("happenings", [])}
    owned = {o["number"]: o["lines"] for o in data["ownership"]}
    inventory = {p["number"]: p for p in data["inventory"]}
    rich = sorted(data["inventory"], key=lambda p: (-p["wcu"], p["number"]))
    place = {p["number"]: i + 1 for i, p in enumerate(rich)}
    placed, more_placed = _cut(last.get("placed", []))
    left, more_left = _cut(last.get("left", []))
    common = {k: data[k] for k in ("week", "board", "bank", "kiosk", "champions", "players")}
    common.update(game=game_name, last_week=last.get("week"), placed=placed, more_placed=more_placed, left=left, more_left=more_left,
                  top=rich[:TOP_SHOWN], count=len(rich))
    out = []
    for number, handle in sorted(handles.items()):
        out.append((handle, {
            **common, "viewer": handle, "number": number, "move": moves.get(number),
            "happened": happened.get(number, []), "owned": owned.get(number, []),
            "me": inventory.get(number), "place": place.get(number),
            "businesses": [b for b in data["businesses"] if b["owner"] == number],
            "pending": [p for p in data["pending"] if p["number"] == number],
        }))
    return out
