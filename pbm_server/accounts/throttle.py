"""Password guessing: every credential check of one mail goes through a
:class:`CredentialGate`.

* At most one password is checked per account per mail.  The same password
  given again for that account (a curio player's several moves) reuses the
  first answer; a different one is refused without running Argon2.
* Failed checks are counted per account (``acct:HANDLE``) and per sender
  address (``from:ADDRESS``) in the ``auth_throttle`` table, so the count
  survives a restart and is shared by every server on the database.  After
  ``auth_max_failures`` failures within ``auth_window_seconds`` the key is
  blocked for ``auth_block_seconds``; each further block doubles (up to
  ``auth_block_max_seconds``).  While a key is blocked no password for it is
  checked at all: the check is refused and the reply says until when.  Whether
  the refused password was right is never computed, so a refused guess tells
  nothing.
* At ``auth_lockout_level`` blocks in a row the account is locked out and its
  owner gets ONE mail about it (again only after the record has calmed down).
* A block level decays once a whole block period plus a window has passed
  without failures.

The counts are written in their own short write transaction right after the
check (not in the mail's transaction), so a mail that later fails still
counts its guesses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from pbm_server.accounts.passwords import verify_password
from pbm_server.base.settings import Settings
from pbm_server.store.db import Database
from pbm_server.store.lookup import Credentials
from pbm_server.store.models import Account, AuthThrottle, table

log = logging.getLogger(__name__)

#: advisory lock (PostgreSQL) serialising updates of the throttle table
LOCK_THROTTLE = 7304

OK, WRONG, THROTTLED, UNCHECKED = "ok", "wrong", "throttled", "unchecked"

_T = table(AuthThrottle)
#: the counts of some keys (one plain statement, made once)
_COUNTS = select(_T.c.key, _T.c.failures, _T.c.blocked_until).where(_T.c.key.in_(bindparam("keys", expanding=True)))


def account_key(handle: str) -> str:
    return "acct:" + handle.lower()[:200]


def sender_key(address: str) -> str:
    return "from:" + address.lower()[:300]


@dataclass
class CredentialGate:
    """The credential checks of one mail."""

    db: Database
    settings: Settings
    sender: str
    now: datetime
    #: notify(session, account, until): mail the owner of a locked-out account
    on_lockout: Callable[[Session, Account | Credentials, datetime], None] | None = None
    #: account key -> (the password checked, its verdict)
    checked: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: for the reply: what was refused and why (no secrets in here)
    notes: list[str] = field(default_factory=list)
    #: failures counted per throttle key when this mail looked (a success
    #: resets only a count that is there)
    _failures_seen: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    #: a read transaction of the caller's to look at the counts in (the
    #: worker's mail is read in one); None: a read transaction of its own
    session: Session | None = field(default=None, repr=False)

    # -- the one entry point ---------------------------------------------------
    def check(self, account: Account | Credentials | None, password: str, handle: str | None = None) -> str:
        """OK, WRONG, THROTTLED or UNCHECKED (another password was already
        checked for this account in this mail).  ``handle`` names the account
        when ``account`` is None: an unknown handle is checked against a dummy
        hash (same time) and counted for the sender only, so no guessed handle
        -- perhaps a misplaced password -- is stored.

        OK means the password matched.  For the counts it is a success only if
        the mail also comes from the account's address: the right password
        from another address counts as a failure, exactly like a wrong one, so
        the throttle's behaviour never tells a guesser which guess was right."""
        name = account.handle if account is not None else (handle or "")
        key = account_key(name)
        if key in self.checked:
            first, verdict = self.checked[key]
            if first == password:
                return verdict
            self.note(f"Only one password per account is checked in one mail; the other passwords given for {name} were not checked.")
            return UNCHECKED
        until = self._blocked_until([key, sender_key(self.sender)])
        if until is not None:
            self.checked[key] = (password, THROTTLED)
            self.note(
                f"Too many failed password attempts for {name} or from {self.sender}: no password is checked "
                f"until {until:%Y-%m-%d %H:%M} UTC; nothing that needs one was done."
            )
            return THROTTLED
        ok = verify_password(account.password_hash if account is not None else None, password)
        verdict = OK if ok else WRONG
        self.checked[key] = (password, verdict)
        try:
            self._record(key, account, ok and account is not None and account.email == self.sender.lower())
        except Exception:  # counting must not lose the mail; the next check counts again
            log.exception("could not record a password check")
        return verdict

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # -- the table ---------------------------------------------------------------
    def _blocked_until(self, keys: list[str]) -> datetime | None:
        if self.session is not None:
            rows = self.session.connection().execute(_COUNTS, {"keys": keys}).all()
        else:
            with self.db.read() as s:
                rows = s.connection().execute(_COUNTS, {"keys": keys}).all()
        # failures counted so far, per key (a success resets only these)
        self._failures_seen = {r.key: r.failures for r in rows if r is not None}
        untils = [r.blocked_until for r in rows if r is not None and r.blocked_until and r.blocked_until > self.now]
        return max(untils) if untils else None

    def _record(self, key: str, account: Account | Credentials | None, ok: bool) -> None:
        st = self.settings
        window = timedelta(seconds=st.auth_window_seconds)
        if ok and not self._failures_seen.get(key):
            # a success with no failures counted: nothing to reset, so no
            # write transaction (and no fsync) for a known player's mail
            return
        # the caller's read transaction cannot see what is written now: later
        # checks of this mail read the counts afresh
        self.session = None
        with self.db.write(lock=LOCK_THROTTLE) as s:
            keys = [key, sender_key(self.sender)] if account is not None else [sender_key(self.sender)]
            for k in keys:
                row = s.get(AuthThrottle, k)
                if ok:
                    if row is not None and k == key:
                        row.failures, row.updated_at = 0, self.now
                    continue
                if row is None:
                    row = AuthThrottle(key=k, failures=0, window_start=self.now, level=0, notified=False, updated_at=self.now)
                    s.add(row)
                # a quiet spell forgives earlier blocks
                if row.level and row.blocked_until and self.now - row.blocked_until > window + self._block(row.level):
                    row.level, row.notified = 0, False
                if self.now - row.window_start > window:
                    row.failures, row.window_start = 0, self.now
                row.failures += 1
                row.updated_at = self.now
                if row.failures >= st.auth_max_failures:
                    row.level += 1
                    row.failures, row.window_start = 0, self.now
                    row.blocked_until = self.now + self._block(row.level)
                    log.warning("password checks for %s refused until %s", k, row.blocked_until)
                    if (k == key and account is not None and row.level >= st.auth_lockout_level
                            and not row.notified and self.on_lockout is not None):
                        row.notified = True
                        self.on_lockout(s, account, row.blocked_until)

    def _block(self, level: int) -> timedelta:
        st = self.settings
        return timedelta(seconds=min(st.auth_block_seconds * 2 ** max(level - 1, 0), st.auth_block_max_seconds))
