"""The game master's operations on a game.

``set_options``, ``change_deadline``, ``pause``, ``resume``, ``add_player``,
``remove_player`` and ``gm_do`` work on the caller's session, so the CLI
(``pbm game ...``) and the GM's mail (``pbm_server.commands.desk``) run
exactly the same code; each one writes an audit entry (who, when, what).  A
refusal raises ServerRefused.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from sqlalchemy.orm import Session

from games import get_rules
from games.base import ALL_PLAYERS, Actor, Context, Line, Notice, Outcome
from pbm_server.base.durations import parse_duration, plain_number, show_duration
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.base.settings import Settings
from pbm_server.mail import alerts
from pbm_server.play import alerting, readycheck, roster, votesettings
from pbm_server.play.creation import create_game
from pbm_server.play.gamestate import set_deadline
from pbm_server.play.moves import apply_commands
from pbm_server.play.notices import Mailer, tell_players
from pbm_server.play.people import close_seat
from pbm_server.store.lookup import account_by_handle, audit
from pbm_server.store.models import Game

#: server-side settings of a game (the game's own options are fixed at creation)
DESK_KEYS: tuple[str, ...] = ("early", "grace", "remind", "press", "anonymous", "seats", "public_press", "notify")
#: the settings for people (issue 44: play/people.py, play/reliability.py)
PEOPLE_KEYS = ("drop_after", "nmr", "min_reliability")
DESK_KEYS += PEOPLE_KEYS
#: what the GM may set here, for refusals
DESK_USAGE = ("early=on|off, grace=DURATION (e.g. 6h), remind=DURATION (e.g. 24h), deadline=EXPR, "
              "press=on|off|broadcast, anonymous=on|off, public_press=on|off, seats=N|none, drop_after=N|off, "
              "nmr=run|extend, min_reliability=PERCENT|off or notify=URL|off")


def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("on", "yes", "true", "1"):
        return True
    if t in ("off", "no", "false", "0"):
        return False
    raise ServerRefused(f"{text!r} is not on or off")


def parse_seats(text: str) -> int | None:
    """seats=N (the most players; a JOIN beyond waits on the waiting list) or seats=none."""
    t = text.strip().lower()
    if t in ("none", "0", "off"):
        return None
    seats = plain_number(t, 6)
    if seats is None or seats > 100000:
        raise ServerRefused(f"seats={text} is not a number of seats: expected seats=N (e.g. seats=6) or seats=none")
    return seats


def desk_summary(game: Game) -> str:
    return (
        f"deadline {game.deadline or 'none'}; next {show_time(game.next_deadline)}; "
        f"early={'on' if game.early else 'off'} grace={show_duration(game.grace_minutes)} "
        f"remind={show_duration(game.remind_minutes)} "
        f"press={game.press_mode} anonymous={'on' if game.press_anonymous else 'off'}"
        + (f" seats={game.seats}" if game.seats else "")
        + (" public_press=on" if game.public_press else "")
        + (f" drop_after={game.drop_after}" if game.drop_after else "")
        + (f" nmr={game.nmr}" if game.nmr != "run" else "")
        + (f" min_reliability={game.min_reliability}" if game.min_reliability else "")
        + (f" notify={notify_said(game)}" if game.notify_url else "")
    )


def notify_said(game: Game) -> str:
    """A game's alert channel as the desk shows it: its format and host (the
    URL's path may be a webhook's token), and why it stopped if it did."""
    try:
        where = alerts.parse_target(game.notify_url or "").where.replace(" at ", "@")
    except ServerRefused:
        where = "?"
    return where + (" (STOPPED: set it again to restart)" if game.notify_error else "")


def set_notify(game: Game, value: str, settings: Settings) -> None:
    """``notify=URL`` (checked: https, a public host) or ``notify=off``.  The
    game's signing key is made the first time and kept; setting a URL again
    restarts a channel a failure stopped."""
    if value.strip().lower() in ("off", "none", ""):
        game.notify_url = game.notify_error = None
        return
    target = alerts.check_url(value, settings)
    game.notify_url = (f"{target.format}+" if value.strip().lower().startswith(target.format + "+") else "") + target.url
    game.notify_error = None
    if not game.notify_secret:
        game.notify_secret = alerts.new_secret()


def _parse_pair(game: Game, key: str, value: str) -> tuple[str, object]:
    """One ``key=value`` of ``game set``, read (nothing is changed yet)."""
    k = key.lower()
    if k in ("early", "anonymous", "public_press"):
        return k, parse_bool(value)
    if k in ("grace", "remind"):
        return k, parse_duration(value)
    if k == "deadline":
        return k, value
    if k == "press":
        press = value.strip().lower()
        if press not in ("on", "off", "broadcast"):
            raise ServerRefused(f"press={value} is not a press setting: expected press=on (players may write to any "
                                "players of the game), press=broadcast (PRESS TO ALL only) or press=off")
        return k, press
    if k == "seats":
        return k, parse_seats(value)
    if k in votesettings.KEYS:  # votes and the ready check (votesettings.py)
        return k, votesettings.parse(k, value)
    if k in PEOPLE_KEYS:
        return k, _people_value(game, k, value)
    if k == "notify":
        return k, value
    if k in {o.name for o in get_rules(game.kind).options}:
        raise ServerRefused(
            f"{key} is an option of the {game.kind} game, fixed when the game was created; "
            f"here you can set {DESK_USAGE}, "
            f"or use the game's own GM commands (do {game.name} LINE)"
        )
    raise ServerRefused(f"unknown setting {key!r}: expected {DESK_USAGE}, {votesettings.USAGE}")


def _people_value(game: Game, key: str, value: str) -> object:
    """drop_after=N|off, nmr=run|extend, min_reliability=PERCENT|off."""
    t = value.strip().lower()
    if key != "nmr" and not get_rules(game.kind).has_turns:
        raise ServerRefused(f"{game.name} has no turns: {key} does not apply to it")
    if key == "nmr":
        if t not in ("run", "extend"):
            raise ServerRefused(f"nmr={value} is not a setting: expected nmr=run (the turn runs at its deadline "
                                "whatever is missing) or nmr=extend (one extension of grace, 24 h when grace is 0, "
                                "per turn for a player who sent orders lately)")
        return t
    if t in ("off", "none", "0"):
        return None
    number = plain_number(t.removesuffix("%"), 3)
    top = 100 if key == "min_reliability" else 999
    if number is None or not 1 <= number <= top:
        raise ServerRefused(f"{key}={value} is not a setting: expected {key}=N (1 to {top}) or {key}=off")
    return number


#: setting -> the Game attribute it sets as it is read (deadline and early are set apart)
_PLAIN = {"grace": "grace_minutes", "remind": "remind_minutes", "press": "press_mode",
          "anonymous": "press_anonymous", "seats": "seats", "public_press": "public_press",
          "drop_after": "drop_after", "nmr": "nmr", "min_reliability": "min_reliability"}


def set_options(session: Session, game: Game, pairs: dict[str, str], now: datetime, actor: str,
                settings: Settings | None = None) -> str:
    """Set the server-side settings of a game; all or nothing.  ``settings``:
    the server's (``notify=`` needs them to check the URL)."""
    rules = get_rules(game.kind)
    parsed = dict(_parse_pair(game, key, value) for key, value in pairs.items())
    if "notify" in parsed:
        if settings is None:
            raise ServerRefused("notify= cannot be set here")
        set_notify(game, str(parsed["notify"]), settings)
    deadline = parsed.get("deadline")
    if isinstance(deadline, str):
        if not rules.has_turns and deadline.lower() != "none":
            raise ServerRefused(f"{rules.title} has no turns, so it takes no deadline")
        set_deadline(game, deadline, now)
    if "early" in parsed:
        game.early = bool(parsed["early"])
        game.early_version = None
    for key, attribute in _PLAIN.items():
        if key in parsed:
            setattr(game, attribute, parsed[key])
    votesettings.apply(session, game, parsed)
    # a notify URL's path may be a webhook's token: the audit log names its host only
    shown = {k: (notify_said(game) if k.lower() == "notify" and game.notify_url else v) for k, v in pairs.items()}
    audit(session, now, actor, "game set", f"{game.name}: " + " ".join(f"{k}={v}" for k, v in shown.items()), game)
    return f"{game.name}: {desk_summary(game)}" + (votesettings.summary(session, game)
                                                    if any(k in votesettings.KEYS for k in parsed) else "")


