"""A player's account, by mail to pbm@DOMAIN: register (signup) and password.
The passwords a handler sees go into ``ctx.secrets`` so no reply can contain
them."""

from __future__ import annotations

import re

from games.base import Line, Result, Section
from pbm_server import confirm
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.compose import MASK
from pbm_server.lookup import account_by_email, account_by_handle, lookalike_refusal
from pbm_server.models import Account
from pbm_server.passwords import hash_password, password_problem, verify_password

HANDLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{1,31}$")


def _verify(acc: Account, password: str) -> bool:
    return verify_password(acc.password_hash, password)


@command("register", Audience.ANYONE,
         ("register HANDLE PASSWORD", "ask for HANDLE at this address (alias: signup); the reply holds a code"),
         aliases=("signup",))
def cmd_register(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    echo = " ".join(words[:2] + [MASK] * (len(words) > 2))
    if len(words) > 2:
        ctx.secrets.add(words[2])
    if len(words) != 3:
        return Result(line, False, "expected: register HANDLE PASSWORD (e.g. register alice s3cret-words)", echo)
    handle, password = words[1], words[2]
    if not HANDLE_RE.match(handle):
        return Result(line, False, f"{handle!r} cannot be a handle: use 2-32 letters, digits, '.', '_' or '-', starting with a letter", echo)
    problem = password_problem(password)
    if problem:
        return Result(line, False, problem, echo)
    if ctx.settings.gm_address and ctx.sender == ctx.settings.gm_address.lower():
        return Result(line, False, "the game master's account is made on the server's command line "
                                   "(pbm account add --gm HANDLE), never by mail", echo)
    existing = account_by_email(ctx.session, ctx.sender)
    if existing is not None:
        return Result(line, False, f"this address is already registered as {existing.handle}; one account per address", echo)
    if account_by_handle(ctx.session, handle) is not None:
        return Result(line, False, f"the handle {handle} is taken; choose another", echo)
    lookalike = lookalike_refusal(ctx.session, handle)
    if lookalike:
        return Result(line, False, lookalike, echo)
    code = confirm.start(ctx.session, "register", ctx.sender, handle, hash_password(password), ctx.now)
    ctx.sections.append(Section(title="Confirm your address", text=ctx.composer.render(
        "server/confirm.txt", {"handle": handle, "code": code, "server": ctx.settings.server_address,
                               "hours": int(confirm.LIFETIME.total_seconds() // 3600)}).text))
    ctx.audit.append(("register requested", f"{handle} <{ctx.sender}>"))
    return Result(line, True, "almost done: to prove this address is yours, send the code below back with 'confirm CODE'",
                  echo)


@command("confirm", Audience.ANYONE,
         ("confirm CODE", "send that code back from this address: the account exists (or moves here)"))
def cmd_confirm(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        return Result(line, False, "expected: confirm CODE (the code from the mail that answered your register, "
                                   "e.g. confirm 7KQ2M-XH4PD)")
    done = confirm.confirm(ctx.session, ctx.sender, words[1], ctx.now)
    if done.ok and isinstance(done, confirm.Moved) and done.account is not None:
        from pbm_server.commands.recovery import send_account_mail

        handle = done.account.handle
        ctx.audit.append(("email moved", f"{handle}: {done.old_email} -> {ctx.sender}"))
        send_account_mail(ctx, done.old_email, handle, f"pbm-server: your account {handle} has moved",
                          "account_notice.txt", {
                              "what": f"Your account {handle} was moved to {ctx.sender}, as asked for from this "
                                      "address with its password and confirmed from the new one. Mail from this "
                                      "address is no longer read as yours.",
                          })
    elif done.ok and done.account is not None:
        ctx.audit.append(("register", f"{done.account.handle} <{ctx.sender}>"))
    return Result(line, done.ok, done.message)


@command("password", Audience.ANYONE, ("password HANDLE OLD NEW", "change your password"))
def cmd_password(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    ctx.secrets.update(words[2:])
    echo = " ".join(words[:2] + [MASK] * len(words[2:]))
    if len(words) != 4:
        return Result(line, False, "expected: password HANDLE OLD NEW", echo)
    acc = account_by_handle(ctx.session, words[1])
    if acc is None or acc.email != ctx.sender or not (ctx.verify or _verify)(acc, words[2]):
        return Result(line, False, "the handle, this sender address and the old password do not match; nothing was changed", echo)
    problem = password_problem(words[3])
    if problem:
        return Result(line, False, problem, echo)
    acc.password_hash = hash_password(words[3])
    ctx.audit.append(("password", acc.handle))
    return Result(line, True, "your password is changed", echo)
