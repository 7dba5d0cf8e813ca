"""What a viewer of Agora RPG sees.  Everything the Game Master tracks is
public (rule 2), so every viewer sees the same."""

from __future__ import annotations

from typing import Any

from games.agora_rpg.model import HEALER, TOWN_SQUARE, Character, World, dungeon, dungeon_level
from games.base import Context, Section


def sections(world: World) -> list[Section]:
    rolls = "\n".join(str(r) for r in world.rolls) or "(none yet)"
    pending = "\n".join(f"{h}: {n} gold" for h, n in world.exchanges) or "(none)"
    return [
        Section(title=f"Characters (week {world.week})", text=world.roster()),
        Section(title="Rolls this week", text=rolls),
        Section(title="Gold exchanged this week", text=pending),
        Section(title="Former characters", text="\n".join(world.departures()) or "(none)"),
    ]


def report_data(world: World, ctx: Context, award: list[str], tick: list[str]) -> dict[str, Any]:
    """The weekly report's data, taken after the award and the tick and
    before the week's rolls are dropped."""
    week = world.week
    return {
        "game": ctx.game_name,
        "week": week,
        "date": ctx.now.strftime("%Y-%m-%d %H:%M UTC"),
        "roster": world.roster(),
        "departed": world.departures(),
        "rolls": [str(r) for r in world.rolls if r.week == week],
        "award": award,
        "tick": tick,
        "mailing_list": world.mailing_list,
        "options": describe_options(world),
    }


def describe_options(world: World) -> list[str]:
    o = world.options
    budget = o.get("points_budget")
    return [
        "combat: "
        + ("decided by the Game Master" if o.get("combat") == "gm" else "the house rule (ATTACK / FLEE)"),
        "weekly token cap: "
        + ("down to twice the factor" if o.get("token_cap") == "double" else "down to the factor (rule 40)"),
        "weekly points budget for exchanged gold: " + ("no limit" if budget is None else str(budget)),
    ]


def order_template(me: Character) -> list[str]:
    """The actions that suit ``me`` where it stands, as lines to send back
    (the weekly report's order template): fight or flee a monster, heal when
    hurt, explore a dungeon level, or go down into the dungeon."""
    here = me.location
    if me.monster is not None:
        return ["ATTACK"]
    if me.health < me.max_health:
        return ["HEAL"] if here == HEALER else [f"MOVE {here} -> {HEALER}"]
    level = dungeon_level(here)
    if level is not None:
        return ["EXPLORE"]
    return [f"MOVE {here} -> {dungeon(1) if here == TOWN_SQUARE else TOWN_SQUARE}"]
