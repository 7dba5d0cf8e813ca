"""Players' votes and the ready check, by mail (issue 44): ``vote`` and
``ready``.  Players send them to the game's address ("vote extend 24h",
"ready"), where route.py reads them as ``vote NAME ...`` and ``ready NAME``;
at pbm@DOMAIN they take the game's name.  The work is done in
pbm_server/play/votes.py and readycheck.py.
"""

from __future__ import annotations

from games.base import Line, Result
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.play import readycheck, votes

#: a vote's own words: a line to pbm@ that starts with one lacks the game's name
_WORDS = ("yes", "no", "extend", "pause", "end", "draw")


@command(
    "vote", Audience.PLAYER,
    ("vote extend DURATION", "(to a game's address) propose to extend the open turn's deadline, e.g. vote extend 24h"),
    ("vote pause DURATION", "(to a game's address) propose to pause the game, e.g. vote pause 7d"),
    ("vote yes | vote no", "(to a game's address) answer the vote under way; the game's rule (votes=) decides"),
    ("vote NAME ...", "the same, mailed to pbm@ with the game's name"),
)
def cmd_vote(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) < 3 or words[1].lower() in _WORDS:
        raise ServerRefused(votes.USAGE + ", sent to the game's address (to pbm@: vote NAME yes, with the game's name)")
    acc = ctx.player()
    game = ctx.game(words[1])
    what = words[2].lower()
    mailer = ctx.outbox()
    if what in ("yes", "no"):
        if len(words) > 3:
            raise ServerRefused(f"'vote {what}' takes nothing after it; {votes.USAGE}")
        return Result(line, True, votes.ballot(ctx.session, mailer, game, acc.handle, what == "yes", ctx.now))
    if what in ("extend", "pause", "end", "draw"):
        if len(words) > 4:
            raise ServerRefused(votes.USAGE)
        kind = "end" if what == "draw" else what
        amount = words[3] if len(words) > 3 else None
        return Result(line, True, votes.propose(ctx.session, mailer, game, acc.handle, kind, amount, ctx.now))
    raise ServerRefused(f"{words[2]!r} is not a vote; {votes.USAGE}")


@command(
    "ready", Audience.PLAYER,
    ("ready", "(to a game's address) confirm your seat in the game's ready check"),
    ("ready NAME", "the same, mailed to pbm@ with the game's name"),
)
def cmd_ready(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) != 2:
        raise ServerRefused("expected: ready, sent to the game's address (or 'ready NAME' to pbm@)")
    acc = ctx.player()
    game = ctx.game(words[1])
    return Result(line, True, readycheck.confirm(ctx.session, ctx.outbox(), game, acc.handle, ctx.now))
