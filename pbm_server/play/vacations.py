"""Vacations ("absent FROM TO"): who is away at a given moment."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from pbm_server.store.lookup import accounts_by_handles
from pbm_server.store.models import Account


def is_absent(acc: Account, moment: datetime) -> bool:
    return bool(acc.absent_from and acc.absent_to and acc.absent_from <= moment < acc.absent_to)


def absent_handles(session: Session, handles: list[str], moment: datetime) -> frozenset[str]:
    """The handles (as given) whose account is on vacation at ``moment``."""
    found = accounts_by_handles(session, handles)
    return frozenset(h for h in handles if (acc := found.get(h.lower())) is not None and is_absent(acc, moment))
