"""Proof that a sender controls an address: a one-time code mailed to it.

``register HANDLE PASSWORD`` does not create the account.  It stores a
:class:`~pbm_server.store.models.Confirmation` (the chosen handle, the password's
Argon2 hash, a SHA-256 of a fresh code) and the reply, which goes to the address
in From, carries the code.  Only ``confirm CODE`` sent back from that address
creates the account.  A forged From therefore gets nothing: the code goes to
the real owner of the address, who can ignore it.

The same mechanism serves these purposes (``Confirmation.purpose``):

* ``register``: the code is in the reply to ``register``; ``confirm CODE``
  creates the account.  Expires after 24 hours.
* ``reset``: ``forgot HANDLE`` mails the code to the account's registered
  address (and, for 7 days after a move, to the address it moved from);
  ``reset HANDLE CODE NEWPASSWORD`` from there sets the password.  1 hour.
* ``email``: ``email HANDLE NEWADDRESS`` (with the password) mails the code
  to the new address; ``confirm CODE`` from there moves the account.  24 hours.
* ``undo``: a move's notice to the old address carries the code;
  ``undo HANDLE CODE NEWPASSWORD`` from there moves the account back.  7 days.
* ``unlock``: mailed to an account's address while its own address is
  blocked from password checks (throttle.py); ``$$unlock CODE$$`` in a mail
  from there gets the password checked.  24 hours, any number of mails.

Every request is a row of its own with its own code: a new request never
voids or shadows another (of the same or another purpose, by the same or
another sender), and a wrong code never voids one either (it is counted in
``attempts``, for the record).  Guessing is hopeless instead: codes have 50
bits from the operating system's CSPRNG (10 characters of an alphabet without
look-alikes), a mail gets one try per request, and a request lives at most
7 days.  The code is never stored, logged or shown anywhere but in the one
mail to the address it proves.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from games.names import name_key
from pbm_server.accounts import service as accounts
from pbm_server.store.lookup import move_stops
from pbm_server.store.models import Account, Confirmation

#: Crockford's base 32: no I, L, O or U to misread
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 10
LIFETIME = timedelta(hours=24)
REGISTER, RESET, EMAIL, UNDO, UNLOCK = "register", "reset", "email", "undo", "unlock"
#: how long a code of each purpose holds
LIFETIMES = {REGISTER: LIFETIME, RESET: timedelta(hours=1), EMAIL: LIFETIME, UNDO: timedelta(days=7),
             UNLOCK: LIFETIME}
#: open requests kept per (purpose, address, handle); the oldest beyond go (they are the sender's own)
MAX_OPEN = 10


def new_code() -> str:
    raw = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:5]}-{raw[5:]}"


def normalise(code: str) -> str:
    """What the player typed -> the code's canonical form (case, dashes, look-alikes)."""
    text = code.upper().replace("-", "").replace(" ", "")
    return text.translate(str.maketrans("OIL", "011"))


def code_hash(code: str) -> str:
    return hashlib.sha256(normalise(code).encode("ascii", "replace")).hexdigest()


