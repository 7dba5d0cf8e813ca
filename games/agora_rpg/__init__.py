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
syntax in :mod:`.parsing`; see docs/games/agora_rpg.md.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from games.agora_rpg import engine
from games.agora_rpg.engine import Dice, Refused
from games.agora_rpg.model import Currency, World
from games.agora_rpg.parsing import GM_SYNTAX, PLAYER_SYNTAX, parse
from games.base import ALL_PLAYERS, actor_problem, Command, Context, GameError, Line, Notice, Option, Outcome, Result, Rules, Section, State


def _choice(*allowed: str):
    def convert(text: str) -> str:
        t = str(text).strip().lower()
        if t not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, not {text!r}")
        return t

    return convert


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
        _choice("house", "gm"),
    ),
    Option(
        "token_cap",
        "factor",
        "weekly tokens: a holder of more than twice the factor (level + 4) drops to "
        "the factor (rule 40 as written), or 'double': to twice the factor",
        _choice("factor", "double"),
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

_PLAYER_ACTIONS = {"leave", "move", "explore", "attack", "flee", "heal", "drink", "exchange", "transfer"}


@dataclass
class _Effects:
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    audit: list[str] = field(default_factory=list)


class AgoraRules(Rules):
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
        opts = {o.name: o.default for o in OPTIONS}
        for k, v in (options or {}).items():
            if k not in opts:
                raise GameError(f"unknown option {k!r} for {self.kind}; options are {', '.join(opts)}")
            opts[k] = v
        mailing_list = opts.pop("mailing_list")
        return World(options=opts, mailing_list=str(mailing_list)).to_state()

    def import_state(self, data: dict[str, Any]) -> State:
        try:
            world = World.from_state(data)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise GameError(f"not an {self.kind} state: {exc!r}") from exc
        problems = world.problems()
        if problems:
            raise GameError("not a valid agora_rpg state: " + "; ".join(problems))
        return world.to_state()

    def export_state(self, state: State) -> dict[str, Any]:
        return World.from_state(state).to_state()

    # -- mail -------------------------------------------------------------------
    def parse(self, lines: list[Line]) -> list[Command]:
        return parse(lines)

    def apply(self, state: State, commands: list[Command], ctx: Context) -> Outcome:
        current = state
        outcome = Outcome(state=state)
        for cmd in commands:
            if cmd.error:
                outcome.results.append(Result(cmd.line, False, cmd.error, cmd.text))
                continue
            # each command works on its own copy: a refusal leaves no trace
            world = World.from_state(current)
            effects = _Effects()
            try:
                message = self._carry_out(world, cmd, ctx, effects)
            except Refused as exc:
                outcome.results.append(Result(cmd.line, False, str(exc), cmd.text))
                continue
            current = world.to_state()
            outcome.results.append(Result(cmd.line, True, "accepted: " + message, cmd.text))
            outcome.joined += effects.joined
            outcome.left += effects.left
            outcome.audit += effects.audit
        outcome.state = current
        handle = ctx.actor.handle if ctx.actor else None
        if handle:
            me = World.from_state(current).character(handle)
            if me is not None:
                points = World.from_state(current).points.get(me.name, 0)
                outcome.sections.append(Section(title="Your character now", text=me.sheet(points)))
        return outcome

    def _carry_out(self, world: World, cmd: Command, ctx: Context, fx: _Effects) -> str:
        actor = ctx.actor
        dice = Dice(ctx.rng, world, ctx.now)
        a = cmd.args
        if cmd.name.startswith("gm_"):
            if actor is None or not actor.is_gm:
                raise Refused("only the Game Master can use GM commands")
            message = self._gm(world, cmd, ctx)
            fx.audit.append(f"{self.kind} GM: {cmd.text} -> {message}")
            return message

        problem = actor_problem(actor)
        if problem:
            raise Refused(problem)
        if cmd.name == "join":
            message = engine.join(world, actor.handle, ctx.now)
            fx.joined.append(actor.handle)
            return message
        c = world.character(actor.handle)
        if c is None:
            raise Refused(f"{actor.handle} is not a party to this game: send JOIN first")
        if cmd.name == "leave":
            fx.left.append(c.name)
            return engine.leave(world, c, ctx.now)
        if cmd.name == "move":
            return engine.move(world, c, a["from"], a["to"], dice)
        if cmd.name == "explore":
            return engine.explore(world, c, dice)
        if cmd.name == "attack":
            return engine.attack(world, c, dice)
        if cmd.name == "flee":
            return engine.flee(world, c, dice)
        if cmd.name == "drink":
            return engine.drink(world, c, a["kind"], a["level"])
        if cmd.name == "heal":
            return engine.heal(world, c)
        if cmd.name == "exchange":
            return engine.exchange(world, c, a["amount"], actor.is_gm)
        if cmd.name == "transfer":
            return engine.transfer(world, c, a["qty"], Currency(a["currency"], a["level"]), a["to"])
        raise Refused(f"unknown command; expected one of {PLAYER_SYNTAX}")  # pragma: no cover

    def _gm(self, world: World, cmd: Command, ctx: Context) -> str:
        a = cmd.args
        if cmd.name == "gm_npc":
            return engine.create_npc(world, a["name"], ctx.now)
        if cmd.name == "gm_remove":
            return engine.remove_npc(world, a["name"])
        if cmd.name == "gm_as":
            npc = world.npc(a["npc"])
            if npc is None:
                raise Refused(f"there is no non-player character called {a['npc']!r}")
            return engine.transfer(world, npc, a["qty"], Currency(a["currency"], a["level"]), a["to"])
        if cmd.name == "gm_set":
            return engine.gm_set(world, a["name"], a["attribute"], a["level"], a["value"])
        if cmd.name == "gm_fight":
            c = world.character(a["name"])
            if c is None:
                raise Refused(f"there is no player character called {a['name']!r}")
            return engine.gm_fight(world, c, a["won"], a["damage"])
        if cmd.name == "gm_list":
            world.mailing_list = a["spec"]
            return f"the RPG mailing list is now: {a['spec']}"
        raise Refused(f"unknown GM command; expected one of {GM_SYNTAX}")  # pragma: no cover

    # -- the week boundary ---------------------------------------------------------
    def run_turn(self, state: State, ctx: Context) -> Outcome:
        world = World.from_state(state)
        week = world.week
        award_lines = engine.award(world)  # end of the week that ends now (rule 38)
        tick_lines = engine.tick(world)  # beginning of the new week (rule 40)
        rolls = [str(r) for r in world.rolls if r.week == week]
        data = {
            "game": ctx.game_name,
            "week": week,
            "date": ctx.now.strftime("%Y-%m-%d %H:%M UTC"),
            "roster": world.roster(),
            "departed": world.departures(),
            "rolls": rolls,
            "award": award_lines,
            "tick": tick_lines,
            "mailing_list": world.mailing_list,
            "options": self._describe_options(world),
        }
        world.rolls = [r for r in world.rolls if r.week > week]
        world.week = week + 1
        notice = Notice(
            to=[ALL_PLAYERS],
            subject=f"{self.title}: report for week {week}",
            template="report.txt",
            data=data,
            kind="report",
        )
        return Outcome(
            state=world.to_state(),
            notices=[notice],
            audit=[f"{self.kind}: week {week} ended: {len(award_lines)} award lines, tokens handed out"],
            turn_done=True,
        )

    @staticmethod
    def _describe_options(world: World) -> list[str]:
        o = world.options
        budget = o.get("points_budget")
        return [
            "combat: "
            + ("decided by the Game Master" if o.get("combat") == "gm" else "the house rule (ATTACK / FLEE)"),
            "weekly token cap: "
            + ("down to twice the factor" if o.get("token_cap") == "double" else "down to the factor (rule 40)"),
            "weekly points budget for exchanged gold: " + ("no limit" if budget is None else str(budget)),
        ]

    # -- what people see -------------------------------------------------------------
    def players(self, state: State) -> list[str]:
        return sorted(state.get("characters", {}))

    def waiting_for(self, state: State) -> list[str]:
        return []

    def view(self, state: State, viewer: str | None) -> list[Section]:
        # Everything the Game Master tracks is public (rule 2): no hiding.
        world = World.from_state(state)
        rolls = "\n".join(str(r) for r in world.rolls) or "(none yet)"
        pending = "\n".join(f"{h}: {n} gold" for h, n in world.exchanges) or "(none)"
        return [
            Section(title=f"Characters (week {world.week})", text=world.roster()),
            Section(title="Rolls this week", text=rolls),
            Section(title="Gold exchanged this week", text=pending),
            Section(title="Former characters", text="\n".join(world.departures()) or "(none)"),
        ]

    def help_text(self) -> str:
        return "\n".join(
            [
                textwrap.fill(self.summary, 72),
                "",
                "Player commands, mailed to the game's address with your password",
                "wrapped in double dollar signs:",
                "  JOIN                      become a character (Town Square, 5 tokens)",
                "  MOVE <from> -> <to>       e.g. MOVE Town Square -> Dungeon Level 1",
                "  EXPLORE                   look around your dungeon level (a move)",
                "  ATTACK / FLEE             fight or run from the monster you met",
                "  DRINK HEALTH POTION <N>   or DRINK VITALITY POTION <N>",
                "  HEAL                      at the Healer, for 2 gold per level",
                "  EXCHANGE <n> GOLD         at the Gold Exchanger: points at week's end",
                "  TRANSFER <qty> <currency> [<N>] TO <name>",
                "                            e.g. TRANSFER 1 ARMOR 2 TO bob",
                "  LEAVE                     stop being a character",
                "",
                "Game Master (from the GM address): GM NPC <name>, GM REMOVE <name>,",
                "  GM AS <npc> TRANSFER ..., GM SET <name> <attribute> = <value>,",
                "  GM FIGHT <name> WON|LOST [DAMAGE <n>], GM LIST <mailing list>",
            ]
        )


RULES = AgoraRules()

__all__ = ["AgoraRules", "RULES"]
