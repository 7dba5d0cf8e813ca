"""A player's mail settings, by mail to pbm@DOMAIN: ``unsubscribe``,
``subscribe`` and ``settings`` (the same as the one-click links of
pbm_server/play/streams.py and the web's settings page).

``unsubscribe GAME STREAM TOKEN`` is what a mail client sends for a mail's
``List-Unsubscribe`` mailto link (RFC 8058's fallback): the token proves
it, so no password is needed; without a token the account's password is.
"""

from __future__ import annotations

from sqlalchemy import select

from games.base import Line, Result
from pbm_server.accounts import links
from pbm_server.base.errors import ServerRefused
from pbm_server.commands.registry import Audience, ServerContext, command
from pbm_server.play import streams
from pbm_server.store.lookup import account_by_email, account_by_handle, stops_of
from pbm_server.store.models import Account, Game

NAMES = ", ".join(streams.STREAMS)


def _streams(word: str | None) -> list[str]:
    if word is None or word.lower() == "all":
        return list(streams.STREAMS)
    if word.lower() not in streams.STREAMS:
        raise ServerRefused(f"there is no stream of mail called {word}: expected one of {NAMES}, or all")
    return [word.lower()]


def _who(ctx: ServerContext, game: str, stream_word: str | None, token: str | None) -> Account:
    """The account the line speaks for: the token's, or the sender's with its password."""
    if token is not None:
        account = account_by_email(ctx.session, ctx.sender)
        stream = stream_word.lower() if stream_word else ""
        if account is None or links.check(ctx.session, f"stop-{stream}", account.handle, game, token, ctx.now) is None:
            raise ServerRefused("that unsubscribe link does not work (expired, changed, or sent from another "
                                "address); write 'unsubscribe GAME' with your $$password$$ instead")
        return account
    account = account_by_handle(ctx.session, ctx.handle) if ctx.handle and ctx.authenticated else None
    if account is None:
        raise ServerRefused("this needs your account's $$password$$ in the mail (or the link in the mail you "
                            "want to stop)")
    return account


@command("unsubscribe", Audience.ANYONE,
         ("unsubscribe GAME [STREAM]", f"stop mail of GAME: one stream ({NAMES}) or all of them"),
         echo=lambda words: " ".join(words[:3]) + (" ****" if len(words) > 3 else ""))
def cmd_unsubscribe(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if not 2 <= len(words) <= 4:
        raise ServerRefused(f"expected: unsubscribe GAME [STREAM], e.g. unsubscribe ring1 press; streams: {NAMES}")
    game = ctx.game(words[1])
    wanted = _streams(words[2] if len(words) > 2 else None)
    account = _who(ctx, game.name, words[2] if len(words) > 2 else None, words[3] if len(words) > 3 else None)
    fresh = [s for s in wanted if streams.stop(ctx.session, account.email, s, game.id, ctx.now)]
    ctx.audit.append(("mail stopped", f"{account.handle}: {', '.join(wanted)} of {game.name}"))
    what = ", ".join(streams.STREAMS[s] for s in wanted)
    said = f"no more {what} of {game.name} will be mailed to you"
    if not fresh:
        said += " (they were stopped already)"
    return Result(line, True, said + f"; 'subscribe {game.name}' starts them again")


@command("subscribe", Audience.PLAYER,
         ("subscribe GAME [STREAM]", "start mail of GAME you stopped again (one stream, or all)"))
def cmd_subscribe(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if not 2 <= len(words) <= 3:
        raise ServerRefused(f"expected: subscribe GAME [STREAM]; streams: {NAMES}")
    account = ctx.player()
    game = ctx.game(words[1])
    wanted = _streams(words[2] if len(words) > 2 else None)
    lifted = sum(streams.resume(ctx.session, account.email, s, game.id) for s in wanted)
    ctx.audit.append(("mail resumed", f"{account.handle}: {', '.join(wanted)} of {game.name}"))
    if not lifted:
        return Result(line, True, f"nothing of {game.name} was stopped for you: its mail comes to you already")
    return Result(line, True, f"{', '.join(streams.STREAMS[s] for s in wanted)} of {game.name} are mailed to you again")


@command("settings", Audience.PLAYER, ("settings", "which mail of which game you have stopped"))
def cmd_settings(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    account = ctx.player()
    stops = stops_of(ctx.session, account.email)
    if not stops:
        return Result(line, True, "you get all the mail of your games; 'unsubscribe GAME [STREAM]' stops some of it")
    ids = {s.game_id for s in stops if s.game_id is not None}
    names = {gid: name for gid, name in ctx.session.execute(select(Game.id, Game.name).where(Game.id.in_(ids)))}
    shown = [f"{streams.STREAMS.get(s.stream, s.stream)} of {names.get(s.game_id or 0, 'every game')}" for s in stops]
    return Result(line, True, "stopped: " + "; ".join(shown) + ". 'subscribe GAME [STREAM]' starts one again")