def change_settings(session: Session, mailer: Mailer, game: Game, pairs: dict[str, str], now: datetime, actor: str) -> str:
    """:func:`set_options` from the GM's desk (``pbm game set``, the GM's
    mail ``game set``): the players are told what changed."""
    message = set_options(session, game, pairs, now, actor, mailer.composer.settings)
    if all(k.lower() == "notify" for k in pairs):
        return message  # the GM's own channel: nothing for the players
    if any(k.lower() == "seats" for k in pairs):
        roster.fill_seats(session, mailer, game, now)  # more seats: the waiting list moves up
    if any(k.lower() in ("seats", "ready") for k in pairs):
        readycheck.after_change(session, mailer, game, now)  # every seat taken: the ready check begins
    said = []
    for key in pairs:
        k = key.lower()
        if k == "early":
            said.append("the turn runs early once every player has sent orders" if game.early
                        else "the turn runs at its deadline, not early")
        elif k == "grace":
            said.append(f"grace period after the deadline: {show_duration(game.grace_minutes)}")
        elif k == "remind":
            said.append(f"reminder before the deadline: {show_duration(game.remind_minutes)}")
        elif k == "deadline":
            said.append(f"deadline: {game.deadline or 'none'}")
        elif k == "seats":
            said.append(f"seats: {game.seats or 'no limit'}")
        elif k == "drop_after":
            said.append(f"a player who misses {game.drop_after} turns in a row loses the seat to a substitute"
                        if game.drop_after else "no seat is freed for missed turns")
        elif k == "nmr":
            said.append("when orders are missing at the deadline of a turn from a player who sent orders lately, "
                        f"the deadline is extended once ({show_duration(game.grace_minutes or 1440)})"
                        if game.nmr == "extend" else "the turn runs at its deadline whatever orders are missing")
        elif k == "min_reliability":
            said.append(f"new players need a reliability of at least {game.min_reliability} %"
                        if game.min_reliability else "new players need no reliability figure")
        elif k == "notify":
            continue
        elif k == "public_press":
            said.append("from now on PRESS TO ALL is public: anyone can read it on the game's web page (press to "
                        "single players stays private)" if game.public_press else
                        "from now on PRESS TO ALL goes to the players only, not to the game's web page")
        elif k in votesettings.KEYS:
            said.append(votesettings.said(session, game, k) or k)
    tell_players(session, mailer, game, f"{game.name}: the game master changed its settings",
                 f"The game master has changed the settings of {game.name}: " + "; ".join(said) + ".", now)
    return message


