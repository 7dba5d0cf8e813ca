"""The game master's desk and the players' own server commands.

The operations (``set_options``, ``pause``, ``resume``, ``add_player``,
``remove_player``, ``gm_do``, ``history``, ``status``) work on the caller's
session, so the CLI and mail run exactly the same code; each GM operation
writes an audit entry (who, when, what).

By mail (to pbm@DOMAIN) they are these commands; the GM ones are accepted only
from ``PBM_GM_ADDRESS`` with the GM account's ``$$password$$`` in the mail:

    game new KIND NAME [KEY=VALUE ...] [deadline EXPR]
    game set NAME KEY=VALUE ...        early=on|off grace=6h remind=24h
    game deadline NAME EXPR|none
    game pause NAME / game resume NAME
    game add NAME HANDLE [JOIN LINE]   game remove NAME HANDLE
    turn run NAME N                    turn rollback NAME N
    do NAME LINE                       a game's own GM command

and for every player (with their ``$$password$$``):

    history NAME [N]     status NAME     timezone ZONE     absent FROM TO | absent none
"""

from __future__ import annotations

import random
import re
from datetime import date, datetime, time, timedelta, timezone

from sqlalchemy import select

from games import KINDS, get_rules
from games.base import ALL_PLAYERS, Actor, Context, Line, Notice, Outcome, Result, Section
from pbm_server.deadlines import DeadlineError, _zone
from pbm_server.gameplay import (
    DeskError,
    Mailer,
    account_by_handle,
    apply_commands,
    audit,
    create_game,
    find_game,
    rollback,
    run_turn,
    seed_hash,
    set_deadline,
    show_time,
)
from pbm_server.models import Account, Game, Order, Snapshot

#: server-side settings of a game (the game's own options are fixed at creation)
DESK_KEYS = ("early", "grace", "remind")
_DURATION = re.compile(r"^(\d+)\s*(m|min|mins|minutes?|h|hours?|d|days?)?$", re.I)


# -- values ----------------------------------------------------------------------
def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("on", "yes", "true", "1"):
        return True
    if t in ("off", "no", "false", "0"):
        return False
    raise DeskError(f"{text!r} is not on or off")


def parse_duration(text: str) -> int:
    """Minutes from '90m', '6h', '2d' or '0'."""
    m = _DURATION.match(text.strip())
    if not m or (m.group(2) is None and m.group(1) != "0"):
        raise DeskError(f"{text!r} is not a duration: write e.g. 30m, 6h, 2d or 0")
    n, unit = int(m.group(1)), (m.group(2) or "m").lower()
    return n * (1440 if unit.startswith("d") else 60 if unit.startswith("h") else 1)


def show_duration(minutes: int) -> str:
    if minutes == 0:
        return "0"
    if minutes % 1440 == 0:
        return f"{minutes // 1440}d"
    if minutes % 60 == 0:
        return f"{minutes // 60}h"
    return f"{minutes}m"


def desk_summary(game: Game) -> str:
    return (
        f"deadline {game.deadline or 'none'}; next {show_time(game.next_deadline)}; "
        f"early={'on' if game.early else 'off'} grace={show_duration(game.grace_minutes)} "
        f"remind={show_duration(game.remind_minutes)}"
    )


# -- GM operations (CLI and mail) ----------------------------------------------------
def set_options(session, game: Game, pairs: dict[str, str], now: datetime, actor: str) -> str:
    """Set the server-side settings of a game; all or nothing."""
    rules = get_rules(game.kind)
    values = {}
    for key, value in pairs.items():
        k = key.lower()
        if k == "early":
            values[k] = parse_bool(value)
        elif k in ("grace", "remind"):
            values[k] = parse_duration(value)
        elif k == "deadline":
            values[k] = value
        elif k in {o.name for o in rules.options}:
            raise DeskError(
                f"{key} is an option of the {game.kind} game, fixed when the game was created; "
                f"here you can set early=on|off, grace=DURATION, remind=DURATION, deadline=EXPR, "
                f"or use the game's own GM commands (do {game.name} LINE)"
            )
        else:
            raise DeskError(f"unknown setting {key!r}: expected early=on|off, grace=DURATION (e.g. 6h), remind=DURATION (e.g. 24h) or deadline=EXPR")
    if "deadline" in values:
        if not rules.has_turns and values["deadline"].lower() != "none":
            raise DeskError(f"{rules.title} has no turns, so it takes no deadline")
        set_deadline(game, values["deadline"], now)
    if "early" in values:
        game.early = values["early"]
        game.early_version = None
    if "grace" in values:
        game.grace_minutes = values["grace"]
    if "remind" in values:
        game.remind_minutes = values["remind"]
    audit(session, now, actor, "game set", f"{game.name}: " + " ".join(f"{k}={v}" for k, v in pairs.items()), game)
    return f"{game.name}: {desk_summary(game)}"