def hours(purpose: str) -> int:
    return int(LIFETIMES.get(purpose, LIFETIME).total_seconds() // 3600)


def start(session: Session, purpose: str, email: str, handle: str, password_hash: str, now: datetime) -> str:
    """Open a new request for ``email`` and return the code to mail to it
    (only to it).  Other open requests stay as they are; only expired ones
    and, past :data:`MAX_OPEN`, the oldest of this very purpose, address and
    handle go."""
    session.execute(delete(Confirmation).where(Confirmation.expires_at < now))
    mine = list(session.scalars(select(Confirmation.id).where(
        Confirmation.purpose == purpose, Confirmation.email == email, Confirmation.handle == handle)
        .order_by(Confirmation.id.desc())))
    if len(mine) >= MAX_OPEN:
        session.execute(delete(Confirmation).where(Confirmation.id.in_(mine[MAX_OPEN - 1:])))
    code = new_code()
    session.add(
        Confirmation(
            purpose=purpose, email=email, handle=handle, password_hash=password_hash,
            code_hash=code_hash(code), created_at=now, expires_at=now + LIFETIMES.get(purpose, LIFETIME), attempts=0,
        )
    )
    return code


def _open(session: Session, purposes: tuple[str, ...], email: str, handle: str | None, now: datetime) -> list[Confirmation]:
    """The open requests of ``purposes`` at ``email`` (for ``handle``, if given), newest first."""
    query = select(Confirmation).where(Confirmation.email == email, Confirmation.purpose.in_(purposes),
                                       Confirmation.expires_at >= now)
    if handle is not None:
        query = query.where(Confirmation.handle == handle)
    return list(session.scalars(query.order_by(Confirmation.id.desc())))


def _matching(rows: list[Confirmation], code: str) -> Confirmation | None:
    """The request whose code ``code`` is; a wrong code is counted on each (never voids one)."""
    digest = code_hash(code)
    found = next((r for r in rows if secrets.compare_digest(r.code_hash, digest)), None)
    if found is None:
        for r in rows:
            r.attempts += 1
    return found


def holds(session: Session, purpose: str, email: str, handle: str, code: str, now: datetime) -> bool:
    """Is ``code`` the code of an open ``purpose`` request of ``handle`` at ``email``?  (Nothing changes.)"""
    digest = code_hash(code)
    return any(secrets.compare_digest(r.code_hash, digest) for r in _open(session, (purpose,), email, handle, now))


def has_open(session: Session, purpose: str, email: str, handle: str, now: datetime) -> bool:
    return bool(_open(session, (purpose,), email, handle, now))


def undo_addresses(session: Session, handle: str, now: datetime) -> list[str]:
    """The addresses ``handle`` moved away from that may still undo the move."""
    rows = session.scalars(select(Confirmation.email).where(
        Confirmation.purpose == UNDO, Confirmation.handle == handle, Confirmation.expires_at >= now)).all()
    return sorted(set(rows))


def redeem(session: Session, purpose: str, email: str, handle: str, code: str, now: datetime) -> Confirmation | str:
    """The open ``purpose`` request of ``handle`` at ``email`` whose code
    ``code`` is (the row is deleted: a code works once); else why not.  A
    wrong code leaves every request open."""
    rows = _open(session, (purpose,), email, handle, now)
    if not rows:
        return "no code is open for this account at this address (a code expires after " \
               f"{_lifetime(purpose)} and works once)"
    found = _matching(rows, code)
    if found is None:
        return "that is not the code that was mailed (the code mailed still works until it expires)"
    session.delete(found)
    return found


def _lifetime(purpose: str) -> str:
    life = LIFETIMES.get(purpose, LIFETIME)
    if life >= timedelta(days=2):
        return f"{life.days} days"
    n = hours(purpose)
    return f"{n} hour{'s' if n != 1 else ''}"


@dataclass
class Confirmed:
    ok: bool
    message: str
    account: Account | None = None


def confirm(session: Session, email: str, code: str, now: datetime) -> Confirmed:
    """Carry out the open request (a registration or a move) of ``email``
    whose code ``code`` is.  Every open request of the address is tried: one
    never shadows another."""
    rows = _open(session, (REGISTER, EMAIL), email, None, now)
    if not rows:
        return Confirmed(False, "there is nothing to confirm for this address (a code expires after 24 hours): "
                                "send 'register HANDLE PASSWORD' again, or 'email HANDLE NEWADDRESS' with your "
                                "password from your old address")
    pending = _matching(rows, code)
    if pending is None:
        return Confirmed(False, "that is not the code mailed to this address (the code mailed still works); "
                                "copy it from that mail, e.g. confirm 7KQ2M-XH4PD")
    session.delete(pending)
    if pending.purpose == EMAIL:
        return _move(session, pending, email, now)
    return _register(session, pending, email, now)


def _register(session: Session, pending: Confirmation, email: str, now: datetime) -> Confirmed:
    """``confirm CODE`` of a registration: the account exists."""
    key = pending.handle.lower()
    if session.scalar(select(Account).where(Account.handle_key == key)) is not None:
        return Confirmed(False, f"the handle {pending.handle} was taken meanwhile; register again with another")
    skel = name_key(pending.handle)
    like = session.scalars(select(Account).where(Account.handle_skeleton == skel, Account.handle_key != key)).first()
    if like is not None:
        return Confirmed(False, f"{pending.handle!r} looks like the handle {like.handle!r}, registered meanwhile; "
                                "register again with another")
    if session.scalar(select(Account).where(Account.email == email)) is not None:
        return Confirmed(False, "this address is registered already; one account per address")
    account = accounts.create(session, pending.handle, email, pending.password_hash, now)
    # the address has its account: its other registrations are done with
    session.execute(delete(Confirmation).where(Confirmation.email == email, Confirmation.purpose == REGISTER))
    return Confirmed(True, f"you are registered as {pending.handle}. Put your password in game mails as $$password$$.",
                     account)


@dataclass
class Moved(Confirmed):
    old_email: str = ""
    #: the code that undoes the move, for the notice to the old address only
    undo_code: str = ""


def _move(session: Session, pending: Confirmation, email: str, now: datetime) -> Confirmed:
    """``confirm CODE`` of an address change: the account now lives at
    ``email``; the old address can undo it for 7 days (:func:`undo`)."""
    account = session.scalar(select(Account).where(Account.handle_key == pending.handle.lower()))
    if account is None:
        return Confirmed(False, f"the account {pending.handle} no longer exists; nothing was changed")
    other = session.scalar(select(Account).where(Account.email == email))
    if other is not None:
        return Confirmed(False, f"this address is registered already (as {other.handle}); one account per address; "
                                "nothing was changed")
    old = account.email
    account.email = email
    move_stops(session, old, email)  # the streams the player stopped stay stopped
    # codes bound to the old address's requests of the account go (a reset code stays where it was mailed)
    session.execute(delete(Confirmation).where(Confirmation.handle == account.handle,
                                               Confirmation.purpose.in_((EMAIL, UNLOCK))))
    undo_code = start(session, UNDO, old, account.handle, "", now)
    return Moved(True, f"the account {account.handle} now belongs to this address; mail from {old} is no longer "
                       "read as it", account, old_email=old, undo_code=undo_code)


def undo(session: Session, email: str, handle: str, code: str, now: datetime) -> Confirmed:
    """``undo HANDLE CODE``: the account moves back to ``email``, an address
    it was moved away from less than 7 days ago, whose undo code ``code`` is.
    Every other open code of the account is void (the mover may hold them)."""
    account = session.scalar(select(Account).where(Account.handle_key == handle.lower()))
    if account is None:
        return Confirmed(False, f"there is no account {handle!r}; nothing was changed")
    other = session.scalar(select(Account).where(Account.email == email))
    if other is not None and other.id != account.id:
        return Confirmed(False, f"this address is registered to {other.handle} now; nothing was changed "
                                "(write to the game master)")
    found = redeem(session, UNDO, email, account.handle, code, now)
    if isinstance(found, str):
        if found.startswith("no code is open"):
            found = f"no move of {account.handle} can be undone from this address (an undo code works once, for 7 days)"
        return Confirmed(False, found + "; nothing was changed")
    moved_to = account.email
    move_back(session, account, email)
    return Moved(True, f"the account {account.handle} is back at this address; mail from {moved_to} is no longer "
                       "read as it", account, old_email=moved_to)


def move_back(session: Session, account: Account, email: str) -> None:
    """``account`` returns to ``email`` (an address it left less than 7 days
    ago, proved by a code mailed there): every other open code of the account
    is void (whoever moved it may hold them)."""
    move_stops(session, account.email, email)
    account.email = email
    session.execute(delete(Confirmation).where(Confirmation.handle == account.handle, Confirmation.purpose != REGISTER))


def drop(session: Session, handle: str, purpose: str) -> None:
    """The open ``purpose`` requests of ``handle`` are done with (its owner used one)."""
    session.execute(delete(Confirmation).where(Confirmation.handle == handle, Confirmation.purpose == purpose))
