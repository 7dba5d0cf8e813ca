"""The game's objects and the one place where JSON state <-> objects happens."""

from __future__ import annotations

from dataclasses import dataclass, field as dfield

from games.rmpm.board import PARKING, SIZE, Board, Field, fmt, is_edge, parse_field

FORMAT = "rmpm/1"
CARDS = ("SM", "RM", "MT", "DM")
CARD_CODES = {"SM": 14, "RM": 13, "MT": 12, "DM": 11}
CARD_TEXT = {
    "SM": "SM (secret or submarine move) card",
    "RM": "RM (rabbit move) card",
    "MT": "MT (move twice) card",
    "DM": "DM (diagonal move) card",
}


def wrap(n: int) -> int:
    """Keep AN and PN in 1..100: subtract 100 while over 100."""
    while n > 100:
        n -= 100
    return n


@dataclass
class Player:
    handle: str
    number: int
    abbr: str
    alias: str
    chips: list[Field] | None  # None while the join is pending
    start: list[Field] | None = None  # the requested start fields of a pending join
    an: int = 1
    pn: int = 0
    capital: int = 0
    cards: dict[str, int] = dfield(default_factory=dict)

    @property
    def placed(self) -> bool:
        return self.chips is not None

    def to_state(self) -> dict:
        return {
            "number": self.number,
            "abbr": self.abbr,
            "alias": self.alias,
            "chips": [fmt(c) for c in self.chips] if self.chips is not None else None,
            "start": [fmt(c) for c in self.start] if self.start is not None else None,
            "an": self.an,
            "pn": self.pn,
            "capital": self.capital,
            "cards": {k: v for k, v in sorted(self.cards.items()) if v},
        }


class Game:
    """Board, players, Bank and Kiosk, with an occupancy index
    (field -> handles of the chips on it, one entry per chip)."""

    def __init__(self, state: dict):
        self.board = Board.from_state(state["numbers"], state["fences"])
        self.week: int = state["week"]
        self.bank: int = state["bank"]
        self.kiosk: int = state["kiosk"]
        self.start_capital: int = state["start_capital"]
        self.next_number: int = state["next_number"]
        self.owners: dict[Field, str] = {parse_field(k): v for k, v in state["owners"].items()}
        self.businesses: dict[Field, str] = {parse_field(k): v for k, v in state["businesses"].items()}
        self.orders: dict[str, list[str]] = {h: list(v) for h, v in state["orders"].items()}
        self.last: dict = state.get("last") or {}
        self.players: dict[str, Player] = {}
        self.occ: dict[Field, list[str]] = {}
        for handle, p in state["players"].items():
            pl = Player(
                handle=handle,
                number=p["number"],
                abbr=p["abbr"],
                alias=p["alias"],
                chips=[parse_field(c) for c in p["chips"]] if p.get("chips") is not None else None,
                start=[parse_field(c) for c in p["start"]] if p.get("start") is not None else None,
                an=p["an"],
                pn=p["pn"],
                capital=p["capital"],
                cards={k: int(v) for k, v in (p.get("cards") or {}).items()},
            )
            self.players[handle] = pl
            if pl.chips:
                for c in pl.chips:
                    self.occ.setdefault(c, []).append(handle)
        self._active: list[Player] | None = None
        self.by_abbr = {p.abbr: p for p in self.players.values()}
        self.by_number = {p.number: p for p in self.players.values()}

    def to_state(self) -> dict:
        st = {
            "format": FORMAT,
            "week": self.week,
            "bank": self.bank,
            "kiosk": self.kiosk,
            "start_capital": self.start_capital,
            "next_number": self.next_number,
            "owners": {fmt(f): h for f, h in sorted(self.owners.items())},
            "businesses": {fmt(f): t for f, t in sorted(self.businesses.items())},
            "players": {h: p.to_state() for h, p in self.players.items()},
            "orders": {h: list(v) for h, v in self.orders.items()},
            "last": self.last,  # built fresh by each update, never shared
        }
        st.update(self.board.to_state())
        return st

    # -- players ------------------------------------------------------------
    def active(self) -> list[Player]:
        """Players on the board, in join order (cached; chips only ever go
        from None to placed through :meth:`placed_now`)."""
        if self._active is None:
            self._active = [p for p in self.players.values() if p.placed]
        return self._active

    def placed_now(self) -> None:
        self._active = None

    def pending(self) -> list[Player]:
        return [p for p in self.players.values() if not p.placed]

    def find_abbr(self, abbr: str) -> Player | None:
        return self.by_abbr.get(abbr.lower())

    def play_order(self) -> list[Player]:
        """PN descending, ties: the player who joined earlier first."""
        return sorted(self.active(), key=lambda p: (-p.pn, p.number))

    def add_player(self, p: Player) -> None:
        self._active = None
        self.players[p.handle] = p
        self.by_abbr[p.abbr] = p
        self.by_number[p.number] = p

    def remove_player(self, handle: str) -> Player:
        p = self.players.pop(handle)
        self._active = None
        self.by_abbr.pop(p.abbr, None)
        self.by_number.pop(p.number, None)
        if p.chips:
            for c in p.chips:
                self.occ[c].remove(handle)
        for f in [f for f, h in self.owners.items() if h == handle]:
            del self.owners[f]
            self.businesses.pop(f, None)
        self.orders.pop(handle, None)
        return p

    # -- chips --------------------------------------------------------------
    def occupants(self, f: Field) -> list[str]:
        return self.occ.get(f, [])

    def others_on(self, f: Field, handle: str) -> list[str]:
        """Distinct other players with a chip on f, earliest arrival first."""
        seen: list[str] = []
        for h in self.occ.get(f, ()):
            if h != handle and h not in seen:
                seen.append(h)
        return seen

    def place_chip(self, handle: str, f: Field) -> None:
        self.occ.setdefault(f, []).append(handle)

    def move_chip(self, p: Player, i: int, to: Field) -> None:
        frm = p.chips[i]
        lst = self.occ[frm]
        lst.remove(p.handle)
        if not lst:
            del self.occ[frm]
        p.chips[i] = to
        self.occ.setdefault(to, []).append(p.handle)

    def landing_refusal(self, p: Player, chip: int, f: Field) -> str | None:
        """Why chip ``chip`` of p may not land on f, or None."""
        if f == PARKING:
            return None
        other = p.chips[1 - chip]
        if other == f:
            return f"{fmt(f)} holds your other chip"
        if len(self.others_on(f, p.handle)) >= 2:
            return f"{fmt(f)} already holds chips of two players"
        return None

    def champions(self) -> list[Player]:
        act = self.active()
        if not act:
            return []
        best = max(p.capital for p in act)
        return [p for p in act if p.capital == best]


def new_state(board: Board, start_capital: int, bank: int, kiosk: int) -> dict:
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


def _int(v, what: str, minimum: int | None = None) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{what}: expected a whole number, got {v!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{what}: must be at least {minimum}, got {v}")
    return v


def validate_state(data: dict) -> dict:
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
    out = {}
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
            cf = [parse_field(c) if isinstance(c, str) else None for c in chips]
            if None in cf:
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
            sf = [parse_field(c) if isinstance(c, str) else None for c in start]
            if None in sf or sf[0] == sf[1] or not all(is_edge(f) for f in sf):
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


def _in_range(v, what: str) -> int:
    v = _int(v, what, 1)
    if v > 100:
        raise ValueError(f"{what}: must be in 1..100")
    return v


__all__ = ["Game", "Player", "new_state", "validate_state", "wrap", "CARDS", "CARD_CODES", "CARD_TEXT", "SIZE"]