def tell_players(session, mailer: Mailer, game: Game, subject: str, text: str, now: datetime) -> None:
    rules = get_rules(game.kind)

    def footer(acc: Account) -> str:
        return f"Next deadline: {show_time(game.next_deadline, acc.timezone)}" if game.next_deadline else ""

    mailer.send_notices(session, game, rules, [Notice(to=[ALL_PLAYERS], subject=subject, text=text)], now, footer=footer)


def pause(session, mailer: Mailer, game: Game, now: datetime, actor: str) -> str:
    if game.status != "running":
        raise DeskError(f"{game.name} is {game.status}, not running")
    game.status = "paused"
    audit(session, now, actor, "game pause", game.name, game)
    tell_players(session, mailer, game, f"{game.name} is paused",
                 f"The game master has paused {game.name}: no turn runs and no orders are taken until it is resumed.", now)
    return f"{game.name} is paused"


def resume(session, mailer: Mailer, game: Game, now: datetime, actor: str) -> str:
    if game.status != "paused":
        raise DeskError(f"{game.name} is {game.status}, not paused")
    game.status = "running"
    if game.deadline:
        set_deadline(game, game.deadline, now)
    audit(session, now, actor, "game resume", game.name, game)
    tell_players(session, mailer, game, f"{game.name} is running again", f"The game master has resumed {game.name}.", now)
    return f"{game.name} is running again; next deadline {show_time(game.next_deadline)}"


def _as_player(session, mailer: Mailer, game: Game, handle: str, text: str, now: datetime) -> Outcome:
    acc = account_by_handle(session, handle)
    if acc is None:
        raise DeskError(f"there is no account named {handle}; the player must register first")
    if game.status != "running":
        raise DeskError(f"{game.name} is {game.status}; resume it first")
    rules = get_rules(game.kind)
    commands = rules.parse([Line(1, text)])
    bad = [c.error for c in commands if c.error]
    if bad:
        raise DeskError(f"{game.kind} does not accept {text!r}: {bad[0]}")
    ctx = Context(now=now, rng=random.Random(), actor=Actor(handle=acc.handle, email=acc.email, authenticated=True),
                  turn=game.turn, game_name=game.name, emails={acc.handle: acc.email})
    outcome = apply_commands(session, game, rules, commands, ctx, None)
    mailer.send_notices(session, game, rules, outcome.notices, now)
    refused = [r for r in outcome.results if not r.ok]
    if refused or not outcome.results:
        raise DeskError(f"{game.name} refused {text!r} for {acc.handle}: " + (refused[0].message if refused else "no answer"))
    return outcome


def add_player(session, mailer: Mailer, game: Game, handle: str, join_line: str | None, now: datetime, actor: str) -> str:
    line = join_line or "JOIN"
    outcome = _as_player(session, mailer, game, handle, line, now)
    audit(session, now, actor, "game add", f"{game.name}: {handle} with {line!r}", game)
    return f"{handle} added to {game.name}: {outcome.results[0].message}"


def remove_player(session, mailer: Mailer, game: Game, handle: str, now: datetime, actor: str) -> str:
    outcome = _as_player(session, mailer, game, handle, "LEAVE", now)
    audit(session, now, actor, "game remove", f"{game.name}: {handle}", game)
    return f"{handle} removed from {game.name}: {outcome.results[0].message}"


def gm_do(session, mailer: Mailer, game: Game, lines: list[str], gm_email: str, gm_handle: str | None, now: datetime, actor: str) -> Outcome:
    """Run a game's own command lines as the game master."""
    rules = get_rules(game.kind)
    commands = rules.parse([Line(i + 1, text) for i, text in enumerate(lines)])
    ctx = Context(now=now, rng=random.Random(), actor=Actor(handle=gm_handle, email=gm_email, authenticated=True, is_gm=True),
                  turn=game.turn, game_name=game.name)
    outcome = apply_commands(session, game, rules, commands, ctx, None, gm_actor=actor)
    mailer.send_notices(session, game, rules, outcome.notices, now)
    return outcome


