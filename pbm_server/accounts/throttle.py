"""Password guessing: every credential check of one mail goes through a
:class:`CredentialGate`.  No count here is a switch one player can use to
turn another off.

* At most one password is checked per account per mail.  The same password
  given again for that account (a curio player's several moves) reuses the
  first answer; a different one is refused without running Argon2.
* Failed checks are counted in the ``auth_throttle`` table (so the counts
  survive a restart and are shared by every server on the database) under
  three keys:

  - ``pair:HANDLE:ADDRESS``, per account and sender address.  After
    ``auth_max_failures`` failures within ``auth_window_seconds`` checks of
    that account FROM THAT ADDRESS are refused for ``auth_block_seconds``,
    doubling with each further block up to ``auth_block_max_seconds``.
    Guesses from mallory's address block mallory's address only.
  - ``from:ADDRESS``, per sender address over all accounts: the same rule,
    but it refuses only checks of accounts that are NOT the sender's own (a
    guesser spraying many accounts is slowed; the address's owner still
    reaches their own account).
  - ``acct:HANDLE``, per account over all addresses: never a block.  Past
    ``auth_account_max_failures`` failures in a window, checks of the account
    from addresses other than its own are refused unrun (no Argon2 is spent
    on them) until the window ends; its own address is never affected.

* The one block that stands against an account's own address is its pair
  key, which a forged From of that address can fill.  Its owner has a way
  through that a forger lacks: an unlock code, mailed to the registered
  address (``on_lockout``), which, given as ``$$unlock CODE$$`` in a mail
  from that address, has the password checked despite the block (for 24
  hours, any number of mails).  The refusal says so.
* Whether a refused password was right is never computed, so a refused guess
  tells nothing; the right password from another address counts as a failure
  exactly like a wrong one.
* Every failed check is written to the audit log with the account AND the
  sender address.

The counts are written in their own short write transaction right after the
check (not in the mail's transaction), so a mail that later fails still
counts its guesses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from pbm_server.accounts.passwords import verify_password
from pbm_server.base.settings import Settings
from pbm_server.store.db import Database
from pbm_server.store.lookup import Credentials, audit, note_rows_for_batch, noted_row
from pbm_server.store.models import Account, AuthThrottle, table

log = logging.getLogger(__name__)

#: advisory lock (PostgreSQL) serialising updates of the throttle table
LOCK_THROTTLE = 7304

OK, WRONG, THROTTLED, UNCHECKED = "ok", "wrong", "throttled", "unchecked"

#: how an unlock code is written in a mail: $$unlock CODE$$ (a password holds no space)
UNLOCK_WORD = "unlock"

_T = table(AuthThrottle)
#: the counts of up to three keys (one plain statement, made once): three
#: plain parameters, not an expanding list, which SQLAlchemy would write into
#: the statement's text afresh on every execution (a mail's costliest statement)
_COUNT_KEYS = ("k0", "k1", "k2")
_COUNTS = select(_T.c.key, _T.c.failures, _T.c.window_start, _T.c.blocked_until).where(
    _T.c.key.in_([bindparam(k) for k in _COUNT_KEYS]))

_COUNTS_OF = select(_T.c.key, _T.c.failures, _T.c.window_start, _T.c.blocked_until).where(
    _T.c.key.in_(bindparam("keys", expanding=True)))
#: Session.info key of the counts asked once for a worker batch (look_ahead)
_AHEAD = "pbm_throttle_ahead"

#: notify(session, account, blocked until): mail the owner an unlock code
OnLockout = Callable[[Session, Account | Credentials, datetime], None]


def account_key(handle: str) -> str:
    return "acct:" + handle.lower()[:200]


def sender_key(address: str) -> str:
    return "from:" + address.lower()[:300]


def pair_key(handle: str, address: str) -> str:
    return "pair:" + handle.lower()[:64] + ":" + address.lower()[:300]


def keys_of(handle: str | None, sender: str) -> list[str]:
    """The counts a check of ``handle``'s password (None: no such account)
    in mail from ``sender`` reads: the pair's, the sender's, the account's."""
    if handle is None:
        return [sender_key(sender)]
    return [pair_key(handle, sender), sender_key(sender), account_key(handle)]


def look_ahead(session: Session, checks: Iterable[tuple[str | None, str]]) -> None:
    """The counts of a worker batch's password checks ((handle or None,
    sender) each), read with one SELECT in the batch's read transaction: the
    gates of that transaction (``session=``) then read none each.  Only the
    gates' own writes change counts, and a gate that wrote reads afresh in a
    new transaction (CredentialGate._record)."""
    wanted = sorted({k for handle, sender in checks for k in keys_of(handle, sender)})
    if wanted:
        found = {r.key: r for r in session.connection().execute(_COUNTS_OF, {"keys": wanted})}
        note_rows_for_batch(session, _AHEAD, wanted, found)


