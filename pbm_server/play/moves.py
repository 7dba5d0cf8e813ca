"""A game's rules between turns: the command lines of one mail (or of the GM)
applied to the stored state, and the game's tick as time passes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from games import get_rules
from games.base import Command, Context, Outcome, Rules
from pbm_server.play import alerting
from pbm_server.play.gamestate import record_outcome, save_entries, save_state
from pbm_server.play.notices import Mailer
from pbm_server.play.seeds import fresh_rng, keep_rng, turn_rng
from pbm_server.play.statecache import StateCache
from pbm_server.store.lookup import audit
from pbm_server.store.models import Game


def apply_commands(
    session: Session, game: Game, rules: Rules[Any], commands: list[Command], ctx: Context, inbound_id: int | None,
    gm_actor: str | None = None, states: StateCache | None = None,
) -> Outcome:
    """A mail's (or the GM's) command lines through the game.  Lines run as
    the game master are written to the audit log (``gm_actor``: who).
    ``states``: the worker's decoded states (the rules never change the state
    they are given, so it is not copied)."""
    state = states.state(game) if states is not None else game.state
    if states is not None:
        ctx.memo = states.memo(game)
    # the dice come from the turn's stream, whatever generator the caller made;
    # a game without turns has no published stream: fresh OS randomness each time
    ctx.rng = turn_rng(game) if rules.has_turns else fresh_rng()
    outcome = rules.apply(state, commands, ctx)
    if rules.has_turns:
        keep_rng(game, ctx.rng)
    if outcome.changed_entries is not None:
        save_entries(session, game, state, outcome.state, outcome.changed_entries, ctx.now)
    else:
        save_state(game, outcome.state, ctx.now)
    if states is not None:
        states.stage(game)
    actor = ctx.actor.handle if ctx.actor and ctx.actor.handle else "unknown"
    record_outcome(session, game, outcome, ctx.now, "gm" if ctx.actor and ctx.actor.is_gm else actor, inbound_id)
    if outcome.finished:
        alerting.game_ended(session, game, rules, ctx.now)
    if ctx.actor and ctx.actor.is_gm and commands:
        how = f" (mail {inbound_id})" if inbound_id else ""
        audit(session, ctx.now, gm_actor or ctx.actor.handle or "gm", "game do",
              f"{game.name}: " + " | ".join(c.text for c in commands) + how, game)
    return outcome


def tick(session: Session, game: Game, mailer: Mailer, now: datetime) -> bool:
    rules = get_rules(game.kind)
    state = game.state
    rng = turn_rng(game) if rules.has_turns else fresh_rng()
    outcome = rules.tick(state, Context(now=now, rng=rng, turn=game.turn, game_name=game.name))
    if outcome is None:
        return False
    if rules.has_turns:
        keep_rng(game, rng)
    save_state(game, outcome.state, now)
    record_outcome(session, game, outcome, now, "scheduler")
    mailer.send_notices(session, game, rules, outcome.notices, now)
    if outcome.finished:
        alerting.game_ended(session, game, rules, now)
    return True
