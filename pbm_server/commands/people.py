"""Substitutes by mail (issue 44.2): ``available KIND...`` / ``unavailable``
(a player standing by), ``resign GAME`` and ``take GAME`` (also at the game's
address, without the name), and the GM's ``offer GAME SEAT``.  The work is
in pbm_server/play/people.py, shared with the CLI (``pbm game offer``)."""

from __future__ import annotations

from games.base import Line, Result
from pbm_server.base.errors import ServerRefused, undone
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.play import people


@command("available", Audience.PLAYER,
         ("available KIND...", "stand by as a substitute for games of these kinds (e.g. available rmpm giveaway); "
                               "alone: the kinds you stand by for"))
def cmd_available(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    return Result(line, True, people.available(ctx.session, ctx.player(), words[1:], ctx.now))


@command("unavailable", Audience.PLAYER,
         ("unavailable [KIND...]", "stand by no more (for every kind, or for those named)"))
def cmd_unavailable(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    return Result(line, True, people.unavailable(ctx.session, ctx.player(), words[1:], ctx.now))


@command("resign", Audience.PLAYER,
         ("resign GAME", "leave game GAME: the game master looks for a substitute to take your seat "
                         "(to GAME@ also just 'resign')"))
def cmd_resign(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        raise ServerRefused("expected: resign GAME, e.g. resign g1 (or 'resign' alone in a mail to the game's address)")
    g = ctx.game(words[1])
    return Result(line, True, people.resign(ctx.session, ctx.outbox(), g, ctx.player(), ctx.now))


@command("take", Audience.PLAYER,
         ("take GAME", "take the seat of game GAME that the game master offers (the first to ask gets it; "
                       "to GAME@ also just 'take')"))
def cmd_take(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        raise ServerRefused("expected: take GAME, e.g. take g1 (or 'take' alone in a mail to the game's address)")
    g = ctx.game(words[1])
    with undone(ctx.session):
        message = people.take(ctx.session, ctx.outbox(), g, ctx.player(), ctx.now)
    return Result(line, True, message)


@command("offer", Audience.GM,
         ("offer GAME SEAT", "offer the seat of player SEAT to the players standing by for the game's kind"))
def cmd_offer(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 3:
        raise ServerRefused("expected: offer GAME SEAT, e.g. offer g1 bob (SEAT: the handle that holds it)")
    with undone(ctx.session):
        g = ctx.game(words[1])
        message = people.offer(ctx.session, ctx.outbox(), g, words[2], ctx.now, ctx.actor)
    return Result(line, True, message)
