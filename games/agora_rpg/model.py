"""The domain model of Agora: The Role-Playing Game.

Everything the Game Master tracks lives in a :class:`World`: the player
characters (:class:`Character`), the non-player characters (:class:`Npc`),
who left when (rule 39), the gold exchanged this week (rule 38), the points
awarded for it, and the week's dice rolls.  :meth:`World.from_state` and
:meth:`World.to_state` are the one place where the JSON state is converted
to and from these objects.  Only integers are stored; dates are ISO strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# -- rule 9: the base values ------------------------------------------------
BASE_HEALTH = 5
BASE_VITALITY = 10
BASE_EXPERIENCE = 10
BASE_MONSTER_HEALTH = 5

#: tokens a character gets on joining (rule 39)
JOIN_TOKENS = 5
#: days a character must have been away before joining gives tokens again
REJOIN_DAYS = 7
#: the movement token accumulation factor is level + TOKEN_FACTOR_BONUS (rule 40)
TOKEN_FACTOR_BONUS = 4

STATE_VERSION = 1

# -- locations (rule 10) ----------------------------------------------------
TOWN_SQUARE = "Town Square"
HEALER = "Healer"
GOLD_EXCHANGER = "Gold Exchanger"
FIXED_PLACES = (TOWN_SQUARE, HEALER, GOLD_EXCHANGER)

_DUNGEON_RE = re.compile(r"^dungeon\s+level\s+([0-9]+)$", re.IGNORECASE)


def dungeon(level: int) -> str:
    """The name of a dungeon level as a location."""
    return f"Dungeon Level {level}"


def dungeon_level(location: str) -> int | None:
    """N for "Dungeon Level N", None for any other location."""
    m = _DUNGEON_RE.match(location.strip())
    if not m:
        return None
    n = int(m.group(1))
    return n if n > 0 else None


#: an NPC name: one word (it is also a location and a transfer target)
NPC_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,31}$")
#: words an NPC may not be called: they start locations or commands
RESERVED_NAMES = frozenset(
    {"town", "square", "healer", "gold", "exchanger", "dungeon", "level", "gm", "all", "none", "npc"}
)


# -- currencies (rules 17 and 18) ---------------------------------------------
#: the currencies that come in levels, in report order
ITEM_KINDS = ("weapon", "armor", "health potion", "vitality potion")
ITEM_TITLES = {
    "weapon": "Weapons",
    "armor": "Armor",
    "health potion": "Health potions",
    "vitality potion": "Vitality potions",
}


@dataclass(frozen=True)
class Currency:
    """gold, or one of the levelled currencies (weapon level 2, ...)."""

    kind: str  # "gold" or one of ITEM_KINDS
    level: int = 0  # > 0 for the levelled currencies

    def __str__(self) -> str:
        if self.kind == "gold":
            return "gold"
        return f"{self.kind} level {self.level}"

    def one(self) -> str:
        """"a weapon level 2", "armor level 1", "a health potion level 3"."""
        return str(self) if self.kind in ("gold", "armor") else f"a {self}"

    def amount(self, qty: int) -> str:
        """"3 gold", "1 weapon level 2", "2 health potions level 1"."""
        if self.kind == "gold":
            return f"{qty} gold"
        noun = self.kind if qty == 1 else self.kind + "s"
        return f"{qty} {noun} level {self.level}"

    @property
    def args(self) -> dict[str, Any]:
        return {"currency": self.kind, "level": self.level}


GOLD = Currency("gold")


@dataclass
class Holdings:
    """The currencies a character owns (rule 17): gold and levelled items."""

    gold: int = 0
    items: dict[str, dict[int, int]] = field(default_factory=lambda: {k: {} for k in ITEM_KINDS})

    def count(self, cur: Currency) -> int:
        if cur.kind == "gold":
            return self.gold
        return self.items[cur.kind].get(cur.level, 0)

    def add(self, cur: Currency, qty: int) -> None:
        self.set(cur, self.count(cur) + qty)

    def set(self, cur: Currency, qty: int) -> None:
        if cur.kind == "gold":
            self.gold = qty
            return
        if qty:
            self.items[cur.kind][cur.level] = qty
        else:
            self.items[cur.kind].pop(cur.level, None)

    def best(self, kind: str) -> int:
        """The highest level held of ``kind``, 0 if none (rules 20, 21)."""
        return max(self.items[kind], default=0)

    def clear(self) -> None:
        self.gold = 0
        self.items = {k: {} for k in ITEM_KINDS}

    def describe(self, kind: str) -> str:
        held = self.items[kind]
        if not held:
            return "none"
        return ", ".join(f"level {lvl} x{n}" for lvl, n in sorted(held.items()))

    # JSON
    def to_json(self) -> dict[str, Any]:
        return {
            "gold": self.gold,
            "items": {k: {str(lvl): n for lvl, n in sorted(v.items())} for k, v in self.items.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Holdings:
        items: dict[str, dict[int, int]] = {k: {} for k in ITEM_KINDS}
        for kind, held in (data.get("items") or {}).items():
            if kind not in items:
                raise ValueError(f"unknown currency {kind!r}")
            items[kind] = {int(lvl): int(n) for lvl, n in held.items() if int(n) > 0}
        return cls(gold=int(data.get("gold", 0)), items=items)


@dataclass
class Monster:
    """The monster a character is fighting (rules 22-24)."""

    level: int
    health: int

    @classmethod
    def of_level(cls, level: int) -> Monster:
        return cls(level=level, health=level * BASE_MONSTER_HEALTH)

    @property
    def starting_health(self) -> int:
        return self.level * BASE_MONSTER_HEALTH

    def __str__(self) -> str:
        return f"a level {self.level} monster (health {self.health} of {self.starting_health})"


@dataclass
class Character:
    """A player character and every attribute the Game Master tracks."""

    name: str
    joined: str  # ISO date-time of becoming a party
    location: str = TOWN_SQUARE
    level: int = 1
    experience: int = 0
    max_health: int = BASE_HEALTH
    health: int = BASE_HEALTH
    max_vitality: int = BASE_VITALITY
    vitality: int = BASE_VITALITY
    stairways: set[int] = field(default_factory=set)  # N: knows the stairway down from level N
    tokens: int = 0
    holdings: Holdings = field(default_factory=Holdings)
    monster: Monster | None = None  # an unresolved fight (rule 27)

    # -- computed attributes (rules 20, 21, 40) ----------------------------
    @property
    def attack_level(self) -> int:
        return self.holdings.best("weapon")

    @property
    def defense_level(self) -> int:
        return self.holdings.best("armor")

    @property
    def token_factor(self) -> int:
        return self.level + TOKEN_FACTOR_BONUS

    # -- attribute changes that carry a rule with them ----------------------
    def set_health(self, value: int) -> None:
        """Rule 14: never above the maximum, never below 0."""
        self.health = max(0, min(value, self.max_health))

    def set_vitality(self, value: int) -> None:
        """Rule 16: never above the maximum, never below 0."""
        self.vitality = max(0, min(value, self.max_vitality))

    def level_ups(self) -> int:
        """Rule 41, repeated while the experience still suffices.  Returns
        how many levels were gained."""
        gained = 0
        while self.experience >= self.level * BASE_EXPERIENCE:
            self.experience -= self.level * BASE_EXPERIENCE
            self.level += 1
            self.max_health += BASE_HEALTH
            self.set_health(self.health + BASE_HEALTH)
            self.max_vitality += BASE_VITALITY
            self.set_vitality(self.vitality + BASE_VITALITY)
            gained += 1
        return gained

    def die(self) -> None:
        """Rule 42: back to the Town Square with nothing."""
        self.location = TOWN_SQUARE
        self.level = 1
        self.experience = 0
        self.max_health = BASE_HEALTH
        self.health = BASE_HEALTH
        self.max_vitality = BASE_VITALITY
        self.vitality = BASE_VITALITY
        self.holdings.clear()
        self.tokens = 0
        self.stairways = set()
        self.monster = None

    @property
    def dead(self) -> bool:
        return self.health <= 0

    # -- printing ------------------------------------------------------------
    def sheet(self, points: int = 0) -> str:
        """Every tracked attribute, in a block of lines under 78 characters."""
        h = self.holdings
        known = ", ".join(str(n) for n in sorted(self.stairways)) or "none"
        lines = [
            f"{self.name} (player character since {self.joined[:10]})",
            f"  Location: {self.location}",
            f"  Level {self.level}, experience {self.experience} (next level at {self.level * BASE_EXPERIENCE})",
            f"  Health {self.health} of {self.max_health}, vitality {self.vitality} of {self.max_vitality}",
            f"  Movement tokens {self.tokens}, gold {h.gold}, points {points}",
            f"  Knows the stairway down from dungeon levels: {known}",
            f"  Weapons: {h.describe('weapon')} (attack level {self.attack_level})",
            f"  Armor: {h.describe('armor')} (defense level {self.defense_level})",
            f"  Health potions: {h.describe('health potion')}",
            f"  Vitality potions: {h.describe('vitality potion')}",
        ]
        if self.monster:
            lines.append(f"  Fighting {self.monster}")
        return "\n".join(lines)

    # -- JSON ----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "joined": self.joined,
            "location": self.location,
            "level": self.level,
            "experience": self.experience,
            "max_health": self.max_health,
            "health": self.health,
            "max_vitality": self.max_vitality,
            "vitality": self.vitality,
            "stairways": sorted(self.stairways),
            "tokens": self.tokens,
            "holdings": self.holdings.to_json(),
            "monster": None if self.monster is None else {"level": self.monster.level, "health": self.monster.health},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Character:
        m = d.get("monster")
        return cls(
            name=str(d["name"]),
            joined=str(d["joined"]),
            location=str(d["location"]),
            level=int(d["level"]),
            experience=int(d["experience"]),
            max_health=int(d["max_health"]),
            health=int(d["health"]),
            max_vitality=int(d["max_vitality"]),
            vitality=int(d["vitality"]),
            stairways={int(n) for n in d.get("stairways", [])},
            tokens=int(d["tokens"]),
            holdings=Holdings.from_json(d.get("holdings") or {}),
            monster=None if not m else Monster(level=int(m["level"]), health=int(m["health"])),
        )


@dataclass
class Npc:
    """A non-player character: created by the Game Master, owns currencies
    but has no location, level or tokens (those belong to player characters)."""

    name: str
    created: str
    holdings: Holdings = field(default_factory=Holdings)

    def sheet(self) -> str:
        h = self.holdings
        return "\n".join(
            [
                f"{self.name} (non-player character since {self.created[:10]})",
                f"  Gold {h.gold}",
                f"  Weapons: {h.describe('weapon')}",
                f"  Armor: {h.describe('armor')}",
                f"  Health potions: {h.describe('health potion')}",
                f"  Vitality potions: {h.describe('vitality potion')}",
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "created": self.created, "holdings": self.holdings.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Npc:
        return cls(name=str(d["name"]), created=str(d["created"]), holdings=Holdings.from_json(d.get("holdings") or {}))


@dataclass
class Roll:
    """One roll of the game's dice server (rule 8), kept for the report."""

    week: int
    at: str  # ISO date-time
    character: str
    purpose: str
    dice: str  # e.g. "1d100"
    result: int

    def __str__(self) -> str:
        return f"{self.at[:16].replace('T', ' ')}  {self.character}: {self.dice} = {self.result} ({self.purpose})"

    def to_json(self) -> dict[str, Any]:
        return {
            "week": self.week,
            "at": self.at,
            "character": self.character,
            "purpose": self.purpose,
            "dice": self.dice,
            "result": self.result,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Roll:
        return cls(
            week=int(d["week"]),
            at=str(d["at"]),
            character=str(d["character"]),
            purpose=str(d["purpose"]),
            dice=str(d["dice"]),
            result=int(d["result"]),
        )


@dataclass
class World:
    """The whole game: what the Game Master tracks."""

    options: dict[str, Any]
    week: int = 1
    characters: dict[str, Character] = field(default_factory=dict)  # by handle
    npcs: dict[str, Npc] = field(default_factory=dict)  # by name as created
    departed: dict[str, str] = field(default_factory=dict)  # handle -> ISO date-time of leaving
    exchanges: list[tuple[str, int]] = field(default_factory=list)  # this week, in order
    points: dict[str, int] = field(default_factory=dict)  # handle -> points awarded so far
    rolls: list[Roll] = field(default_factory=list)  # this week's rolls
    mailing_list: str = "public messages"

    # -- lookups ---------------------------------------------------------------
    def character(self, name: str) -> Character | None:
        if name in self.characters:
            return self.characters[name]
        low = name.lower()
        for handle, c in self.characters.items():
            if handle.lower() == low:
                return c
        return None

    def npc(self, name: str) -> Npc | None:
        low = name.lower()
        for n, npc in self.npcs.items():
            if n.lower() == low:
                return npc
        return None

    def party(self, name: str) -> Character | Npc | None:
        """A character of either kind by name (case-insensitive)."""
        return self.character(name) or self.npc(name)

    def resolve_location(self, text: str) -> str | None:
        """The canonical spelling of a location, or None if there is none
        such (rule 10)."""
        t = " ".join(text.split())
        for place in FIXED_PLACES:
            if t.lower() == place.lower():
                return place
        n = dungeon_level(t)
        if n is not None:
            return dungeon(n)
        npc = self.npc(t)
        return npc.name if npc else None

    def problems(self) -> list[str]:
        """What makes this world impossible under the rules (for imports)."""
        out = []
        if self.options.get("combat", "house") not in ("house", "gm"):
            out.append("option combat must be house or gm")
        if self.options.get("token_cap", "factor") not in ("factor", "double"):
            out.append("option token_cap must be factor or double")
        budget = self.options.get("points_budget")
        if budget is not None and (not isinstance(budget, int) or budget < 0):
            out.append("option points_budget must be a whole number or null")
        for handle, c in self.characters.items():
            if handle != c.name:
                out.append(f"character {handle} is filed under another name ({c.name})")
            if self.resolve_location(c.location) != c.location:
                out.append(f"{handle}: unknown location {c.location!r}")
            if c.level < 1:
                out.append(f"{handle}: level must be at least 1")
            for attr in ("experience", "health", "max_health", "vitality", "max_vitality", "tokens"):
                if getattr(c, attr) < 0:
                    out.append(f"{handle}: {attr} must not be negative")
            if c.health > c.max_health or c.vitality > c.max_vitality:
                out.append(f"{handle}: health and vitality must not exceed their maxima")
            if c.health == 0:
                out.append(f"{handle}: health 0 means death, which resets the character")
        for name, npc in self.npcs.items():
            if name != npc.name or name in self.characters:
                out.append(f"non-player character {name} clashes with another name")
        return out

    # -- printing -----------------------------------------------------------
    def roster(self) -> str:
        """Every tracked attribute of every character."""
        blocks = [c.sheet(self.points.get(h, 0)) for h, c in sorted(self.characters.items())]
        blocks += [n.sheet() for _, n in sorted(self.npcs.items(), key=lambda kv: kv[0].lower())]
        return "\n\n".join(blocks) if blocks else "(no characters yet)"

    def departures(self) -> list[str]:
        """Who left when: joining again within 7 days gives no tokens (rule 39)."""
        return [f"{h} left on {t[:16].replace('T', ' ')} UTC" for h, t in sorted(self.departed.items())]

    def __str__(self) -> str:
        return self.roster()

    # -- JSON ----------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "options": dict(self.options),
            "week": self.week,
            "mailing_list": self.mailing_list,
            "characters": {h: c.to_json() for h, c in self.characters.items()},
            "npcs": {n: npc.to_json() for n, npc in self.npcs.items()},
            "departed": dict(self.departed),
            "exchanges": [[h, n] for h, n in self.exchanges],
            "points": dict(self.points),
            "rolls": [r.to_json() for r in self.rolls],
        }

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> World:
        return cls(
            options=dict(s.get("options") or {}),
            week=int(s.get("week", 1)),
            mailing_list=str(s.get("mailing_list", "public messages")),
            characters={str(h): Character.from_json(c) for h, c in (s.get("characters") or {}).items()},
            npcs={str(n): Npc.from_json(d) for n, d in (s.get("npcs") or {}).items()},
            departed={str(h): str(t) for h, t in (s.get("departed") or {}).items()},
            exchanges=[(str(h), int(n)) for h, n in (s.get("exchanges") or [])],
            points={str(h): int(p) for h, p in (s.get("points") or {}).items()},
            rolls=[Roll.from_json(r) for r in (s.get("rolls") or [])],
        )


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
