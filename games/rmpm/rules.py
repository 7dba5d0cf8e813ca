"""RmpmRules: the server's view of Rich Man - Poor Man."""

from __future__ import annotations

import textwrap
import unicodedata
from dataclasses import dataclass
from typing import Any

from games.base import (
    ALL_PLAYERS,
    NO_PASSWORD,
    NOT_REGISTERED,
    Command,
    Context,
    GameError,
    JoinHint,
    Line,
    Mail,
    Notice,
    Option,
    Outcome,
    Refused,
    Result,
    Rules,
    Section,
    State,
    TurnView,
)
from games.names import looks_alike
from games.rmpm import parse
from games.rmpm.board import Board, Field, field_of, fmt, parse_board_file, parse_field
from games.rmpm.engine import parse_held, placement_refusal, run_slot, validate_orders, weekly_update
from games.rmpm.help import rule_book
from games.rmpm.model import START_CAPITAL, Game, Player, Position, Sketch
from games.rmpm.parse import ORDER_NAMES
from games.rmpm.state import dump, load, new_state, validated
from games.rmpm.view import COLOURS, FULL_REPORT_PLAYERS, colour_of, own_reports, report_data, update_data

REGISTER_FIRST = NOT_REGISTERED
JOIN_HINT = "JOIN <abbr> <edge field> <edge field> <alias>, e.g. JOIN bd 01-05 25-10 blue dragon"
#: the abbreviations and aliases a join example on the web picks from: the first pair free in the game
EXAMPLE_NAMES = (("bd", "blue dragon"), ("gf", "green falcon"), ("rw", "red wolf"), ("yo", "yellow owl"),
                 ("sk", "silver kite"), ("pm", "purple moth"), ("tx", "tin fox"), ("cj", "copper jay"))
#: the start fields a join example prefers (the rule book's), then every other edge field in order
EXAMPLE_FIELDS = ((1, 5), (25, 10), *((r, c) for r in range(1, 26) for c in range(1, 26)
                                       if (r in (1, 25) or c in (1, 25)) and (r, c) not in ((1, 5), (25, 10))))


def join_example(game: Game) -> str:
    """A JOIN line ``game`` would accept from a newcomer now (the game's
    web pages show it); the syntax with its placeholders if every example
    name is taken or the edge is full."""
    players = list(game.players.values())

    def free(abbr: str, alias: str) -> bool:
        return not any(looks_alike(p.abbr, abbr) or (p.alias and looks_alike(p.alias, alias))
                       for p in players if p.abbr)
    names = next((pair for pair in EXAMPLE_NAMES if free(*pair)), None)
    crowd: dict[tuple[int, int], set[str]] = {}
    for p in players:
        for f in (p.chips or []) + (p.start or []):
            crowd.setdefault(f, set()).add(p.handle)
    fields = [f for f in EXAMPLE_FIELDS if len(crowd.get(f, set()) | set(game.others_on(f, ""))) < 2][:2]
    if names is None or len(fields) < 2:
        return "JOIN ABBR F1 F2 ALIAS"
    return f"JOIN {names[0]} {fmt(fields[0])} {fmt(fields[1])} {names[1]}"


def _board_option(text: str) -> str:
    parse_board_file(text or "")  # raises ValueError naming the line
    return text


def _int_option(text: str) -> int:
    return int(str(text).strip())


GM_ONLY = "GM commands are only accepted from the game master's address with the GM password"


@dataclass
class RmpmMail(Mail):
    """``state``: the state given; ``decoded``: the Game, once a command
    needed all of it (JOIN, the GM's commands, a pending player's LEAVE).  A
    mail of orders alone never decodes it: the orders are checked and tried
    on a :class:`Sketch` and written as one entry of the state's orders."""

    state: State
    first_join: Command | None  # the mail's first JOIN line; any other is refused
    decoded: Game | None = None
    changed: bool = False  # the decoded game is saved only when a command changed it

    @property
    def game(self) -> Game:
        if self.decoded is None:
            self.decoded = load(self.state, self.ctx.turn)
        return self.decoded

    @property
    def handle(self) -> str:
        actor = self.ctx.actor
        assert actor is not None and actor.handle is not None  # sender_refusal checked it
        return actor.handle


