"""A player's own account, by mail to pbm@DOMAIN: register (signup), password,
timezone, absent.  The passwords a handler sees go into ``ctx.secrets`` so no
reply can contain them."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone

from games.base import Line, Result
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.compose import MASK
from pbm_server.deadlines import DeadlineError, _zone
from pbm_server.lookup import account_by_email, account_by_handle
from pbm_server.models import Account
from pbm_server.passwords import hash_password, verify_password

HANDLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{1,31}$")
MIN_PASSWORD = 6


def _password_problem(password: str) -> str | None:
    if len(password) < MIN_PASSWORD:
        return f"a password needs at least {MIN_PASSWORD} characters"
    if "$$" in password:
        return "a password cannot contain $$"
    return None


@command("register", Audience.ANYONE,
         ("register HANDLE PASSWORD", "bind HANDLE to this address (alias: signup)"), aliases=("signup",))
def cmd_register(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    echo = " ".join(words[:2] + [MASK] * (len(words) > 2))
    if len(words) > 2:
        ctx.secrets.add(words[2])
    if len(words) != 3:
        return Result(line, False, "expected: register HANDLE PASSWORD (e.g. register alice s3cret-words)", echo)
    handle, password = words[1], words[2]
    if not HANDLE_RE.match(handle):
        return Result(line, False, f"{handle!r} cannot be a handle: use 2-32 letters, digits, '.', '_' or '-', starting with a letter", echo)
    problem = _password_problem(password)
    if problem:
        return Result(line, False, problem, echo)
    existing = account_by_email(ctx.session, ctx.sender)
    if existing is not None:
        return Result(line, False, f"this address is already registered as {existing.handle}; one account per address", echo)
    if account_by_handle(ctx.session, handle) is not None:
        return Result(line, False, f"the handle {handle} is taken; choose another", echo)
    ctx.session.add(Account(handle=handle, handle_key=handle.lower(), email=ctx.sender, password_hash=hash_password(password), created_at=ctx.now))
    ctx.audit.append(("register", f"{handle} <{ctx.sender}>"))
    return Result(line, True, f"you are registered as {handle}. Put your password in game mails as $$password$$.", echo)


@command("password", Audience.ANYONE, ("password HANDLE OLD NEW", "change your password"))
def cmd_password(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    ctx.secrets.update(words[2:])
    echo = " ".join(words[:2] + [MASK] * len(words[2:]))
    if len(words) != 4:
        return Result(line, False, "expected: password HANDLE OLD NEW", echo)
    acc = account_by_handle(ctx.session, words[1])
    if acc is None or acc.email != ctx.sender or not verify_password(acc.password_hash, words[2]):
        return Result(line, False, "the handle, this sender address and the old password do not match; nothing was changed", echo)
    problem = _password_problem(words[3])
    if problem:
        return Result(line, False, problem, echo)
    acc.password_hash = hash_password(words[3])
    ctx.audit.append(("password", acc.handle))
    return Result(line, True, "your password is changed", echo)


@command("timezone", Audience.PLAYER, ("timezone ZONE", "show deadlines also in ZONE, e.g. Europe/Zurich"))
def cmd_timezone(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    if len(words) == 1:
        return Result(line, True, f"your time zone is {acc.timezone or 'UTC'}")
    if len(words) != 2:
        return Result(line, False, "expected: timezone ZONE, e.g. timezone Europe/Zurich (an IANA name) or timezone UTC")
    try:
        z = _zone(words[1])
    except DeadlineError as exc:
        return Result(line, False, f"{exc}; nothing was changed")
    acc.timezone = None if z.key == "UTC" else z.key
    ctx.audit.append(("timezone", f"{acc.handle}: {z.key}"))
    return Result(line, True, f"deadlines in your mails are now also shown in {z.key}")


@command("absent", Audience.PLAYER,
         ("absent FROM TO", 'a vacation, dates YYYY-MM-DD (both included); "absent none" ends it'))
def cmd_absent(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    usage = "expected: absent FROM TO with dates as YYYY-MM-DD (both days included), e.g. absent 2026-12-20 2027-01-03, or absent none"
    tz = _zone(acc.timezone)
    if len(words) == 1:
        if acc.absent_from and acc.absent_to and acc.absent_to > ctx.now:
            last = (acc.absent_to.astimezone(tz) - timedelta(days=1)).date()
            return Result(line, True, f"you are on vacation from {acc.absent_from.astimezone(tz).date()} to {last}")
        return Result(line, True, "you have no vacation set")
    if len(words) == 2 and words[1].lower() in ("none", "off", "cancel"):
        acc.absent_from = acc.absent_to = None
        ctx.audit.append(("absent", f"{acc.handle}: none"))
        return Result(line, True, "your vacation is cancelled: the no-order rules apply to you again")
    if len(words) != 3:
        return Result(line, False, usage)
    try:
        first, last = date.fromisoformat(words[1]), date.fromisoformat(words[2])
    except ValueError:
        return Result(line, False, usage)
    if last < first:
        return Result(line, False, f"the vacation ends ({last}) before it starts ({first}); {usage}")
    start = datetime.combine(first, time(0), tz).astimezone(timezone.utc)
    end = datetime.combine(last + timedelta(days=1), time(0), tz).astimezone(timezone.utc)
    if end <= ctx.now:
        return Result(line, False, f"that vacation is over already; {usage}")
    acc.absent_from, acc.absent_to = start, end
    ctx.audit.append(("absent", f"{acc.handle}: {first} to {last} ({tz.key})"))
    return Result(line, True, f"you are on vacation from {first} to {last} ({tz.key}): deadlines keep running, but you get no reminders and the no-order rules leave you out")

