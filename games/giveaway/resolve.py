"""Resolving a round: gifts, rings, scores, next holdings, the end of the game.

``resolve_round(game)`` reads the orders held and returns a
:class:`RoundResult`; ``advance(game, result)`` returns the game for the next
round (or the finished game).  Nothing here changes its arguments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from games.giveaway.model import (
    OVER,
    PLAYING,
    ROUND_BONUS,
    WINNING_SCORE,
    Game,
    Player,
    key,
)
from games.giveaway.rings import TANGLE_LOOPS, RingAnalysis, find_rings


@dataclass(slots=True)
class PlayerRound:
    handle: str
    holding: int
    ordered: bool
    share: int = 0  # points from split unordered holdings (option no_order=split)
    bonus: int = 0  # ring bonuses
    forfeited: int = 0  # own points lost for want of an order
    kept: int = 0  # own points kept: no order, but on vacation (ABSENT)
    got: int = 0  # gifts received plus share
    score: int = 0  # the ruling: points received including ring bonuses

    @property
    def next_holding(self) -> int:
        """Rule 4: the score plus three (plus a vacationer's kept holding)."""
        return self.score + ROUND_BONUS + self.kept


@dataclass(slots=True)
class RoundResult:
    round: int
    players: list[PlayerRound]  # active players, join order; ring members index this list
    gifts: list[dict[int, int]]  # gifts[i][j]: points players[i] gave players[j]
    analysis: RingAnalysis
    winner: str | None = None
    finished: bool = False
    notes: list[str] = field(default_factory=list)

    def handle(self, i: int) -> str:
        return self.players[i].handle

    def gave(self, i: int) -> list[tuple[str, int]]:
        """(recipient, points) of players[i]'s gifts."""
        return [(self.players[j].handle, n) for j, n in self.gifts[i].items()]

    def received(self) -> list[list[tuple[str, int]]]:
        """Per player, (giver, points) of the gifts received, givers in join order."""
        incoming: list[list[tuple[str, int]]] = [[] for _ in self.players]
        for i, gifts in enumerate(self.gifts):
            giver = self.players[i].handle
            for j, n in gifts.items():
                incoming[j].append((giver, n))
        return incoming

    @property
    def scores(self) -> dict[str, int]:
        return {p.handle: p.score for p in self.players}


def resolve_round(
    game: Game, tangle_loops: int | None = TANGLE_LOOPS, absent: frozenset[str] = frozenset()
) -> RoundResult:
    """``absent``: handles on vacation; without an order they keep their
    holding instead of falling under the no-order rule."""
    active = game.active
    handles = [p.handle for p in active]
    # held orders name active players only (LEAVE drops the others), by their
    # registered spelling; the casefold lookup is a fallback for imported states
    by_handle = {h: i for i, h in enumerate(handles)}
    by_key = {key(h): i for i, h in enumerate(handles)}
    orders = game.orders
    rows = [PlayerRound(p.handle, p.holding, ordered=p.key in orders) for p in active]
    away = {key(h) for h in absent}
    for row in rows:
        if not row.ordered and key(row.handle) in away:
            row.kept = row.holding
    out: list[dict[int, int]] = [{} for _ in active]
    for i, p in enumerate(active):
        gifts = orders.get(p.key)
        if not gifts:
            continue
        mine = out[i]
        for gift in gifts:
            j = by_handle.get(gift.to)
            if j is None:
                j = by_key[key(gift.to)]
            mine[j] = mine.get(j, 0) + gift.amount
    for received in out:
        for j, n in received.items():
            rows[j].got += n
    # No order: the holding is forfeited, or split evenly among the others.
    others = len(active) - 1
    if game.no_order == "split" and others > 0:
        each = [0 if row.ordered or row.kept else row.holding // others for row in rows]
        pool = sum(each)
        for row, own in zip(rows, each, strict=True):
            row.share = pool - own
            row.got += row.share
            if not row.ordered and not row.kept:
                row.forfeited = row.holding - own * others
    else:
        for row in rows:
            if not row.ordered and not row.kept:
                row.forfeited = row.holding

    analysis = find_rings(out, tangle_loops)
    for row, bonus in zip(rows, analysis.bonuses(len(active)), strict=False):
        row.bonus = bonus
        row.score = row.got + bonus

    result = RoundResult(game.round, rows, out, analysis)
    _decide_end(result, game.round_limit)
    return result


def _decide_end(result: RoundResult, round_limit: int) -> None:
    """Rule 1 and the round limit option."""
    scores = result.scores
    if not scores:
        return
    counts = Counter(scores.values())
    unique = [(s, h) for h, s in scores.items() if counts[s] == 1]
    best = max(unique) if unique else None
    top = max(scores.values())
    if top >= WINNING_SCORE:
        if best is not None:
            result.winner, result.finished = best[1], True
            tied = sorted({s for s in counts if counts[s] > 1 and s > best[0]}, reverse=True)
            if tied:
                result.notes.append(
                    "Tied scores drop out of contention (rule 1): "
                    + ", ".join(str(s) for s in tied)
                    + f". {best[1]} has the highest score nobody else has."
                )
            result.notes.append(f"{best[1]} wins the game with {best[0]} points.")
            return
        result.notes.append(
            f"A score of {WINNING_SCORE} or more was reached, but every score is tied with another one, "
            "so nobody can win yet: another round is played."
        )
    if round_limit and result.round >= round_limit:
        result.finished = True
        if best is not None:
            result.winner = best[1]
            result.notes.append(
                f"The round limit ({round_limit}) is reached: {best[1]} wins with {best[0]} points, "
                "the highest score nobody else has."
            )
        else:
            result.notes.append(
                f"The round limit ({round_limit}) is reached and every score is tied with another: "
                "the game ends without a winner."
            )


def advance(game: Game, result: RoundResult) -> Game:
    """The game after ``result``: scores and holdings updated, orders cleared."""
    rows = {r.handle: r for r in result.players}
    players = []
    for p in game.players:
        r = rows.get(p.handle) if p.active else None
        if r is None:
            players.append(Player(p.handle, p.holding, p.active, p.score, p.left_round))
        else:
            players.append(Player(p.handle, r.next_holding, p.active, r.score, p.left_round))
    return replace(
        game,
        players=players,
        orders={},
        round=game.round + 1 if not result.finished else game.round,
        status=OVER if result.finished else PLAYING,
        winner=result.winner,
        end_note=" ".join(result.notes) if result.finished else None,
        last={
            "round": result.round,
            "rings": [
                [ring.amount, [result.handle(m) for m in ring.members]] for ring in result.analysis.rings
            ],
        },
    )

