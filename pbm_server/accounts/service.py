"""Player accounts: the checks and changes that the pbm@ commands and the
`pbm account` CLI share.

A refusal raises :class:`~pbm_server.base.errors.ServerRefused` with the reason
(the pbm@ dispatch makes it the line's refusal; the CLI prints it).  Nothing
here writes the audit log: each caller says who did it.  Finding one account
by handle or address is :mod:`pbm_server.store.lookup`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from games import get_rules
from games.names import name_key
from pbm_server.accounts.passwords import MIN_PASSWORD, hash_password
from pbm_server.accounts.throttle import account_key, pair_key
from pbm_server.base.errors import ServerRefused
from pbm_server.base.settings import Settings
from pbm_server.store.lookup import account_by_email, account_by_handle, drop_stops, lookalike_refusal, move_stops
from pbm_server.store.models import Account, AuthThrottle, Confirmation, Game, Membership, Observer

#: what a handle may be: 2-32 letters, digits, '.', '_' or '-', starting with a letter
HANDLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{1,31}$")
#: what an e-mail address given to us must look like
ADDRESS_RE = re.compile(r"^[^@\s<>()\[\],;:\"$]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")
#: a removed account that played keeps its handle, at an address here
REMOVED_DOMAIN = "removed.invalid"


def forgot_key(handle: str) -> str:
    """The auth_throttle row that counted an account's ``forgot`` codes
    (before issue 26; now the mails to an address are counted: mail_key)."""
    return "forgot:" + handle.lower()[:200]


def mail_key(address: str) -> str:
    """The auth_throttle row counting the code mails (recovery, address
    change) sent to ``address`` within the hour."""
    return "mailto:" + address.lower()[:300]


def is_removed(acc: Account) -> bool:
    return acc.email.endswith("@" + REMOVED_DOMAIN)


def is_gm(settings: Settings, acc: Account) -> bool:
    """Is ``acc`` the game master's account (the one at PBM_GM_ADDRESS)?"""
    gm = (settings.gm_address or "").lower()
    return bool(gm) and acc.email == gm


def create(session: Session, handle: str, email: str, password_hash: str, now: datetime) -> Account:
    """The new account row (its checks made by the caller)."""
    acc = Account(handle=handle, handle_key=handle.lower(), handle_skeleton=name_key(handle), email=email.lower(),
                  password_hash=password_hash, created_at=now)
    session.add(acc)
    return acc


def check_new(handle: str, password: str) -> None:
    """Refused unless ``handle`` and ``password`` may make an account (before
    any database is read)."""
    if not HANDLE_RE.match(handle):
        raise ServerRefused(f"{handle!r} cannot be a handle")
    if len(password) < MIN_PASSWORD:
        raise ServerRefused(f"a password needs at least {MIN_PASSWORD} characters")


def add(session: Session, handle: str, email: str, password: str, now: datetime) -> Account:
    """An account made at once, no confirmation (the CLI's ``account add``;
    :func:`check_new` first)."""
    if account_by_handle(session, handle) or account_by_email(session, email):
        raise ServerRefused("that handle or address is registered already")
    lookalike = lookalike_refusal(session, handle)
    if lookalike:
        raise ServerRefused(lookalike)
    return create(session, handle, email, hash_password(password), now)


def find(session: Session, handle: str, *, removed: bool = False) -> Account:
    """The account ``handle``; refused if there is none (or, unless
    ``removed``, if it was removed)."""
    acc = account_by_handle(session, handle)
    if acc is None:
        raise ServerRefused(f"there is no account {handle!r} (pbm account list shows them)")
    if is_removed(acc) and not removed:
        raise ServerRefused(f"the account {acc.handle} was removed; its handle stays reserved for its game history")
    return acc


def everyone(session: Session) -> Sequence[Account]:
    """Every account, by handle."""
    return session.scalars(select(Account).order_by(Account.handle_key)).all()


