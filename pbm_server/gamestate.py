"""Writing what a game's rules decided: the new state (a new version), the
next deadline, and the memberships, orders and audit lines of an outcome.

A game's state is stored as a document (``games.state``) and, laid over it,
entries written one by one (``state_entries``): a mail that changed nothing
but some entries of a top-level mapping of the state (a player's orders,
``Outcome.changed_entries``) writes just those rows, so its cost does not
grow with the game.  Writing the whole state (a turn run, a join) stores the
document again and drops the entries.

Everything here works in the caller's session and transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from games.base import Outcome
from pbm_server.deadlines import DeadlineError, parse_deadline
from pbm_server.errors import DeskError
from pbm_server.lookup import account_by_handle, audit
from pbm_server.models import Game, Membership, Order, StateEntry, remember_state


def save_state(game: Game, state: dict, now: datetime) -> None:
    # kept as the rules returned it: a game's state is always exactly what JSON
    # reads back (tests/games/driver.py checks), so no copy is needed
    game.version += 1
    game.state = state
    game.updated_at = now


#: entries one change may add in a known order (their ``seq`` is the version
#: times this plus their place; a 32-bit seq then lasts 8 million versions)
SEQ_PER_VERSION = 256


def save_entries(session: Session, game: Game, old: dict[str, Any], new: dict[str, Any],
                 changed: dict[str, list[str]], now: datetime) -> None:
    """The new state differs from ``old`` only in the entries ``changed``
    (field -> keys): write those rows, not the document.  Nothing changed:
    nothing is written, and the version stays."""
    if not any(changed.values()):
        return
    game.version += 1
    game.updated_at = now
    added = 0
    for field, keys in changed.items():
        before, after = old.get(field) or {}, new.get(field) or {}
        for key in dict.fromkeys(keys):
            row = session.get(StateEntry, (game.id, field, key))
            value = after.get(key)
            if key in after and key not in before:
                # added: it now comes last, and after what this mail added
                # before it (the order reads back as the rules had it)
                seq: int | None = game.version * SEQ_PER_VERSION + min(added, SEQ_PER_VERSION - 1)
                added += 1
            else:
                seq = row.seq if row is not None else None  # kept its place
            if row is None:
                session.add(StateEntry(game_id=game.id, field=field, key=key, value=value, seq=seq))
            else:
                row.value, row.seq = value, seq
    remember_state(game, new)


def set_deadline(game: Game, expr: str | None, now: datetime) -> None:
    if not expr or expr.lower() == "none":
        game.deadline, game.next_deadline = None, None
        return
    try:
        dl = parse_deadline(expr)
        game.deadline = expr
        game.next_deadline = dl.next_after(now, game.created_at)
    except DeadlineError as exc:
        raise DeskError(str(exc)) from None


def record_outcome(session: Session, game: Game, outcome: Outcome, now: datetime, actor: str, inbound_id: int | None = None) -> None:
    """Memberships, orders and audit lines of an outcome (not the notices)."""
    for handle in outcome.joined:
        acc = account_by_handle(session, handle)
        if acc is None:
            continue
        m = session.scalar(select(Membership).where(Membership.game_id == game.id, Membership.account_id == acc.id, Membership.role == "player"))
        if m is None:
            session.add(Membership(game_id=game.id, account_id=acc.id, role="player", joined_at=now))
        else:
            m.joined_at, m.left_at = now, None
    for handle in outcome.left:
        acc = account_by_handle(session, handle)
        if acc is None:
            continue
        m = session.scalar(select(Membership).where(Membership.game_id == game.id, Membership.account_id == acc.id, Membership.role == "player"))
        if m is not None:
            m.left_at = now
    for handle, lines in outcome.orders.items():
        row = session.scalar(select(Order).where(Order.game_id == game.id, Order.handle == handle, Order.turn == game.turn))
        if row is None:
            session.add(Order(game_id=game.id, handle=handle, turn=game.turn, lines=list(lines), received_at=now, inbound_id=inbound_id))
        else:
            row.lines, row.received_at, row.inbound_id = list(lines), now, inbound_id
    for line in outcome.audit:
        audit(session, now, actor, "game", line, game)
    if outcome.finished:
        game.status = "finished"
        game.next_deadline = None
