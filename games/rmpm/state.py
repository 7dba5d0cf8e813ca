"""RMPM's state: a new game's document, the check of an imported one, and
loading/saving :class:`~games.rmpm.model.Game` (whose constructor and
``to_state`` hold the field mapping)."""

from __future__ import annotations

from typing import Any

from games.base import GameError, State
from games.rmpm.board import PARKING, Board, Field, fmt, is_edge, parse_field
from games.rmpm.model import CARDS, FORMAT, Game


def load(state: State, turn: int = 0) -> Game:
    """The game, its week number following the server's turn counter when
    the server gives one (so mails and reports agree on the week)."""
    game = Game.from_state(state)
    if turn > 0:
        game.week = turn
    return game


def dump(game: Game) -> State:
    return game.to_state()


def validated(data: dict[str, Any]) -> State:
    """A clean state from an imported document; GameError naming the first problem."""
    try:
        return validate_state(data)
    except ValueError as exc:
        raise GameError(f"invalid rmpm game file: {exc}") from None


def new_state(board: Board, start_capital: int, bank: int, kiosk: int) -> dict[str, Any]:
    st = {
        "format": FORMAT,
        "week": 1,
        "bank": bank,
        "kiosk": kiosk,
        "start_capital": start_capital,
        "next_number": 1,
        "owners": {},
        "businesses": {},
        "players": {},
        "orders": {},
        "last": {},
    }
    st.update(board.to_state())
    return st