# -- what anybody may ask ------------------------------------------------------------------
def history(session, game: Game, turn: int | None, viewer: Account | None, is_gm: bool) -> tuple[str, list[Section]]:
    rules = get_rules(game.kind)
    afters = session.scalars(
        select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "after").order_by(Snapshot.id)
    ).all()
    if not afters:
        raise DeskError(f"no {rules.turn_name} of {game.name} has been processed yet")
    done = sorted({s.turn for s in afters})
    if turn is None:
        turn = max(done)
    if turn not in done:
        raise DeskError(f"{game.name} has no processed {rules.turn_name} {turn}; processed: {', '.join(map(str, done))}")
    snap = [s for s in afters if s.turn == turn][-1]
    key = viewer.handle_key if viewer else None
    reports = snap.reports or {}
    if key in reports:
        text = reports[key]
    elif snap.report is not None:
        text = snap.report
    elif is_gm and reports:
        first = sorted(reports)[0]
        text = f"(the copy {first} got)\n\n" + reports[first]
    else:
        text = f"The reports of {rules.turn_name} {turn} were private to each player, and you got none."
    lines = []
    for t in done:
        s = [x for x in afters if x.turn == t][-1]
        lines.append(f"{rules.turn_name} {t}: processed {s.created_at:%Y-%m-%d %H:%M} UTC" + (f", seed {s.seed}" if s.seed else ""))
    lines.append(f"{rules.turn_name} {game.turn}: open, SHA-256 of its seed {seed_hash(game.turn_seed)}")
    sections = [
        Section(title=f"{game.name}: report of {rules.turn_name} {turn}", text=text),
        Section(title=f"{game.name}: {rules.turn_name}s", text="\n".join(lines)),
    ]
    return f"the report of {rules.turn_name} {turn} and the list of {rules.turn_name}s follow", sections


def status(session, game: Game, viewer: Account | None) -> list[Section]:
    rules = get_rules(game.kind)
    tz = viewer.timezone if viewer else None
    info = [f"{rules.title} game {game.name}: {game.status}"]
    if rules.has_turns:
        info.append(f"Open {rules.turn_name}: {game.turn}")
        info.append(f"Next deadline: {show_time(game.next_deadline, tz)}" + (f" ({game.deadline})" if game.deadline else ""))
        if game.grace_minutes:
            info.append(f"Grace period after the deadline: {show_duration(game.grace_minutes)}")
        if game.early:
            info.append("The turn runs early once every player has sent orders.")
        info.append(f"SHA-256 of the seed of {rules.turn_name} {game.turn}: {seed_hash(game.turn_seed)}")
    handle = None
    if viewer is not None:
        players = {h.lower(): h for h in rules.players(game.state)}
        handle = players.get(viewer.handle_key)
        if handle is None:
            info.append(f"You ({viewer.handle}) are not playing in this game; you see what an observer sees.")
        elif rules.has_turns:
            held = session.scalar(select(Order).where(Order.game_id == game.id, Order.handle == handle, Order.turn == game.turn))
            waiting = {h.lower() for h in rules.waiting_for(game.state)}
            if held is not None and held.lines:
                info.append(f"Your orders for {rules.turn_name} {game.turn}:")
                info.extend(f"  {line}" for line in held.lines)
            elif viewer.handle_key in waiting:
                info.append(f"You have sent no orders for {rules.turn_name} {game.turn} yet.")
    sections = [Section(title=f"{game.name}: status", text="\n".join(info))]
    sections.extend(rules.view(game.state, handle))
    return sections


# -- mail handlers ------------------------------------------------------------------------
GM_REFUSED = (
    "game master commands are accepted only from the game master's address with the GM password "
    "in the mail ($$password$$); nothing was done"
)


def _need_gm(ctx, line: Line) -> Result | None:
    if ctx.is_gm:
        return None
    audit(ctx.session, ctx.now, ctx.handle or ctx.sender, "gm refused", f"{ctx.sender}: {line.text[:200]}")
    return Result(line, False, GM_REFUSED)


def _game(ctx, line: Line, name: str) -> Game:
    g = find_game(ctx.session, name)
    if g is None:
        raise DeskError(f"there is no game named {name}")
    return g


def _actor(ctx) -> str:
    return ctx.handle or ctx.sender


