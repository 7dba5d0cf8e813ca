"""Reading Agora RPG command lines.  Syntax only: whether a location or a
character exists is decided when the command is carried out.  Never raises."""

from __future__ import annotations

import re
from typing import Any

from games.agora_rpg.model import NPC_NAME_RE, RESERVED_NAMES
from games.base import Command, Line

PLAYER_SYNTAX = (
    "JOIN, LEAVE, MOVE <from> -> <to>, EXPLORE, ATTACK, FLEE, HEAL, "
    "DRINK HEALTH POTION <N>, DRINK VITALITY POTION <N>, EXCHANGE <n> GOLD, "
    "TRANSFER <qty> <currency> [<N>] TO <name>"
)
GM_SYNTAX = (
    "GM NPC <name>, GM REMOVE <name>, GM AS <npc> TRANSFER ..., "
    "GM SET <name> <attribute> = <value>, GM FIGHT <name> WON|LOST [DAMAGE <n>], "
    "GM LIST <how to reach the RPG mailing list>"
)

_NO_ARGS = {"join", "leave", "explore", "attack", "flee", "heal"}

_MOVE_ARROW = re.compile(r"^move\s+(.+?)\s*->\s*(.+?)\s*\.?$", re.IGNORECASE)
_MOVE_WORDS = re.compile(r"^move\s+from\s+(.+?)\s+to\s+(.+?)\s*\.?$", re.IGNORECASE)
_LOCATION = re.compile(
    r"^(town\s+square|healer|gold\s+exchanger|dungeon\s+level\s+[1-9][0-9]*|[A-Za-z][A-Za-z0-9_.\-]*)$",
    re.IGNORECASE,
)
_DRINK = re.compile(r"^drink\s+(health|vitality)\s+potions?\s+(?:level\s+)?(\S+)$", re.IGNORECASE)
_EXCHANGE = re.compile(r"^exchange\s+(\S+)(?:\s+gold)?$", re.IGNORECASE)
_TRANSFER = re.compile(r"^transfer\s+(\S+)\s+(.+?)\s+to\s+(\S+)$", re.IGNORECASE)
_CURRENCY = re.compile(
    r"^(?:(gold)|(weapons?|armou?rs?|health\s+potions?|vitality\s+potions?)\s+(?:level\s+)?(\S+))$",
    re.IGNORECASE,
)
_TOKENS = re.compile(r"^movement\s+tokens?$", re.IGNORECASE)
_GM_SET = re.compile(r"^gm\s+set\s+(\S+)\s+(.+?)\s*=\s*(.+)$", re.IGNORECASE)
_GM_FIGHT = re.compile(r"^gm\s+fight\s+(\S+)\s+(won|win|lost|lose)(?:\s+damage\s+(\S+))?$", re.IGNORECASE)
_GM_AS = re.compile(r"^gm\s+as\s+(\S+)\s+(transfer\s+.*)$", re.IGNORECASE)

#: GM SET attribute spellings -> (attribute, needs a level N)
SET_ATTRIBUTES: dict[str, tuple[str, bool]] = {
    "location": ("location", False),
    "level": ("level", False),
    "experience": ("experience", False),
    "health": ("health", False),
    "max health": ("max_health", False),
    "maximum health": ("max_health", False),
    "vitality": ("vitality", False),
    "max vitality": ("max_vitality", False),
    "maximum vitality": ("max_vitality", False),
    "tokens": ("tokens", False),
    "movement tokens": ("tokens", False),
    "gold": ("gold", False),
    "points": ("points", False),
    "monster": ("monster", False),
    "stairway": ("stairway", True),
    "weapon": ("weapon", True),
    "armor": ("armor", True),
    "health potion": ("health potion", True),
    "vitality potion": ("vitality potion", True),
}


def _kind(word: str) -> str:
    w = " ".join(word.lower().split())
    if w.startswith("weapon"):
        return "weapon"
    if w.startswith("armo"):
        return "armor"
    if w.startswith("health"):
        return "health potion"
    return "vitality potion"


