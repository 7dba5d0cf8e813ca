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

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from games.base import Outcome
from pbm_server.base.deadlines import DeadlineError, parse_deadline
from pbm_server.base.errors import ServerRefused
from pbm_server.store.lookup import account_by_handle, audit
from pbm_server.store.models import Game, Membership, Order, StateEntry, remember_state, table


def save_state(game: Game, state: dict[str, Any], now: datetime) -> None:
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
    entries = table(StateEntry)
    for field, keys in changed.items():
        before, after = old.get(field) or {}, new.get(field) or {}
        for key in dict.fromkeys(keys):
            value = after.get(key)
            if key in after and key not in before:
                # added: it now comes last, and after what this mail added
                # before it (the order reads back as the rules had it)
                seq = game.version * SEQ_PER_VERSION + min(added, SEQ_PER_VERSION - 1)
                added += 1
                upsert(session, entries, {"game_id": game.id, "field": field, "key": key, "value": value, "seq": seq},
                       ("game_id", "field", "key"), ("value", "seq"))
            else:  # changed (or gone: a null value) where it was: it keeps its place
                upsert(session, entries, {"game_id": game.id, "field": field, "key": key, "value": value, "seq": None},
                       ("game_id", "field", "key"), ("value",))
    remember_state(game, new)


def upsert(session: Session, table: Table, values: dict[str, Any], keys: tuple[str, ...],
           update: tuple[str, ...]) -> None:
    """One row written whether or not it is there (``keys``: its unique
    columns; ``update``: what an existing row takes from ``values``): one
    INSERT .. ON CONFLICT statement, SQLite's and PostgreSQL's alike, on the
    transaction's connection (so the worker does not read the row first)."""
    conn = session.connection()
    conn.execute(_upsert_statement(conn.dialect.name, table, tuple(values), keys, update), values)


@functools.lru_cache(maxsize=32)
def _upsert_statement(dialect: str, table: Table, columns: tuple[str, ...], keys: tuple[str, ...],
                      update: tuple[str, ...]) -> Any:
    # made once per shape: its `excluded` alias copies every column of the table
    stmt = (sqlite if dialect == "sqlite" else postgresql).insert(table)
    return stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in update})


def set_deadline(game: Game, expr: str | None, now: datetime) -> None:
    if not expr or expr.lower() == "none":
        game.deadline, game.next_deadline = None, None
        return
    try:
        dl = parse_deadline(expr)
        game.deadline = expr
        game.next_deadline = dl.next_after(now, game.created_at)
    except DeadlineError as exc:
        raise ServerRefused(str(exc)) from None


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
        upsert(session, table(Order), {"game_id": game.id, "handle": handle, "turn": game.turn, "lines": list(lines),
                                          "received_at": now, "inbound_id": inbound_id},
               ("game_id", "handle", "turn"), ("lines", "received_at", "inbound_id"))
    for line in outcome.audit:
        audit(session, now, actor, "game", line, game)
    if outcome.finished:
        game.status = "finished"
        game.next_deadline = None
