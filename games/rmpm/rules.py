"""RmpmRules: the server's view of Rich Man - Poor Man."""

from __future__ import annotations

import textwrap
from typing import Any

from games.base import ALL_PLAYERS, NO_PASSWORD, NOT_REGISTERED, Command, Context, GameError, Line, Notice, Option, Outcome, Result, Rules, Section, State
from games.rmpm.board import Board, fmt, parse_board_file, parse_field
from games.rmpm.engine import FIELD_PRICE, parse_held, placement_refusal, run_slot, validate_orders, weekly_update
from games.rmpm.model import Game, Player, new_state, validate_state
from games.rmpm.orders import ORDER_NAMES, parse_lines
from games.rmpm.report import status_data, update_data

REGISTER_FIRST = NOT_REGISTERED
JOIN_HINT = "JOIN <abbr> <edge field> <edge field> <alias>, e.g. JOIN bd 01-05 25-10 blue dragon"


def _board_option(text: str) -> str:
    parse_board_file(text or "")  # raises ValueError naming the line
    return text


def _int_option(text: str) -> int:
    return int(str(text).strip())


class RmpmRules(Rules):
    kind = "rmpm"
    title = "Rich Man - Poor Man"
    summary = (
        "Rich Man - Poor Man: any number of players move two chips each week on a 25x25 board of "
        "numbered fields. Chip 1 steps one field, chip 2 then moves as far as the number chip 1 "
        "landed on. Meeting another player's chip triggers an action chosen by your action number; "
        "buy fields, turn fences, swap numbers, and become the richest player: the champion of the week."
    )
    has_turns = True
    turn_name = "week"
    default_deadline = "every Saturday 03:00 UTC"
    options = (
        Option("board", "", "board file text (25 number rows, FENCE RR-CC <side> lines); empty: the standard board",
               _board_option),
        Option("capital", 10000, "starting capital of a new player in WCU", _int_option),
        Option("bank", 0, "the Bank's balance when the game starts (it may go negative)", _int_option),
        Option("kiosk", 0, "money in the kiosk when the game starts", _int_option),
    )

    # -- life cycle -------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        text = options.get("board") or ""
        try:
            board = parse_board_file(text) if text else Board.default()
        except ValueError as exc:
            raise GameError(str(exc)) from None
        try:
            capital = int(options.get("capital", 10000))
            bank = int(options.get("bank", 0))
            kiosk = int(options.get("kiosk", 0))
        except (TypeError, ValueError) as exc:
            raise GameError(f"bad option: {exc}") from None
        if capital < 0 or kiosk < 0:
            raise GameError("capital and kiosk cannot be negative")
        return new_state(board, capital, bank, kiosk)

    def import_state(self, data: dict[str, Any]) -> State:
        try:
            return validate_state(data)
        except ValueError as exc:
            raise GameError(f"invalid rmpm game file: {exc}") from None

    def export_state(self, state: State) -> dict[str, Any]:
        return state

    # -- mail -------------------------------------------------------------
    def parse(self, lines: list[Line]) -> list[Command]:
        return parse_lines(lines)

    def apply(self, state: State, commands: list[Command], ctx: Context) -> Outcome:
        game = _load(state, ctx)
        out = Outcome(state=state)
        actor = ctx.actor
        results: list[Result | None] = [None] * len(commands)

        def refuse(i: int, msg: str) -> None:
            results[i] = Result(commands[i].line, False, msg, commands[i].text)

        handle = actor.handle if actor else None
        changed = False
        # GM commands first: the GM address need not be a player's account
        for i, c in enumerate(commands):
            if not c.name.startswith("gm"):
                continue
            if not (actor and actor.is_gm):
                refuse(i, "GM commands are only accepted from the game master's address with the GM password")
            elif not c.ok:
                refuse(i, c.error)
            else:
                msg, err = self._gm(game, c)
                if err:
                    refuse(i, err)
                else:
                    results[i] = Result(c.line, True, "accepted: " + msg, c.text)
                    out.audit.append(f"{self.kind} {ctx.game_name} week {game.week}: {c.text}: {msg}")
                    changed = True
        rest = [i for i, c in enumerate(commands) if results[i] is None]
        if rest and handle is None:
            for i in rest:
                refuse(i, REGISTER_FIRST)
            rest = []
        if rest and not actor.authenticated:
            for i in rest:
                refuse(i, commands[i].error or NO_PASSWORD)
            rest = []
        joins = [i for i in rest if commands[i].name == "join"]
        for n, i in enumerate(joins):
            c = commands[i]
            if not c.ok:
                refuse(i, c.error)
            elif n > 0:
                refuse(i, "only one JOIN per mail")
            else:
                err, msg = self._join(game, handle, c, out)
                if err:
                    refuse(i, err)
                else:
                    results[i] = Result(c.line, True, msg, c.text)
                    changed = True
        order_idx = [i for i in rest if commands[i].name in ORDER_NAMES or commands[i].name == "error"]
        if any(commands[i].name in ORDER_NAMES for i in order_idx):
            if self._orders(game, handle, commands, order_idx, results, out):
                changed = True
        else:
            for i in order_idx:
                refuse(i, commands[i].error)
        for i, c in enumerate(commands):
            if results[i] is None:
                refuse(i, c.error or "not understood")
        out.results = [r for r in results if r is not None]
        if changed:
            out.state = game.to_state()
        return out

    # -- joining ------------------------------------------------------------
    def _join(self, game: Game, handle: str, c: Command, out: Outcome) -> tuple[str | None, str]:
        abbr, alias = c.args["abbr"], c.args["alias"]
        fields = [parse_field(f) for f in c.args["fields"]]
        me = game.players.get(handle)
        if me and me.placed:
            return f"you are already in the game as {me.abbr} ({me.alias})", ""
        other = game.find_abbr(abbr)
        if other and other.handle != handle:
            return (f"the abbreviation {abbr!r} is taken by {other.alias}; choose another 2 letters "
                    f"or digits"), ""
        probe = me or Player(handle=handle, number=0, abbr=abbr, alias=alias, chips=None)
        why = placement_refusal(game, probe, fields)
        if why:
            return f"{why}; choose another edge field", ""
        if me:
            game.by_abbr.pop(me.abbr, None)
            me.abbr, me.alias, me.start = abbr, alias, fields
            game.by_abbr[abbr] = me
            verb = "your join is changed"
        else:
            me = Player(handle=handle, number=game.next_number, abbr=abbr, alias=alias, chips=None,
                        start=fields, an=1, pn=0, capital=game.start_capital, cards={})
            game.next_number += 1
            game.add_player(me)
            out.joined.append(handle)
            verb = "you join"
        pn = sum(game.board.number(f) for f in fields)
        out.sections.append(Section(title="Joining", text=_wrap(
            f"You are player #{me.number:02d}, {abbr} ({alias}). Your chips are placed on "
            f"{fmt(fields[0])} and {fmt(fields[1])} at the update of week {game.week}, after the moves "
            f"of the players already in the game, in the order the players joined. As the board "
            f"stands now you would start with AN 1, PN {pn} and {game.start_capital} WCU. "
            "Placing the chips is your move for that week; send orders after the report.")))
        return None, f"accepted: {verb} as {abbr} ({alias}), player #{me.number:02d}"

    # -- orders -------------------------------------------------------------
    def _orders(self, game: Game, handle: str, commands: list[Command], idx: list[int],
                results: list, out: Outcome) -> bool:
        me = game.players.get(handle)

        def refuse(i: int, msg: str) -> None:
            results[i] = Result(commands[i].line, False, msg, commands[i].text)

        if me is None:
            for i in idx:
                refuse(i, commands[i].error or f"you are not in this game; join first with {JOIN_HINT}")
            return False
        if not me.placed:
            if [commands[i].name for i in idx] == ["leave"]:
                game.remove_player(handle)
                out.left.append(handle)
                results[idx[0]] = Result(commands[idx[0]].line, True,
                                         "accepted: your join is withdrawn; you are no longer in this game",
                                         commands[idx[0]].text)
                return True
            for i in idx:
                refuse(i, commands[i].error or (
                    f"your chips are placed at the update of week {game.week}; "
                    "send orders after that report"))
            return False
        cmds = [commands[i] for i in idx]
        errors = {j: c.error for j, c in enumerate(cmds) if not c.ok}
        good = [j for j, c in enumerate(cmds) if c.ok]
        verr = validate_orders(game, me, [cmds[j] for j in good])
        for k, msg in verr.items():
            errors[good[k]] = msg
        previous = game.orders.get(handle)
        if errors:
            where = ", ".join(cmds[j].line.where for j in sorted(errors))
            for j, c in enumerate(cmds):
                if j in errors:
                    refuse(idx[j], errors[j])
                else:
                    refuse(idx[j], f"valid, but not taken: {where} of this mail was refused")
            keep = ("your previous orders stay in force" if previous
                    else "you have no orders for this week yet")
            out.sections.append(Section(
                title="Orders not changed",
                text=_wrap(f"Because a line of this mail was refused, none of its orders were taken: "
                           f"{keep}. Send the whole corrected order set again."),
            ))
            out.orders[handle] = list(previous or [])
            if previous:
                out.sections.append(self._preanalysis(game, me, previous, None, None))
            return False
        names = [c.name for c in cmds]
        if names == ["cancel"]:
            game.orders.pop(handle, None)
            results[idx[0]] = Result(cmds[0].line, True, "accepted: your orders for this week are withdrawn",
                                     cmds[0].text)
            out.orders[handle] = []
            return True
        held = [c.text for c in cmds]
        game.orders[handle] = held
        out.orders[handle] = list(held)
        if names == ["leave"]:
            results[idx[0]] = Result(cmds[0].line, True, (
                f"accepted: you leave the game at the update of week {game.week}: your chips are removed, "
                "your fields become unowned and your money leaves the game (send CANCEL or new orders "
                "to stay)"), cmds[0].text)
            return True
        out.sections.append(self._preanalysis(game, me, held, cmds, [results, idx]))
        return True

    def _preanalysis(self, game: Game, me: Player, held: list[str], cmds, fill) -> Section:
        """Run the held orders on a copy of the current board; fills the
        per-line results (when ``fill``) and returns the reply section."""
        sim = Game(game.to_state())
        p = sim.players[me.handle]
        parsed = parse_held(held)
        res = run_slot(sim, p, parsed)
        lines = []
        for j, c in enumerate(parsed):
            notes = res.notes.get(j, [])
            if c.name == "use_mt":
                notes = ["plays an MT card: a second move follows"]
            if c.name == "buy" and not notes:
                notes = ["no encounter on the current board"]
            text = "; ".join(notes) if notes else "nothing to do"
            lines.append(_wrap(f"  {c.text}: {text}", indent="      "))
            if fill:
                results, idx = fill
                results[idx[j]] = Result(cmds[j].line, True, "accepted; now: " + text, cmds[j].text)
        for e in res.events:
            lines.append(_wrap(f"  {e}", indent="      "))
        before = [q for q in game.play_order() if (-q.pn, q.number) < (-me.pn, me.number)]
        names = ", ".join(f"{q.abbr} (PN {q.pn})" for q in before[:10])
        if len(before) > 10:
            names += f" and {len(before) - 10} more"
        moved = res.mn_text
        body = [f"How your orders would run on the board as it stands now (week {game.week}):"]
        body += lines
        body.append(_wrap(f"Your chips would end on {fmt(p.chips[0])} and {fmt(p.chips[1])}: "
                          f"MN {moved}, AN {p.an}, PN {p.pn}, capital {p.capital} WCU."))
        if before:
            body.append(_wrap(f"Reminder: players with a higher PN move first this week, and they may "
                              f"change fences, numbers and who stands where. Before you ({len(before)}): "
                              f"{names}."))
        else:
            body.append(_wrap(f"Reminder: players with a higher PN move first this week; with PN {me.pn} "
                              "nobody moves before you at the moment."))
        return Section(title="Pre-analysis", text="\n".join(body))

    # -- GM -------------------------------------------------------------------
    def _gm(self, game: Game, c: Command) -> tuple[str, str | None]:
        a = c.args
        if c.name in ("gm_card", "gm_capital"):
            p = game.find_abbr(a["abbr"])
            if p is None:
                return "", f"no player with the abbreviation {a['abbr']!r}"
            if c.name == "gm_card":
                have = p.cards.get(a["card"], 0)
                if have + a["n"] < 0:
                    return "", f"{p.abbr} holds only {have} {a['card']}"
                p.cards[a["card"]] = have + a["n"]
                return f"{p.abbr} now holds {have + a['n']} {a['card']}", None
            if p.capital + a["amount"] < 0:
                return "", f"capital cannot go below 0: {p.abbr} has {p.capital} WCU"
            p.capital += a["amount"]
            return f"{p.abbr} now has {p.capital} WCU", None
        if c.name == "gm_kiosk":
            game.kiosk += a["amount"]
            return f"the kiosk now holds {game.kiosk} WCU", None
        if c.name == "gm_bank":
            game.bank += a["amount"]
            return f"the Bank now holds {game.bank} WCU", None
        if c.name == "gm_own":
            f = parse_field(a["field"])
            if a["abbr"] is None:
                game.owners.pop(f, None)
                game.businesses.pop(f, None)
                return f"{fmt(f)} is now unowned", None
            p = game.find_abbr(a["abbr"])
            if p is None:
                return "", f"no player with the abbreviation {a['abbr']!r}"
            game.owners[f] = p.handle
            return f"{fmt(f)} now belongs to {p.abbr}", None
        if c.name == "gm_business":
            f = parse_field(a["field"])
            if a["text"] is None:
                game.businesses.pop(f, None)
                return f"the business on {fmt(f)} is removed", None
            if f not in game.owners:
                return "", f"nobody owns {fmt(f)}: a business needs an owner (GM OWN {fmt(f)} <abbr>)"
            game.businesses[f] = a["text"]
            return f"business on {fmt(f)} recorded", None
        return "", "unknown GM command"

    # -- turns ------------------------------------------------------------------
    def run_turn(self, state: State, ctx: Context) -> Outcome:
        game = _load(state, ctx)
        upd = weekly_update(game)
        game.last = update_data(game, upd)
        data = report_data(game)
        notice = Notice(to=[ALL_PLAYERS], kind="report",
                        subject=f"{self.title}: report of week {upd.week}",
                        template="report.txt", data=data)
        return Outcome(state=game.to_state(), notices=[notice], turn_done=True,
                       left=[p.handle for p in upd.left])

    # -- views ------------------------------------------------------------------
    def players(self, state: State) -> list[str]:
        return list(state["players"].keys())

    def waiting_for(self, state: State) -> list[str]:
        orders = state.get("orders", {})
        return [h for h, p in state["players"].items() if p.get("chips") and not orders.get(h)]

    def view(self, state: State, viewer: str | None) -> list[Section]:
        game = Game(state)
        sections = [Section(title=f"{self.title}, week {game.week}", template="report.txt",
                            data=report_data(game))]
        if viewer and viewer in game.players:
            held = game.orders.get(viewer)
            sections.append(Section(
                title="Your orders held this week",
                text="\n".join(held) if held else "(none)",
            ))
        return sections

    def help_text(self) -> str:
        return HELP


