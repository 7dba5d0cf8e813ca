"""Account recovery and moves, by mail to pbm@DOMAIN.

    forgot HANDLE                    a one-time code to HANDLE's registered address
                                     (and, 7 days after a move, to the old one too)
    reset HANDLE CODE NEWPASSWORD    from where the code went: the new password
    email HANDLE NEWADDRESS          with $$password$$: a code to NEWADDRESS
    confirm CODE                     (account.py) from NEWADDRESS: the move
    undo HANDLE CODE NEWPASSWORD     from the old address, within 7 days of a
                                     move: the account comes back, with a new password

Every code travels in its own mail to the address it proves (confirm.py keeps
only its hash); no reply to anybody else ever holds it.  The words of a
``reset`` or ``undo`` line after the handle go into ``ctx.secrets``: no mail
repeats them.

Fan-out: a mail to an address other than the sender's counts against the
mail's budget (``ctx.budget``, PBM_MAX_NOTICES_PER_MAIL, shared with the game
notices the mail causes); code mails to one address are limited per hour
(PBM_ACCOUNT_MAILS_PER_HOUR); a mail's repeated lines for the same handle do
one thing.  A line not carried out for any of these reasons is refused and
says why.  ``forgot X`` from anyone but X's owner answers alike whether X
exists or not.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from games.base import Line, Result
from pbm_server.accounts import confirm
from pbm_server.accounts import service as accounts
from pbm_server.accounts.passwords import hash_password, password_problem
from pbm_server.base.errors import ServerRefused
from pbm_server.base.settings import Settings
from pbm_server.commands.registry import Audience, ServerContext, command, masked_after_two
from pbm_server.mail.compose import Composer
from pbm_server.mail.outbound import enqueue
from pbm_server.store.lookup import Credentials, account_by_email, account_by_handle, audit
from pbm_server.store.models import Account, AuthThrottle

#: the window of PBM_ACCOUNT_MAILS_PER_HOUR (as long as a reset code lives: the codes mailed still work)
MAIL_WINDOW = timedelta(hours=1)
UNLOCK_SUBJECT = "pbm-server: failed password attempts"


def send_account_mail(ctx: ServerContext, to: str, handle: str, subject: str, template: str, data: dict[str, Any]) -> None:
    """A mail of its own to ``to`` (never part of the reply to the sender)."""
    body = ctx.composer.render(f"server/{template}", {"gm": ctx.settings.gm_address, **data})
    mid, raw = ctx.composer.message(to_addr=to, to_name=handle, from_local="pbm", subject=subject, body=body,
                                    auto="auto-generated", now=ctx.now)
    enqueue(ctx.session, to_addr=to, message_id=mid, raw=raw, kind="notice", now=ctx.now)


def mail_unlock_code(session: Session, composer: Composer, settings: Settings, account: Account | Credentials,
                     until: datetime, now: datetime) -> bool:
    """Mail the owner of ``account`` an unlock code (throttle.py), unless one
    is open already (it is in their mailbox).  True if one was mailed."""
    if confirm.has_open(session, confirm.UNLOCK, account.email, account.handle, now):
        return False
    code = confirm.start(session, confirm.UNLOCK, account.email, account.handle, "", now)
    body = composer.render("server/account_code.txt", {
        "intro": f"Someone has sent many wrong passwords for your account {account.handle}, perhaps in mails that "
                 f"claim to come from this address. Until {until:%Y-%m-%d %H:%M} UTC (longer if it goes on) no "
                 "password for it from this address is checked, unless the mail also carries your unlock code:",
        "line": f"unlock {code}",
        "outro": "Put that into your mails between two pairs of dollar signs, just as you write your password "
                 f"(like $$password$$, with 'unlock {code}' in place of the word password), beside your "
                 "password, and they work as before. The code works "
                 "from this address only, for 24 hours, as often as you need it. If you have forgotten your "
                 f"password, send 'forgot {account.handle}' to {settings.server_address} for a one-time code "
                 "(it comes to this address only). Nobody else has this code; do not pass it on.",
        "gm": settings.gm_address,
    })
    mid, raw = composer.message(to_addr=account.email, to_name=account.handle, from_local="pbm",
                                subject=UNLOCK_SUBJECT, body=body, auto="auto-generated", now=now)
    enqueue(session, to_addr=account.email, message_id=mid, raw=raw, kind="notice", now=now)
    audit(session, now, "system", "unlock code", f"{account.handle}: mailed to {account.email}")
    return True


# -- fan-out ------------------------------------------------------------------------
def _first(ctx: ServerContext, what: str, key: str, line: Line) -> None:
    """Refused if this mail's lines did ``what`` for ``key`` already."""
    if (what, key) in ctx.once:
        raise ServerRefused(f"not carried out: '{what} {key}' was done by an earlier line of this mail "
                            "(once per mail is enough)")
    ctx.once.add((what, key))