def _int(v: object, what: str, minimum: int | None = None) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{what}: expected a whole number, got {v!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{what}: must be at least {minimum}, got {v}")
    return v


def validate_state(data: dict[str, Any]) -> dict[str, Any]:
    """Check an imported document (see docs/games/rmpm.md) and return a clean
    state; ValueError names the first problem found."""
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    if data.get("format", FORMAT) != FORMAT:
        raise ValueError(f"format: expected {FORMAT!r}, got {data.get('format')!r}")
    default = Board.default().to_state()
    numbers = data.get("numbers", default["numbers"])
    fences = data.get("fences", default["fences"])
    board = Board.from_state(numbers, fences)
    st = new_state(
        board,
        _int(data.get("start_capital", 10000), "start_capital", 0),
        _int(data.get("bank", 0), "bank"),
        _int(data.get("kiosk", 0), "kiosk", 0),
    )
    st["week"] = _int(data.get("week", 1), "week", 1)
    players = data.get("players", {})
    if isinstance(players, list):  # a list of objects with "handle"
        pl = {}
        for i, p in enumerate(players):
            if not isinstance(p, dict) or not isinstance(p.get("handle"), str):
                raise ValueError(f"players[{i}]: expected an object with a \"handle\"")
            pl[p["handle"]] = p
        players = pl
    if not isinstance(players, dict):
        raise ValueError("players: expected an object handle -> player")
    abbrs: set[str] = set()
    numbers_seen: set[int] = set()
    occupancy: dict[Field, set[str]] = {}
    out: dict[str, dict[str, Any]] = {}
    next_number = 1
    for handle, p in players.items():
        where = f"players.{handle}"
        if not isinstance(p, dict):
            raise ValueError(f"{where}: expected an object")
        abbr = p.get("abbr")
        if not isinstance(abbr, str) or len(abbr) != 2 or not abbr.isalnum():
            raise ValueError(f"{where}.abbr: expected 2 letters or digits, got {abbr!r}")
        abbr = abbr.lower()
        if abbr in abbrs:
            raise ValueError(f"{where}.abbr: {abbr!r} is used twice")
        abbrs.add(abbr)
        number = _int(p.get("number", next_number), f"{where}.number", 1)
        if number in numbers_seen:
            raise ValueError(f"{where}.number: {number} is used twice")
        numbers_seen.add(number)
        next_number = max(next_number, number + 1)
        alias = p.get("alias", abbr)
        if not isinstance(alias, str) or not alias.strip():
            raise ValueError(f"{where}.alias: expected a name")
        chips = p.get("chips")
        start = p.get("start")
        if chips is not None:
            if not isinstance(chips, list) or len(chips) != 2:
                raise ValueError(f"{where}.chips: expected two fields like [\"08-13\", \"13-09\"] or null")
            maybe = [parse_field(c) if isinstance(c, str) else None for c in chips]
            cf = [c for c in maybe if c is not None]
            if len(cf) != 2:
                raise ValueError(f"{where}.chips: {chips!r} are not two fields RR-CC on the board")
            if cf[0] == cf[1] and cf[0] != PARKING:
                raise ValueError(f"{where}.chips: both chips on {fmt(cf[0])} (only the parking 13-13 allows that)")
            for c in cf:
                occupancy.setdefault(c, set()).add(handle)
                if c != PARKING and len(occupancy[c]) > 2:
                    raise ValueError(f"{where}.chips: {fmt(c)} would hold chips of more than two players")
            chips = [fmt(c) for c in cf]
            start = None
        elif start is not None:
            if not isinstance(start, list) or len(start) != 2:
                raise ValueError(f"{where}.start: expected two edge fields or null")
            sf = [f for f in (parse_field(c) if isinstance(c, str) else None for c in start) if f is not None]
            if len(sf) != 2 or sf[0] == sf[1] or not all(is_edge(f) for f in sf):
                raise ValueError(f"{where}.start: expected two different edge fields, got {start!r}")
            start = [fmt(c) for c in sf]
        cards = p.get("cards", {})
        if not isinstance(cards, dict) or any(k not in CARDS for k in cards):
            raise ValueError(f"{where}.cards: expected an object with keys among {', '.join(CARDS)}")
        out[handle] = {
            "number": number,
            "abbr": abbr,
            "alias": alias.strip(),
            "chips": chips,
            "start": start,
            "an": _in_range(p.get("an", 1), f"{where}.an"),
            "pn": _int(p.get("pn", 0), f"{where}.pn", 0),
            "capital": _int(p.get("capital", st["start_capital"]), f"{where}.capital", 0),
            "cards": {k: _int(v, f"{where}.cards.{k}", 0) for k, v in cards.items()},
        }
        if out[handle]["pn"] > 100:
            raise ValueError(f"{where}.pn: must be in 0..100")
    st["players"] = out
    st["next_number"] = max(_int(data.get("next_number", next_number), "next_number", 1), next_number)
    for key in ("owners", "businesses"):
        src = data.get(key, {})
        if not isinstance(src, dict):
            raise ValueError(f"{key}: expected an object \"RR-CC\" -> value")
        for k, v in src.items():
            f = parse_field(k)
            if f is None:
                raise ValueError(f"{key}: {k!r} is not a field RR-CC on the board")
            if f == PARKING and key == "owners":
                raise ValueError("owners: the parking 13-13 cannot be owned")
            if key == "owners" and v not in out:
                raise ValueError(f"owners.{k}: {v!r} is not a player of this game")
            if not isinstance(v, str):
                raise ValueError(f"{key}.{k}: expected a string")
            st[key][fmt(f)] = v
    orders = data.get("orders", {})
    if not isinstance(orders, dict):
        raise ValueError("orders: expected an object handle -> list of order lines")
    for h, lines in orders.items():
        if h not in out:
            raise ValueError(f"orders.{h}: not a player of this game")
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            raise ValueError(f"orders.{h}: expected a list of order lines")
        st["orders"][h] = list(lines)
    last = data.get("last", {})
    st["last"] = last if isinstance(last, dict) else {}
    return st


def _in_range(v: object, what: str) -> int:
    v = _int(v, what, 1)
    if v > 100:
        raise ValueError(f"{what}: must be in 1..100")
    return v


__all__ = ["dump", "load", "new_state", "validate_state", "validated"]