def _load(state: State, ctx: Context) -> Game:
    """The game, its week number following the server's turn counter when
    the server gives one (so mails and reports agree on the week)."""
    game = Game(state)
    if ctx.turn and ctx.turn > 0:
        game.week = ctx.turn
    return game


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=76, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def report_data(game: Game) -> dict:
    data = status_data(game)
    data["last"] = game.last or None
    data["price"] = FIELD_PRICE
    return data


HELP = textwrap.fill(RmpmRules.summary, width=76) + f"""

Send commands to the game's address, with your password enclosed in double
dollar signs somewhere in the mail.
  JOIN <abbr> <field> <field> <alias>   e.g. JOIN bd 01-05 25-10 blue dragon
      two different edge fields; the chips appear at the next weekly update.
Orders for the week (a new order mail replaces the whole set):
  16-04 -> 16-05        chip 1: one field up, down, left or right
  22-07 -> 25-07        chip 2: moves in that direction as far as the number
                        of the field chip 1 landed on (fences stop it)
  F 15-04 u -> l        turn a fence next to your chip (u, r, d, l)
  E 16-03 <-> 16-05     swap the numbers on both sides of your chip
  BUY  or  BUY 16-09    buy the field of your encounter ({FIELD_PRICE} WCU)
  USE MT                play an MT card: a second move block follows
  LEAVE                 leave the game at the next update
  CANCEL                withdraw this week's orders
Every order mail is answered with a pre-analysis on the current board.
"""
