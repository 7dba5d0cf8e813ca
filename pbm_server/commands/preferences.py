"""A registered player's settings, by mail to pbm@DOMAIN: timezone (deadlines
also shown in their own zone) and absent (a vacation)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

from games.base import Line, Result
from pbm_server.base.deadlines import _zone
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import UnknownZone, known_zone
from pbm_server.commands.registry import Audience, ServerContext, command


@command("timezone", Audience.PLAYER, ("timezone ZONE", "show deadlines also in ZONE, e.g. Europe/Zurich"))
def cmd_timezone(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    if len(words) == 1:
        return Result(line, True, f"your time zone is {acc.timezone or 'UTC'}")
    if len(words) != 2:
        raise ServerRefused("expected: timezone ZONE, e.g. timezone Europe/Zurich (an IANA name) or timezone UTC")
    try:
        z = known_zone(words[1])
    except UnknownZone as exc:
        raise ServerRefused(f"{exc}; nothing was changed") from None
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
        raise ServerRefused(usage)
    try:
        first, last = date.fromisoformat(words[1]), date.fromisoformat(words[2])
    except ValueError:
        raise ServerRefused(usage) from None
    if last < first:
        raise ServerRefused(f"the vacation ends ({last}) before it starts ({first}); {usage}")
    start = datetime.combine(first, time(0), tz).astimezone(timezone.utc)
    end = datetime.combine(last + timedelta(days=1), time(0), tz).astimezone(timezone.utc)
    if end <= ctx.now:
        raise ServerRefused(f"that vacation is over already; {usage}")
    acc.absent_from, acc.absent_to = start, end
    ctx.audit.append(("absent", f"{acc.handle}: {first} to {last} ({tz.key})"))
    return Result(line, True, f"you are on vacation from {first} to {last} ({tz.key}): deadlines keep running, but you get no reminders and the no-order rules leave you out")