def _number(text: str) -> int | None:
    """A whole number written in ASCII digits, else None."""
    return int(text) if re.fullmatch(r"[0-9]+", text) else None


def _positive(text: str) -> int | None:
    n = _number(text)
    return n if n is not None and n > 0 else None


def parse_currency(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """("gold" | "weapon 2" | "health potion level 1" ...) -> args or an error."""
    t = " ".join(text.split())
    if _TOKENS.match(t):
        return None, "movement tokens cannot be transferred (rule 18)"
    m = _CURRENCY.match(t)
    if not m:
        return None, (
            f"{t!r} is not a currency; the currencies are gold, weapon <N>, armor <N>, "
            "health potion <N> and vitality potion <N>"
        )
    if m.group(1):
        return {"currency": "gold", "level": 0}, None
    level = _positive(m.group(3))
    if level is None:
        return None, f"the level of {m.group(2).lower()} must be a whole number above 0, not {m.group(3)!r}"
    return {"currency": _kind(m.group(2)), "level": level}, None


def _location_ok(text: str) -> bool:
    return bool(_LOCATION.match(" ".join(text.split())))


def parse_line(line: Line) -> Command:
    text = " ".join(line.text.split())
    words = text.split(" ")
    key = words[0].lower() if words and words[0] else ""

    def bad(name: str, error: str) -> Command:
        return Command(line=line, name=name, error=error)

    if key in _NO_ARGS:
        if len(words) > 1:
            return bad(key, f"{key.upper()} takes nothing after it; write just {key.upper()}")
        return Command(line=line, name=key)

    if key == "move":
        m = _MOVE_ARROW.match(text) or _MOVE_WORDS.match(text)
        if not m:
            return bad(
                "move",
                "expected MOVE <from> -> <to>, e.g. MOVE Town Square -> Dungeon Level 1",
            )
        frm, to = m.group(1), m.group(2)
        for loc in (frm, to):
            if not _location_ok(loc):
                return bad(
                    "move",
                    f"{loc!r} is not a location: use Town Square, Healer, Gold Exchanger, "
                    "Dungeon Level N or the one-word name of a non-player character",
                )
        return Command(line=line, name="move", args={"from": frm, "to": to})

    if key == "drink":
        m = _DRINK.match(text)
        level = _positive(m.group(2)) if m else None
        if not m or level is None:
            return bad(
                "drink",
                "expected DRINK HEALTH POTION <N> or DRINK VITALITY POTION <N> with N the "
                "potion's level, e.g. DRINK HEALTH POTION 1",
            )
        return Command(line=line, name="drink", args={"kind": m.group(1).lower() + " potion", "level": level})

    if key == "exchange":
        m = _EXCHANGE.match(text)
        amount = _positive(m.group(1)) if m else None
        if amount is None:
            return bad("exchange", "expected EXCHANGE <n> GOLD with n a whole number above 0, e.g. EXCHANGE 5 GOLD")
        return Command(line=line, name="exchange", args={"amount": amount})

    if key == "transfer":
        return _transfer(line, text, "transfer")

    if key == "gm":
        return _gm(line, text, words)

    if not key:
        return bad("unknown", "empty command line")
    return bad("unknown", f"unknown command {words[0]!r}; expected one of {PLAYER_SYNTAX}")


def _transfer(line: Line, text: str, name: str) -> Command:
    example = "expected TRANSFER <qty> <currency> [<N>] TO <name>, e.g. TRANSFER 3 GOLD TO bob or TRANSFER 1 WEAPON 2 TO bob"
    m = _TRANSFER.match(text)
    if not m:
        return Command(line=line, name=name, error=example)
    qty = _positive(m.group(1))
    if qty is None:
        return Command(line=line, name=name, error=f"the quantity must be a whole number above 0, not {m.group(1)!r}; {example}")
    cur, error = parse_currency(m.group(2))
    if error or cur is None:
        return Command(line=line, name=name, error=error or example)
    return Command(line=line, name=name, args={"qty": qty, **cur, "to": m.group(3)})


def _gm(line: Line, text: str, words: list[str]) -> Command:
    sub = words[1].lower() if len(words) > 1 else ""

    def bad(error: str) -> Command:
        return Command(line=line, name="gm", error=error)

    if sub == "npc":
        if len(words) != 3:
            return bad("expected GM NPC <name>, e.g. GM NPC Merchant")
        name = words[2]
        if not NPC_NAME_RE.match(name) or name.lower() in RESERVED_NAMES:
            return bad(
                f"{name!r} cannot be a non-player character's name: use one word of letters, digits, "
                "'_', '.' or '-' starting with a letter, not a word of a location"
            )
        return Command(line=line, name="gm_npc", args={"name": name})
    if sub == "remove":
        if len(words) != 3:
            return bad("expected GM REMOVE <name> of a non-player character, e.g. GM REMOVE Merchant")
        return Command(line=line, name="gm_remove", args={"name": words[2]})
    if sub == "as":
        m = _GM_AS.match(text)
        if not m:
            return bad("expected GM AS <npc> TRANSFER <qty> <currency> [<N>] TO <name>")
        cmd = _transfer(line, m.group(2), "gm_as")
        cmd.args["npc"] = m.group(1)
        return cmd
    if sub == "set":
        m = _GM_SET.match(text)
        if not m:
            return bad("expected GM SET <name> <attribute> = <value>, e.g. GM SET alice TOKENS = 5")
        attr_words = m.group(2).lower().split()
        level = 0
        if attr_words and _number(attr_words[-1]) is not None:
            level = int(attr_words.pop())
            if attr_words and attr_words[-1] == "level":
                attr_words.pop()
        spelled = " ".join(attr_words)
        spelled = {"max_health": "max health", "max_vitality": "max vitality", "armour": "armor"}.get(spelled, spelled)
        if spelled.endswith("s") and spelled[:-1] in SET_ATTRIBUTES and spelled not in SET_ATTRIBUTES:
            spelled = spelled[:-1]
        found = SET_ATTRIBUTES.get(spelled)
        if found is None:
            return bad(
                f"unknown attribute {m.group(2)!r}; use one of " + ", ".join(
                    k + (" <N>" if v[1] else "") for k, v in SET_ATTRIBUTES.items()
                )
            )
        attribute, levelled = found
        if levelled and level < 1:
            return bad(f"{spelled} needs a level above 0, e.g. GM SET alice {spelled.upper()} 2 = 1")
        if not levelled and level:
            return bad(f"{spelled} has no level; e.g. GM SET alice {spelled.upper()} = 3")
        return Command(
            line=line, name="gm_set", args={"name": m.group(1), "attribute": attribute, "level": level, "value": m.group(3)}
        )
    if sub == "fight":
        m = _GM_FIGHT.match(text)
        damage = 0
        if m and m.group(3) is not None:
            found_damage = _number(m.group(3))
            damage = -1 if found_damage is None else found_damage
        if not m or damage < 0:
            return bad("expected GM FIGHT <name> WON|LOST [DAMAGE <n>], e.g. GM FIGHT alice WON DAMAGE 2")
        won = m.group(2).lower() in ("won", "win")
        return Command(line=line, name="gm_fight", args={"name": m.group(1), "won": won, "damage": damage})
    if sub == "list":
        spec = " ".join(words[2:])
        if not spec:
            return bad("expected GM LIST <how players reach the RPG mailing list>, e.g. GM LIST public messages")
        return Command(line=line, name="gm_list", args={"spec": spec})
    return bad(f"unknown GM command {' '.join(words[:2])!r}; expected one of {GM_SYNTAX}")
