"""The game's objects and the one place where JSON state <-> objects happens.

A :class:`Game` is the whole state decoded (turns, joins, the GM's
commands).  A :class:`Sketch` is the same position drawn from a stored state
for one order mail's pre-analysis, without decoding it: its players are made
when first looked at, and what needs all of them (who stands where, the play
order, the capitals) comes from an :class:`Index` kept in the server's memo
between mails.  Both are a :class:`Position`, which is what one player's slot
(games/rmpm/engine.py ``run_slot``) works on.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from dataclasses import field as dfield
from itertools import accumulate
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


def player_of(handle: str, p: dict[str, Any]) -> Player:
    """The player stored as ``p`` (a new object: nothing is shared with ``p``)."""
    return Player(
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


class Position:
    """What one player's slot works on (engine.run_slot): the board, the
    Bank, the kiosk, the owned fields, and the players and their chips
    through the methods below.  :class:`Game` holds all of it decoded,
    :class:`Sketch` draws it from a stored state as it is needed."""

    board: Board
    week: int
    bank: int
    kiosk: int
    owners: dict[Field, str]

    def find(self, handle: str) -> Player | None:
        """The player ``handle`` (as registered), None if there is none."""
        raise NotImplementedError

    def held(self, handle: str) -> list[str] | None:
        """The order lines held for ``handle`` this week (do not change them)."""
        raise NotImplementedError

    def occupants(self, f: Field) -> list[str]:
        """Handles of the chips on f, one entry per chip, earliest arrival
        first (the caller does not change the list)."""
        raise NotImplementedError

    def move_chip(self, p: Player, i: int, to: Field) -> None:
        raise NotImplementedError

    def share_out(self, v: Player, percent: int) -> tuple[int, int]:
        """``v`` gives ``percent`` % of its capital to the other players on
        the board, in equal whole shares (what does not divide stays with
        ``v``).  Returns (the share, how many players got it)."""
        raise NotImplementedError

    def collect(self, a: Player, amount: int) -> tuple[int, int]:
        """Every other player on the board pays ``a`` up to ``amount``.
        Returns (how many players paid, the total)."""
        raise NotImplementedError

    def ahead_of(self, p: Player, limit: int) -> tuple[int, list[Player]]:
        """How many players on the board move before ``p`` this week (higher
        PN, or the same PN and joined earlier), and the first ``limit`` of
        them in play order."""
        raise NotImplementedError

    def sketch(self) -> Position:
        """A copy of the position to try orders on (the pre-analysis)."""
        raise NotImplementedError

    def others_on(self, f: Field, handle: str) -> list[str]:
        """Distinct other players with a chip on f, earliest arrival first."""
        seen: list[str] = []
        for h in self.occupants(f):
            if h != handle and h not in seen:
                seen.append(h)
        return seen

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


class Game(Position):
    """Board, players, Bank and Kiosk, with an occupancy index
    (field -> handles of the chips on it, one entry per chip)."""

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Game:
        return cls(state)

    def __init__(self, state: dict[str, Any]):
        self.board = Board.from_state(state["numbers"], state["fences"])
        self.week = state["week"]
        self.bank = state["bank"]
        self.kiosk = state["kiosk"]
        self.start_capital: int = state["start_capital"]
        self.next_number: int = state["next_number"]
        self.owners = {field_of(k): v for k, v in state["owners"].items()}
        self.businesses: dict[Field, str] = {field_of(k): v for k, v in state["businesses"].items()}
        self.orders: dict[str, list[str]] = {h: list(v) for h, v in state["orders"].items()}
        self.last: dict[str, Any] = state.get("last") or {}
        self.players: dict[str, Player] = {}
        self.occ: dict[Field, list[str]] = {}
        for handle, p in state["players"].items():
            pl = player_of(handle, p)
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

    def sketch(self) -> Game:
        return Game(self.to_state())

    # -- players ------------------------------------------------------------
    def find(self, handle: str) -> Player | None:
        return self.players.get(handle)

    def held(self, handle: str) -> list[str] | None:
        return self.orders.get(handle)

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

    def ahead_of(self, p: Player, limit: int) -> tuple[int, list[Player]]:
        before = [q for q in self.play_order() if (-q.pn, q.number) < (-p.pn, p.number)]
        return len(before), before[:limit]

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

    # -- money --------------------------------------------------------------
    def share_out(self, v: Player, percent: int) -> tuple[int, int]:
        others = [p for p in self.active() if p is not v]
        share = v.capital * percent // 100 // len(others) if others else 0
        for o in others:
            o.capital += share
        v.capital -= share * len(others)
        return share, len(others)

    def collect(self, a: Player, amount: int) -> tuple[int, int]:
        total = n = 0
        for o in self.active():
            if o is a:
                continue
            x = min(amount, o.capital)
            o.capital -= x
            total += x
            n += 1
        a.capital += total
        return n, total

    # -- chips --------------------------------------------------------------
    def occupants(self, f: Field) -> list[str]:
        return self.occ.get(f, [])

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

    def champions(self) -> list[Player]:
        act = self.active()
        if not act:
            return []
        best = max(p.capital for p in act)
        return [p for p in act if p.capital == best]


class Index:
    """What a stored players mapping says about all its players at once:
    who stands where, the play order, the capitals.  Made once per mapping
    and kept in the server's memo (``Context.memo``): an order mail does not
    change the players, so the next mail finds it again (checked by the
    identity of the mapping, which is never changed in place)."""

    MEMO = "rmpm.index"

    def __init__(self, players: dict[str, Any]) -> None:
        self.players = players
        #: field -> handles of the chips on it, as Game builds it
        self.occ: dict[Field, list[str]] = {}
        keys: list[tuple[int, int, str]] = []
        for handle, p in players.items():
            chips = p.get("chips")
            if chips is None:
                continue
            for c in chips:
                self.occ.setdefault(field_of(c), []).append(handle)
            keys.append((-p["pn"], p["number"], handle))
        keys.sort()
        #: (-PN, number, handle) of the players on the board, in play order
        self.play_order = keys
        self._capitals: tuple[list[int], list[int]] | None = None

    @classmethod
    def of(cls, state: dict[str, Any], memo: dict[str, Any]) -> Index:
        found = memo.get(cls.MEMO)
        if not isinstance(found, Index) or found.players is not state["players"]:
            found = memo[cls.MEMO] = cls(state["players"])
        return found

    @property
    def on_board(self) -> int:
        return len(self.play_order)

    def capitals(self) -> tuple[list[int], list[int]]:
        """The capitals of the players on the board, sorted, and their
        running sums (``sums[k]``: the k smallest together)."""
        if self._capitals is None:
            caps = sorted(self.players[h]["capital"] for _, _, h in self.play_order)
            self._capitals = (caps, [0, *accumulate(caps)])
        return self._capitals


class Sketch(Position):
    """The position of a stored state, drawn for one order mail without
    decoding the state: a player is made from its stored dict when first
    looked at (``drawn``), the chips' occupancy is the :class:`Index`'s with
    the fields changed here laid over it, and the money that moves between
    all players at once (``share_out``, ``collect``) is kept as one function
    of the stored capital, applied to a player when drawn.  Nothing of the
    state is changed.  What it answers is exactly what a :class:`Game`
    decoded from the same state answers (tests/games/rmpm/test_sketch.py)."""

    BOARD_MEMO = "rmpm.board"

    def __init__(self, state: dict[str, Any], memo: dict[str, Any]) -> None:
        self.state = state
        self.memo = memo
        self.index = Index.of(state, memo)
        parts = (state["numbers"], state["fences"], state["owners"])
        found = memo.get(self.BOARD_MEMO)
        if found is None or any(a is not b for a, b in zip(found[0], parts, strict=True)):
            board = Board.from_state(state["numbers"], state["fences"])
            found = memo[self.BOARD_MEMO] = (parts, board, {field_of(k): v for k, v in state["owners"].items()})
        self.board = found[1].copy()
        self.owners = dict(found[2])
        self.week = state["week"]
        self.bank = state["bank"]
        self.kiosk = state["kiosk"]
        #: the players looked at so far, as this sketch changed them
        self.drawn: dict[str, Player] = {}
        self._cells: dict[Field, list[str]] = {}
        # every undrawn player's capital c is now max(c + shift, floor)
        self._shift = 0
        self._floor: int | None = None

    def sketch(self) -> Sketch:
        return Sketch(self.state, self.memo)

    def _capital(self, stored: int) -> int:
        """A stored capital as the money moved among all players left it."""
        c = stored + self._shift
        return c if self._floor is None or c >= self._floor else self._floor

    def find(self, handle: str) -> Player | None:
        p = self.drawn.get(handle)
        if p is None:
            row = self.state["players"].get(handle)
            if row is None:
                return None
            p = player_of(handle, row)
            if p.placed:
                p.capital = self._capital(p.capital)
            self.drawn[handle] = p
        return p

    def held(self, handle: str) -> list[str] | None:
        held: list[str] | None = self.state["orders"].get(handle)
        return held

    def ahead_of(self, p: Player, limit: int) -> tuple[int, list[Player]]:
        order = self.index.play_order
        k = bisect_left(order, (-p.pn, p.number))
        first = [self.find(h) for _, _, h in order[:min(k, limit)]]
        return k, [q for q in first if q is not None]

    # -- chips ----------------------------------------------------------------
    def occupants(self, f: Field) -> list[str]:
        cell = self._cells.get(f)
        return cell if cell is not None else self.index.occ.get(f, [])

    def _cell(self, f: Field) -> list[str]:
        cell = self._cells.get(f)
        if cell is None:
            cell = self._cells[f] = list(self.index.occ.get(f, ()))
        return cell

    def move_chip(self, p: Player, i: int, to: Field) -> None:
        self._cell(p.fields[i]).remove(p.handle)
        p.fields[i] = to
        self._cell(to).append(p.handle)

    # -- money --------------------------------------------------------------
    def _on_board_drawn(self) -> list[tuple[Player, int]]:
        """The drawn players on the board with their stored capitals."""
        rows = self.state["players"]
        return [(p, rows[h]["capital"]) for h, p in self.drawn.items() if p.placed]

    def share_out(self, v: Player, percent: int) -> tuple[int, int]:
        n = self.index.on_board - (1 if v.placed else 0)
        share = v.capital * percent // 100 // n if n else 0
        for q, _ in self._on_board_drawn():
            if q is not v:
                q.capital += share
        self._shift += share
        if self._floor is not None:
            self._floor += share
        v.capital -= share * n
        return share, n

    def collect(self, a: Player, amount: int) -> tuple[int, int]:
        n = self.index.on_board - (1 if a.placed else 0)
        # what the undrawn pay: what all would pay as stored, less the drawn's part
        total = self._payable(amount)
        for q, stored in self._on_board_drawn():
            total -= min(amount, self._capital(stored))
            if q is not a:
                x = min(amount, q.capital)
                q.capital -= x
                total += x
        # c -> c - min(amount, c), that is max(c - amount, 0)
        self._shift -= amount
        self._floor = 0 if self._floor is None else max(self._floor - amount, 0)
        a.capital += total
        return n, total

    def _payable(self, amount: int) -> int:
        """The sum over every player on the board of min(amount, capital),
        each capital as stored and then moved by this sketch (not by what
        happened to the drawn players on their own)."""
        caps, sums = self.index.capitals()
        shift, floor = self._shift, self._floor
        # capitals below floor - shift are at the floor; then c + shift up to amount
        k1 = 0 if floor is None else bisect_left(caps, floor - shift)
        k2 = max(k1, bisect_left(caps, amount - shift))
        low = 0 if floor is None else k1 * min(amount, floor)
        return low + sums[k2] - sums[k1] + shift * (k2 - k1) + amount * (len(caps) - k2)


__all__ = ["CARDS", "CARD_CODES", "CARD_TEXT", "SIZE", "Game", "Index", "Player", "Position", "Sketch", "player_of", "wrap"]