def _safely(ctx, line: Line, fn) -> Result:
    """Run a GM operation in a savepoint: a refusal changes nothing."""
    try:
        with ctx.session.begin_nested():
            message = fn()
        return Result(line, True, message)
    except DeskError as exc:
        return Result(line, False, f"{exc}; nothing was changed" if "nothing" not in str(exc) else str(exc))


GAME_USAGE = (
    "expected one of: game new KIND NAME [KEY=VALUE ...] [deadline EXPR]; game set NAME KEY=VALUE ...; "
    "game deadline NAME EXPR|none; game pause NAME; game resume NAME; game add NAME HANDLE [JOIN LINE]; "
    "game remove NAME HANDLE"
)


def cmd_game(ctx, line: Line, words: list[str]) -> Result:
    refused = _need_gm(ctx, line)
    if refused:
        return refused
    sub = words[1].lower() if len(words) > 1 else ""
    actor = _actor(ctx)
    if sub == "new":
        if len(words) < 4:
            return Result(line, False, "expected: game new KIND NAME [KEY=VALUE ...] [deadline EXPR], e.g. game new giveaway g1 no_order=split deadline every Saturday 12:00 UTC")
        kind, name, rest = words[2].lower(), words[3], words[4:]
        pairs, deadline = {}, None
        for i, w in enumerate(rest):
            if w.lower() == "deadline":
                deadline = " ".join(rest[i + 1:])
                break
            if "=" not in w:
                return Result(line, False, f"{w!r} is not KEY=VALUE; expected: game new KIND NAME [KEY=VALUE ...] [deadline EXPR]")
            k, v = w.split("=", 1)
            pairs[k] = v
        desk = {k: v for k, v in pairs.items() if k.lower() in DESK_KEYS}
        options = {k: v for k, v in pairs.items() if k.lower() not in DESK_KEYS}

        def new() -> str:
            if kind not in KINDS:
                raise DeskError(f"unknown game kind {kind!r}; kinds: {', '.join(KINDS)}")
            g = create_game(ctx.session, kind, name, options, deadline, ctx.now, actor=actor)
            if desk:
                set_options(ctx.session, g, desk, ctx.now, actor)
            return f"{g.kind} game {g.name} created: players mail {g.name}@{ctx.settings.domain}; {desk_summary(g)}"

        return _safely(ctx, line, new)
    if sub in ("set", "deadline", "pause", "resume", "add", "remove", "kick"):
        if len(words) < 3:
            return Result(line, False, GAME_USAGE)
        name = words[2]

        def op() -> str:
            g = _game(ctx, line, name)
            if sub == "set":
                if len(words) < 4:
                    raise DeskError("expected: game set NAME KEY=VALUE ... (early=on|off grace=6h remind=24h)")
                pairs = {}
                for w in words[3:]:
                    if "=" not in w:
                        raise DeskError(f"{w!r} is not KEY=VALUE")
                    k, v = w.split("=", 1)
                    pairs[k] = v
                return set_options(ctx.session, g, pairs, ctx.now, actor)
            if sub == "deadline":
                if len(words) < 4:
                    raise DeskError("expected: game deadline NAME EXPR, e.g. game deadline g1 every Saturday 03:00 UTC, or none")
                msg = set_options(ctx.session, g, {"deadline": " ".join(words[3:])}, ctx.now, actor)
                tell_players(ctx.session, ctx.mailer, g, f"{g.name}: the deadline has changed",
                             f"The game master has set the deadline of {g.name} to: {g.deadline or 'none'}.", ctx.now)
                return msg
            if sub == "pause":
                return pause(ctx.session, ctx.mailer, g, ctx.now, actor)
            if sub == "resume":
                return resume(ctx.session, ctx.mailer, g, ctx.now, actor)
            if len(words) < 4:
                raise DeskError(f"expected: game {sub} NAME HANDLE")
            if sub == "add":
                return add_player(ctx.session, ctx.mailer, g, words[3], " ".join(words[4:]) or None, ctx.now, actor)
            return remove_player(ctx.session, ctx.mailer, g, words[3], ctx.now, actor)

        return _safely(ctx, line, op)
    return Result(line, False, GAME_USAGE)