def plays_in(game: Game, handle_key: str) -> str | None:
    """The handle as ``game`` spells it if ``handle_key`` plays in it now."""
    try:
        players = get_rules(game.kind).players(game.state)
    except Exception:
        return None
    return next((h for h in players if h.lower() == handle_key), None)


def running_games(session: Session) -> Sequence[Game]:
    """The games not finished (running or paused), by name."""
    return session.scalars(select(Game).where(Game.status != "finished").order_by(Game.name)).all()


def games_played(session: Session, acc: Account) -> list[str]:
    """The names of the running (or paused) games ``acc`` plays in now."""
    return [g.name for g in running_games(session) if plays_in(g, acc.handle_key) is not None]


def observed(session: Session, account_id: int) -> list[Game]:
    """The games the account observes, by name."""
    return list(session.scalars(
        select(Game).join(Observer, Observer.game_id == Game.id).where(Observer.account_id == account_id)
        .order_by(Game.name)))


def open_codes(session: Session, acc: Account, now: datetime) -> Sequence[Confirmation]:
    """The account's one-time codes that still work."""
    return session.scalars(select(Confirmation).where(Confirmation.handle == acc.handle,
                                                      Confirmation.expires_at > now)).all()


def set_password(session: Session, acc: Account, password_hash: str, *, unlock: bool) -> None:
    """A new password (hashed by the caller, outside the write transaction if
    it likes); ``unlock``: the owner has proved themselves, so the account's
    password-guessing lockout ends."""
    acc.password_hash = password_hash
    if unlock:
        session.execute(delete(AuthThrottle).where(
            AuthThrottle.key.in_([account_key(acc.handle), pair_key(acc.handle, acc.email)])))


def move(session: Session, settings: Settings, acc: Account, new: str) -> str:
    """Move ``acc`` to the address ``new`` at once (the CLI's ``account
    set-email``); its open codes, but a registration's, are void.  The old
    address is returned."""
    gm = (settings.gm_address or "").lower()
    if is_gm(settings, acc):
        raise ServerRefused("the game master's account lives at PBM_GM_ADDRESS: change that setting and "
                            "recreate the account (pbm account add --gm)")
    if gm and new == gm:
        raise ServerRefused(f"{new} is PBM_GM_ADDRESS, the game master's address; give the player's own")
    other = account_by_email(session, new)
    if other is not None:
        raise ServerRefused(f"{new} is registered already (as {other.handle}); one account per address")
    old = acc.email
    acc.email = new
    move_stops(session, old, new)
    session.execute(delete(Confirmation).where(Confirmation.handle == acc.handle, Confirmation.purpose != "register"))
    return old


def remove(session: Session, acc: Account) -> bool:
    """Remove ``acc`` (refused while it plays a running game).  True: it had
    played, so its handle stays reserved, without address or password."""
    playing = games_played(session, acc)
    if playing:
        raise ServerRefused(f"{acc.handle} plays in {', '.join(playing)}: take them out first "
                            f"(pbm game remove-player NAME {acc.handle}); nothing was changed")
    session.execute(delete(Observer).where(Observer.account_id == acc.id))
    drop_stops(session, acc.email)  # the next account at the address starts with every stream
    session.execute(delete(Confirmation).where(Confirmation.handle == acc.handle))
    session.execute(delete(AuthThrottle).where(AuthThrottle.key.in_([account_key(acc.handle), forgot_key(acc.handle)])))
    session.execute(delete(AuthThrottle).where(AuthThrottle.key.startswith(pair_key(acc.handle, ""), autoescape=True)))
    played = session.scalar(select(Membership.id).where(Membership.account_id == acc.id).limit(1)) is not None
    if played:
        acc.email = f"removed-{acc.id}@{REMOVED_DOMAIN}"
        acc.password_hash = "!removed"
        acc.absent_from = acc.absent_to = None
    else:
        session.delete(acc)
    return played