def _spend(ctx: ServerContext, mails: int) -> None:
    """Count ``mails`` to addresses other than the sender's against the mail's budget; refused beyond it."""
    budget = ctx.budget
    if budget is None or mails <= 0:
        return
    if budget.used + mails > budget.limit:
        raise ServerRefused(f"not carried out: this mail has caused {budget.used} mails to other addresses "
                            f"already, and one mail may cause at most {budget.limit}; send this line again in a "
                            "later mail; nothing was changed")
    budget.used += mails


def _mail_allowed(ctx: ServerContext, address: str) -> datetime | None:
    """Count one code mail to ``address``; None if allowed, else when the next may go."""
    key = accounts.mail_key(address)
    row = ctx.session.get(AuthThrottle, key)
    if row is None:
        row = AuthThrottle(key=key, failures=0, window_start=ctx.now, level=0, notified=False, updated_at=ctx.now)
        ctx.session.add(row)
    if row.window_start + MAIL_WINDOW <= ctx.now:
        row.failures, row.window_start = 0, ctx.now
    if row.failures >= ctx.settings.account_mails_per_hour:
        allowed: datetime = row.window_start + MAIL_WINDOW
        return allowed
    row.failures += 1
    row.updated_at = ctx.now
    return None


# -- forgot / reset ---------------------------------------------------------------
def _mail_reset_code(ctx: ServerContext, acc: Account, to: str) -> None:
    code = confirm.start(ctx.session, confirm.RESET, to, acc.handle, "", ctx.now)
    hours = confirm.hours(confirm.RESET)
    moved_from = to != acc.email
    send_account_mail(ctx, to, acc.handle, f"pbm-server: a code to reset the password of {acc.handle}",
                      "account_code.txt", {
                          "intro": f"Somebody (from {'this address' if ctx.sender == to else 'another address'}) "
                                   f"asked to reset the password of your account {acc.handle}"
                                   + (" (it was moved away from this address less than 7 days ago, so the code "
                                      "comes here too)" if moved_from else "")
                                   + f". To choose a new password, send this line to {ctx.settings.server_address} "
                                   f"from this address within {hours} hour{'s' if hours != 1 else ''}, with your new "
                                   "password in place of NEWPASSWORD:",
                          "line": f"reset {acc.handle} {code} NEWPASSWORD",
                          "outro": "The code works once"
                                   + (" and also brings the account back to this address" if moved_from else "")
                                   + ". If you did not ask for this, ignore this mail: your password stays as it is, "
                                   "and nobody else has the code.",
                      })


def _recovery_targets(ctx: ServerContext, acc: Account | None) -> list[str]:
    """Where ``forgot`` codes for ``acc`` go: its address, and for 7 days after
    a move the address it left.  None for an unknown, removed or GM account."""
    if acc is None or accounts.is_removed(acc) or accounts.is_gm(ctx.settings, acc):
        return []
    return [acc.email] + [a for a in confirm.undo_addresses(ctx.session, acc.handle, ctx.now) if a != acc.email]


@command("forgot", Audience.ANYONE,
         ("forgot HANDLE", "forgotten password: a one-time code goes to HANDLE's registered address"))
