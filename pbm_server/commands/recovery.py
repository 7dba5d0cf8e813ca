"""Account recovery and moves, by mail to pbm@DOMAIN.

    forgot HANDLE                    a one-time code to HANDLE's registered address
    reset HANDLE CODE NEWPASSWORD    from that address: the new password
    email HANDLE NEWADDRESS          with $$password$$: a code to NEWADDRESS
    confirm CODE                     (account.py) from NEWADDRESS: the move

Every code travels in its own mail to the address it proves (confirm.py keeps
only its hash); no reply to anybody else ever holds it.  The words of a
``reset`` line after the handle go into ``ctx.secrets``: no mail repeats them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from games.base import Line, Result
from pbm_server.accounts import confirm
from pbm_server.accounts import service as accounts
from pbm_server.accounts.passwords import hash_password, password_problem
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command, masked_after_two
from pbm_server.mail.outbound import enqueue
from pbm_server.store.lookup import account_by_email, account_by_handle
from pbm_server.store.models import Account, AuthThrottle

#: forgot: at most this many codes per account within FORGOT_WINDOW
FORGOT_LIMIT = 3
FORGOT_WINDOW = timedelta(hours=24)

def send_account_mail(ctx: ServerContext, to: str, handle: str, subject: str, template: str, data: dict[str, Any]) -> None:
    """A mail of its own to ``to`` (never part of the reply to the sender)."""
    body = ctx.composer.render(f"server/{template}", {"gm": ctx.settings.gm_address, **data})
    mid, raw = ctx.composer.message(to_addr=to, to_name=handle, from_local="pbm", subject=subject, body=body,
                                    auto="auto-generated", now=ctx.now)
    enqueue(ctx.session, to_addr=to, message_id=mid, raw=raw, kind="notice", now=ctx.now)


def _forgot_allowed(ctx: ServerContext, acc: Account) -> datetime | None:
    """Count one ``forgot`` for the account; None if allowed, else when the next is."""
    row = ctx.session.get(AuthThrottle, accounts.forgot_key(acc.handle))
    if row is None:
        row = AuthThrottle(key=accounts.forgot_key(acc.handle), failures=0, window_start=ctx.now, level=0, notified=False,
                           updated_at=ctx.now)
        ctx.session.add(row)
    if row.window_start + FORGOT_WINDOW <= ctx.now:
        row.failures, row.window_start = 0, ctx.now
    if row.failures >= FORGOT_LIMIT:
        return row.window_start + FORGOT_WINDOW
    row.failures += 1
    row.updated_at = ctx.now
    return None


@command("forgot", Audience.ANYONE,
         ("forgot HANDLE", "forgotten password: a one-time code goes to HANDLE's registered address"))
def cmd_forgot(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        raise ServerRefused("expected: forgot HANDLE (your account's handle, e.g. forgot alice)")
    acc = account_by_handle(ctx.session, words[1])
    if acc is None:
        raise ServerRefused(f"there is no account {words[1]!r}; check the spelling of your handle "
                            f"(or register one with 'register HANDLE PASSWORD')")
    if accounts.is_gm(ctx.settings, acc):
        raise ServerRefused("the game master's password is set on the server's command line "
                            "(pbm account set-password HANDLE), never by mail")
    until = _forgot_allowed(ctx, acc)
    if until is not None:
        raise ServerRefused(f"{FORGOT_LIMIT} codes for {acc.handle} were mailed within "
                            f"{int(FORGOT_WINDOW.total_seconds() // 3600)} hours; the next can be asked for "
                            f"after {until:%Y-%m-%d %H:%M} UTC (the last code still works until it expires)")
    code = confirm.start(ctx.session, confirm.RESET, acc.email, acc.handle, "", ctx.now)
    hours = confirm.hours(confirm.RESET)
    send_account_mail(ctx, acc.email, acc.handle, f"pbm-server: a code to reset the password of {acc.handle}",
                      "account_code.txt", {
                          "intro": f"Somebody (from {'this address' if ctx.sender == acc.email else 'another address'}) "
                                   f"asked to reset the password of your account {acc.handle}. To choose a new "
                                   f"password, send this line to {ctx.settings.server_address} from this address "
                                   f"within {hours} hour{'s' if hours != 1 else ''}, with your new password in "
                                   "place of NEWPASSWORD:",
                          "line": f"reset {acc.handle} {code} NEWPASSWORD",
                          "outro": "The code works once. If you did not ask for this, ignore this mail: your "
                                   "password stays as it is, and nobody else has the code.",
                      })
    ctx.audit.append(("forgot", f"{acc.handle}: a reset code mailed to the registered address"
                      + ("" if ctx.sender == acc.email else f" (asked from {ctx.sender})")))
    if ctx.sender == acc.email:
        return Result(line, True, f"a one-time code is on its way to you in a separate mail; it expires in {hours} "
                                  f"hour{'s' if hours != 1 else ''}")
    return Result(line, True, f"a one-time code went to the address registered for {acc.handle} (not to this "
                              "one); only its owner can use it")


@command("reset", Audience.ANYONE,
         ("reset HANDLE CODE NEWPASSWORD", "from the registered address: the code from 'forgot' sets a new password"),
         echo=masked_after_two)
def cmd_reset(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    ctx.secrets.update(w for w in words[2:] if len(w) >= 4)
    if len(words) != 4:
        raise ServerRefused("expected: reset HANDLE CODE NEWPASSWORD, with the code from the mail that "
                            "answered 'forgot HANDLE'; nothing was changed")
    acc = account_by_handle(ctx.session, words[1])
    if acc is None:
        raise ServerRefused(f"there is no account {words[1]!r}; nothing was changed")
    if acc.email != ctx.sender:
        raise ServerRefused(f"reset must come from the address registered for {acc.handle} (where the code "
                            "was mailed); nothing was changed")

    problem = password_problem(words[3])
    if problem:
        raise ServerRefused(f"{problem}; nothing was changed (the code still works)")
    found = confirm.redeem(ctx.session, confirm.RESET, acc.email, acc.handle, words[2], ctx.now)
    if isinstance(found, str):
        raise ServerRefused(f"{found}; nothing was changed. Send 'forgot {acc.handle}' for a new code")
    # the owner has proved the address: the guessing lockout of the account ends
    accounts.set_password(ctx.session, acc, hash_password(words[3]), unlock=True)
    ctx.audit.append(("password reset", acc.handle))
    return Result(line, True, "your password is changed; put it in your mails as $$password$$")


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
    new = words[2].strip("<>").lower()
    if not accounts.ADDRESS_RE.match(new):
        raise ServerRefused(f"{words[2]!r} is not an e-mail address (expected e.g. alice@new.example); "
                            "nothing was changed")
    domain = ctx.settings.domain.lower()
    if new.endswith("@" + domain) or new == (ctx.settings.gm_address or "").lower():
        raise ServerRefused(f"{new} is an address of this server; give your own; nothing was changed")
    if new == acc.email:
        raise ServerRefused(f"your account is at {new} already; nothing was changed")
    if account_by_email(ctx.session, new) is not None:
        raise ServerRefused(f"{new} is registered to another account already (one account per address); "
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
