"""The reliability record (issue 44.1): per account, over all games, the
turns it owed orders, the turns it sent them, and how many it has missed in
a row now -- "orders in 18 of 20 turns (90 %)".

A turn is written down when it runs to its end (play/turns.py), one row
per account that owed orders (``turn_duties``).  Who owes a turn:

a seated player (``Rules.players``), not on vacation/absent at the run,
whose seat is not resigned (play/people.py) -- and in a game that collects
orders (``Rules.waiting_for`` names someone: rmpm, giveaway), only one the
game waits for or who mailed it during the turn.

In a game that collects orders, the players it still waits for at the run
missed the turn, and those it does not wait for who mailed the game during
the turn sent them (the others, e.g. an rmpm player whose chips are not on
the board yet, owed nothing).  In a game whose actions take effect when
they arrive, a player sent orders when a mail of theirs ran lines of the
game during the turn.  "Mailed the game during the turn": a mail whose inbox
row carries the turn's published stream (as ``who`` reads it), or orders
held for the turn.  Curio boards
have no turns and are not counted.

A turn run again after a rollback writes its rows again (the last run
counts).  Accounts with fewer than :data:`NEW_BELOW` turns owed are new:
``min_reliability`` lets them in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, func, insert, or_, select
from sqlalchemy.orm import Session

from games.base import Rules, State
from pbm_server.play.seeds import seed_hash
from pbm_server.store.models import Account, Game, InboundMail, Order, SeatOffer, TurnDuty

#: an account that owed fewer turns than this is new (min_reliability lets it in)
NEW_BELOW = 3


@dataclass(frozen=True)
class Record:
    owed: int = 0
    sent: int = 0
    #: turns missed in a row now (the newest first, over all games)
    in_a_row: int = 0

    @property
    def percent(self) -> int | None:
        """Whole percent, rounded down (89.9 % is 89 %); None: nothing owed yet."""
        return self.sent * 100 // self.owed if self.owed else None

    @property
    def new(self) -> bool:
        return self.owed < NEW_BELOW

    def below(self, threshold: int) -> bool:
        """Under ``threshold`` percent (exactly, not the rounded figure); a new account never is."""
        return not self.new and self.sent * 100 < threshold * self.owed

    def text(self) -> str:
        if not self.owed:
            return "no turns owed yet (new)"
        out = f"orders in {self.sent} of {self.owed} turn{'s' if self.owed != 1 else ''} ({self.percent} %)"
        if self.in_a_row:
            out += f", {self.in_a_row} missed in a row now"
        if self.new:
            out += " (new)"
        return out

    def as_json(self) -> dict[str, Any]:
        return {"turns_owed": self.owed, "turns_sent": self.sent, "missed_in_a_row": self.in_a_row,
                "percent": self.percent, "new": self.new}


def records(session: Session, account_ids: Iterable[int]) -> dict[int, Record]:
    """The record of each account (an account with no rows: an empty Record)."""
    ids = sorted(set(account_ids))
    if not ids:
        return {}
    counts = {aid: (int(owed), int(sent or 0)) for aid, owed, sent in session.execute(
        select(TurnDuty.account_id, func.count(), func.sum(case((TurnDuty.sent.is_(True), 1), else_=0)))
        .where(TurnDuty.account_id.in_(ids)).group_by(TurnDuty.account_id)).all()}
    # missed in a row now: the misses after each account's newest turn sent (all of them if none), one query
    last = (select(TurnDuty.account_id.label("aid"), func.max(TurnDuty.at).label("last"))
            .where(TurnDuty.account_id.in_(ids), TurnDuty.sent.is_(True)).group_by(TurnDuty.account_id).subquery())
    in_a_row = dict(session.execute(
        select(TurnDuty.account_id, func.count()).outerjoin(last, last.c.aid == TurnDuty.account_id)
        .where(TurnDuty.account_id.in_(ids), TurnDuty.sent.is_(False), or_(last.c.last.is_(None), TurnDuty.at > last.c.last))
        .group_by(TurnDuty.account_id)).all())
    out = {}
    for aid in ids:
        owed, sent = counts.get(aid, (0, 0))
        out[aid] = Record(owed, sent, int(in_a_row.get(aid, 0)))
    return out


def record_of(session: Session, account: Account) -> Record:
    return records(session, [account.id]).get(account.id, Record())


def records_by_handle(session: Session, handles: Iterable[str]) -> dict[str, Record]:
    """handle (lower case) -> record, for the handles that are accounts."""
    keys = {h.lower() for h in handles}
    if not keys:
        return {}
    accounts = session.execute(select(Account.id, Account.handle_key).where(Account.handle_key.in_(keys))).all()
    recs = records(session, [a.id for a in accounts])
    return {key: recs.get(aid, Record()) for aid, key in accounts}


def resigned_seats(session: Session, game: Game) -> set[str]:
    """Seats (lower case) whose players resigned and wait for a substitute."""
    return {s.lower() for s in session.scalars(select(SeatOffer.seat).where(
        SeatOffer.game_id == game.id, SeatOffer.reason == "resigned", SeatOffer.status.in_(("vacant", "offered"))))}


def duties(session: Session, game: Game, rules: Rules[Any], state: State, absent: frozenset[str]) -> dict[str, bool]:
    """Who owes orders for the game's open turn (handle -> whether they sent
    them), read before the turn runs; see the module's docstring."""
    try:
        players = list(rules.players(state))
        waiting = {h.lower() for h in rules.waiting_for(state)}
    except Exception:  # a state the rules cannot read: nobody
        return {}
    out_keys = {h.lower() for h in absent} | resigned_seats(session, game)
    # who mailed the game in this turn: orders held for it, or a mail of theirs the game ran
    active = {h.lower() for h in session.scalars(select(Order.handle).where(Order.game_id == game.id,
                                                                             Order.turn == game.turn))}
    if game.turn_seed:
        sender = func.lower(InboundMail.mail_from)
        ran = select(sender.label("address")).where(InboundMail.game_id == game.id, InboundMail.status == "done",
                                                    InboundMail.seed == seed_hash(game.turn_seed)).distinct().subquery()
        active |= set(session.scalars(select(Account.handle_key).join(ran, ran.c.address == Account.email)))
    owed: dict[str, bool] = {}
    for h in players:
        key = h.lower()
        if key in out_keys:
            continue
        if waiting:  # the game collects orders: those it waits for missed them
            if key in waiting:
                owed[h] = False
            elif key in active:
                owed[h] = True
        else:  # actions take effect when they arrive: a mail that ran is the turn's orders
            owed[h] = key in active
    return owed