def new_game(session: Session, kind: str, name: str, pairs: dict[str, str], deadline: str | None, now: datetime, actor: str,
             settings: Settings | None = None) -> Game:
    """Create a game at the GM's desk (CLI ``pbm game new`` and the GM's mail
    ``game new``): ``early``, ``grace`` and ``remind`` among ``pairs`` are the
    server's settings (as in :func:`set_options`), the others the game's own
    options.  All or nothing, in the caller's transaction."""
    desk = {k: v for k, v in pairs.items() if k.lower() in DESK_KEYS + votesettings.KEYS}
    options = {k: v for k, v in pairs.items() if k.lower() not in DESK_KEYS + votesettings.KEYS}
    game = create_game(session, kind, name, options, deadline, now, actor=actor)
    if desk:
        set_options(session, game, desk, now, actor, settings)
    if game.notify_url:
        alerting.game_started(session, game, get_rules(game.kind), now)
    return game


#: a first deadline closer than this is pointed out when a game is created
NEAR_FIRST_DEADLINE = timedelta(hours=48)


def first_deadline_note(game: Game, now: datetime, how: str) -> str | None:
    """A plain warning when the new game's first deadline is less than 48
    hours away; ``how`` says how to set another (CLI or mail wording)."""
    if game.next_deadline is None or game.next_deadline - now >= NEAR_FIRST_DEADLINE:
        return None
    left = game.next_deadline - now
    hours = int(left.total_seconds() // 3600)
    span = f"{hours} hours" if hours >= 2 else f"{max(int(left.total_seconds() // 60), 1)} minutes"
    when = game.next_deadline.astimezone(timezone.utc).strftime("%A %H:%M UTC")
    rules = get_rules(game.kind)
    source = f"the default of {game.kind}" if game.deadline == rules.default_deadline else "the deadline given"
    return (f"the first deadline is in {span} ({when}; {game.deadline}, {source}); "
            f"set another with {how}")


def change_deadline(session: Session, mailer: Mailer, game: Game, expr: str, now: datetime, actor: str) -> str:
    """A new deadline expression (or "none"); the players are told."""
    message = set_options(session, game, {"deadline": expr}, now, actor)
    tell_players(session, mailer, game, f"{game.name}: the deadline has changed",
                 f"The game master has set the deadline of {game.name} to: {game.deadline or 'none'}.", now)
    return message


def pause(session: Session, mailer: Mailer, game: Game, now: datetime, actor: str,
          vote: tuple[datetime, str] | None = None) -> str:
    """``vote``: paused by the players' vote (votes.py), until when, and what
    they are told; else by the game master."""
    if game.status != "running":
        raise ServerRefused(f"{game.name} is {game.status}, not running")
    game.status = "paused"
    votesettings.note_pause(session, game, "vote" if vote else "gm", now, vote[0] if vote else None)
    audit(session, now, actor, "game pause", game.name, game)
    tell_players(session, mailer, game, f"{game.name} is paused", vote[1] if vote else
                 f"The game master has paused {game.name}: no turn runs and no orders are taken until it is resumed.", now)
    return f"{game.name} is paused"


def resume(session: Session, mailer: Mailer, game: Game, now: datetime, actor: str, said: str | None = None) -> str:
    """``said``: what the players are told (a vote's pause ending), else that the GM resumed it."""
    if game.status != "paused":
        raise ServerRefused(f"{game.name} is {game.status}, not paused")
    game.status = "running"
    if game.deadline:
        # the next deadline after the resume, never one the game had already
        # moved past: a turn run early keeps its rhythm through a pause
        kept = game.next_deadline
        set_deadline(game, game.deadline, now)
        if kept is not None and kept > now and game.next_deadline is not None and game.next_deadline < kept:
            set_deadline(game, game.deadline, kept - timedelta(microseconds=1))
    votesettings.note_pause(session, game, None, now)
    audit(session, now, actor, "game resume", game.name, game)
    tell_players(session, mailer, game, f"{game.name} is running again", said or f"The game master has resumed {game.name}.", now)
    return f"{game.name} is running again; next deadline {show_time(game.next_deadline)}"


def _as_player(session: Session, mailer: Mailer, game: Game, handle: str, text: str, now: datetime) -> Outcome:
    acc = account_by_handle(session, handle)
    if acc is None:
        raise ServerRefused(f"there is no account named {handle}; the player must register first")
    if game.status != "running":
        raise ServerRefused(f"{game.name} is {game.status}; resume it first")
    rules = get_rules(game.kind)
    commands = rules.parse([Line(1, text)])
    bad = [c.error for c in commands if c.error]
    if bad:
        raise ServerRefused(f"{game.kind} does not accept {text!r}: {bad[0]}")
    ctx = Context(now=now, rng=random.Random(), actor=Actor(handle=acc.handle, email=acc.email, authenticated=True),
                  turn=game.turn, game_name=game.name, emails={acc.handle: acc.email})
    outcome = apply_commands(session, game, rules, commands, ctx, None)
    mailer.send_notices(session, game, rules, outcome.notices, now)
    refused = [r for r in outcome.results if not r.ok]
    if refused or not outcome.results:
        raise ServerRefused(f"{game.name} refused {text!r} for {acc.handle}: " + (refused[0].message if refused else "no answer"))
    return outcome


def _announce(session: Session, mailer: Mailer, game: Game, handle: str, to_them: tuple[str, str],
              to_others: tuple[str, str], now: datetime) -> None:
    """The GM's action, told to the player it touches and to the game's
    other players.  Never counted against PBM_MAX_NOTICES_PER_MAIL (docs/gm.md)."""
    rules = get_rules(game.kind)
    acc = account_by_handle(session, handle)
    who = acc.handle if acc else handle
    notices = [Notice(to=[who], subject=to_them[0], text=to_them[1])]
    mailer.send_notices(session, game, rules, notices, now)
    mailer.send_notices(session, game, rules, [Notice(to=[ALL_PLAYERS], subject=to_others[0], text=to_others[1])], now,
                        skip={who.lower()})


def add_player(session: Session, mailer: Mailer, game: Game, handle: str, join_line: str | None, now: datetime, actor: str) -> str:
    line = join_line or "JOIN"
    outcome = _as_player(session, mailer, game, handle, line, now)
    audit(session, now, actor, "game add", f"{game.name}: {handle} with {line!r}", game)
    readycheck.after_change(session, mailer, game, now)
    result = outcome.results[0].message
    _announce(session, mailer, game, handle,
              (f"{game.name}: the game master added you",
               f"The game master has added you to {game.name} ({line}): {result}\n\n"
               f"Mail your orders to {game.name}@{mailer.composer.settings.domain} with your $$password$$."),
              (f"{game.name}: the game master added {handle}",
               f"The game master has added {handle} to {game.name}."), now)
    return f"{handle} added to {game.name}: {result}"


def remove_player(session: Session, mailer: Mailer, game: Game, handle: str, now: datetime, actor: str) -> str:
    outcome = _as_player(session, mailer, game, handle, "LEAVE", now)
    audit(session, now, actor, "game remove", f"{game.name}: {handle}", game)
    close_seat(session, game, handle)  # a seat waiting for a substitute is gone with its player
    roster.fill_seats(session, mailer, game, now)  # the freed seat goes to the first one waiting
    result = outcome.results[0].message
    _announce(session, mailer, game, handle,
              (f"{game.name}: the game master removed you",
               f"The game master has removed you from {game.name}: {result}\n\n"
               "You get no more mail of this game. Ask the game master if you think this is a mistake."),
              (f"{game.name}: the game master removed {handle}",
               f"The game master has removed {handle} from {game.name}."), now)
    return f"{handle} removed from {game.name}: {result}"


def gm_do(session: Session, mailer: Mailer, game: Game, lines: list[str], gm_email: str, gm_handle: str | None, now: datetime, actor: str) -> Outcome:
    """Run a game's own command lines as the game master."""
    rules = get_rules(game.kind)
    commands = rules.parse([Line(i + 1, text) for i, text in enumerate(lines)])
    ctx = Context(now=now, rng=random.Random(), actor=Actor(handle=gm_handle, email=gm_email, authenticated=True, is_gm=True),
                  turn=game.turn, game_name=game.name)
    outcome = apply_commands(session, game, rules, commands, ctx, None, gm_actor=actor)
    mailer.send_notices(session, game, rules, outcome.notices, now)
    return outcome
