"""The game's objects and the one place where JSON state <-> objects happens."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dfield
from typing import Any

from games.rmpm.board import PARKING, SIZE, Board, Field, field_of, fmt

FORMAT = "rmpm/1"
CARDS = ("SM", "RM", "MT", "DM")
CARD_CODES = {"SM": 14, "RM": 13, "MT": 12, "DM": 11}
CARD_TEXT = {
    "SM": "SM (secret or submarine move) card",
    "RM": "RM (rabbit move) card",
    "MT": "MT (move twice) card",
    "DM": "DM (diagonal move) card",
}


#: AN and PN are kept in 1..NUMBER_LIMIT (IV/02-03)
NUMBER_LIMIT = 100
#: a new player's AN (I/02) and starting capital in WCU (the default of the
#: ``capital`` option)
START_AN = 1
START_CAPITAL = 10000


def wrap(n: int) -> int:
    """Keep AN and PN in 1..100: subtract 100 while over 100."""
    while n > NUMBER_LIMIT:
        n -= NUMBER_LIMIT
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

    @property
    def fields(self) -> list[Field]:
        """The chips of a placed player (the same list object as ``chips``)."""
        if self.chips is None:
            raise ValueError(f"{self.handle} has no chips on the board yet")
        return self.chips

    def to_state(self) -> dict[str, Any]:
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

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Game:
        return cls(state)

    def __init__(self, state: dict[str, Any]):
        self.board = Board.from_state(state["numbers"], state["fences"])
        self.week: int = state["week"]
        self.bank: int = state["bank"]
        self.kiosk: int = state["kiosk"]
        self.start_capital: int = state["start_capital"]
        self.next_number: int = state["next_number"]
        self.owners: dict[Field, str] = {field_of(k): v for k, v in state["owners"].items()}
        self.businesses: dict[Field, str] = {field_of(k): v for k, v in state["businesses"].items()}
        self.orders: dict[str, list[str]] = {h: list(v) for h, v in state["orders"].items()}
        self.last: dict[str, Any] = state.get("last") or {}
        self.players: dict[str, Player] = {}
        self.occ: dict[Field, list[str]] = {}
        for handle, p in state["players"].items():
            pl = Player(
                handle=handle,
                number=p["number"],
                abbr=p["abbr"],
                alias=p["alias"],
                chips=[field_of(c) for c in p["chips"]] if p.get("chips") is not None else None,
                start=[field_of(c) for c in p["start"]] if p.get("start") is not None else None,
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

    def to_state(self) -> dict[str, Any]:
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
        frm = p.fields[i]
        lst = self.occ[frm]
        lst.remove(p.handle)
        if not lst:
            del self.occ[frm]
        p.fields[i] = to
        self.occ.setdefault(to, []).append(p.handle)

    def landing_refusal(self, p: Player, chip: int, f: Field) -> str | None:
        """Why chip ``chip`` of p may not land on f, or None."""
        if f == PARKING:
            return None
        other = p.fields[1 - chip]
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


__all__ = ["CARDS", "CARD_CODES", "CARD_TEXT", "SIZE", "Game", "Player", "wrap"]
