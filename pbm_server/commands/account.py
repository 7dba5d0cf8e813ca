"""A player's account, by mail to pbm@DOMAIN: register (signup) and password.
The passwords a handler sees go into ``ctx.secrets`` so no reply can contain
them."""

from __future__ import annotations

from games.base import Line, Result, Section
from games.names import ascii_spelling, imitates_server
from pbm_server.accounts import confirm
from pbm_server.accounts import service as accounts
from pbm_server.accounts.passwords import hash_password, password_problem, verify_password
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command, masked_after_two
from pbm_server.mail.compose import MASK
from pbm_server.store.lookup import account_by_email, account_by_handle, lookalike_refusal
from pbm_server.store.models import Account


def _verify(acc: Account, password: str) -> bool:
    return verify_password(acc.password_hash, password)


def handle_refusal(handle: str) -> str:
    """Why ``handle`` cannot be a handle, and, where one is near, a spelling
    that can (``zoë``: ``zoe``)."""
    why = (f"{handle!r} cannot be a handle: a handle is 2-32 ASCII letters (a-z, A-Z), digits, '.', '_' or '-', "
           "starting with a letter")
    spelled = ascii_spelling(handle)
    if spelled != handle and accounts.HANDLE_RE.match(spelled):
        return f"{why}: {spelled} would do"
    return why


def _masked_password(words: list[str]) -> str:
    """``register HANDLE ****``: the password (and anything after it) masked."""
    return " ".join(words[:2] + [MASK] * (len(words) > 2))


@command("register", Audience.ANYONE,
         ("register HANDLE PASSWORD", "ask for HANDLE at this address (alias: signup); the reply holds a code"),
         aliases=("signup",), echo=_masked_password)
def cmd_register(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) > 2:
        ctx.secrets.add(words[2])
    if len(words) != 3:
        raise ServerRefused("expected: register HANDLE PASSWORD (e.g. register alice s3cret-words)")
    handle, password = words[1], words[2]
    if not accounts.HANDLE_RE.match(handle):
        raise ServerRefused(handle_refusal(handle))
    imitated = imitates_server(handle)
    if imitated:
        raise ServerRefused(f"{handle!r} cannot be a handle: it looks like {imitated!r}, a name the server speaks "
                            "with (its game master, postmaster or itself); choose another")
    problem = password_problem(password)
    if problem:
        raise ServerRefused(problem)
    if ctx.settings.gm_address and ctx.sender == ctx.settings.gm_address.lower():
        raise ServerRefused("the game master's account is made on the server's command line "
                            "(pbm account add --gm HANDLE), never by mail")
    existing = account_by_email(ctx.session, ctx.sender)
    if existing is not None:
        raise ServerRefused(f"this address is already registered as {existing.handle}; one account per address")
    if account_by_handle(ctx.session, handle) is not None:
        raise ServerRefused(f"the handle {handle} is taken; choose another")
    lookalike = lookalike_refusal(ctx.session, handle)
    if lookalike:
        raise ServerRefused(lookalike)
    code = confirm.start(ctx.session, "register", ctx.sender, handle, hash_password(password), ctx.now)
    ctx.sections.append(Section(title="Confirm your address", text=ctx.composer.render(
        "server/confirm.txt", {"handle": handle, "code": code, "server": ctx.settings.server_address,
                               "hours": int(confirm.LIFETIME.total_seconds() // 3600)}).text))
    ctx.audit.append(("register requested", f"{handle} <{ctx.sender}>"))
    return Result(line, True, "almost done: to prove this address is yours, send the code below back with 'confirm CODE'")


@command("confirm", Audience.ANYONE,
         ("confirm CODE", "send that code back from this address: the account exists (or moves here)"))
def cmd_confirm(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        raise ServerRefused("expected: confirm CODE (the code from the mail that answered your register, "
                            "e.g. confirm 7KQ2M-XH4PD)")
    if ("confirm", "") in ctx.once:
        raise ServerRefused("not carried out: only one code is tried per mail (an earlier line of this mail "
                            "gave one)")
    ctx.once.add(("confirm", ""))
    done = confirm.confirm(ctx.session, ctx.sender, words[1], ctx.now)
    if not done.ok:
        raise ServerRefused(done.message)
    if isinstance(done, confirm.Moved) and done.account is not None:
        from pbm_server.commands.recovery import tell_moved

        ctx.audit.append(("email moved", f"{done.account.handle}: {done.old_email} -> {ctx.sender}"))
        tell_moved(ctx, done)  # the old address can undo it for 7 days
    elif done.account is not None:
        ctx.audit.append(("register", f"{done.account.handle} <{ctx.sender}>"))
    return Result(line, True, done.message)


@command("password", Audience.ANYONE, ("password HANDLE OLD NEW", "change your password"), echo=masked_after_two)
def cmd_password(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    ctx.secrets.update(words[2:])
    if len(words) != 4:
        raise ServerRefused("expected: password HANDLE OLD NEW")
    acc = account_by_handle(ctx.session, words[1])
    if acc is None or acc.email != ctx.sender or not (ctx.verify or _verify)(acc, words[2]):
        raise ServerRefused("the handle, this sender address and the old password do not match; nothing was changed")
    problem = password_problem(words[3])
    if problem:
        raise ServerRefused(problem)
    accounts.set_password(ctx.session, acc, hash_password(words[3]), unlock=False)
    ctx.audit.append(("password", acc.handle))
    return Result(line, True, "your password is changed")
