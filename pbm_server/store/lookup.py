"""Finding rows: a game by name, an account by handle or address, and the
audit log every operation writes to."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from games import get_rules
from games.names import name_key
from pbm_server.base import clock
from pbm_server.store.models import Account, AuditEntry, Game, MailStop, Membership, ServerSecret, table


def audit(
    session: Session, now: datetime, actor: str, action: str, detail: str = "", game: Game | None = None, *, game_id: int | None = None
) -> None:
    """One line of the audit log: who did what, when, to which game."""
    session.add(AuditEntry(at=now, actor=actor, game_id=game.id if game else game_id, action=action, detail=detail))


def server_key(session: Session, name: str) -> bytes:
    """A 256-bit key the server made for itself (``server_secrets``): made on
    first use, the first writer winning; never mailed, never shown."""
    value = session.scalar(select(ServerSecret.value).where(ServerSecret.name == name))
    if value is None:
        try:
            with session.begin_nested():
                session.add(ServerSecret(name=name, value=secrets.token_hex(32), created_at=clock.now()))
        except IntegrityError:
            pass
        value = session.scalar(select(ServerSecret.value).where(ServerSecret.name == name))
    assert value is not None
    return bytes.fromhex(value)


#: Session.info key: the games of a batch, loaded with one SELECT (load_games)
_LOADED = "pbm_games_by_name"


def load_games(session: Session, names: Iterable[str]) -> list[Game]:
    """The games ``names`` (those that exist), loaded with one SELECT for
    the :func:`find_game` calls of this session (a worker's batch, a mail
    per game): the object each would have found, without a query each."""
    wanted = sorted({n.lower() for n in names})
    if not wanted:
        return []
    found = list(session.scalars(select(Game).where(Game.name.in_(wanted))).all())
    session.info[_LOADED] = {g.name: g for g in found}
    return found


def note_rows_for_batch(session: Session, key: str, asked: Iterable[Any], found: dict[Any, Any]) -> None:
    """What one SELECT found for a whole worker batch (its games, its
    senders), kept in the batch's session under ``key``: for each member
    asked, its row (None: there is none); a per-mail lookup takes it from
    there (:func:`noted_row`) instead of asking the database."""
    session.info[key] = {m: found.get(m) for m in asked}


def noted_row(session: Session, key: str, member: Any, once: bool = False) -> tuple[bool, Any]:
    """(True, the row or None) if the batch's note ``key`` answers for
    ``member``; (False, None) if the caller must ask the database.
    ``once``: the note answers for it only once (a batch has one mail per
    game: a second question about the same game asks the database again)."""
    noted: dict[Any, Any] | None = session.info.get(key)
    if noted is None or member not in noted:
        return False, None
    return True, noted.pop(member) if once else noted[member]


def note_for_batch(session: Session, key: str, members: Iterable[Any]) -> None:
    """The members for which a per-mail lookup may be skipped
    (:func:`noted_for_batch`): a note of rows with no row to keep."""
    note_rows_for_batch(session, key, members, {})


def noted_for_batch(session: Session, key: str, member: Any, once: bool = True) -> bool:
    """Whether the batch's note ``key`` holds ``member`` (then the caller's
    per-mail lookup is skipped); ``once`` as for :func:`noted_row`."""
    return noted_row(session, key, member, once)[0]


def find_game(session: Session, name: str) -> Game | None:
    loaded: dict[str, Game] | None = session.info.get(_LOADED)
    if loaded is not None:
        game = loaded.get(name.lower())
        if game is not None and game in session and game.name == name.lower():  # not deleted, not renamed
            return game
    return session.scalar(select(Game).where(Game.name == name.lower()))


def game_name_kind(session: Session, name: str) -> tuple[str, str] | None:
    """(name, kind) of the game named ``name``, or None: one plain SELECT on
    the transaction's connection, for the worker's look before it writes
    (none if :func:`games_ahead` asked for the batch)."""
    known, noted = noted_row(session, _NAMES_AHEAD, name.lower())
    if known:
        return cast("tuple[str, str] | None", noted)
    found = session.connection().execute(_NAME_KIND, {"name": name.lower()}).first()
    return None if found is None else (found.name, found.kind)


def games_ahead(session: Session, names: Iterable[str]) -> None:
    """(name, kind) of the games ``names``, asked once for a worker batch's
    mails (their recipients' local parts): :func:`game_name_kind` then asks
    nothing in this read transaction."""
    wanted = sorted({n.lower() for n in names})
    if wanted:
        found = {r.name: (r.name, r.kind) for r in session.connection().execute(_NAME_KINDS, {"names": wanted})}
        note_rows_for_batch(session, _NAMES_AHEAD, wanted, found)


_G = table(Game)
_NAME_KIND = select(_G.c.name, _G.c.kind).where(_G.c.name == bindparam("name"))
_NAME_KINDS = select(_G.c.name, _G.c.kind).where(_G.c.name.in_(bindparam("names", expanding=True)))
#: Session.info keys of the batch look-aheads (games_ahead, credentials_ahead)
_NAMES_AHEAD = "pbm_game_names_ahead"
_CREDENTIALS_AHEAD = "pbm_credentials_ahead"


def account_by_handle(session: Session, handle: str) -> Account | None:
    return session.scalar(select(Account).where(Account.handle_key == handle.lower()))


#: handles asked for in one SELECT by accounts_by_handles (SQLite takes up
#: to 32,766 parameters, PostgreSQL 65,535; smaller chunks keep each
#: statement's text short)
HANDLES_PER_SELECT = 500


def accounts_by_handles(session: Session, handles: Iterable[str]) -> dict[str, Account]:
    """The accounts of ``handles``, by handle key (lower case; a handle with
    no account is left out): what :func:`account_by_handle` finds for each,
    in one SELECT for every HANDLES_PER_SELECT of them (a turn's reports to
    10,000 players ask 20 statements, not 10,000)."""
    keys = list(dict.fromkeys(h.lower() for h in handles))
    found: dict[str, Account] = {}
    for i in range(0, len(keys), HANDLES_PER_SELECT):
        chunk = keys[i:i + HANDLES_PER_SELECT]
        found.update((a.handle_key, a) for a in session.scalars(select(Account).where(Account.handle_key.in_(chunk))))
    return found


def account_like(session: Session, handle: str) -> Account | None:
    """Another account whose handle looks like ``handle`` (the same
    confusable skeleton, a different handle): ``aIice`` beside ``alice``."""
    return session.scalars(
        select(Account).where(Account.handle_skeleton == name_key(handle), Account.handle_key != handle.lower())
    ).first()


def lookalike_refusal(session: Session, handle: str) -> str | None:
    """Why ``handle`` cannot be chosen because it looks like an existing one, or None."""
    other = account_like(session, handle)
    if other is None:
        return None
    return f"{handle!r} looks like the existing handle {other.handle!r}; choose another"


@dataclass(frozen=True)
class Credentials:
    """What the worker reads of the sender's account before it writes: who
    they are and the hash their password is checked against (a plain row, no
    ORM object)."""

    id: int
    handle: str
    email: str
    password_hash: str


_A = table(Account)
_BY_EMAIL = select(_A.c.id, _A.c.handle, _A.c.email, _A.c.password_hash).where(_A.c.email == bindparam("email"))


_BY_EMAILS = select(_A.c.id, _A.c.handle, _A.c.email, _A.c.password_hash).where(
    _A.c.email.in_(bindparam("emails", expanding=True)))


def credentials_by_email(session: Session, email: str) -> Credentials | None:
    known, noted = noted_row(session, _CREDENTIALS_AHEAD, email.lower())
    if known:
        return cast("Credentials | None", noted)
    found = session.connection().execute(_BY_EMAIL, {"email": email.lower()}).first()
    return None if found is None else Credentials(*found)


def credentials_ahead(session: Session, emails: Iterable[str]) -> None:
    """The accounts of the addresses ``emails``, asked once for a worker
    batch's senders: :func:`credentials_by_email` then asks nothing in this
    read transaction."""
    wanted = sorted({e.lower() for e in emails})
    if wanted:
        found = {r.email: Credentials(*r) for r in session.connection().execute(_BY_EMAILS, {"emails": wanted})}
        note_rows_for_batch(session, _CREDENTIALS_AHEAD, wanted, found)


def account_by_email(session: Session, email: str) -> Account | None:
    return session.scalar(select(Account).where(Account.email == email.lower()))


def player_count(session: Session, game: Game) -> int:
    try:
        return len(get_rules(game.kind).players(game.state))
    except Exception:
        return session.scalar(
            select(func.count()).select_from(Membership).where(Membership.game_id == game.id, Membership.left_at.is_(None))
        ) or 0


# -- mail stops (play/streams.py): they follow the account ----------------------------
def stops_of(session: Session, address: str) -> list[MailStop]:
    return list(session.scalars(select(MailStop).where(MailStop.address == address.lower()).order_by(MailStop.id)))


def move_stops(session: Session, old: str, new: str) -> None:
    """An account moved from ``old`` to ``new`` (``email``/``confirm``, its
    undo, the CLI's set-email): the streams it stopped stay stopped at the
    new address.  A stop the new address had already stays, once."""
    if old.lower() == new.lower():
        return
    there = {(r.stream, r.game_id) for r in stops_of(session, new)}
    for row in stops_of(session, old):
        if (row.stream, row.game_id) in there:
            session.delete(row)
        else:
            row.address = new.lower()
    session.flush()


def drop_stops(session: Session, address: str) -> None:
    """The account at ``address`` is removed: its stops go with it, so the
    next account at that address gets every stream."""
    session.execute(delete(MailStop).where(MailStop.address == address.lower()))
