"""Information by mail to pbm@DOMAIN: games, help (and help KIND), and for a
registered player status and history."""

from __future__ import annotations

from games import KINDS, get_rules
from games.base import Line, Result, Section
from pbm_server.accounts.links import LIFETIME
from pbm_server.accounts.service import observed, plays_in, running_games
from pbm_server.base.durations import plain_number
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.commands.registry import REGISTRY, Audience, ServerContext, command
from pbm_server.play import streams
from pbm_server.play.reliability import record_of
from pbm_server.play.roster import join_offer
from pbm_server.play.views import history, status
from pbm_server.store.lookup import account_by_handle, player_count
from pbm_server.store.models import Account

#: a turn number is at most this long (in a command word or a page's URL: web/app.py)
TURN_DIGITS = 9


def help_rows(audience: Audience) -> list[str]:
    """The lines ``help`` shows for the commands of one audience."""
    out = []
    for cmd in REGISTRY.for_audience(audience):
        for syntax, text in cmd.rows:
            text = text.replace("{kinds}", ", ".join(KINDS))
            out.append(f"  {syntax:<28} {text}" if text else f"  {syntax}")
    return out


@command("games", Audience.ANYONE, ("games", "the running games and how to join them; yours are marked"))
def cmd_games(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    games = running_games(ctx.session)
    me = account_by_handle(ctx.session, ctx.handle) if ctx.handle else None
    tz = me.timezone if me else None
    watched = {g.id for g in observed(ctx.session, me.id)} if me else set()
    rows = []
    for g in games:
        rules = get_rules(g.kind)
        count = player_count(ctx.session, g)
        rows.append(
            {
                **join_offer(g, rules, ctx.settings.domain, count),
                "name": g.name,
                "kind": g.kind,
                "title": rules.title,
                "status": g.status,
                "turn": g.turn,
                "turn_name": rules.turn_name,
                "players": count,
                "next_deadline": show_time(g.next_deadline, tz) if g.next_deadline else None,
                "mine": bool(me and plays_in(g, me.handle_key)),
                "observed": g.id in watched,
            }
        )
    mine = sum(1 for r in rows if r["mine"])
    text = ctx.composer.render("server/games.txt", {"games": rows, "domain": ctx.settings.domain, "mine": mine,
                                                    "known": me is not None}).text
    ctx.sections.append(Section(title="Games", text=text))
    return Result(line, True, f"{len(rows)} game(s) listed below" + (f", {mine} of them yours (marked *)" if mine else ""))


@command("help", Audience.ANYONE, ("help", "this text"), ("help KIND", "a game's rules and commands ({kinds})"),
         ("help press", "how to write to the other players of your game"))
def cmd_help(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    if len(words) >= 2 and words[1].lower() == "press":
        text = ctx.composer.render("server/help_press.txt", {"per_hour": ctx.settings.press_per_hour}).text
        ctx.sections.append(Section(title="Press", text=text))
        return Result(line, True, "how to send press follows")
    if len(words) >= 2:
        kind = words[1].lower()
        if kind not in KINDS:
            raise ServerRefused(f"there is no game kind {words[1]!r}; kinds: {', '.join(KINDS)}")
        rules = get_rules(kind)
        ctx.sections.append(Section(title=f"{rules.title} ({kind})", text=rules.help_text()))
        return Result(line, True, f"the rules and commands of {rules.title} follow")
    text = ctx.composer.once(("help", ctx.is_gm), "server/help.txt", lambda: {
        "server": ctx.settings.server_address, "domain": ctx.settings.domain, "gm": ctx.is_gm,
        "anyone": help_rows(Audience.ANYONE), "player": help_rows(Audience.PLAYER), "gm_rows": help_rows(Audience.GM)}
    ).text
    ctx.sections.append(Section(title="Help", text=text))
    return Result(line, True, "the list of commands follows")


@command("status", Audience.PLAYER,
         ("status", "your games: turn, deadline, whether your orders are held / it is your move"),
         ("status NAME", "game NAME as you see it, your orders, the deadline"))
def cmd_status(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    if len(words) == 1:
        return my_games(ctx, line, acc)
    if len(words) != 2:
        raise ServerRefused("expected: status (all your games) or status NAME (one game), e.g. status g1")
    g = ctx.game(words[1])
    for sec in status(ctx.session, g, acc):
        if sec.template:  # a game's template: render it here, the reply is not the game's
            title, text, _ = ctx.composer.section(sec, g.kind)
            sec = Section(title=title, text=text)
        ctx.sections.append(sec)
    if plays_in(g, acc.handle_key):  # the reply goes to the player's own address only: the links are theirs
        rules = get_rules(g.kind)
        found = streams.LinkMaker(ctx.session, ctx.settings).player_links(
            acc, g.name, g.private, f"orders for {rules.turn_name} {g.turn}" if rules.has_turns else "your move",
            ctx.now)
        if found.own is not None:
            ctx.sections.append(Section(title=f"{g.name} on the web", template="server/links.txt", data={
                "game": g.name, "own": found.own, "home": found.home, "game_page": found.game_page,
                "mailto": found.mailto, "days": LIFETIME.days}))
    return Result(line, True, f"the state of {g.name} as you see it follows")


@command("history", Audience.PLAYER,
         ("history NAME [N]", "the report of turn N (default: the last) and the list of turns"))
def cmd_history(ctx: ServerContext, line: Line, words: list[str]) -> Result:
    acc = ctx.player()
    if len(words) not in (2, 3):
        raise ServerRefused("expected: history NAME [N], e.g. history g1 or history g1 3")
    number = plain_number(words[2], TURN_DIGITS) if len(words) == 3 else None
    if len(words) == 3 and number is None:
        raise ServerRefused(f"{words[2][:20]!r} is not a turn number: N is written in the digits 0-9 "
                            f"(at most {TURN_DIGITS} of them), e.g. history g1 3")
    g = ctx.game(words[1])
    msg, sections = history(ctx.session, g, number, acc, ctx.is_gm)
    ctx.sections.extend(sections)
    return Result(line, True, msg)



def my_games(ctx: ServerContext, line: Line, acc: Account) -> Result:
    """``status`` with no name: every running game the sender plays, with its
    turn, the next deadline in their time zone and where they stand."""
    games = running_games(ctx.session)
    blocks = []
    for g in games:
        handle = plays_in(g, acc.handle_key)
        if handle is None:
            continue
        rules = get_rules(g.kind)
        head = f"{g.name}@{ctx.settings.domain}  {rules.title} ({g.kind}), {g.status}"
        lines = [head]
        if rules.has_turns:
            lines.append(f"  {rules.turn_name} {g.turn}, next deadline: {show_time(g.next_deadline, acc.timezone)}")
        if g.status == "paused":
            lines.append("  paused by the game master: no orders are taken now")
        try:
            standing = rules.standing(g.state, handle)
        except Exception:
            standing = []
        lines.extend(f"  {s}" for s in standing)
        blocks.append("\n".join(lines))
    watched = observed(ctx.session, acc.id)
    text = "\n\n".join(blocks) if blocks else "You play in no running game. Mail 'games' for the list of games."
    if watched:
        text += "\n\nYou observe: " + ", ".join(g.name for g in watched)
    text += "\n\n'status NAME' shows one game in full."
    text += f"\n\nYour reliability: {record_of(ctx.session, acc).text()} (all games; 'who NAME' shows each player's)"
    ctx.sections.append(Section(title=f"Your games ({acc.handle})", text=text))
    home = streams.LinkMaker(ctx.session, ctx.settings).home(acc, ctx.now)
    if home is not None:  # the reply goes to the player's own address only: the link is theirs
        ctx.sections.append(Section(title="Your games on the web", template="server/links.txt", data={
            "game": "", "own": None, "home": home, "game_page": None, "mailto": None, "days": LIFETIME.days}))
    return Result(line, True, f"you play in {len(blocks)} running game{'s' if len(blocks) != 1 else ''}; "
                              "the list follows")