def cmd_forgot(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        raise ServerRefused("expected: forgot HANDLE (your account's handle, e.g. forgot alice)")
    _first(ctx, "forgot", words[1].lower(), line)
    acc = account_by_handle(ctx.session, words[1])
    if acc is not None and acc.email == ctx.sender and not accounts.is_removed(acc):
        return _forgot_own(ctx, line, acc)
    # from anyone else: the same answer (and the same cost) whether the handle exists or not
    targets = _recovery_targets(ctx, acc)
    _spend(ctx, max(len(targets), 1))
    limit = ctx.settings.account_mails_per_hour
    if acc is not None and targets:
        sent = [to for to in targets if _mail_allowed(ctx, to) is None]
        for to in sent:
            _mail_reset_code(ctx, acc, to)
        ctx.audit.append(("forgot", f"{acc.handle}: asked from {ctx.sender}; a reset code mailed to "
                                    f"{len(sent)} of {len(targets)} address(es)"))
    return Result(line, True, f"if {words[1]} is the handle of an account here, a one-time code went to the "
                              f"address registered for it (not to this one), unless {limit} had gone there within "
                              "the hour; only its owner can use it")


def _forgot_own(ctx: ServerContext, line: Line, acc: Account) -> Result:
    """``forgot`` from the account's own address."""
    if accounts.is_gm(ctx.settings, acc):
        raise ServerRefused("the game master's password is set on the server's command line "
                            "(pbm account set-password HANDLE), never by mail")
    targets = _recovery_targets(ctx, acc)
    _spend(ctx, len(targets) - 1)
    hours = confirm.hours(confirm.RESET)
    until = _mail_allowed(ctx, acc.email)
    if until is not None:
        raise ServerRefused(f"{ctx.settings.account_mails_per_hour} codes were mailed to this address within the "
                            f"hour, so no more is sent before {until:%Y-%m-%d %H:%M} UTC; the codes already mailed "
                            f"still work (each for {hours} hour{'s' if hours != 1 else ''} after it was sent)")
    for to in targets:
        if to == acc.email or _mail_allowed(ctx, to) is None:
            _mail_reset_code(ctx, acc, to)
    ctx.audit.append(("forgot", f"{acc.handle}: a reset code mailed to the registered address"))
    return Result(line, True, f"a one-time code is on its way to you in a separate mail; it expires in {hours} "
                              f"hour{'s' if hours != 1 else ''}")


def _code_line(ctx: ServerContext, verb: str, words: list[str], line: Line, expected: str) -> None:
    """The start of a `VERB HANDLE CODE NEWPASSWORD` line (reset, undo): a
    repeated line is refused before its words join the secrets (its echo is
    masked anyway: 300 such lines would otherwise make 600 secrets for every
    mail the line causes to scan); then the words are kept secret, and a
    line of another length is refused with ``expected``."""
    _first(ctx, verb, words[1].lower() if len(words) > 1 else "", line)
    ctx.secrets.update(w for w in words[2:] if len(w) >= 4)
    if len(words) != 4:
        raise ServerRefused(expected)


@command("reset", Audience.ANYONE,
         ("reset HANDLE CODE NEWPASSWORD", "from the registered address: the code from 'forgot' sets a new password"),
         echo=masked_after_two)
def cmd_reset(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    _code_line(ctx, "reset", words, line, "expected: reset HANDLE CODE NEWPASSWORD, with the code from the mail "
               "that answered 'forgot HANDLE'; nothing was changed")
    acc = account_by_handle(ctx.session, words[1])
    moved_from = acc is not None and ctx.sender in confirm.undo_addresses(ctx.session, acc.handle, ctx.now)
    if acc is None or (acc.email != ctx.sender and not moved_from) or accounts.is_removed(acc):
        raise ServerRefused(f"reset must come from the address registered for {words[1]} (where the code "
                            "was mailed); nothing was changed")
    problem = password_problem(words[3])
    if problem:
        raise ServerRefused(f"{problem}; nothing was changed (the code still works)")
    found = confirm.redeem(ctx.session, confirm.RESET, ctx.sender, acc.handle, words[2], ctx.now)
    if isinstance(found, str):
        raise ServerRefused(f"{found}; nothing was changed. Send 'forgot {acc.handle}' for a new code")
    if moved_from:
        moved_to = acc.email
        confirm.move_back(ctx.session, acc, ctx.sender)
        ctx.audit.append(("email move undone", f"{acc.handle}: {moved_to} -> {ctx.sender} (by a reset code)"))
    else:
        confirm.drop(ctx.session, acc.handle, confirm.RESET)  # the owner is through: the other codes are done with
    # the owner has proved the address: the guessing lockout of the account ends
    accounts.set_password(ctx.session, acc, hash_password(words[3]), unlock=True)
    ctx.audit.append(("password reset", acc.handle))
    return Result(line, True, "your password is changed; put it in your mails as $$password$$"
                  + ("; the account is back at this address" if moved_from else ""))


# -- moving an account --------------------------------------------------------------
@command("email", Audience.PLAYER,
         ("email HANDLE NEWADDRESS", "move your account to NEWADDRESS (a code goes there: confirm CODE from it)"))
def cmd_email(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    if len(words) != 3:
        raise ServerRefused("expected: email HANDLE NEWADDRESS, e.g. email alice alice@new.example, with "
                            "$$password$$ in the mail; nothing was changed")
    if words[1].lower() != acc.handle_key:
        raise ServerRefused(f"this address belongs to {acc.handle}, not {words[1]}: you can move only your "
                            "own account; nothing was changed")
    if accounts.is_gm(ctx.settings, acc):
        raise ServerRefused("the game master's account stays at PBM_GM_ADDRESS; nothing was changed")
    new = _new_address(ctx, acc, words[2])
    _first(ctx, "email", acc.handle_key, line)
    _spend(ctx, 1)
    until = _mail_allowed(ctx, new)
    if until is not None:
        raise ServerRefused(f"{ctx.settings.account_mails_per_hour} codes were mailed to {new} within the hour, so "
                            f"no more is sent before {until:%Y-%m-%d %H:%M} UTC (the codes mailed still work); "
                            "nothing was changed")
    code = confirm.start(ctx.session, confirm.EMAIL, new, acc.handle, "", ctx.now)
    hours = confirm.hours(confirm.EMAIL)
    send_account_mail(ctx, new, acc.handle, f"pbm-server: confirm your new address for {acc.handle}",
                      "account_code.txt", {
                          "intro": f"The player {acc.handle} asked to move their account to this address. To "
                                   f"confirm, send this line to {ctx.settings.server_address} from this address "
                                   f"within {hours} hours:",
                          "line": f"confirm {code}",
                          "outro": "Until then the account stays where it is. If you did not ask for this, ignore "
                                   "this mail: nothing happens without the code.",
                      })
    ctx.audit.append(("email requested", f"{acc.handle}: {acc.email} -> {new}"))
    return Result(line, True, f"a code went to {new}: send 'confirm CODE' from there within {hours} hours to move "
                              "your account; until then it stays at this address")


def _new_address(ctx: ServerContext, acc: Account, given: str) -> str:
    """The address an account may move to; refused if it cannot."""
    new = given.strip("<>").lower()
    if not accounts.ADDRESS_RE.match(new):
        raise ServerRefused(f"{given!r} is not an e-mail address (expected e.g. alice@new.example); "
                            "nothing was changed")
    domain = ctx.settings.domain.lower()
    if new.endswith("@" + domain) or new == (ctx.settings.gm_address or "").lower():
        raise ServerRefused(f"{new} is an address of this server; give your own; nothing was changed")
    if new == acc.email:
        raise ServerRefused(f"your account is at {new} already; nothing was changed")
    if account_by_email(ctx.session, new) is not None:
        raise ServerRefused(f"{new} is registered to another account already (one account per address); "
                            "nothing was changed")
    return new


def tell_moved(ctx: ServerContext, moved: confirm.Moved) -> None:
    """The address an account left is told, with the code that undoes the
    move (7 days).  Always sent: it counts against the mail's budget but is
    never withheld."""
    if moved.account is None:
        return
    handle = moved.account.handle
    if ctx.budget is not None:
        ctx.budget.used += 1
    days = confirm.LIFETIMES[confirm.UNDO].days
    send_account_mail(ctx, moved.old_email, handle, f"pbm-server: your account {handle} has moved",
                      "account_code.txt", {
                          "intro": f"Your account {handle} was moved to {ctx.sender}, as asked for from this address "
                                   "with its password and confirmed from the new one. Mail from this address is no "
                                   f"longer read as yours. If this was not you, undo it within {days} days: send "
                                   f"this line to {ctx.settings.server_address} from this address, with a new "
                                   "password in place of NEWPASSWORD:",
                          "line": f"undo {handle} {moved.undo_code} NEWPASSWORD",
                          "outro": "That brings the account back here with the new password (whoever moved it "
                                   f"knows the old one). Until then, codes for 'forgot {handle}' come to this address "
                                   "too. If you moved it yourself, ignore this mail.",
                      })


@command("undo", Audience.ANYONE,
         ("undo HANDLE CODE NEWPASSWORD", "from the old address, within 7 days: undo a move of your account "
                                          "(the code is in the mail that told you of it)"),
         echo=masked_after_two)
def cmd_undo(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    _code_line(ctx, "undo", words, line, "expected: undo HANDLE CODE NEWPASSWORD, with the code from the mail "
               "that told this address of the move; nothing was changed")
    problem = password_problem(words[3])
    if problem:
        raise ServerRefused(f"{problem}; nothing was changed (the code still works)")
    done = confirm.undo(ctx.session, ctx.sender, words[1], words[2], ctx.now)
    if not done.ok or not isinstance(done, confirm.Moved) or done.account is None:
        raise ServerRefused(done.message)
    acc = done.account
    accounts.set_password(ctx.session, acc, hash_password(words[3]), unlock=True)
    ctx.audit.append(("email move undone", f"{acc.handle}: {done.old_email} -> {ctx.sender}"))
    return Result(line, True, f"{done.message}; your new password is set: put it in your mails as $$password$$")
