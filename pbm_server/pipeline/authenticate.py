"""The second stage of a mail's path: who sent it, and which of its
credentials hold.

:func:`authenticate` finds the sender's account by the From address, asks
whether our MTA verified that address (senderauth.py), and checks the mail's
first ``$$password$$`` against the account: the slow hashing happens here,
outside any write transaction, once per account per mail, through the mail's
:class:`~pbm_server.accounts.throttle.CredentialGate`.  An unregistered sender's
password is not checked at all (the reply says there is no account).

The other credentials of a mail are known only once its lines are routed and
parsed: :meth:`Sender.vouch` checks them through the same gate (the userid
and password of a pbmserv-style line, the old password of a `password` line,
the accounts a line names).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from games import KINDS
from games.base import Actor, Command
from pbm_server.accounts import confirm
from pbm_server.accounts.passwords import MIN_PASSWORD, VERIFIED, verify_password
from pbm_server.accounts.throttle import OK, THROTTLED, Check, CredentialGate, unlock_codes
from pbm_server.base.settings import Settings
from pbm_server.mail.mailtext import IncomingMail
from pbm_server.mail.senderauth import unverified_reason
from pbm_server.pipeline.route import Routed
from pbm_server.store.db import Database
from pbm_server.store.lookup import Credentials, account_by_handle, credentials_by_email
from pbm_server.store.models import Account, Game

#: the most words of one mail looked up in the cache of verified passwords
MAX_WORDS_LOOKED_UP = 2000
#: the most words of one mail hashed to see whether one is the sender's password (Sender._password_words)
MAX_WORD_CHECKS = 2
#: at most this many words of one mail are looked up as game names (one query)
MAX_GAME_NAMES_LOOKED_UP = 200

#: told when someone keeps guessing an account's password: (session, account, blocked until)
OnLockout = Callable[[Session, Account | Credentials, datetime], None]


@dataclass
class Vouched:
    """What the credentials of a mail's lines came to."""

    #: handle -> address of every account the mail's lines name (the sender's too)
    emails: dict[str, str] = field(default_factory=dict)
    #: (account handle key, old password) of `password` lines -> it matched
    verified: dict[tuple[str, str], bool] = field(default_factory=dict)
    #: passwords of pbmserv-style lines (masked in whatever the mail causes)
    secrets: set[str] = field(default_factory=set)
    #: the userid slot of a line whose credentials failed (it may hold a
    #: misplaced password): masked in the echo of the sender's lines
    echo_secrets: set[str] = field(default_factory=set)
    #: what the gate has to say (throttling), for the reply
    notes: list[str] = field(default_factory=list)


#: the punctuation a sentence puts around a word ("rules,", "(giveaway)."):
#: an ordinary word so written is no more a password than without it
_SENTENCE_MARKS = ".,;:!?()[]\"'"


def _stem(word: str) -> str:
    return word.strip(_SENTENCE_MARKS) or word


def _could_be_password(word: str) -> bool:
    """Whether a word of a mail that proved nothing is masked unchecked in
    its echo: it holds a digit or a sign beyond a sentence's punctuation
    (``s3cret``, ``open-sesame``).  A word of letters only (``giveaway``,
    ``wonderful``) is not: a password like that is masked only once some
    mail of the account proved it (passwords.VERIFIED)."""
    return not _stem(word).isalpha()


def _game_words(s: Session, words: list[str]) -> set[str]:
    """The words (lower case, without a sentence's punctuation) that are a
    game kind or the name of a game here: never masked as a password."""
    stems = [_stem(w).lower() for w in words]
    names = {k for k in stems if k in KINDS}
    # a game name of letters only is not masked anyway (_could_be_password)
    ask = list(dict.fromkeys(k for k in stems if not k.isalpha() and k not in names))[:MAX_GAME_NAMES_LOOKED_UP]
    if ask:
        names |= set(s.scalars(select(Game.name).where(Game.name.in_(ask))).all())
    return names