def write_turn(session: Session, game: Game, turn: int, owed: dict[str, bool], now: datetime) -> None:
    """The rows of one turn run (those of an earlier run of it replaced)."""
    session.execute(delete(TurnDuty).where(TurnDuty.game_id == game.id, TurnDuty.turn == turn))
    if not owed:
        return
    ids = dict(session.execute(select(Account.handle_key, Account.id)
                               .where(Account.handle_key.in_([h.lower() for h in owed]))).all())
    rows = [{"game_id": game.id, "turn": turn, "account_id": ids[h.lower()], "sent": sent, "at": now}
            for h, sent in owed.items() if h.lower() in ids]
    if rows:
        session.execute(insert(TurnDuty), rows)


def missed_here(session: Session, game: Game, account_id: int) -> int:
    """Turns of ``game`` the account missed in a row, up to the last one run."""
    last = session.scalar(select(func.max(TurnDuty.turn)).where(TurnDuty.game_id == game.id,
                                                                TurnDuty.account_id == account_id,
                                                                TurnDuty.sent.is_(True)))
    q = select(func.count()).select_from(TurnDuty).where(TurnDuty.game_id == game.id,
                                                         TurnDuty.account_id == account_id, TurnDuty.sent.is_(False))
    if last is not None:
        q = q.where(TurnDuty.turn > last)
    return int(session.scalar(q) or 0)


def sent_lately(session: Session, game: Game, turns: int = 2) -> set[str]:
    """Handles (lower case) that sent orders in one of the game's last ``turns`` turns run."""
    rows = session.scalars(select(Account.handle_key).join(TurnDuty, TurnDuty.account_id == Account.id).where(
        TurnDuty.game_id == game.id, TurnDuty.sent.is_(True), TurnDuty.turn >= game.turn - turns,
        TurnDuty.turn < game.turn))
    return set(rows)