class RmpmRules(Rules[RmpmMail]):
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
        Option("capital", START_CAPITAL, "starting capital of a new player in WCU", _int_option),
        Option("bank", 0, "the Bank's balance when the game starts (it may go negative)", _int_option),
        Option("kiosk", 0, "money in the kiosk when the game starts", _int_option),
    )

    # -- life cycle -------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        values = self.option_values(options)
        text = values["board"] or ""
        try:
            board = parse_board_file(text) if text else Board.default()
        except ValueError as exc:
            raise GameError(str(exc)) from None
        capital, bank, kiosk = (int(values[name]) for name in ("capital", "bank", "kiosk"))
        if capital < 0 or kiosk < 0:
            raise GameError("capital and kiosk cannot be negative")
        return new_state(board, capital, bank, kiosk)

    def import_state(self, data: dict[str, Any]) -> State:
        return validated(data)

    def export_state(self, state: State) -> dict[str, Any]:
        return state

    # -- mail -------------------------------------------------------------
    def parse_line(self, line: Line) -> Command:
        return parse.parse_line(line)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> RmpmMail:
        first_join = next((c for c in commands if c.name == "join"), None)
        return RmpmMail(ctx, commands, Outcome(state=state), state=state, first_join=first_join)

    def priority(self, cmd: Command) -> int:
        """GM commands first: the GM address need not be a player's account."""
        return 0 if cmd.name.startswith("gm") else 1

    def sender_refusal(self, mail: RmpmMail, cmd: Command) -> str | None:
        actor = mail.ctx.actor
        if cmd.name.startswith("gm"):
            return None if actor and actor.is_gm else GM_ONLY
        if actor is None or actor.handle is None:
            return REGISTER_FIRST
        if not actor.authenticated:
            return cmd.error or NO_PASSWORD
        return None

    def close_mail(self, mail: RmpmMail) -> None:
        """A mail's order lines (and unreadable lines among them) are one order set.

        Orders of a player on the board, in a mail that needed nothing else
        of the game, change one entry of the state's orders: the state is
        not decoded and the server writes just that entry
        (``Outcome.changed_entries``), whatever the number of players."""
        actor, state, out = mail.ctx.actor, mail.state, mail.outcome
        out.state, out.changed_entries = state, {}
        if actor is not None and actor.handle is not None and actor.authenticated:
            handle = actor.handle
            idx = [i for i, c in enumerate(mail.commands) if c.name in ORDER_NAMES or c.name == "error"]
            if any(mail.commands[i].name in ORDER_NAMES for i in idx):
                if mail.decoded is None and self._sketchable(state, handle, mail.ctx):
                    change = self._orders(Sketch(state, mail.ctx.memo), handle, mail.commands, idx, mail.results, out)
                    if change is not None and (change[0] == "hold" or handle in state["orders"]):
                        orders = dict(state["orders"])
                        if change[0] == "hold":
                            orders[handle] = change[1]
                        else:
                            del orders[handle]
                        out.state, out.changed_entries = {**state, "orders": orders}, {"orders": [handle]}
                    return
                change = self._orders(mail.game, handle, mail.commands, idx, mail.results, out)
                if change is not None:
                    what, held = change
                    if what == "withdraw":
                        mail.game.remove_player(handle)
                    elif what == "cancel":
                        mail.game.orders.pop(handle, None)
                    else:
                        mail.game.orders[handle] = held
                    mail.changed = True
        if mail.changed:
            out.state, out.changed_entries = dump(mail.game), None

    @staticmethod
    def _sketchable(state: State, handle: str, ctx: Context) -> bool:
        """Whether this sender's orders can be taken on a Sketch: they are on
        the board (or not in the game at all), and the state's week is the
        server's (after an import they may differ until the state is
        written whole; see ``load``)."""
        row = state["players"].get(handle)
        return (row is None or row.get("chips") is not None) and (ctx.turn <= 0 or state["week"] == ctx.turn)

    def _order(self, mail: RmpmMail, cmd: Command) -> None:
        """An order line: ``close_mail`` takes the mail's orders together."""
        return

    handle_move = handle_fence = handle_exchange = handle_buy = handle_use_mt = handle_leave = handle_cancel = _order

    # -- GM -------------------------------------------------------------------
    def _gm_done(self, mail: RmpmMail, cmd: Command, message: str) -> str:
        mail.outcome.audit.append(f"{self.kind} {mail.ctx.game_name} week {mail.game.week}: {cmd.text}: {message}")
        mail.changed = True
        return message

    def _player(self, game: Game, abbr: str) -> Player:
        p = game.find_abbr(abbr)
        if p is None:
            raise Refused(f"no player with the abbreviation {abbr!r}")
        return p

    def handle_gm_card(self, mail: RmpmMail, cmd: Command) -> str:
        a = cmd.args
        p = self._player(mail.game, a["abbr"])
        have = p.cards.get(a["card"], 0)
        if have + a["n"] < 0:
            raise Refused(f"{p.abbr} holds only {have} {a['card']}")
        p.cards[a["card"]] = have + a["n"]
        change = f"given you {a['n']}" if a["n"] > 0 else f"taken {-a['n']} from you"
        self._tell(mail, p, "your cards", f"The game master has {change} {a['card']} card"
                   f"{'s' if abs(a['n']) != 1 else ''}: you now hold {have + a['n']} {a['card']}.")
        return self._gm_done(mail, cmd, f"{p.abbr} now holds {have + a['n']} {a['card']}")

    def handle_gm_capital(self, mail: RmpmMail, cmd: Command) -> str:
        a = cmd.args
        p = self._player(mail.game, a["abbr"])
        if p.capital + a["amount"] < 0:
            raise Refused(f"capital cannot go below 0: {p.abbr} has {p.capital} WCU")
        p.capital += a["amount"]
        change = f"added {a['amount']} WCU to" if a["amount"] > 0 else f"taken {-a['amount']} WCU from"
        self._tell(mail, p, "your capital", f"The game master has {change} your capital: you now have "
                   f"{p.capital} WCU.")
        return self._gm_done(mail, cmd, f"{p.abbr} now has {p.capital} WCU")

    @staticmethod
    def _tell(mail: RmpmMail, p: Player, what: str, text: str) -> None:
        """A GM line that changes one player's holdings is told to that
        player (the server mails the Notice)."""
        name = mail.ctx.game_name or "rmpm"
        mail.outcome.notices.append(Notice(
            to=[p.handle], subject=f"{name}: the game master changed {what} (week {mail.game.week})",
            text=f"{text}\n\nThe change shows in your next report."))

    def handle_gm_kiosk(self, mail: RmpmMail, cmd: Command) -> str:
        mail.game.kiosk += cmd.args["amount"]
        return self._gm_done(mail, cmd, f"the kiosk now holds {mail.game.kiosk} WCU")

    def handle_gm_bank(self, mail: RmpmMail, cmd: Command) -> str:
        mail.game.bank += cmd.args["amount"]
        return self._gm_done(mail, cmd, f"the Bank now holds {mail.game.bank} WCU")

    def handle_gm_own(self, mail: RmpmMail, cmd: Command) -> str:
        game, a = mail.game, cmd.args
        f = field_of(a["field"])
        if a["abbr"] is None:
            game.owners.pop(f, None)
            game.businesses.pop(f, None)
            return self._gm_done(mail, cmd, f"{fmt(f)} is now unowned")
        p = self._player(game, a["abbr"])
        game.owners[f] = p.handle
        return self._gm_done(mail, cmd, f"{fmt(f)} now belongs to {p.abbr}")

    def handle_gm_business(self, mail: RmpmMail, cmd: Command) -> str:
        game, a = mail.game, cmd.args
        f = field_of(a["field"])
        if a["text"] is None:
            game.businesses.pop(f, None)
            return self._gm_done(mail, cmd, f"the business on {fmt(f)} is removed")
        if f not in game.owners:
            raise Refused(f"nobody owns {fmt(f)}: a business needs an owner (GM OWN {fmt(f)} <abbr>)")
        game.businesses[f] = a["text"]
        return self._gm_done(mail, cmd, f"business on {fmt(f)} recorded")

    # -- joining ------------------------------------------------------------
    def handle_join(self, mail: RmpmMail, c: Command) -> str:
        if c is not mail.first_join:
            raise Refused("only one JOIN per mail")
        game, handle, out = mail.game, mail.handle, mail.outcome
        abbr, alias = c.args["abbr"], c.args["alias"]
        fields = [field_of(f) for f in c.args["fields"]]
        me = game.players.get(handle)
        if me and me.placed:
            raise Refused(f"you are already in the game as {me.abbr} ({me.alias})")
        other = game.find_abbr(abbr)
        if other and other.handle != handle:
            raise Refused(f"the abbreviation {abbr!r} is taken by {other.alias}; choose another 2 letters "
                          f"or digits")
        for p in game.players.values():
            if p.handle == handle or not p.abbr:
                continue
            if looks_alike(p.abbr, abbr):
                raise Refused(f"{abbr!r} looks like the existing abbreviation {p.abbr!r} of {p.alias}; "
                              "choose another 2 letters or digits")
            if p.alias and looks_alike(p.alias, alias):
                raise Refused(f"{alias!r} looks like the existing alias {p.alias!r}; choose another")
        plain = unicodedata.normalize("NFKC", abbr)
        if plain != abbr:
            # superscript 2 3, fullwidth letters, ligatures: they read as other
            # characters (the look-alike check above folds them so), and an
            # abbreviation is typed in every order: it must be written plainly
            spelled = f"write it as {plain!r}" if len(plain) == 2 and plain.isalnum() else "choose 2 plain letters or digits"
            raise Refused(f"the abbreviation {abbr!r} is written with compatibility characters (superscript, "
                          f"fullwidth or the like) that read as {plain!r}; {spelled}")
        probe = me or Player(handle=handle, number=0, abbr=abbr, alias=alias, chips=None)
        why = placement_refusal(game, probe, fields)
        if why:
            raise Refused(f"{why}; choose another edge field")
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
        mail.changed = True
        return f"{verb} as {abbr} ({alias}), player #{me.number:02d}"

    # -- orders -------------------------------------------------------------
    def _orders(self, game: Position, handle: str, commands: list[Command], idx: list[int],
                results: list[Result | None], out: Outcome) -> tuple[str, list[str]] | None:
        """The order set of one mail: the results of its lines, the
        pre-analysis, and what becomes of the orders held for ``handle``:
        ("hold", lines), ("cancel", []), ("withdraw", []) for a pending join
        withdrawn, or None (nothing changes).  ``game`` is not changed."""
        me = game.find(handle)

        def refuse(i: int, msg: str) -> None:
            results[i] = Result(commands[i].line, False, msg, commands[i].text)

        if me is None:
            for i in idx:
                refuse(i, commands[i].error or f"you are not in this game; join first with {JOIN_HINT}")
            return None
        if not me.placed:
            if [commands[i].name for i in idx] == ["leave"]:
                out.left.append(handle)
                results[idx[0]] = Result(commands[idx[0]].line, True,
                                         "accepted: your join is withdrawn; you are no longer in this game",
                                         commands[idx[0]].text)
                return "withdraw", []
            for i in idx:
                refuse(i, commands[i].error or (
                    f"your chips are placed at the update of week {game.week}; "
                    "send orders after that report"))
            return None
        cmds = [commands[i] for i in idx]
        errors = {j: c.error for j, c in enumerate(cmds) if c.error is not None}
        for j, msg in validate_orders(game, me, cmds).items():
            errors.setdefault(j, msg)
        previous = game.held(handle)
        if errors:
            where = ", ".join(cmds[j].line.where for j in sorted(errors))
            for j in range(len(cmds)):
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
            return None
        names = [c.name for c in cmds]
        if names == ["cancel"]:
            results[idx[0]] = Result(cmds[0].line, True, "accepted: your orders for this week are withdrawn",
                                     cmds[0].text)
            out.orders[handle] = []
            return "cancel", []
        held = [c.text for c in cmds]
        out.orders[handle] = list(held)
        if names == ["leave"]:
            results[idx[0]] = Result(cmds[0].line, True, (
                f"accepted: you leave the game at the update of week {game.week}: your chips are removed, "
                "your fields become unowned and your money leaves the game (send CANCEL or new orders "
                "to stay)"), cmds[0].text)
            return "hold", held
        out.sections.append(self._preanalysis(game, me, held, cmds, (results, idx)))
        return "hold", held

    def _preanalysis(self, game: Position, me: Player, held: list[str], cmds: list[Command] | None,
                     fill: tuple[list[Result | None], list[int]] | None) -> Section:
        """Run the held orders on a copy of the current board; fills the
        per-line results (when ``fill``) and returns the reply section."""
        sim = game.sketch()
        p = sim.find(me.handle)
        assert p is not None  # the sender is a player on the board
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
            if fill and cmds:
                results, idx = fill
                results[idx[j]] = Result(cmds[j].line, True, "accepted; now: " + text, cmds[j].text)
        for e in res.events:
            lines.append(_wrap(f"  {e}", indent="      "))
        ahead, first = game.ahead_of(me, 10)
        names = ", ".join(f"{q.abbr} (PN {q.pn})" for q in first)
        if ahead > 10:
            names += f" and {ahead - 10} more"
        moved = res.mn_text
        body = [f"How your orders would run on the board as it stands now (week {game.week}):"]
        body += lines
        body.append(_wrap(f"Your chips would end on {fmt(p.fields[0])} and {fmt(p.fields[1])}: "
                          f"MN {moved}, AN {p.an}, PN {p.pn}, capital {p.capital} WCU."))
        if ahead:
            body.append(_wrap(f"Reminder: players with a higher PN move first this week, and they may "
                              f"change fences, numbers and who stands where. Before you ({ahead}): "
                              f"{names}."))
        else:
            body.append(_wrap(f"Reminder: players with a higher PN move first this week; with PN {me.pn} "
                              "nobody moves before you at the moment."))
        return Section(title="Pre-analysis", text="\n".join(body))

    # -- turns ------------------------------------------------------------------
    def run_turn(self, state: State, ctx: Context) -> Outcome:
        game = load(state, ctx.turn)
        upd = weekly_update(game)
        game.last = update_data(game, upd)
        data = report_data(game)
        subject = f"{ctx.game_name or self.title}: report of week {upd.week}"
        notice = Notice(to=[ALL_PLAYERS], kind="report", subject=subject, template="report.txt", data=data)
        notices, record = [notice], None
        handles = {p.number: p.handle for p in game.players.values()}
        if len(handles) > FULL_REPORT_PLAYERS:
            # a large game: each player gets their own part, the whole report is kept
            notices, record = [Notice(to=[h], kind="report", subject=subject, template="own_report.txt", data=own)
                               for h, own in own_reports(data, handles, ctx.game_name)], notice
        return Outcome(state=dump(game), notices=notices, record=record, turn_done=True,
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

    def standing(self, state: State, handle: str) -> list[str]:
        """Orders held or not; a player whose chips are not placed yet waits."""
        player = state["players"].get(handle) or next(
            (p for h, p in state["players"].items() if h.lower() == handle.lower()), None)
        if player is None:
            return []
        if not player.get("chips"):
            return ["your chips are placed at the next weekly update; no orders until then"]
        return super().standing(state, handle)

    def scores(self, state: State) -> list[tuple[str, int]]:
        """Each player's capital in WCU (the report's inventory shows it to all)."""
        rows = [(h, int(p.get("capital", 0))) for h, p in state["players"].items()]
        return sorted(rows, key=lambda r: (-r[1], r[0].lower()))

    def trends(self, state: State) -> dict[str, list[tuple[str, int]]]:
        """Each player's AN and PN (the report's inventory shows them to all)."""
        return {name: sorted(((h, int(p.get(key, 0))) for h, p in state["players"].items()),
                             key=lambda r: (-r[1], r[0].lower()))
                for name, key in (("AN", "an"), ("PN", "pn"))}

    def colours(self, state: State) -> dict[str, int]:
        """The chip colour of each player's number (the board's legend)."""
        return {h: colour_of(int(p["number"])) % COLOURS for h, p in state["players"].items()}

    def turn_view(self, before: State | None, after: State, turn: int, name: str) -> TurnView | None:
        """The weekly report as it was mailed: the update it left in the
        state (``last``), the board, ownership and inventory after it; per
        player their capital, AN and PN and the chips' move."""
        game = load(after)
        if not game.last:
            return None
        data = report_data(game)
        moves = {m["number"]: m for m in game.last.get("moves", [])}
        placed = {p["number"]: p for p in game.last.get("placed", [])}
        figures = []
        for p in sorted(game.players.values(), key=lambda q: q.number):
            m = moves.get(p.number)
            if m is not None and m["mn"] != "-":
                did = f"{m['old']} -> {m['new']} (MN {m['mn']})"
            elif p.number in placed:
                did = f"chips placed on {placed[p.number]['chips']}"
            else:
                did = None
            figures.append({"handle": p.handle, "score": p.capital, "standing": f"{p.capital} wcu, AN {p.an}, PN {p.pn}",
                            "did": did, "abbr": p.abbr, "alias": p.alias, "number": p.number, "an": p.an,
                            "pn": p.pn})
        return TurnView(f"week {game.last.get('week', turn)}",
                        [Section(template="report.txt", data=data)], figures)  # its own heading

    def order_template(self, state: State, handle: str, last: list[str]) -> list[str] | None:
        """The orders held for the new week if any, else those of the week
        just run: the lines to edit and send back."""
        if handle not in state["players"]:
            return None
        held = state.get("orders", {}).get(handle)
        if held:
            return list(held)
        # last week's lines only where they still apply: a move or a fence turn from a field the
        # player's chips have left (they moved) would be refused if sent back as it is
        chips = {field for field in (parse_field(c) for c in state["players"][handle].get("chips") or [])
                 if field is not None}
        return [line for line in last if self._still_applies(line, chips)]

    @staticmethod
    def _still_applies(line: str, chips: set[Field]) -> bool:
        """Whether an order line of last week names, where it names a chip's
        field (its first field), a field one of the player's chips stands on."""
        words = line.replace("->", " ").split()
        if words and words[0].upper() == "F":
            words = words[1:]
        first = parse_field(words[0]) if words else None
        return first is None or first in chips

    def public_reports(self, state: State, notices: list[Notice]) -> list[Notice]:
        """The weekly report: the board, the update and the standings, sent
        alike to every player.  Never the orders held for the coming week
        nor a pre-analysis (those are in the sender's reply only)."""
        return [n for n in super().public_reports(state, notices) if n.template == "report.txt"]

    def hidden_from(self, state: State, viewer: str | None) -> list[str]:
        """The order lines other players hold for this week's update."""
        orders: dict[str, list[str]] = state.get("orders", {})
        own = set(orders.get(viewer, [])) if viewer else set()
        others = {line for handle, lines in orders.items() if handle != viewer for line in lines}
        return sorted(others - own)

    def join_hint(self, state: State) -> JoinHint | None:
        """JOIN ABBR F1 F2 ALIAS at any time, the example one this game
        would accept as it stands: an abbreviation and an alias no player
        has (nor one that looks like it), two edge fields with room for
        another player's chips (counting the pending joins' start fields)."""
        return JoinHint(join_example(load(state)),
                        "ABBR: two letters or digits of your own; two start fields on the board's edge (row or "
                        "column 01 or 25) with chips of at most one other player; ALIAS: your name in the "
                        "reports. Your chips are placed at the next weekly update")

    def help_text(self) -> str:
        return rule_book(self.summary, self.options)


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=76, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)