@dataclass
class Sender:
    """Who sent the mail, as far as it proved it."""

    actor: Actor
    gate: CredentialGate
    #: the mail carried a password that did not prove the sender (or was not checked)
    bad_password: bool = False
    #: the $$password$$ was not checked: too many failed attempts (throttle.py)
    throttled: bool = False
    #: why the From address cannot be trusted (Authentication-Results); None: trusted or not checked
    unverified: str | None = None
    #: our MTA vouched for the From address (PBM_TRUSTED_AUTHSERV_ID and a pass for it):
    #: only then may words of a mail without $$password$$ be hashed (_password_words)
    from_proven: bool = False
    notes: list[str] = field(default_factory=list)

    def vouch(self, s: Session, routed: Routed) -> Vouched:
        """The credentials of the routed lines, checked through the mail's
        gate; a game command whose credentials fail gets its error."""
        out = Vouched()
        sender = self.actor.email
        for cmd in routed.commands:
            self._vouch_command(s, cmd, out)
        for line in routed.server_lines:
            # `password HANDLE OLD NEW`: the old password is checked here, not in
            # the write transaction; commands.account.cmd_password reads the verdict
            words = line.text.split()
            if len(words) == 4 and words[0].lower() == "password":
                acc = account_by_handle(s, words[1])
                if acc is not None and acc.email == sender:
                    out.verified[(acc.handle_key, words[2])] = self.gate.check(acc, words[2]) == OK
        found, maybe = self._password_words(s, routed)
        out.secrets |= found
        out.echo_secrets |= maybe
        out.notes.extend(self.gate.notes)
        if self.actor.handle:
            out.emails[self.actor.handle] = sender
        return out

    def _password_words(self, s: Session, routed: Routed) -> tuple[set[str], set[str]]:
        """The words of a mail without a $$password$$ that may be the sender's
        password written without its marks (``pass s3cret``): (those known to
        be it, masked in all the mail causes; those that may be it, masked in
        the echo of the sender's refused lines).  A word is looked up in the
        cache of passwords verified lately (passwords.VERIFIED: cheap).  Only
        when our MTA proved the From address are at most MAX_WORD_CHECKS words
        hashed: a From anyone may write would otherwise buy Argon2 work
        outside the throttle (CredentialGate) with every forged mail; there
        the likeliest words that can be a password (:func:`_could_be_password`,
        not a game's kind or name) are masked in the echo unchecked instead (the
        reply goes to that address, and the mail proved nothing, so its lines
        did nothing).  A mail whose password matched needs none of it (its
        password is masked anyway); one whose password failed runs no line."""
        if self.actor.authenticated or self.bad_password or self.throttled or self.actor.handle is None:
            return set(), set()
        account = credentials_by_email(s, self.actor.email)
        if account is None:
            return set(), set()
        lines = [*routed.server_lines, *routed.game_lines, *routed.misdirected]
        words = list(dict.fromkeys(w for line in lines for w in line.text.split()[1:]
                                   if len(w) >= MIN_PASSWORD and "$$" not in w))[:MAX_WORDS_LOOKED_UP]
        found = {w for w in words if VERIFIED.knows(account.password_hash, w)}
        if found:
            return found, set()
        names = _game_words(s, words)
        words = [w for w in words if _stem(w).lower() not in names]
        # a password mostly holds a digit or a sign: such words are the likeliest
        likely = sorted(words, key=lambda w: not _could_be_password(w))[:MAX_WORD_CHECKS]
        if not self.from_proven:
            # unchecked, only a word that can be a password is masked: one with
            # a digit or a sign, never a game's kind or name nor an ordinary word
            # of letters (issue 41.6: "please mail me the rules of ****")
            return set(), {w for w in likely if _could_be_password(w)}
        return {w for w in likely if verify_password(account.password_hash, w)}, set()

    def _vouch_command(self, s: Session, cmd: Command, out: Vouched) -> None:
        sender = self.actor.email
        if cmd.credentials:
            userid, password = cmd.credentials
            out.secrets.add(password)
            if self.unverified:
                out.echo_secrets.add(userid)
                if cmd.error is None:
                    cmd.error = f"the sender of this mail could not be verified ({self.unverified}); nothing was done"
                return
            acc = account_by_handle(s, userid)
            verdict = self.gate.check(acc, password, handle=userid)
            if verdict == OK and acc is not None and acc.email == sender:
                cmd.actor = acc.handle
            else:
                # the "userid" slot may hold a misplaced password: never echo it
                out.echo_secrets.add(userid)
                if cmd.error is None and verdict == THROTTLED:
                    cmd.error = "too many failed password attempts: the password was not checked (see above); nothing was done"
                elif cmd.error is None:
                    cmd.error = f"the userid, its password and the sender address {sender} do not match; nothing was done"
        for h in cmd.accounts:
            acc = account_by_handle(s, h)
            if acc is None:
                if cmd.error is None:
                    cmd.error = f"there is no account named {h}; they must register first"
            else:
                out.emails[acc.handle] = acc.email