def unlock_codes(tokens: Sequence[str]) -> tuple[list[str], list[str]]:
    """The mail's ``$$...$$`` tokens split into (passwords, unlock codes)."""
    passwords, codes = [], []
    for t in tokens:
        words = t.split()
        if len(words) == 2 and words[0].lower() == UNLOCK_WORD:
            codes.append(words[1])
        else:
            passwords.append(t)
    return passwords, codes


def _until(row: Any, now: datetime) -> datetime | None:
    if row is None or row.blocked_until is None or row.blocked_until <= now:
        return None
    blocked: datetime = row.blocked_until
    return blocked


@dataclass(frozen=True)
class Check:
    """A password check the gate let through (:meth:`CredentialGate.begin`),
    waiting for its Argon2 hash."""

    account: Account | Credentials | None
    #: the account's handle (or the handle a line named, for an unknown account)
    name: str
    password: str
    #: the mail comes from the account's own address
    owner: bool

    def run(self) -> bool:
        """The slow part: does the password match?  (An unknown account is
        checked against a dummy hash, so it takes as long.)"""
        return verify_password(self.account.password_hash if self.account is not None else None, self.password)


@dataclass
class CredentialGate:
    """The credential checks of one mail."""

    db: Database
    settings: Settings
    sender: str
    now: datetime
    #: notify(session, account, until): mail the owner an unlock code (none if one is open)
    on_lockout: OnLockout | None = None
    #: account key -> (the password checked, its verdict)
    checked: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: for the reply: what was refused and why (no secrets in here)
    notes: list[str] = field(default_factory=list)
    #: the unlock codes the mail carries ($$unlock CODE$$)
    unlock: list[str] = field(default_factory=list)
    #: holds(session, account, code): is ``code`` the account's open unlock
    #: code?  (confirm.holds, passed in: confirm imports this module's neighbours)
    unlock_holds: Callable[[Session, Account | Credentials, str], bool] | None = None
    #: failures counted per throttle key when this mail looked (a success
    #: resets only a count that is there)
    _failures_seen: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    #: a read transaction of the caller's to look at the counts in (the
    #: worker's mail is read in one); None: a read transaction of its own
    session: Session | None = field(default=None, repr=False)
    #: a check of this mail wrote the counts (a read transaction begun
    #: before that write does not see it)
    wrote: bool = field(default=False, init=False)

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
        the throttle's behaviour never tells a guesser which guess was right.

        In two steps, which a worker may hold apart to run a batch's hashing
        back to back: :meth:`begin` (the verdict if one comes without hashing,
        else the :class:`Check` to run) and :meth:`finish` (its result counted)."""
        started = self.begin(account, password, handle)
        return started if isinstance(started, str) else self.finish(started, started.run())

    def begin(self, account: Account | Credentials | None, password: str, handle: str | None = None) -> str | Check:
        """The verdict when none needs the hash (THROTTLED, UNCHECKED, or the
        one this mail had already), else the check to run and then :meth:`finish`."""
        name = account.handle if account is not None else (handle or "")
        key = account_key(name)
        if key in self.checked:
            first, verdict = self.checked[key]
            if first == password:
                return verdict
            self.note(f"Only one password per account is checked in one mail; the other passwords given for {name} were not checked.")
            return UNCHECKED
        owner = account is not None and account.email == self.sender.lower()
        if self._refused(account, name, owner):
            self.checked[key] = (password, THROTTLED)
            return THROTTLED
        return Check(account, name, password, owner)

    def finish(self, check: Check, ok: bool) -> str:
        """The verdict of a check that ran (``ok``: its password matched), counted."""
        verdict = OK if ok else WRONG
        self.checked[account_key(check.name)] = (check.password, verdict)
        try:
            self._record(check.name, check.account, ok and check.owner)
        except Exception:  # counting must not lose the mail; the next check counts again
            log.exception("could not record a password check")
        return verdict

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # -- refusals ----------------------------------------------------------------
    def _refused(self, account: Account | Credentials | None, name: str, owner: bool) -> bool:
        """Is the check refused unrun?  (The note says why.)"""
        pair, by_sender = pair_key(name, self.sender), sender_key(self.sender)
        rows = self._rows(keys_of(None if account is None else name, self.sender))
        if owner and account is not None:
            until = _until(rows.get(pair), self.now)
            if until is None or self._unlocked(account):
                return False
            self._refuse_owner(account, until)
            return True
        untils = [u for u in (_until(rows.get(pair), self.now), _until(rows.get(by_sender), self.now)) if u]
        if untils:
            self.note(f"Too many failed password attempts for {name} or from {self.sender}: no password is checked "
                      f"until {max(untils):%Y-%m-%d %H:%M} UTC; nothing that needs one was done.")
            return True
        hot = rows.get(account_key(name)) if account is not None else None
        window = timedelta(seconds=self.settings.auth_window_seconds)
        if hot is not None and hot.failures >= self.settings.auth_account_max_failures \
                and self.now - hot.window_start <= window:
            self.note(f"Many failed password attempts for {name} from other addresses: until "
                      f"{hot.window_start + window:%Y-%m-%d %H:%M} UTC its password is checked only in mail from "
                      "its own address; nothing that needs it was done.")
            return True
        return False

    def _refuse_owner(self, account: Account | Credentials, until: datetime) -> None:
        """The owner's own address is blocked (a forger may have filled it):
        the unlock code is their way through."""
        self.note(
            f"Too many failed password attempts for {account.handle} from {self.sender} (perhaps mails with this "
            f"address forged as their sender): no password for it from this address is checked until "
            f"{until:%Y-%m-%d %H:%M} UTC; nothing that needs one was done. An unlock code has been mailed to "
            f"this address (Subject: \"pbm-server: failed password attempts\"). Send your mail again with it "
            "beside your password, written like $$password$$ with 'unlock CODE' in place of the word password: "
            "then your password is checked despite the block. The code works from this address only, for 24 hours."
        )
        if self.unlock:
            self.note("The unlock code in your mail is not the one mailed to this address (or it has expired).")
        if self.on_lockout is None:
            return
        try:
            with self.db.write(lock=LOCK_THROTTLE) as s:
                self.on_lockout(s, account, until)
        except Exception:
            log.exception("could not mail an unlock code")

    def _unlocked(self, account: Account | Credentials) -> bool:
        """Does the mail carry the open unlock code of ``account``?"""
        if not self.unlock or self.unlock_holds is None:
            return False
        code = self.unlock[0]  # one code per mail is tried
        if self.session is not None:
            return self.unlock_holds(self.session, account, code)
        with self.db.read() as s:
            return self.unlock_holds(s, account, code)

    # -- the table ---------------------------------------------------------------
    def _rows(self, keys: list[str]) -> dict[str, Any]:
        # one to three keys: the first stands in for the ones not given
        params = dict(zip(_COUNT_KEYS, keys + [keys[0]] * (len(_COUNT_KEYS) - len(keys)), strict=True))
        noted = [noted_row(self.session, _AHEAD, k) for k in keys] if self.session is not None else []
        rows: Sequence[Any]
        if noted and all(known for known, _ in noted):  # the batch's look-ahead read them
            rows = [row for _, row in noted if row is not None]
        elif self.session is not None:
            rows = self.session.connection().execute(_COUNTS, params).all()
        else:
            with self.db.read() as s:
                rows = s.connection().execute(_COUNTS, params).all()
        # failures counted so far, per key (a success resets only these)
        self._failures_seen.update({r.key: r.failures for r in rows})
        return {r.key: r for r in rows}

    def _record(self, name: str, account: Account | Credentials | None, ok: bool) -> None:
        pair = pair_key(name, self.sender)
        if ok and not self._failures_seen.get(pair):
            # a success with no failures counted: nothing to reset, so no
            # write transaction (and no fsync) for a known player's mail
            return
        # the caller's read transaction cannot see what is written now: later
        # checks of this mail read the counts afresh
        self.session = None
        self.wrote = True
        with self.db.write(lock=LOCK_THROTTLE) as s:
            if ok:
                row = s.get(AuthThrottle, pair)
                if row is not None:
                    row.failures, row.updated_at = 0, self.now
                return
            audit(s, self.now, self.sender.lower()[:300], "failed password check",
                  f"for {name[:64]}, in mail from {self.sender[:300]}")
            if account is None:
                self._count(s, sender_key(self.sender), block=True)
                return
            self._count(s, account_key(name), block=False)
            self._count(s, sender_key(self.sender), block=True)
            row, began = self._count(s, pair, block=True)
            # blocks keep coming at the owner's own address: the owner gets
            # the unlock code before they need it (one open code at a time)
            if (began and account.email == self.sender.lower() and row.blocked_until is not None
                    and row.level >= self.settings.auth_lockout_level and self.on_lockout is not None):
                self.on_lockout(s, account, row.blocked_until)

    def _count(self, s: Session, key: str, *, block: bool) -> tuple[AuthThrottle, bool]:
        """One more failure under ``key``; a block begins at the limit (then
        the second value is True)."""
        st = self.settings
        window = timedelta(seconds=st.auth_window_seconds)
        row = s.get(AuthThrottle, key)
        if row is None:
            row = AuthThrottle(key=key, failures=0, window_start=self.now, level=0, notified=False, updated_at=self.now)
            s.add(row)
        # a quiet spell forgives earlier blocks
        if row.level and row.blocked_until and self.now - row.blocked_until > window + self._block(row.level):
            row.level, row.notified = 0, False
        if self.now - row.window_start > window:
            row.failures, row.window_start = 0, self.now
        row.failures += 1
        row.updated_at = self.now
        if block and row.failures >= st.auth_max_failures:
            row.level += 1
            row.failures, row.window_start = 0, self.now
            row.blocked_until = self.now + self._block(row.level)
            log.warning("password checks for %s refused until %s", key, row.blocked_until)
            return row, True
        return row, False

    def _block(self, level: int) -> timedelta:
        st = self.settings
        return timedelta(seconds=min(st.auth_block_seconds * 2 ** max(level - 1, 0), st.auth_block_max_seconds))
