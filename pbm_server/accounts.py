"""Server commands, mailed to pbm@DOMAIN: register/signup, password, help,
help KIND, games.  Each handler takes one parsed line and returns a Result;
the passwords it saw go into ``secrets`` so no reply can contain them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from games import KINDS, get_rules
from games.base import Line, Result, Section
from pbm_server import confirm
from pbm_server.compose import MASK, Composer
from pbm_server.gameplay import account_by_email, account_by_handle, player_count, show_time
from pbm_server.models import Account, Game
from pbm_server.passwords import hash_password, verify_password
from pbm_server.settings import Settings

HANDLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{1,31}$")
MIN_PASSWORD = 6


@dataclass
class ServerContext:
    session: Session
    settings: Settings
    composer: Composer
    sender: str
    now: datetime
    is_gm: bool = False
    #: the sender's account handle (None: unregistered) and whether the mail's
    #: $$password$$ matched it
    handle: str | None = None
    authenticated: bool = False
    #: turns Notices into outbox mails (for commands that run turns)
    mailer: object = None
    secrets: set[str] = field(default_factory=set)
    sections: list[Section] = field(default_factory=list)
    audit: list[tuple[str, str]] = field(default_factory=list)


def _password_problem(password: str) -> str | None:
    if len(password) < MIN_PASSWORD:
        return f"a password needs at least {MIN_PASSWORD} characters"
    if "$$" in password:
        return "a password cannot contain $$"
    return None


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
    if ctx.settings.gm_address and ctx.sender == ctx.settings.gm_address.lower():
        return Result(line, False, "the game master's account is made on the server's command line "
                                   "(pbm account add --gm HANDLE), never by mail", echo)
    existing = account_by_email(ctx.session, ctx.sender)
    if existing is not None:
        return Result(line, False, f"this address is already registered as {existing.handle}; one account per address", echo)
    if account_by_handle(ctx.session, handle) is not None:
        return Result(line, False, f"the handle {handle} is taken; choose another", echo)
    code = confirm.start(ctx.session, "register", ctx.sender, handle, hash_password(password), ctx.now)
    ctx.sections.append(Section(title="Confirm your address", text=ctx.composer.render(
        "server/confirm.txt", {"handle": handle, "code": code, "server": ctx.settings.server_address,
                               "hours": int(confirm.LIFETIME.total_seconds() // 3600)}).text))
    ctx.audit.append(("register requested", f"{handle} <{ctx.sender}>"))
    return Result(line, True, f"almost done: to prove this address is yours, send the code below back with 'confirm CODE'", echo)


def cmd_confirm(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        return Result(line, False, "expected: confirm CODE (the code from the mail that answered your register, "
                                   "e.g. confirm 7KQ2M-XH4PD)")
    done = confirm.confirm(ctx.session, ctx.sender, words[1], ctx.now)
    if done.ok and done.account is not None:
        ctx.audit.append(("register", f"{done.account.handle} <{ctx.sender}>"))
    return Result(line, done.ok, done.message)


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


def cmd_help(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) >= 2:
        kind = words[1].lower()
        if kind not in KINDS:
            return Result(line, False, f"there is no game kind {words[1]!r}; kinds: {', '.join(KINDS)}")
        rules = get_rules(kind)
        ctx.sections.append(Section(title=f"{rules.title} ({kind})", text=rules.help_text()))
        return Result(line, True, f"the rules and commands of {rules.title} follow")
    text = ctx.composer.render(
        "server/help.txt", {"server": ctx.settings.server_address, "domain": ctx.settings.domain, "kinds": list(KINDS), "gm": ctx.is_gm}
    ).text
    ctx.sections.append(Section(title="Help", text=text))
    return Result(line, True, "the list of commands follows")


def cmd_games(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    games = ctx.session.scalars(select(Game).where(Game.status != "finished").order_by(Game.name)).all()
    me = account_by_handle(ctx.session, ctx.handle) if ctx.handle else None
    tz = me.timezone if me else None
    rows = []
    for g in games:
        rules = get_rules(g.kind)
        rows.append(
            {
                "name": g.name,
                "kind": g.kind,
                "title": rules.title,
                "status": g.status,
                "turn": g.turn,
                "turn_name": rules.turn_name,
                "players": player_count(ctx.session, g),
                "next_deadline": show_time(g.next_deadline, tz) if g.next_deadline else None,
            }
        )
    text = ctx.composer.render("server/games.txt", {"games": rows, "domain": ctx.settings.domain}).text
    ctx.sections.append(Section(title="Games", text=text))
    return Result(line, True, f"{len(rows)} game(s) listed below")


COMMANDS = {
    "register": cmd_register,
    "signup": cmd_register,
    "confirm": cmd_confirm,
    "password": cmd_password,
    "help": cmd_help,
    "games": cmd_games,
}

#: extra server commands (the GM desk registers its own here)
EXTRA_COMMANDS: dict = {}




def run_line(ctx: ServerContext, line: Line) -> Result:
    words = line.text.split()
    name = words[0].lower()
    handler = COMMANDS.get(name) or EXTRA_COMMANDS.get(name)
    if handler is None:
        known = ", ".join(sorted(COMMANDS))
        # a mistyped "register HANDLE PASSWORD" carries a password: echo only
        # the first two words of a line we cannot read
        ctx.secrets.update(words[2:])
        echo = " ".join(words[:2] + [MASK] * len(words[2:]))
        return Result(line, False, f"unknown command {words[0]!r}; commands here: {known} (game commands go to the game's address)", echo)
    return handler(ctx, line, words)


# the game master's desk and the players' history/status/preferences commands
from pbm_server import gmdesk  # noqa: E402

gmdesk.register()
