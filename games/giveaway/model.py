"""The game as objects, and the one place where JSON state <-> objects happens.

A :class:`Game` holds the players (in join order), the orders held for the
current round and a short summary of the last round.  ``Game.from_state``
copies everything out of the stored dict, ``Game.to_state`` builds a new one,
so the state the server passed in is never changed.

The stored players are the list ``players`` followed by the mapping
``joins`` (player key -> handle, in join order): a JOIN before round 1 adds
one entry to ``joins`` and leaves the list alone, so the server writes that
one entry (``Outcome.changed_entries``) however many have joined.  Whenever
the state is written whole (a round, a LEAVE) the joiners go to the end of
the list and ``joins`` goes away; a state without it (every state stored
before joins were entries) reads as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from games.base import GameError

SCHEMA = 1
START_HOLDING = 3  # rule 2: everybody starts round 1 with three points
ROUND_BONUS = 3  # rule 4: three extra points every later round
WINNING_SCORE = 100  # rule 1
MIN_PLAYERS = 3

NO_ORDER_CHOICES = ("forfeit", "split")

#: the stored mapping of the players who joined since the list was last written
JOINS = "joins"

# Game status
JOINING = "joining"  # round 1 not resolved yet: players may join
PLAYING = "playing"
OVER = "over"


def key(handle: str) -> str:
    """Handles match case-insensitively."""
    return handle.casefold()


@dataclass(slots=True)
class Gift:
    amount: int
    to: str  # recipient handle as registered

    def line(self) -> str:
        return f"GIVE {self.amount} TO {self.to}"


@dataclass(slots=True)
class Player:
    handle: str
    holding: int = START_HOLDING
    active: bool = True
    score: int | None = None  # score of the last round played
    left_round: int | None = None  # the round during which the player left

    @property
    def key(self) -> str:
        return key(self.handle)


@dataclass(slots=True)
class Game:
    no_order: str = "forfeit"
    round_limit: int = 0  # 0: no limit
    round: int = 1  # the round whose orders are being collected
    status: str = JOINING
    players: list[Player] = field(default_factory=list)
    orders: dict[str, list[Gift]] = field(default_factory=dict)  # giver key -> gifts
    winner: str | None = None
    end_note: str | None = None
    last: dict[str, Any] | None = None  # summary of the last round for `view`

    # -- players ----------------------------------------------------------
    def find(self, handle: str) -> Player | None:
        k = key(handle)
        for p in self.players:
            if p.key == k:
                return p
        return None

    def player_index(self) -> dict[str, Player]:
        return {p.key: p for p in self.players}

    @property
    def active(self) -> list[Player]:
        return [p for p in self.players if p.active]

    @property
    def started(self) -> bool:
        return self.status != JOINING

    @property
    def over(self) -> bool:
        return self.status == OVER

    def order_of(self, handle: str) -> list[Gift] | None:
        return self.orders.get(key(handle))

    def player(self, handle: str) -> Player:
        """The player ``handle`` (KeyError if there is none)."""
        p = self.find(handle)
        if p is None:
            raise KeyError(handle)
        return p

    def order_lines(self, handle: str) -> list[str]:
        return [g.line() for g in self.orders.get(key(handle), [])]

    def __str__(self) -> str:
        """The standings: holdings and last scores, who left, the last rings."""
        rows = [("Player", "Holding", "Last score")]
        for p in self.active:
            rows.append((p.handle, str(p.holding), "-" if p.score is None else str(p.score)))
        w = [max(len(r[i]) for r in rows) for i in range(3)]
        text = "\n".join(f"{r[0].ljust(w[0])}  {r[1].rjust(w[1])}  {r[2].rjust(w[2])}".rstrip() for r in rows)
        gone = [p.handle for p in self.players if not p.active]
        if gone:
            text += "\n\nLeft the game: " + ", ".join(gone)
        if self.last and self.last.get("rings"):
            text += f"\n\nRings in round {self.last['round']}:\n" + "\n".join(
                f"  {' > '.join(names + names[:1])} ({amount} point{'s' if amount != 1 else ''})"
                for amount, names in self.last["rings"]
            )
        return text

    # -- JSON -------------------------------------------------------------
    @classmethod
    def from_state(cls, state: dict[str, Any], check: bool = False) -> Game:
        """The game in ``state``.  ``check`` (imports): fill in the optional
        fields a hand-written file may leave out, spell order keys and
        recipients as registered, and validate everything."""
        try:
            if state.get("schema", SCHEMA) != SCHEMA:
                raise GameError(f"unknown giveaway state schema {state.get('schema')!r}, expected {SCHEMA}")
            opts = state.get("options", {})
            round_ = int(state.get("round", 1))
            game = cls(
                no_order=opts.get("no_order", "forfeit"),
                round_limit=int(opts.get("round_limit", 0)),
                round=round_,
                status=state.get("status", JOINING if round_ == 1 else PLAYING),
                players=[
                    Player(
                        handle=str(p["handle"]),
                        holding=int(p.get("holding", START_HOLDING)),
                        active=bool(p.get("active", True)),
                        score=p.get("score"),
                        left_round=p.get("left_round"),
                    )
                    for p in state["players"]
                ] + [Player(handle=str(h)) for h in (state.get(JOINS) or {}).values()],
                orders={
                    key(k) if check else k: [Gift(int(g[0]), str(g[1])) for g in gifts]
                    for k, gifts in state.get("orders", {}).items()
                },
                winner=state.get("winner"),
                end_note=state.get("end_note"),
                last=_copy(state.get("last")),
            )
        except GameError:
            raise
        except KeyError as exc:
            raise GameError(f"not a giveaway state: the field {exc} is missing") from None
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            raise GameError(f"not a giveaway state: {exc}") from None
        if check:
            game.validate()
            index = game.player_index()
            for gifts in game.orders.values():
                for g in gifts:
                    g.to = index[key(g.to)].handle
        return game

    def to_state(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "options": {"no_order": self.no_order, "round_limit": self.round_limit},
            "round": self.round,
            "status": self.status,
            "players": [
                {
                    "handle": p.handle,
                    "holding": p.holding,
                    "active": p.active,
                    "score": p.score,
                    "left_round": p.left_round,
                }
                for p in self.players
            ],
            "orders": {k: [[g.amount, g.to] for g in gifts] for k, gifts in self.orders.items()},
            "winner": self.winner,
            "end_note": self.end_note,
            "last": _copy(self.last),
        }

    def validate(self) -> None:
        """Raise GameError naming the first thing wrong (used by import)."""
        if self.no_order not in NO_ORDER_CHOICES:
            raise GameError(f"options.no_order must be one of {', '.join(NO_ORDER_CHOICES)}, not {self.no_order!r}")
        if self.round_limit < 0:
            raise GameError("options.round_limit must be 0 (no limit) or a positive number of rounds")
        if self.round < 1:
            raise GameError("round must be 1 or more")
        if self.status not in (JOINING, PLAYING, OVER):
            raise GameError(f"status must be joining, playing or over, not {self.status!r}")
        seen = set()
        for p in self.players:
            if not p.handle or p.key in seen:
                raise GameError(f"player handle {p.handle!r} is empty or appears twice")
            seen.add(p.key)
            if p.holding < 1:
                raise GameError(f"player {p.handle} holds {p.holding} points; a holding is at least 1")
        if self.last is not None:
            ok = isinstance(self.last, dict) and isinstance(self.last.get("round"), int)
            rings = self.last.get("rings", []) if ok else None
            ok = ok and isinstance(rings, list) and all(
                isinstance(r, list) and len(r) == 2 and isinstance(r[0], int) and isinstance(r[1], list)
                and all(isinstance(h, str) for h in r[1])
                for r in rings
            )
            if not ok:
                raise GameError('last must be null or {"round": N, "rings": [[points, [handle, ...]], ...]}')
        index = self.player_index()
        for giver, gifts in self.orders.items():
            holder = index.get(giver)
            if holder is None or not holder.active:
                raise GameError(f"an order is held for {giver!r}, who is not an active player")
            if sum(g.amount for g in gifts) != holder.holding or any(g.amount < 1 for g in gifts):
                raise GameError(f"the order held for {holder.handle} does not add up to the holding {holder.holding}")
            for g in gifts:
                r = index.get(key(g.to))
                if r is None or not r.active or r is holder:
                    raise GameError(f"the order held for {holder.handle} gives to {g.to!r}, not another active player")


class Roster:
    """A stored state looked at for one order or join, without decoding it
    whole: players of the list are found through an index of their keys
    (built once per players list and kept in the server's memo,
    ``Context.memo``), joiners in the ``joins`` mapping directly, so an order
    or a join costs the same in a game of 10 or 10,000 players.  Offers what
    an order needs of :class:`Game`; nothing here changes the state."""

    MEMO = "giveaway.index"

    def __init__(self, state: dict[str, Any], memo: dict[str, Any]) -> None:
        if state.get("schema", SCHEMA) != SCHEMA:
            raise GameError(f"unknown giveaway state schema {state.get('schema')!r}, expected {SCHEMA}")
        self.state = state
        self.round = int(state.get("round", 1))
        self.status = state.get("status", JOINING if self.round == 1 else PLAYING)
        self._rows: list[dict[str, Any]] = state["players"]
        found = memo.get(self.MEMO)
        if found is None or found[0] is not self._rows:
            found = (self._rows, {key(str(p["handle"])): i for i, p in enumerate(self._rows)},
                     sum(1 for p in self._rows if p.get("active", True)))
            memo[self.MEMO] = found
        self._index: dict[str, int] = found[1]
        self._active_rows: int = found[2]
        self.joins: dict[str, str] = state.get(JOINS) or {}
        self.orders_held: dict[str, Any] = state.get("orders", {})

    @property
    def over(self) -> bool:
        return bool(self.status == OVER)

    @property
    def started(self) -> bool:
        return bool(self.status != JOINING)

    def find(self, handle: str) -> Player | None:
        i = self._index.get(key(handle))
        if i is None:
            joined = self.joins.get(key(handle))
            return None if joined is None else Player(handle=str(joined))
        p = self._rows[i]
        return Player(handle=str(p["handle"]), holding=int(p.get("holding", START_HOLDING)),
                      active=bool(p.get("active", True)), score=p.get("score"), left_round=p.get("left_round"))

    def player(self, handle: str) -> Player:
        p = self.find(handle)
        if p is None:
            raise KeyError(handle)
        return p

    def active_handles(self, limit: int) -> list[str]:
        """The first ``limit`` active players' handles (for a refusal's list)."""
        out: list[str] = []
        for p in self._rows:
            if len(out) >= limit:
                break
            if p.get("active", True):
                out.append(str(p["handle"]))
        for h in self.joins.values():
            if len(out) >= limit:
                break
            out.append(str(h))
        return out

    def active_count(self) -> int:
        return self._active_rows + len(self.joins)

    def order_of(self, handle: str) -> list[Gift] | None:
        gifts = self.orders_held.get(key(handle))
        return None if gifts is None else [Gift(int(g[0]), str(g[1])) for g in gifts]

    def order_lines(self, handle: str) -> list[str]:
        return [g.line() for g in self.order_of(handle) or []]

    def with_order(self, giver: str, gifts: list[Gift]) -> dict[str, Any]:
        """The state with ``giver``'s order replaced: a new document sharing
        everything but the orders mapping with the one looked at."""
        orders = dict(self.orders_held)
        orders[giver] = [[g.amount, g.to] for g in gifts]
        return {**self.state, "orders": orders}

    def with_join(self, handle: str) -> dict[str, Any]:
        """The state with ``handle`` joined (after everybody else): a new
        document sharing everything but the joins mapping."""
        return {**self.state, JOINS: {**self.joins, key(handle): handle}}


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
