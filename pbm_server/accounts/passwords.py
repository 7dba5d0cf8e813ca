"""Password hashing: Argon2id (argon2-cffi), salted, verified in constant time.

A worker checks the same player's password on every mail they send, and an
Argon2 check costs about 20 ms of CPU by design.  :func:`verify_password`
therefore remembers, in this process only, the credentials it has recently
verified as RIGHT: an entry is HMAC-SHA256(process key, stored hash, password)
with an expiry.  The key is random per process and never leaves it, nothing
is written to disk, a wrong password is never remembered (every guess costs
a full Argon2 check), and a changed password changes the stored hash, so old
entries no longer match.  docs/security.md, "Verified-credential cache", has
the threat model.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

# Moderate cost: a command mail is verified once; 19 MiB, 2 passes (OWASP's minimum for argon2id).
_HASHER = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1)


@functools.cache
def _dummy() -> str:
    """The hash an unknown account's password is checked against, made the
    first time one is (not on import: every `pbm` command, and every process
    of a server, would pay an Argon2 hash for it)."""
    return _HASHER.hash("no account has this password")


class VerifiedCache:
    """Recently verified (stored hash, password) pairs, as keyed digests."""

    def __init__(self, size: int = 20_000, ttl_seconds: float = 900.0) -> None:
        self.size, self.ttl = size, ttl_seconds
        self._key = os.urandom(32)
        self._entries: OrderedDict[bytes, float] = OrderedDict()
        self._lock = threading.Lock()

    def _digest(self, stored: str, password: str) -> bytes:
        msg = stored.encode() + b"\0" + password.encode("utf-8", "surrogatepass")
        return hmac.new(self._key, msg, hashlib.sha256).digest()

    def knows(self, stored: str, password: str) -> bool:
        digest = self._digest(stored, password)
        with self._lock:
            expires = self._entries.get(digest)
            if expires is None:
                return False
            if expires < time.monotonic():
                del self._entries[digest]
                return False
            self._entries.move_to_end(digest)
            return True

    def remember(self, stored: str, password: str) -> None:
        digest = self._digest(stored, password)
        with self._lock:
            self._entries[digest] = time.monotonic() + self.ttl
            self._entries.move_to_end(digest)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: this process's cache (size 0 turns it off)
VERIFIED = VerifiedCache()


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    """True if ``password`` matches; an unknown account is checked against a
    dummy hash so the answer takes as long either way.  A pair verified right
    recently in this process is answered from :data:`VERIFIED`."""
    if stored is not None and VERIFIED.size and VERIFIED.knows(stored, password):
        return True
    try:
        ok = _HASHER.verify(stored or _dummy(), password) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
    if ok and stored is not None and VERIFIED.size:
        VERIFIED.remember(stored, password)
    return ok


#: the shortest password an account may have
MIN_PASSWORD = 6


def password_problem(password: str) -> str | None:
    """Why ``password`` cannot be an account's password, or None."""
    if len(password) < MIN_PASSWORD:
        return f"a password needs at least {MIN_PASSWORD} characters"
    if "$$" in password:
        return "a password cannot contain $$"
    return None
