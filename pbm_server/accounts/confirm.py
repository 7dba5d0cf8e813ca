"""Proof that a sender controls an address: a one-time code mailed to it.

``register HANDLE PASSWORD`` does not create the account.  It stores a
:class:`~pbm_server.store.models.Confirmation` (the chosen handle, the password's
Argon2 hash, a SHA-256 of a fresh code) and the reply, which goes to the address
in From, carries the code.  Only ``confirm CODE`` sent back from that address
creates the account.  A forged From therefore gets nothing: the code goes to
the real owner of the address, who can ignore it.

The same mechanism serves three purposes (``Confirmation.purpose``):

* ``register``: the code is in the reply to ``register``; ``confirm CODE``
  creates the account.  Expires after 24 hours.
* ``reset``: ``forgot HANDLE`` mails the code to the account's registered
  address (never to anyone else); ``reset HANDLE CODE NEWPASSWORD`` from that
  address sets the password.  Expires after 1 hour.
* ``email``: ``email HANDLE NEWADDRESS`` (with the password) mails the code
  to the new address; ``confirm CODE`` from there moves the account.  Expires
  after 24 hours.

Codes have 50 bits from the operating system's CSPRNG (10 characters of an
alphabet without look-alikes), and a request is dropped after five wrong
codes.  The code is never stored, logged or shown anywhere but in the one mail
to the address it proves.
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
from pbm_server.store.models import Account, Confirmation

#: Crockford's base 32: no I, L, O or U to misread
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LENGTH = 10
LIFETIME = timedelta(hours=24)
REGISTER, RESET, EMAIL = "register", "reset", "email"
#: how long a code of each purpose holds
LIFETIMES = {REGISTER: LIFETIME, RESET: timedelta(hours=1), EMAIL: LIFETIME}
MAX_ATTEMPTS = 5
#: a sender can have this many open registrations at once (the newest wins)
OPEN_PER_ADDRESS = 1


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
    """Open a request for ``email`` and return the code to mail to it (only to
    it).  A new request replaces the open one of the same purpose for the same
    address, and (reset, email) for the same account."""
    session.execute(delete(Confirmation).where(Confirmation.email == email, Confirmation.purpose == purpose))
    if purpose != REGISTER:
        session.execute(delete(Confirmation).where(Confirmation.handle == handle, Confirmation.purpose == purpose))
    session.execute(delete(Confirmation).where(Confirmation.expires_at < now))
    code = new_code()
    session.add(
        Confirmation(
            purpose=purpose, email=email, handle=handle, password_hash=password_hash,
            code_hash=code_hash(code), created_at=now, expires_at=now + LIFETIMES.get(purpose, LIFETIME), attempts=0,
        )
    )
    return code


def redeem(session: Session, purpose: str, email: str, handle: str, code: str, now: datetime) -> Confirmation | str:
    """The open ``purpose`` request of ``handle`` at ``email`` if ``code`` is
    its code (the row is deleted: a code works once); else why not.  Five
    wrong codes end the request."""
    pending = session.scalars(
        select(Confirmation).where(Confirmation.email == email, Confirmation.purpose == purpose,
                                   Confirmation.handle == handle).order_by(Confirmation.id.desc())
    ).first()
    if pending is None or pending.expires_at < now:
        if pending is not None:
            session.delete(pending)
        return "no code is open for this account at this address (a code expires after " \
               f"{hours(purpose)} hour{'s' if hours(purpose) != 1 else ''} and works once)"
    if not secrets.compare_digest(pending.code_hash, code_hash(code)):
        pending.attempts += 1
        if pending.attempts >= MAX_ATTEMPTS:
            session.delete(pending)
            return "that is not the code, and that was the last try: the code is void"
        left = MAX_ATTEMPTS - pending.attempts
        return f"that is not the code that was mailed ({left} tries left)"
    session.delete(pending)
    return pending


@dataclass
class Confirmed:
    ok: bool
    message: str
    account: Account | None = None


def confirm(session: Session, email: str, code: str, now: datetime) -> Confirmed:
    """Carry out the open request of ``email`` if ``code`` is its code."""
    pending = session.scalars(
        select(Confirmation).where(Confirmation.email == email, Confirmation.purpose.in_((REGISTER, EMAIL)))
        .order_by(Confirmation.id.desc())
    ).first()
    if pending is None or pending.expires_at < now:
        if pending is not None:
            session.delete(pending)
        return Confirmed(False, "there is nothing to confirm for this address (a code expires after 24 hours): "
                                "send 'register HANDLE PASSWORD' again, or 'email HANDLE NEWADDRESS' with your "
                                "password from your old address")
    if not secrets.compare_digest(pending.code_hash, code_hash(code)):
        pending.attempts += 1
        if pending.attempts >= MAX_ATTEMPTS:
            session.delete(pending)
            return Confirmed(False, "that is not the code, and that was the last try: send 'register HANDLE PASSWORD' again")
        left = MAX_ATTEMPTS - pending.attempts
        return Confirmed(False, f"that is not the code mailed to this address ({left} tries left); "
                                "copy it from that mail, e.g. confirm 7KQ2M-XH4PD")
    session.delete(pending)
    if pending.purpose == EMAIL:
        return _move(session, pending, email)
    if pending.purpose != REGISTER:
        return Confirmed(False, "this code is for something this server no longer does")
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
    return Confirmed(True, f"you are registered as {pending.handle}. Put your password in game mails as $$password$$.",
                     account)


@dataclass
class Moved(Confirmed):
    old_email: str = ""


def _move(session: Session, pending: Confirmation, email: str) -> Confirmed:
    """``confirm CODE`` of an address change: the account now lives at ``email``."""
    account = session.scalar(select(Account).where(Account.handle_key == pending.handle.lower()))
    if account is None:
        return Confirmed(False, f"the account {pending.handle} no longer exists; nothing was changed")
    other = session.scalar(select(Account).where(Account.email == email))
    if other is not None:
        return Confirmed(False, f"this address is registered already (as {other.handle}); one account per address; "
                                "nothing was changed")
    old = account.email
    account.email = email
    return Moved(True, f"the account {account.handle} now belongs to this address; mail from {old} is no longer "
                       "read as it", account, old_email=old)
