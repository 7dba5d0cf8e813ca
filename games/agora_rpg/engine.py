"""The actions of Agora: The Role-Playing Game, rule by rule.

Each action works on a :class:`~games.agora_rpg.model.World` and either
raises :class:`Refused` *before changing anything* or carries the action out
and returns the text of the reply ("moved from ... to ...").  Dice come from
a :class:`Dice`, which draws from the server's seeded random stream and
records every roll in the world for the weekly report.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from games.agora_rpg.model import (
    FIXED_PLACES,
    GOLD,
    GOLD_EXCHANGER,
    HEALER,
    ITEM_KINDS,
    JOIN_TOKENS,
    REJOIN_DAYS,
    TOWN_SQUARE,
    Character,
    Currency,
    Monster,
    Npc,
    Roll,
    World,
    dungeon,
    dungeon_level,
    iso,
)
from games.base import Refused


@dataclass
class Dice:
    """The game's dice server (rule 8): rolls from the recorded random
    stream, each one kept with its purpose for the weekly report."""

    rng: random.Random
    world: World
    now: datetime
    made: list[Roll] = field(default_factory=list)

    def roll(self, who: str, sides: int, purpose: str) -> int:
        result = self.rng.randint(1, sides)
        roll = Roll(
            week=self.world.week, at=iso(self.now), character=who, purpose=purpose, dice=f"1d{sides}", result=result
        )
        self.world.rolls.append(roll)
        self.made.append(roll)
        return result


# -- numbers of the rules the engine plays by (help agora_rpg prints them) -------
#: sides of the die of an encounter (rule 27) and of a combat round (house rule)
ENCOUNTER_DIE = 100
COMBAT_DIE = 6
#: a monster strikes for max(0, 1d6 + its level - defense level - STRIKE_OFFSET)
STRIKE_OFFSET = 3
#: a move made with vitality 0 costs 1 health and gives this x level vitality (rule 26)
EXHAUSTED_VITALITY_PER_LEVEL = 2
#: the Healer's price per level of the character, in gold (rule 37)
HEAL_COST_PER_LEVEL = 2
#: potions (rules 35, 36): kind -> (gain per potion level below the maximum,
#: rise of the maximum per potion level when drunk at the maximum)
POTIONS: dict[str, tuple[int, int]] = {"health potion": (2, 1), "vitality potion": (4, 2)}

# -- the encounter table (rule 27 as settled in rulings.md section 4) ------------
#: (lowest roll, highest roll, what is found, level relative to the dungeon level)
ENCOUNTERS: tuple[tuple[int, int, str, int], ...] = (
    (1, 10, "stairway", 0),
    (11, 11, "weapon", -1),
    (12, 14, "weapon", 0),
    (15, 15, "weapon", 1),
    (16, 16, "armor", -1),
    (17, 19, "armor", 0),
    (20, 20, "armor", 1),
    (21, 23, "health potion", -1),
    (24, 31, "health potion", 0),
    (32, 35, "health potion", 1),
    (36, 38, "vitality potion", -1),
    (39, 47, "vitality potion", 0),
    (48, 50, "vitality potion", 1),
    (51, 60, "monster", -1),
    (61, 90, "monster", 0),
    (91, 100, "monster", 1),
)


def encounter_for(roll: int, level: int) -> tuple[str, int]:
    """What a roll of 1d100 finds on dungeon level ``level``: (kind, level)."""
    for low, high, kind, offset in ENCOUNTERS:
        if low <= roll <= high:
            return kind, level + offset
    raise ValueError(f"1d100 cannot roll {roll}")


# -- helpers -----------------------------------------------------------------------
def _tokens(n: int) -> str:
    return f"{n} movement token" + ("" if n == 1 else "s")


def _status(c: Character) -> str:
    return f"health {c.health} of {c.max_health}, vitality {c.vitality} of {c.max_vitality}"


def _death(c: Character) -> str:
    c.die()
    return (
        f"{c.name}'s health is 0: {c.name} dies and starts again at the Town Square "
        "at level 1 with nothing (rule 42)"
    )


def _gain(c: Character, experience: int) -> str:
    c.experience += experience
    gained = c.level_ups()
    if not gained:
        return ""
    word = "a level" if gained == 1 else f"{gained} levels"
    return f"; {c.name} gains {word} and is now level {c.level} ({_status(c)}, experience {c.experience})"


# -- joining and leaving (rules 3, 10-16, 19, 39) ----------------------------------
def join(world: World, handle: str, now: datetime) -> str:
    if world.character(handle):
        raise Refused(f"{handle} is already a party to this game")
    if world.npc(handle):
        raise Refused(f"the name {handle} belongs to a non-player character; you cannot join under it")
    left = world.departed.get(handle)
    fresh = left is None or now - datetime.fromisoformat(left) >= timedelta(days=REJOIN_DAYS)
    c = Character(name=handle, joined=iso(now), tokens=JOIN_TOKENS if fresh else 0)
    world.characters[handle] = c
    world.departed.pop(handle, None)
    if fresh or left is None:
        return f"{handle} joins at the Town Square with {JOIN_TOKENS} movement tokens"
    return (
        f"{handle} joins at the Town Square with no movement tokens: {handle} left less than "
        f"{REJOIN_DAYS} days ago ({left[:16].replace('T', ' ')} UTC) (rule 39)"
    )


def leave(world: World, c: Character, now: datetime) -> str:
    del world.characters[c.name]
    world.departed[c.name] = iso(now)
    return f"{c.name} leaves the game; everything {c.name} held is gone"


# -- moves (rules 25, 26) and exploring (rules 27-33) ----------------------------------
def move_defined(world: World, frm: str, to: str) -> bool:
    """Is "from ``frm`` to ``to``" one of the moves of rule 25 (ignoring the
    stairway proviso)?"""
    npc_names = {n.name for n in world.npcs.values()}
    if frm == TOWN_SQUARE:
        return to in (HEALER, GOLD_EXCHANGER, dungeon(1)) or to in npc_names
    if frm in (HEALER, GOLD_EXCHANGER) or frm in npc_names:
        return to == TOWN_SQUARE
    n = dungeon_level(frm)
    if n is None:
        return False
    if to == TOWN_SQUARE:
        return n == 1
    m = dungeon_level(to)
    return m is not None and m in (n - 1, n, n + 1)


def move(world: World, c: Character, frm_text: str, to_text: str, dice: Dice) -> str:
    if c.monster:
        raise Refused(f"{c.name} is fighting {c.monster} and cannot move until it is over: ATTACK or FLEE (rule 27)")
    frm = world.resolve_location(frm_text)
    to = world.resolve_location(to_text)
    if frm is None:
        raise Refused(f"there is no location called {frm_text!r}; {_places(world)}")
    if to is None:
        raise Refused(f"there is no location called {to_text!r}; {_places(world)}")
    if frm != c.location:
        raise Refused(f"{c.name} is at {c.location}, not at {frm}: a move must start where you are (rule 26)")
    if not move_defined(world, frm, to):
        raise Refused(f"there is no move from {frm} to {to} (rule 25); {_moves_from(world, c)}")
    n, m = dungeon_level(frm), dungeon_level(to)
    if n is not None and m == n + 1 and n not in c.stairways:
        raise Refused(
            f"{c.name} does not know the stairway down from Dungeon Level {n} yet: "
            f"EXPLORE Dungeon Level {n} to find it (rule 25)"
        )
    if c.tokens < 1:
        raise Refused(f"{c.name} has no movement tokens left; new ones come at the start of the week (rule 40)")

    c.tokens -= 1
    c.location = to
    parts = [f"moved from {frm} to {to} ({_tokens(c.tokens)} left)"]
    if c.vitality > 0:
        c.vitality -= 1
        parts.append(f"vitality {c.vitality} of {c.max_vitality}")
    else:
        c.set_health(c.health - 1)
        c.set_vitality(c.vitality + EXHAUSTED_VITALITY_PER_LEVEL * c.level)
        parts.append(
            f"with no vitality left the move costs 1 health: health {c.health} of {c.max_health}, "
            f"vitality {c.vitality} of {c.max_vitality}"
        )
        if c.dead:
            parts.append(_death(c))
            return "; ".join(parts)
    if n is not None and n == m:
        parts.append(explore_encounter(world, c, n, dice))
    return "; ".join(parts)


def explore(world: World, c: Character, dice: Dice) -> str:
    n = dungeon_level(c.location)
    if n is None:
        raise Refused(
            f"{c.name} is at {c.location}: EXPLORE works only in the dungeon (MOVE Town Square -> Dungeon Level 1)"
        )
    return move(world, c, c.location, c.location, dice)


def explore_encounter(world: World, c: Character, n: int, dice: Dice) -> str:
    roll = dice.roll(c.name, ENCOUNTER_DIE, f"encounter on Dungeon Level {n}")
    kind, level = encounter_for(roll, n)
    head = f"rolled 1d100 = {roll} for the encounter on Dungeon Level {n}: "
    if kind == "stairway":
        c.stairways.add(n)
        return head + f"{c.name} finds the stairway down from Dungeon Level {n} (rule 28)"
    if level == 0:
        c.holdings.add(GOLD, 1)
        what = "a level 0 monster" if kind == "monster" else f"a level 0 {kind}"
        return head + f"{what} is a piece of gold: {c.name} now has {c.holdings.gold} gold (rules 29-33)"
    if kind == "monster":
        c.monster = Monster.of_level(level)
        return head + f"{c.name} meets {c.monster}; ATTACK or FLEE (rule 33)"
    cur = Currency(kind, level)
    c.holdings.add(cur, 1)
    return head + f"{c.name} finds {cur.one()} (now holds {c.holdings.count(cur)})"


def _places(world: World) -> str:
    npcs = sorted(n.name for n in world.npcs.values())
    names = list(FIXED_PLACES) + npcs + ["Dungeon Level N"]
    return "the locations are " + ", ".join(names)


def _moves_from(world: World, c: Character) -> str:
    here = c.location
    n = dungeon_level(here)
    if here == TOWN_SQUARE:
        dests = [HEALER, GOLD_EXCHANGER] + sorted(x.name for x in world.npcs.values()) + [dungeon(1)]
    elif n is None:
        dests = [TOWN_SQUARE]
    else:
        dests = ([TOWN_SQUARE] if n == 1 else [dungeon(n - 1)]) + [dungeon(n), dungeon(n + 1)]
    return f"from {here} you can move to " + ", ".join(dests)


# -- combat (rule 34 "TBD"; the house rule of rulings.md section 4) ------------------
def _require_fight(world: World, c: Character, verb: str) -> Monster:
    if c.monster is None:
        raise Refused(f"{c.name} is not fighting anything; there is nothing to {verb}")
    if world.options.get("combat", "house") == "gm":
        raise Refused(
            f"in this game the Game Master decides every fight (option combat=gm); "
            f"{c.name}'s fight with {c.monster} waits for the GM's ruling"
        )
    return c.monster


def _monster_strikes(c: Character, m: Monster, dice: Dice) -> str:
    roll = dice.roll(c.name, COMBAT_DIE, f"the level {m.level} monster strikes")
    damage = max(0, roll + m.level - c.defense_level - STRIKE_OFFSET)
    c.set_health(c.health - damage)
    text = (
        f"the monster rolls 1d6 = {roll} and strikes for {damage} "
        f"({roll} + monster level {m.level} - defense level {c.defense_level} - {STRIKE_OFFSET}, at least 0): "
        f"health {c.health} of {c.max_health}"
    )
    if c.dead:
        text += "; " + _death(c)
    return text


def _win(c: Character, m: Monster) -> str:
    c.monster = None
    reward = m.starting_health
    c.holdings.add(GOLD, m.level)
    text = f"the monster is slain: {c.name} gains {reward} experience and {m.level} gold"
    return text + _gain(c, reward)


def attack(world: World, c: Character, dice: Dice) -> str:
    m = _require_fight(world, c, "attack")
    roll = dice.roll(c.name, COMBAT_DIE, f"attack on a level {m.level} monster")
    hit = roll + c.attack_level
    m.health = max(0, m.health - hit)
    text = f"rolled 1d6 = {roll} to attack; with attack level {c.attack_level} the monster loses {hit} health"
    if m.health == 0:
        return text + "; " + _win(c, m)
    text += f" and has {m.health} of {m.starting_health} left; "
    return text + _monster_strikes(c, m, dice)


def flee(world: World, c: Character, dice: Dice) -> str:
    m = _require_fight(world, c, "flee from")
    c.monster = None
    text = f"{c.name} flees from the level {m.level} monster, which strikes once more: "
    text += _monster_strikes(c, m, dice)
    return text + ("" if c.dead else "; the encounter is over")


def gm_fight(world: World, c: Character, won: bool, damage: int) -> str:
    """The Game Master decides a fight (option combat=gm, or any time)."""
    if c.monster is None:
        raise Refused(f"{c.name} is not fighting anything")
    m = c.monster
    c.monster = None
    text = f"the Game Master rules that {c.name} {'wins' if won else 'loses'} the fight with the level {m.level} monster"
    if damage:
        c.set_health(c.health - damage)
        text += f"; {c.name} loses {damage} health: health {c.health} of {c.max_health}"
        if c.dead:
            return text + "; " + _death(c)
    if won:
        return text + "; " + _win(c, m)
    return text + "; the encounter is over without reward"


# -- potions and the Healer (rules 35-37) ---------------------------------------------
def drink(world: World, c: Character, kind: str, level: int) -> str:
    cur = Currency(kind, level)
    if c.holdings.count(cur) < 1:
        raise Refused(f"{c.name} has no {cur} to drink; {c.name} holds: {c.holdings.describe(kind)}")
    c.holdings.add(cur, -1)
    gain, rise = POTIONS[kind]
    if kind == "health potion":
        if c.health < c.max_health:
            c.set_health(c.health + gain * level)
            return f"{c.name} drinks a {cur}: health {c.health} of {c.max_health}"
        c.max_health += rise * level
        return f"{c.name} drinks a {cur} at full health: maximum health rises to {c.max_health}"
    if c.vitality < c.max_vitality:
        c.set_vitality(c.vitality + gain * level)
        return f"{c.name} drinks a {cur}: vitality {c.vitality} of {c.max_vitality}"
    c.max_vitality += rise * level
    return f"{c.name} drinks a {cur} at full vitality: maximum vitality rises to {c.max_vitality}"


def heal(world: World, c: Character) -> str:
    if c.location != HEALER:
        raise Refused(f"{c.name} is at {c.location}; healing happens at the Healer (MOVE Town Square -> Healer)")
    cost = HEAL_COST_PER_LEVEL * c.level
    if c.holdings.gold < cost:
        raise Refused(f"healing a level {c.level} character costs {cost} gold and {c.name} has {c.holdings.gold}")
    c.holdings.add(GOLD, -cost)
    c.set_health(c.max_health)
    c.set_vitality(c.max_vitality)
    return f"{c.name} pays {cost} gold to the Healer: {_status(c)}; {c.holdings.gold} gold left"


# -- the Gold Exchanger (rule 38) -----------------------------------------------------
def exchange(world: World, c: Character, amount: int, is_gm: bool) -> str:
    if is_gm:
        raise Refused("the Game Master may not exchange gold (rule 38)")
    if c.location != GOLD_EXCHANGER:
        raise Refused(
            f"{c.name} is at {c.location}; gold is exchanged at the Gold Exchanger "
            "(MOVE Town Square -> Gold Exchanger)"
        )
    if amount > c.holdings.gold:
        raise Refused(f"{c.name} has only {c.holdings.gold} gold")
    c.holdings.add(GOLD, -amount)
    world.exchanges.append((c.name, amount))
    week_total = sum(n for h, n in world.exchanges if h == c.name)
    return (
        f"{c.name} exchanges {amount} gold ({c.holdings.gold} left); {week_total} gold exchanged "
        "this week becomes points at the end of the week"
    )


def award(world: World) -> list[str]:
    """End of the week (rule 38): points for the gold exchanged, first come
    first served up to the weekly budget; the rest comes back as gold."""
    budget = world.options.get("points_budget")
    left = budget
    lines: list[str] = []
    refunds: dict[str, int] = {}
    for handle, amount in world.exchanges:
        give = amount if left is None else min(amount, left)
        if left is not None:
            left -= give
        if give:
            world.points[handle] = world.points.get(handle, 0) + give
        if give < amount:
            refunds[handle] = refunds.get(handle, 0) + amount - give
        lines.append(f"{handle}: {amount} gold exchanged, {give} points awarded")
    for handle, gold in refunds.items():
        c = world.character(handle)
        if c is not None:
            c.holdings.add(GOLD, gold)
            lines.append(f"{handle}: {gold} gold created for the points that could not be awarded")
        else:
            lines.append(f"{handle}: {gold} points could not be awarded; {handle} has left, so no gold")
    world.exchanges = []
    return lines


# -- weekly movement tokens (rule 40) -----------------------------------------------
def tick(world: World) -> list[str]:
    double = world.options.get("token_cap", "factor") == "double"
    lines = []
    for handle, c in sorted(world.characters.items()):
        f = c.token_factor
        c.tokens += f
        text = f"{handle}: +{_tokens(f)}"
        if c.tokens > 2 * f:
            c.tokens = 2 * f if double else f
            text += f", more than {2 * f} so cut to {c.tokens}"
        lines.append(text + f" (now {c.tokens})")
    return lines


# -- transfers (rules 17, 18) -----------------------------------------------------
def transfer(world: World, giver: Character | Npc, qty: int, cur: Currency, to_name: str) -> str:
    taker = world.party(to_name)
    if taker is None:
        raise Refused(f"there is no character called {to_name!r} in this game")
    if taker is giver:
        raise Refused("a character cannot transfer to itself")
    if isinstance(giver, Character) and isinstance(taker, Character) and giver.location != taker.location:
        raise Refused(
            f"{giver.name} is at {giver.location} and {taker.name} at {taker.location}: "
            "player characters trade only at the same location (rule 17)"
        )
    if isinstance(giver, Character) and not isinstance(taker, Character) and giver.location != taker.name:
        raise Refused(f"{giver.name} must be at {taker.name} to give to {taker.name} (rule 17)")
    if not isinstance(giver, Character) and isinstance(taker, Character) and taker.location != giver.name:
        raise Refused(f"{taker.name} must be at {giver.name} for {giver.name} to give to {taker.name} (rule 17)")
    have = giver.holdings.count(cur)
    if have < qty:
        raise Refused(f"{giver.name} has only {have} {cur}")
    giver.holdings.add(cur, -qty)
    taker.holdings.add(cur, qty)
    return f"{giver.name} gives {cur.amount(qty)} to {taker.name}"


# -- Game Master tools ----------------------------------------------------------------
def create_npc(world: World, name: str, now: datetime) -> str:
    if world.party(name) or world.departed.get(name) is not None:
        raise Refused(f"the name {name} is already taken by a character")
    if world.resolve_location(name) is not None:
        raise Refused(f"{name} is already a location")
    world.npcs[name] = Npc(name=name, created=iso(now))
    return f"{name} is now a non-player character; players reach it by MOVE Town Square -> {name}"


def remove_npc(world: World, name: str) -> str:
    npc = world.npc(name)
    if npc is None:
        raise Refused(f"there is no non-player character called {name!r}")
    del world.npcs[npc.name]
    sent = sorted(c.name for c in world.characters.values() if c.location == npc.name)
    for h in sent:
        world.characters[h].location = TOWN_SQUARE
    text = f"{npc.name} is no longer a party to the game"
    if sent:
        text += "; back at the Town Square (rule 10): " + ", ".join(sent)
    return text


#: GM SET attributes of player characters that hold a plain integer, with
#: their lowest value
INT_ATTRIBUTES = {
    "level": 1,
    "experience": 0,
    "health": 0,
    "max_health": 0,
    "vitality": 0,
    "max_vitality": 0,
    "tokens": 0,
    "points": 0,
}


def gm_set(world: World, name: str, attribute: str, level: int, value: str) -> str:
    """Set one attribute (see parsing.SET_ATTRIBUTES for the names)."""
    who = world.party(name)
    if who is None:
        raise Refused(f"there is no character called {name!r}")
    if attribute == "points":
        n = _int_value(value, 0, attribute)
        world.points[who.name] = n
        return f"{who.name} now has {n} points"
    if attribute == "gold" or attribute in ITEM_KINDS:
        cur = GOLD if attribute == "gold" else Currency(attribute, level)
        n = _int_value(value, 0, str(cur))
        who.holdings.set(cur, n)
        return f"{who.name} now holds {cur.amount(n)}"
    if isinstance(who, Npc):
        raise Refused(f"{who.name} is a non-player character: only its currencies can be set")
    c = who
    if attribute == "location":
        loc = world.resolve_location(value)
        if loc is None:
            raise Refused(f"there is no location called {value!r}; {_places(world)}")
        c.location = loc
        return f"{c.name} is now at {loc}"
    if attribute == "stairway":
        flag = value.strip().lower()
        if flag not in ("true", "false", "yes", "no"):
            raise Refused(f"expected TRUE or FALSE for the stairway, not {value!r}")
        if flag in ("true", "yes"):
            c.stairways.add(level)
        else:
            c.stairways.discard(level)
        return f"{c.name} {'knows' if level in c.stairways else 'does not know'} the stairway down from level {level}"
    if attribute == "monster":
        if value.strip().lower() == "none":
            c.monster = None
            return f"{c.name} is not fighting anything now"
        n = _int_value(value, 1, "monster level")
        c.monster = Monster.of_level(n)
        return f"{c.name} now fights {c.monster}"
    n = _int_value(value, INT_ATTRIBUTES[attribute], attribute.replace("_", " "))
    if attribute == "health":
        c.set_health(n)
    elif attribute == "vitality":
        c.set_vitality(n)
    else:
        setattr(c, attribute, n)
    if attribute == "max_health":
        c.set_health(c.health)
    if attribute == "max_vitality":
        c.set_vitality(c.vitality)
    text = f"{c.name}'s {attribute.replace('_', ' ')} is now {getattr(c, attribute)}"
    if attribute in ("experience", "level"):
        text += _gain(c, 0)
    if c.dead:
        text += "; " + _death(c)
    return text


def _int_value(value: str, lowest: int, what: str) -> int:
    v = value.strip()
    if not re.fullmatch(r"[0-9]+", v) or int(v) < lowest:
        raise Refused(f"expected a whole number of at least {lowest} for {what}, not {value!r}")
    return int(v)


__all__ = [
    "ENCOUNTERS",
    "Dice",
    "Refused",
    "attack",
    "award",
    "create_npc",
    "drink",
    "encounter_for",
    "exchange",
    "explore",
    "flee",
    "gm_fight",
    "gm_set",
    "heal",
    "join",
    "leave",
    "move",
    "remove_npc",
    "tick",
    "transfer",
]