@dataclass
class Authentication:
    """A sender's authentication up to its password's hash
    (:func:`begin_authentication`); :meth:`finish` takes the hash's result.
    A worker holds the two apart to hash a whole batch's passwords back to
    back: between Argon2 runs, which sweep 19 MiB through the core's caches,
    the rest of each mail's work would run with cold caches, at about half
    speed (docs/benchmarks.md, "Issue 30, fourth round")."""

    sender: Sender
    account: Credentials | None
    #: the mail carried a $$password$$ that is looked at
    asked: bool
    #: the sender's password check, to run (None: nothing to hash)
    check: Check | None = None
    #: the verdict reached without hashing (throttled), if any
    verdict: str | None = None
    #: the mail comes from the GM's address (PBM_GM_ADDRESS)
    from_gm: bool = False

    def finish(self, ok: bool | None, session: Session | None = None) -> Sender:
        """The :class:`Sender`, given whether the password matched (None:
        no check ran); ``session``: the read transaction the mail's next
        stages use (the gate reads the throttle's counts in it)."""
        found, gate = self.sender, self.sender.gate
        if session is not None:
            gate.session = session
        verdict = self.verdict
        if self.check is not None:
            verdict = gate.finish(self.check, bool(ok))
        authenticated = verdict == OK
        if self.asked:
            found.throttled = verdict == THROTTLED
            found.bad_password = not authenticated
        found.actor = Actor(handle=self.account.handle if self.account else None, email=found.actor.email,
                            authenticated=authenticated, is_gm=self.from_gm and authenticated)
        return found


def authenticate(s: Session, db: Database, settings: Settings, mail: IncomingMail, passwords: list[str],
                 now: datetime, on_lockout: OnLockout) -> Sender:
    """The sender of ``mail``, proved by the first of ``passwords`` if it can be."""
    started = begin_authentication(s, db, settings, mail, passwords, now, on_lockout)
    return started.finish(started.check.run() if started.check is not None else None)


def begin_authentication(s: Session, db: Database, settings: Settings, mail: IncomingMail, passwords: list[str],
                         now: datetime, on_lockout: OnLockout) -> Authentication:
    """:func:`authenticate` up to the password's hash."""
    unverified = mail.from_problem  # a From whose display name is another address (senderauth.read_from)
    if settings.trusted_authserv_id and unverified is None:
        unverified = unverified_reason(mail.auth_results, settings.trusted_authserv_id, mail.from_addr)
    # $$unlock CODE$$: the owner's way through a block of their own address (throttle.py)
    passwords, codes = unlock_codes(passwords)
    gate = CredentialGate(db, settings, mail.from_addr, now, on_lockout=on_lockout, session=s, unlock=codes[:1],
                          unlock_holds=lambda rs, acc, code: confirm.holds(rs, confirm.UNLOCK, acc.email, acc.handle,
                                                                           code, now))
    account = credentials_by_email(s, mail.from_addr)
    found = Sender(Actor(handle=None, email=mail.from_addr, authenticated=False), gate, unverified=unverified,
                   from_proven=bool(settings.trusted_authserv_id) and unverified is None)
    if passwords and unverified:
        found.notes.append(f"The sender of this mail could not be verified ({unverified}), so its password "
                           "was not checked and nothing that needs it was done.")
        passwords = []
    started = Authentication(found, account, asked=bool(passwords),
                             from_gm=bool(settings.gm_address) and mail.from_addr == settings.gm_address.lower())
    if passwords:
        begun = gate.begin(account, passwords[0]) if account is not None else None
        if isinstance(begun, Check):
            started.check = begun
        else:
            started.verdict = begun
        if len(set(passwords)) > 1:
            gate.note("Only the first $$password$$ of a mail is checked as your password.")
    return started
