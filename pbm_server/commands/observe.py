"""Observing a game, by mail to pbm@DOMAIN: ``observe NAME`` / ``unobserve NAME``.

An observer gets the public view of each of the game's reports (what
``Rules.public_reports`` makes of them; pbm_server/play/notices.py sends it), never
orders, press or anything a player's own view hides.  Observing needs an
account and its password (so nobody can sign a stranger's address up for
mail).  A player cannot observe a game they play: they get its reports already,
and their own view is more than the public one.
"""

from __future__ import annotations

from sqlalchemy import select

from games import get_rules
from games.base import Line, Result
from pbm_server.accounts.service import observed
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.store.models import Game, Observer


def _named_game(ctx: ServerContext, words: list[str], verb: str) -> Game:
    if len(words) != 2:
        raise ServerRefused(f"expected: {verb} NAME, the game's name (e.g. {verb} ring); "
                            "'games' lists the running games")
    return ctx.game(words[1], "; 'games' lists the running games")


@command("observe", Audience.PLAYER,
         ("observe NAME", "get the public view of game NAME's reports (not for a game you play)"))
def cmd_observe(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    g = _named_game(ctx, words, "observe")
    if g.status == "finished":
        raise ServerRefused(f"{g.name} is finished: there is nothing more to observe")
    rules = get_rules(g.kind)
    if acc.handle_key in {h.lower() for h in rules.players(g.state)}:
        raise ServerRefused(f"you play in {g.name}: you get its reports already, and more than an observer "
                            "sees; you cannot observe your own game")
    if ctx.session.scalar(select(Observer.id).where(Observer.game_id == g.id, Observer.account_id == acc.id)):
        return Result(line, True, f"you observe {g.name} already; 'unobserve {g.name}' stops it")
    ctx.session.add(Observer(game_id=g.id, account_id=acc.id, since=ctx.now))
    ctx.audit.append(("observe", f"{acc.handle}: {g.name}"))
    return Result(line, True, f"you now observe {g.name}: you get the public view of each of its "
                              f"{rules.turn_name} reports (nothing a player's own view hides, no orders, no press)")


@command("unobserve", Audience.PLAYER, ("unobserve NAME", "stop observing game NAME"))
def cmd_unobserve(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    g = _named_game(ctx, words, "unobserve")
    row = ctx.session.scalar(select(Observer).where(Observer.game_id == g.id, Observer.account_id == acc.id))
    if row is None:
        mine = ", ".join(x.name for x in observed(ctx.session, acc.id)) or "none"
        raise ServerRefused(f"you do not observe {g.name}; the games you observe: {mine}")
    ctx.session.delete(row)
    ctx.audit.append(("unobserve", f"{acc.handle}: {g.name}"))
    return Result(line, True, f"you no longer observe {g.name}")
