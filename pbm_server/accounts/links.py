"""Signed links: a player's own view of a game on the web, and one click
that stops a stream of mail, without a password ever going over HTTP.

A link names its purpose, the account and the game, and when it expires;
its signature is an HMAC (key ``link_key`` in ``server_secrets``) over those
and, for a view link, over a fingerprint of the account's password hash, so
a view link dies when the password changes (a player who thinks a link leaked
changes the password); every link dies LIFETIME after it was made.  A tampered link, one for
another account or game, and an expired one are all refused alike.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from pbm_server.base.durations import plain_number
from pbm_server.store.lookup import account_by_handle, server_key
from pbm_server.store.models import Account

KEY_NAME = "link_key"
#: how long a link in a mail works: a season of weekly turns
LIFETIME = timedelta(days=120)
#: what a link may open: a player's own view of a game, their home (every game of
#: theirs; ``game`` is ""), their calendar of deadlines (the same, read-only, for a
#: calendar program to fetch), or stop one stream of mail (``stop-reports``, ...;
#: pbm_server/play/streams.py)
PURPOSE = re.compile(r"^(view|home|calendar|stop-[a-z]{1,16})$")
#: a token as make() writes it: the expiry (ASCII digits) and the unpadded urlsafe base64 MAC
#: (24 characters); anything else is refused before any part of it is parsed or compared
TOKEN = re.compile(r"([0-9]{1,12})\.([A-Za-z0-9_-]{1,40})", re.ASCII)


def tied_to_password(purpose: str) -> bool:
    """A view, home or calendar link dies with the password; a stop link (it can only stop
    mail) keeps working, so an old mail's one-click unsubscribe still does."""
    return purpose in ("view", "home", "calendar")


@dataclass(frozen=True)
class Link:
    purpose: str
    handle: str
    game: str
    expires: int  # seconds since the epoch
    mac: str

    @property
    def token(self) -> str:
        return f"{self.expires}.{self.mac}"


def _mac(key: bytes, purpose: str, handle_key: str, game: str, expires: int, password_hash: str) -> str:
    fingerprint = hashlib.sha256(password_hash.encode()).hexdigest()[:32] if tied_to_password(purpose) else "-"
    message = f"{purpose}|{handle_key}|{game.lower()}|{expires}|{fingerprint}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()[:18]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def link_key(session: Session) -> bytes:
    return server_key(session, KEY_NAME)


def make_with(key: bytes, account: Account, purpose: str, game: str, now: datetime) -> Link:
    assert PURPOSE.match(purpose), purpose
    expires = int((now + LIFETIME).timestamp())
    mac = _mac(key, purpose, account.handle_key, game, expires, account.password_hash)
    return Link(purpose, account.handle, game.lower(), expires, mac)


def make(session: Session, account: Account, purpose: str, game: str, now: datetime) -> Link:
    return make_with(link_key(session), account, purpose, game, now)


def check(session: Session, purpose: str, handle: str, game: str, token: str, now: datetime) -> Account | None:
    """The account a link opens, or None (tampered, expired, for another
    account or game, or signed before the password last changed)."""
    whole = TOKEN.fullmatch(token)
    if whole is None or not PURPOSE.fullmatch(purpose):
        return None
    stamp, mac = whole.groups()
    expires = plain_number(stamp, 12)
    if expires is None or expires < now.timestamp():
        return None
    account = account_by_handle(session, handle)
    if account is None:
        return None
    wanted = _mac(link_key(session), purpose, account.handle_key, game, expires, account.password_hash)
    return account if hmac.compare_digest(wanted, mac) else None


def base_url(public_url: str, http_listen: str) -> str:
    """Where the HTTP side is reached from outside: PBM_PUBLIC_URL, or by
    default the HTTP side's own address."""
    return (public_url or f"http://{http_listen}").rstrip("/")


def url(base: str, link: Link) -> str:
    """The own-view page of a view link."""
    return f"{base}/me/{link.handle}/{link.game}?k={link.token}"


def home_url(base: str, link: Link) -> str:
    """The player's home: every game and board of theirs (a home link)."""
    return f"{base}/me/{link.handle}?k={link.token}"


def calendar_url(base: str, link: Link) -> str:
    """The player's deadlines as an iCalendar file (a calendar link)."""
    return f"{base}/me/{link.handle}/deadlines.ics?k={link.token}"