def cmd_turn(ctx, line: Line, words: list[str]) -> Result:
    refused = _need_gm(ctx, line)
    if refused:
        return refused
    usage = "expected: turn run NAME N (N: the turn now open) or turn rollback NAME N"
    if len(words) != 4 or words[1].lower() not in ("run", "rollback"):
        return Result(line, False, usage)
    try:
        n = int(words[3])
    except ValueError:
        return Result(line, False, f"{words[3]!r} is not a turn number; {usage}")
    actor = _actor(ctx)

    def op() -> str:
        g = _game(ctx, line, words[2])
        rules = get_rules(g.kind)
        if words[1].lower() == "run":
            outcome = run_turn(ctx.session, g, ctx.mailer, ctx.now, actor=actor, expected_turn=n)
            return (f"{g.name}: {rules.turn_name} {n} processed; {len(outcome.notices)} notice(s) sent"
                    + ("; the game is finished" if g.status == "finished" else f"; now open: {rules.turn_name} {g.turn}"))
        rollback(ctx.session, g, ctx.mailer, n, ctx.now, actor)
        return f"{g.name} is back before {rules.turn_name} {n}; the players are told"

    return _safely(ctx, line, op)


def cmd_do(ctx, line: Line, words: list[str]) -> Result:
    refused = _need_gm(ctx, line)
    if refused:
        return refused
    parts = line.text.split(None, 2)
    if len(parts) < 3:
        return Result(line, False, "expected: do NAME LINE (a game's own command, run as the game master)")
    try:
        with ctx.session.begin_nested() as nested:
            g = _game(ctx, line, parts[1])
            outcome = gm_do(ctx.session, ctx.mailer, g, [parts[2]], ctx.sender, ctx.handle, ctx.now, _actor(ctx))
            results = outcome.results or [Result(line, False, "the game gave no answer")]
            if not all(r.ok for r in results):
                nested.rollback()
    except DeskError as exc:
        return Result(line, False, f"{exc}; nothing was changed")
    r = results[0]
    ctx.sections.extend(outcome.sections if r.ok else [])
    return Result(line, r.ok, f"{g.name}: {r.message}" + ("" if r.ok else "; nothing was changed"))


def _need_account(ctx, line: Line) -> Result | Account:
    if not ctx.handle:
        return Result(line, False, f"you are not registered: first send 'register HANDLE PASSWORD' to {ctx.settings.server_address}")
    if not ctx.authenticated:
        return Result(line, False, "this needs your password: put $$yourpassword$$ anywhere in the mail")
    return account_by_handle(ctx.session, ctx.handle)


def cmd_history(ctx, line: Line, words: list[str]) -> Result:
    acc = _need_account(ctx, line)
    if isinstance(acc, Result):
        return acc
    if len(words) not in (2, 3) or (len(words) == 3 and not words[2].isdigit()):
        return Result(line, False, "expected: history NAME [N], e.g. history g1 or history g1 3")
    try:
        g = _game(ctx, line, words[1])
        msg, sections = history(ctx.session, g, int(words[2]) if len(words) == 3 else None, acc, ctx.is_gm)
    except DeskError as exc:
        return Result(line, False, str(exc))
    ctx.sections.extend(sections)
    return Result(line, True, msg)


def cmd_status(ctx, line: Line, words: list[str]) -> Result:
    acc = _need_account(ctx, line)
    if isinstance(acc, Result):
        return acc
    if len(words) != 2:
        return Result(line, False, "expected: status NAME, e.g. status g1")
    g = find_game(ctx.session, words[1])
    if g is None:
        return Result(line, False, f"there is no game named {words[1]}")
    for sec in status(ctx.session, g, acc):
        if sec.template:  # a game's template: render it here, the reply is not the game's
            title, text, _ = ctx.composer.section(sec, g.kind)
            sec = Section(title=title, text=text)
        ctx.sections.append(sec)
    return Result(line, True, f"the state of {g.name} as you see it follows")


def cmd_timezone(ctx, line: Line, words: list[str]) -> Result:
    acc = _need_account(ctx, line)
    if isinstance(acc, Result):
        return acc
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


def cmd_absent(ctx, line: Line, words: list[str]) -> Result:
    acc = _need_account(ctx, line)
    if isinstance(acc, Result):
        return acc
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


def register() -> None:
    from pbm_server.accounts import EXTRA_COMMANDS

    EXTRA_COMMANDS.update(
        {
            "game": cmd_game,
            "turn": cmd_turn,
            "do": cmd_do,
            "history": cmd_history,
            "status": cmd_status,
            "timezone": cmd_timezone,
            "absent": cmd_absent,
        }
    )
