"""Observing a game, by mail to pbm@DOMAIN: ``observe NAME`` / ``unobserve NAME``.

An observer gets the public view of each of the game's reports (what
``Rules.public_reports`` makes of them; pbm_server/notices.py sends it), never
orders, press or anything a player's own view hides.  Observing needs an
account and its password (so nobody can sign a stranger's address up for
mail).  A player cannot observe a game they play: they get its reports already,
and their own view is more than the public one.
"""

from __future__ import annotations

from sqlalchemy import select

from games import get_rules
from games.base import Line, Result
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.lookup import find_game
from pbm_server.models import Game, Observer


def observed_games(ctx: ServerContext, account_id: int) -> list[Game]:
    return list(ctx.session.scalars(
        select(Game).join(Observer, Observer.game_id == Game.id).where(Observer.account_id == account_id)
        .order_by(Game.name)))


def _named_game(ctx: ServerContext, words: list[str], verb: str) -> Game | Result:
    if len(words) != 2:
        return Result(Line(0, ""), False, f"expected: {verb} NAME, the game's name (e.g. {verb} ring); "
                                          "'games' lists the running games")
    g = find_game(ctx.session, words[1])
    if g is None:
        return Result(Line(0, ""), False, f"there is no game named {words[1]}; 'games' lists the running games")
    return g


@command("observe", Audience.PLAYER,
         ("observe NAME", "get the public view of game NAME's reports (not for a game you play)"))
def cmd_observe(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    found = _named_game(ctx, words, "observe")
    if isinstance(found, Result):
        return Result(line, False, found.message)
    g = found
    if g.status == "finished":
        return Result(line, False, f"{g.name} is finished: there is nothing more to observe")
    rules = get_rules(g.kind)
    if acc.handle_key in {h.lower() for h in rules.players(g.state)}:
        return Result(line, False, f"you play in {g.name}: you get its reports already, and more than an observer "
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
    found = _named_game(ctx, words, "unobserve")
    if isinstance(found, Result):
        return Result(line, False, found.message)
    g = found
    row = ctx.session.scalar(select(Observer).where(Observer.game_id == g.id, Observer.account_id == acc.id))
    if row is None:
        mine = ", ".join(x.name for x in observed_games(ctx, acc.id)) or "none"
        return Result(line, False, f"you do not observe {g.name}; the games you observe: {mine}")
    ctx.session.delete(row)
    ctx.audit.append(("unobserve", f"{acc.handle}: {g.name}"))
    return Result(line, True, f"you no longer observe {g.name}")
