"""njudge's conveniences by mail to pbm@DOMAIN: ``summary NAME`` (the whole
game so far), ``who NAME`` (its roster) and ``info NAME`` (the GM's text);
the work is in pbm_server/play/roster.py."""

from __future__ import annotations

import textwrap

from games.base import Line, Result, Section
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.play import readycheck, roster, votes
from pbm_server.store.lookup import account_by_handle
from pbm_server.store.models import Game


def _one_game(ctx: ServerContext, words: list[str], example: str) -> Game:
    if len(words) != 2:
        raise ServerRefused(f"expected: {words[0].lower()} NAME, e.g. {example}")
    return ctx.game(words[1])


@command("summary", Audience.PLAYER,
         ("summary NAME", "the whole game so far in one mail: every turn, its scores and its report"))
def cmd_summary(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    g = _one_game(ctx, words, "summary g1")
    ctx.sections.extend(roster.summary(ctx.session, g, ctx.player(), ctx.is_gm))
    return Result(line, True, f"the game {g.name} so far follows")


@command("who", Audience.ANYONE,
         ("who NAME", "who plays game NAME, when each last sent orders, and who waits for a seat"))
def cmd_who(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    g = _one_game(ctx, words, "who g1")
    # once per game and mail: a mail of many `who` lines of one game reads the roster once
    if ("who", g.name.lower()) in ctx.once:
        raise ServerRefused(f"not carried out: 'who {g.name}' was answered by an earlier line of this mail "
                            "(once per mail is enough)")
    ctx.once.add(("who", g.name.lower()))
    me = account_by_handle(ctx.session, ctx.handle) if ctx.handle else None
    tz = me.timezone if me else None
    # a vote under way and the ready check: who said yes, who is ready (issue 44)
    people = [textwrap.fill(said, 72) for said in votes.shown(ctx.session, g, tz) + readycheck.shown(ctx.session, g, tz)]
    ctx.sections.append(Section(title=f"{g.name}: who plays",
                                text="\n\n".join([roster.who(ctx.session, g, tz), *people])))
    return Result(line, True, f"the players of {g.name} follow")


@command("info", Audience.ANYONE, ("info NAME", "what the game master says about game NAME"))
def cmd_info(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    g = _one_game(ctx, words, "info g1")
    ctx.sections.append(Section(title=f"{g.name}: information", text=roster.info_text(g)))
    return Result(line, True, f"the information on {g.name} follows")
