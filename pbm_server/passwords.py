"""Password hashing: Argon2id (argon2-cffi), salted, verified in constant time."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

# Moderate cost: a command mail is verified once; 19 MiB, 2 passes (OWASP's minimum for argon2id).
_HASHER = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1)
_DUMMY = _HASHER.hash("no account has this password")


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    """True if ``password`` matches; an unknown account is checked against a
    dummy hash so the answer takes as long either way."""
    try:
        return _HASHER.verify(stored or _DUMMY, password) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
