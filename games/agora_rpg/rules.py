"""Agora: The Role-Playing Game (proto-contract v0.2, Agora nomic).

Characters join by mail, move between the Town Square, the Healer, the Gold
Exchanger, non-player characters and the levels of a dungeon, explore for
stairways, treasure and monsters, fight, drink potions, heal, trade and
exchange gold for points.  Every action takes effect when its mail is
processed, in the order the mails arrived; the server rolls every die from
the game's recorded random stream.  At each week boundary (``run_turn``) the
gold exchanged during the week is turned into points, movement tokens are
handed out, and a report with every character and the contract text goes
to all characters.

The rules are in :mod:`.engine`, the data model in :mod:`.model`, the mail
syntax in :mod:`.parse`; see docs/games/agora_rpg.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from games.agora_rpg import engine, parse, view
from games.agora_rpg.engine import Dice
from games.agora_rpg.help import rule_book
from games.agora_rpg.model import Character, Currency, World
from games.agora_rpg.state import dump, load, validated
from games.base import (
    ALL_PLAYERS,
    Command,
    Context,
    JoinHint,
    Line,
    Mail,
    Notice,
    Option,
    Outcome,
    Refused,
    Rules,
    Section,
    State,
    choice,
)


def _budget(text: Any) -> int | None:
    if text is None:
        return None
    t = str(text).strip().lower()
    if t in ("", "none", "unlimited"):
        return None
    if not t.isascii() or not t.isdigit():
        raise ValueError(f"expected a whole number of points or 'none', not {text!r}")
    return int(t)


OPTIONS = (
    Option(
        "combat",
        "house",
        "house: ATTACK and FLEE are rolled by the server (the house rule); "
        "gm: the Game Master decides every fight with GM FIGHT",
        choice("house", "gm"),
    ),
    Option(
        "token_cap",
        "factor",
        "weekly tokens: a holder of more than twice the factor (level + 4) drops to "
        "the factor (rule 40 as written), or 'double': to twice the factor",
        choice("factor", "double"),
    ),
    Option(
        "points_budget",
        None,
        "points the Game Master can award per week for exchanged gold, first come "
        "first served; the rest is returned as gold ('none': no limit)",
        _budget,
    ),
    Option(
        "mailing_list",
        "public messages",
        "how players reach the RPG mailing list (rule 5); the GM can change it with GM LIST",
        str,
    ),
)

@dataclass
class AgoraMail(Mail):
    """Each command works on its own copy of the world (``begin``), kept only
    when the command is accepted (``commit``): a refusal leaves no trace."""

    current: State
    world: World = field(init=False)
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    audit: list[str] = field(default_factory=list)

    def begin(self) -> None:
        self.world = load(self.current)
        self.joined, self.left, self.audit = [], [], []

    def commit(self) -> None:
        self.current = dump(self.world)
        self.outcome.joined += self.joined
        self.outcome.left += self.left
        self.outcome.audit += self.audit

    def dice(self) -> Dice:
        return Dice(self.ctx.rng, self.world, self.ctx.now)


class AgoraRules(Rules[AgoraMail]):
    kind = "agora_rpg"
    title = "Agora: The Role-Playing Game"
    summary = (
        "Agora: The Role-Playing Game. Join, then spend movement tokens to walk "
        "between the Town Square, the Healer, the Gold Exchanger and a dungeon of "
        "endless levels; explore for stairways, weapons, armor, potions, gold and "
        "monsters; fight, heal, trade and exchange gold for points. Actions take "
        "effect as they arrive; a report goes out every week."
    )
    has_turns = True
    turn_name = "week"
    default_deadline = "every Monday 00:00 UTC"
    options = OPTIONS

    # -- life cycle -----------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        opts = self.option_values(options)
        mailing_list = opts.pop("mailing_list")
        return dump(World(options=opts, mailing_list=str(mailing_list)))

    def import_state(self, data: dict[str, Any]) -> State:
        return validated(data)

    def export_state(self, state: State) -> dict[str, Any]:
        return dump(load(state))

    # -- mail -------------------------------------------------------------------
    def parse_line(self, line: Line) -> Command:
        return parse.parse_line(line)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> AgoraMail:
        return AgoraMail(ctx, commands, Outcome(state=state), current=state)

    def close_mail(self, mail: AgoraMail) -> None:
        mail.outcome.state = mail.current
        handle = mail.ctx.actor.handle if mail.ctx.actor else None
        if handle:
            world = load(mail.current)
            me = world.character(handle)
            if me is not None:
                points = world.points.get(me.name, 0)
                mail.outcome.sections.append(Section(title="Your character now", text=me.sheet(points)))

    # -- who may act --------------------------------------------------------------
    def _character(self, mail: AgoraMail) -> Character:
        handle = mail.sender()
        c = mail.world.character(handle)
        if c is None:
            raise Refused(f"{handle} is not a party to this game: send JOIN first")
        return c

    def _gm(self, mail: AgoraMail, cmd: Command, act: Callable[[World], str]) -> str:
        actor = mail.ctx.actor
        if actor is None or not actor.is_gm:
            raise Refused("only the Game Master can use GM commands")
        message = act(mail.world)
        mail.audit.append(f"{self.kind} GM: {cmd.text} -> {message}")
        return message

    # -- player commands ----------------------------------------------------------
    def handle_join(self, mail: AgoraMail, cmd: Command) -> str:
        handle = mail.sender()
        message = engine.join(mail.world, handle, mail.ctx.now)
        mail.joined.append(handle)
        return message

    def handle_leave(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        mail.left.append(c.name)
        return engine.leave(mail.world, c, mail.ctx.now)

    def handle_move(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        return engine.move(mail.world, c, cmd.args["from"], cmd.args["to"], mail.dice())

    def handle_explore(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        return engine.explore(mail.world, c, mail.dice())

    def handle_attack(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        return engine.attack(mail.world, c, mail.dice())

    def handle_flee(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        return engine.flee(mail.world, c, mail.dice())

    def handle_drink(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        return engine.drink(mail.world, c, cmd.args["kind"], cmd.args["level"])

    def handle_heal(self, mail: AgoraMail, cmd: Command) -> str:
        return engine.heal(mail.world, self._character(mail))

    def handle_exchange(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        assert mail.ctx.actor is not None
        return engine.exchange(mail.world, c, cmd.args["amount"], mail.ctx.actor.is_gm)

    def handle_transfer(self, mail: AgoraMail, cmd: Command) -> str:
        c = self._character(mail)
        a = cmd.args
        return engine.transfer(mail.world, c, a["qty"], Currency(a["currency"], a["level"]), a["to"])

    # -- Game Master commands -----------------------------------------------------
    def handle_gm_npc(self, mail: AgoraMail, cmd: Command) -> str:
        return self._gm(mail, cmd, lambda world: engine.create_npc(world, cmd.args["name"], mail.ctx.now))

    def handle_gm_remove(self, mail: AgoraMail, cmd: Command) -> str:
        return self._gm(mail, cmd, lambda world: engine.remove_npc(world, cmd.args["name"]))

    def handle_gm_as(self, mail: AgoraMail, cmd: Command) -> str:
        a = cmd.args

        def act(world: World) -> str:
            npc = world.npc(a["npc"])
            if npc is None:
                raise Refused(f"there is no non-player character called {a['npc']!r}")
            return engine.transfer(world, npc, a["qty"], Currency(a["currency"], a["level"]), a["to"])

        return self._gm(mail, cmd, act)

    def handle_gm_set(self, mail: AgoraMail, cmd: Command) -> str:
        a = cmd.args
        message = self._gm(mail, cmd, lambda world: engine.gm_set(world, a["name"], a["attribute"], a["level"], a["value"]))
        player = mail.world.character(a["name"])
        if player is not None:  # the player is told what the Game Master changed
            name = mail.ctx.game_name or self.title
            what = a["attribute"].replace("_", " ") + (f" {a['level']}" if a["level"] else "")
            mail.outcome.notices.append(Notice(
                to=[player.name], subject=f"{name}: the game master changed your {what}",
                text=f"The Game Master has set the {what} of your character: {message}.\n\n"
                     + player.sheet(mail.world.points.get(player.name, 0))))
        return message

    def handle_gm_fight(self, mail: AgoraMail, cmd: Command) -> str:
        a = cmd.args

        def act(world: World) -> str:
            c = world.character(a["name"])
            if c is None:
                raise Refused(f"there is no player character called {a['name']!r}")
            return engine.gm_fight(world, c, a["won"], a["damage"])

        return self._gm(mail, cmd, act)

    def handle_gm_list(self, mail: AgoraMail, cmd: Command) -> str:
        def act(world: World) -> str:
            world.mailing_list = cmd.args["spec"]
            return f"the RPG mailing list is now: {cmd.args['spec']}"

        return self._gm(mail, cmd, act)

    # -- the week boundary ---------------------------------------------------------
    def run_turn(self, state: State, ctx: Context) -> Outcome:
        world = load(state)
        week = world.week
        award_lines = engine.award(world)  # end of the week that ends now (rule 38)
        tick_lines = engine.tick(world)  # beginning of the new week (rule 40)
        data = view.report_data(world, ctx, award_lines, tick_lines)
        world.rolls = [r for r in world.rolls if r.week > week]
        world.week = week + 1
        notice = Notice(
            to=[ALL_PLAYERS],
            subject=f"{ctx.game_name or self.title}: report for week {week}",
            template="report.txt",
            data=data,
            kind="report",
        )
        return Outcome(
            state=dump(world),
            notices=[notice],
            audit=[f"{self.kind}: week {week} ended: {len(award_lines)} award lines, tokens handed out"],
            turn_done=True,
        )

    # -- what people see -------------------------------------------------------------
    def players(self, state: State) -> list[str]:
        return sorted(state.get("characters", {}))

    def waiting_for(self, state: State) -> list[str]:
        return []

    def standing(self, state: State, handle: str) -> list[str]:
        """Actions take effect when they arrive: the movement tokens left."""
        world = load(state)
        me = world.characters.get(handle) or next(
            (c for h, c in world.characters.items() if h.lower() == handle.lower()), None)
        if me is None:
            return []
        return [f"{me.tokens} movement token{'s' if me.tokens != 1 else ''} left this week; "
                "actions take effect when they arrive"]

    def scores(self, state: State) -> list[tuple[str, int]]:
        """Each character's points (the weekly report shows them to all)."""
        points = state.get("points") or {}
        rows = [(h, int(points.get(h, 0) or 0)) for h in state.get("characters", {})]
        return sorted(rows, key=lambda r: (-r[1], r[0].lower()))

    def order_template(self, state: State, handle: str, last: list[str]) -> list[str] | None:
        """Actions take effect when they arrive, so nothing is held: the
        template is the actions that suit the character where it stands
        (view.order_template), to edit and send back."""
        world = load(state)
        me = world.characters.get(handle)
        return None if me is None else view.order_template(me)

    def public_reports(self, state: State, notices: list[Notice]) -> list[Notice]:
        """The weekly report, which is the public record of the game (rule
        2). A reply to one player's action (their dice, a transfer they
        made) is in their reply only and is never passed on."""
        return [n for n in super().public_reports(state, notices) if n.template == "report.txt"]

    def view(self, state: State, viewer: str | None) -> list[Section]:
        return view.sections(load(state))

    def join_hint(self, state: State) -> JoinHint | None:
        """JOIN at any time: the character starts at the Town Square (engine.join)."""
        return JoinHint("JOIN", "your character starts at the Town Square; actions take effect when they arrive")

    def help_text(self) -> str:
        return rule_book(self.summary, self.options)


__all__ = ["AgoraRules"]
