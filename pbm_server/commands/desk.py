"""The game master's desk by mail to pbm@DOMAIN: game ..., turn ..., do ...

Accepted only from PBM_GM_ADDRESS with the GM account's $$password$$ (the
registry refuses everyone else).  Each command runs the same operation as the
CLI (pbm_server.play.gmdesk, pbm_server.play.turns) inside a savepoint, so a refusal
changes nothing.
"""

from __future__ import annotations

from games import KINDS, get_rules
from games.base import Line, Result
from pbm_server.base.errors import ServerRefused, undone
from pbm_server.base.localtime import show_time
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.play import readycheck
from pbm_server.play.gmdesk import (
    add_player,
    change_deadline,
    change_settings,
    desk_summary,
    first_deadline_note,
    gm_do,
    new_game,
    pause,
    remove_player,
    resume,
)
from pbm_server.play.turns import rollback, rollback_said, run_turn, why_not_done

GAME_USAGE = (
    "expected one of: game new KIND NAME [KEY=VALUE ...] [deadline EXPR]; game set NAME KEY=VALUE ...; "
    "game deadline NAME EXPR|none; game pause NAME; game resume NAME; game start NAME; game add NAME HANDLE [JOIN LINE]; "
    "game remove NAME HANDLE"
)


@command(
    "game", Audience.GM,
    ("game new KIND NAME [KEY=VALUE ...] [deadline EXPR]", ""),
    ("game set NAME early=on|off grace=6h remind=24h press=on|off|broadcast anonymous=on|off notify=URL|off", ""),
    ("game set NAME votes=majority|two-thirds|unanimous|off max_extensions=2 max_pause=14d ready=48h|off", ""),
    ("game set NAME drop_after=N|off nmr=run|extend min_reliability=PERCENT|off", ""),
    ("game deadline NAME EXPR|none", ""),
    ("game pause NAME", ""),
    ("game resume NAME", ""),
    ("game start NAME", "begin the ready check (ready=48h) now"),
    ("game add NAME HANDLE [LINE]", ""),
    ("game remove NAME HANDLE", ""),
)
def cmd_game(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    sub = words[1].lower() if len(words) > 1 else ""
    actor = ctx.actor
    if sub == "new":
        if len(words) < 4:
            raise ServerRefused("expected: game new KIND NAME [KEY=VALUE ...] [deadline EXPR], e.g. game new giveaway g1 no_order=split deadline every Saturday 12:00 UTC")
        kind, name, rest = words[2].lower(), words[3], words[4:]
        pairs, deadline = {}, None
        for i, w in enumerate(rest):
            if w.lower() == "deadline":
                deadline = " ".join(rest[i + 1:])
                break
            if "=" not in w:
                raise ServerRefused(f"{w!r} is not KEY=VALUE; expected: game new KIND NAME [KEY=VALUE ...] [deadline EXPR]")
            k, v = w.split("=", 1)
            pairs[k] = v
        with undone(ctx.session):
            if kind not in KINDS:
                raise ServerRefused(f"unknown game kind {kind!r}; kinds: {', '.join(KINDS)}")
            g = new_game(ctx.session, kind, name, pairs, deadline, ctx.now, actor, ctx.settings)
            note = first_deadline_note(g, ctx.now, f"game deadline {g.name} EXPR")
        return Result(line, True, f"{g.kind} game {g.name} created: players mail {g.name}@{ctx.settings.domain}; "
                                  f"{desk_summary(g)}" + (f". NOTE: {note}" if note else ""))
    if sub in ("set", "deadline", "pause", "resume", "start", "add", "remove", "kick"):
        if len(words) < 3:
            raise ServerRefused(GAME_USAGE)
        with undone(ctx.session):
            message = _game_op(ctx, sub, words)
        return Result(line, True, message)
    raise ServerRefused(GAME_USAGE)


def _game_op(ctx: ServerContext, sub: str, words: list[str]) -> str:
    """``game SUB NAME ...`` on an existing game (in cmd_game's savepoint)."""
    actor = ctx.actor
    g = ctx.game(words[2])
    if sub == "set":
        if len(words) < 4:
            raise ServerRefused("expected: game set NAME KEY=VALUE ... (early=on|off grace=6h remind=24h press=on|off|broadcast anonymous=on|off)")
        pairs = {}
        for w in words[3:]:
            if "=" not in w:
                raise ServerRefused(f"{w!r} is not KEY=VALUE")
            k, v = w.split("=", 1)
            pairs[k] = v
        said = change_settings(ctx.session, ctx.outbox(), g, pairs, ctx.now, actor)
        if g.notify_url and any(k.lower() == "notify" for k in pairs):
            # never by mail: the key that signs the generic JSON alerts
            said += (f"; the key that signs its alerts (X-PBM-Signature) is shown on the server by "
                     f"pbm game show {g.name}, never by mail")
        return said
    if sub == "deadline":
        if len(words) < 4:
            raise ServerRefused("expected: game deadline NAME EXPR, e.g. game deadline g1 every Saturday 03:00 UTC, or none")
        return change_deadline(ctx.session, ctx.outbox(), g, " ".join(words[3:]), ctx.now, actor)
    if sub == "pause":
        return pause(ctx.session, ctx.outbox(), g, ctx.now, actor)
    if sub == "resume":
        return resume(ctx.session, ctx.outbox(), g, ctx.now, actor)
    if sub == "start":
        return readycheck.gm_start(ctx.session, ctx.outbox(), g, ctx.now, actor)
    if len(words) < 4:
        raise ServerRefused(f"expected: game {sub} NAME HANDLE")
    if sub == "add":
        return add_player(ctx.session, ctx.outbox(), g, words[3], " ".join(words[4:]) or None, ctx.now, actor)
    return remove_player(ctx.session, ctx.outbox(), g, words[3], ctx.now, actor)


@command(
    "turn", Audience.GM,
    ("turn run NAME N", "N: the turn now open; any other N is refused"),
    ("turn rollback NAME N", "back to just before turn N was processed"),
    ("turn rollback NAME N --same-seed", "the same dice; no orders until it has run"),
)
def cmd_turn(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    usage = "expected: turn run NAME N (N: the turn now open) or turn rollback NAME N [--same-seed]"
    same_seed = len(words) == 5 and words[1].lower() == "rollback" and words[4].lower() == "--same-seed"
    if same_seed:
        words = words[:4]
    if len(words) != 4 or words[1].lower() not in ("run", "rollback"):
        raise ServerRefused(usage)
    try:
        n = int(words[3])
    except ValueError:
        raise ServerRefused(f"{words[3]!r} is not a turn number; {usage}") from None
    with undone(ctx.session):
        message = _turn_op(ctx, words[1].lower(), words[2], n, same_seed)
    return Result(line, True, message)


def _turn_op(ctx: ServerContext, verb: str, name: str, n: int, same_seed: bool = False) -> str:
    """``turn run|rollback NAME N`` (in cmd_turn's savepoint)."""
    g = ctx.game(name)
    rules = get_rules(g.kind)
    if verb == "run":
        outcome = run_turn(ctx.session, g, ctx.outbox(), ctx.now, actor=ctx.actor, expected_turn=n)
        if not outcome.turn_done:
            return (f"{g.name}: {rules.turn_name} {n} did not run, the game did not complete its turn: {why_not_done(outcome)}; "
                    f"the deadline stays {show_time(g.next_deadline)}")
        return (f"{g.name}: {rules.turn_name} {n} processed; {len(outcome.notices)} notice(s) sent"
                + ("; the game is finished" if g.status == "finished" else f"; now open: {rules.turn_name} {g.turn}"))
    rollback(ctx.session, g, ctx.outbox(), n, ctx.now, ctx.actor, same_seed=same_seed)
    return rollback_said(g, n, same_seed)


@command("do", Audience.GM, ("do NAME LINE", "a game's own GM command"))
def cmd_do(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    parts = line.text.split(None, 2)
    if len(parts) < 3:
        raise ServerRefused("expected: do NAME LINE (a game's own command, run as the game master)")
    with undone(ctx.session, always=True):
        g = ctx.game(parts[1])
        outcome = gm_do(ctx.session, ctx.outbox(), g, [parts[2]], ctx.sender, ctx.handle, ctx.now, ctx.actor)
        results = outcome.results or [Result(line, False, "the game gave no answer")]
        refused = next((r for r in results if not r.ok), None)
        if refused is not None:
            # the game refused: nothing of it is kept
            raise ServerRefused(f"{g.name}: {refused.message}")
    ctx.sections.extend(outcome.sections)
    return Result(line, True, f"{g.name}: {results[0].message}")
