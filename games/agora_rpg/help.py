"""``help agora_rpg``: the rule book, built from the numbers and tables the
engine plays by (the base values, the encounter table, tokens, combat,
potions), so the text cannot drift from the game."""

from __future__ import annotations

from collections.abc import Sequence

from games.agora_rpg import engine
from games.agora_rpg.engine import (
    COMBAT_DIE,
    ENCOUNTER_DIE,
    EXHAUSTED_VITALITY_PER_LEVEL,
    HEAL_COST_PER_LEVEL,
    POTIONS,
    STRIKE_OFFSET,
)
from games.agora_rpg.model import (
    BASE_EXPERIENCE,
    BASE_HEALTH,
    BASE_MONSTER_HEALTH,
    BASE_VITALITY,
    GOLD_EXCHANGER,
    HEALER,
    JOIN_TOKENS,
    REJOIN_DAYS,
    TOKEN_FACTOR_BONUS,
    TOWN_SQUARE,
)
from games.base import Option
from games.helptext import HOW_TO_SEND, commands, document, heading, options, para, table

#: the words for each kind of find in the encounter table
FIND_WORDS = {
    "stairway": "the stairway down from this level",
    "weapon": "a weapon",
    "armor": "armor",
    "health potion": "a health potion",
    "vitality potion": "a vitality potion",
    "monster": "a monster",
}


def _level(offset: int) -> str:
    return "N" if offset == 0 else f"N{offset:+d}"


def encounter_rows() -> list[tuple[str, str]]:
    """The encounter table as (roll, what is found) rows, from ENCOUNTERS."""
    rows = []
    for low, high, kind, offset in engine.ENCOUNTERS:
        roll = str(low) if low == high else f"{low}-{high}"
        what = FIND_WORDS[kind] if kind == "stairway" else f"{FIND_WORDS[kind]}, level {_level(offset)}"
        rows.append((roll, what))
    return rows


def rule_book(summary: str, opts: Sequence[Option]) -> str:
    """The whole of ``help agora_rpg``."""
    (hp_gain, hp_rise), (vp_gain, vp_rise) = POTIONS["health potion"], POTIONS["vitality potion"]
    return document(
        para(summary),
        heading("Commands"),
        para(HOW_TO_SEND + " One mail may carry several actions; they "
             "take effect in order, at the moment the server receives the mail."),
        commands([
            ("JOIN", f"become a character (at the {TOWN_SQUARE})"),
            ("MOVE <from> -> <to>", "spend a movement token, e.g. MOVE Town Square -> Dungeon Level 1"),
            ("EXPLORE", "move from your dungeon level to the same level: an encounter"),
            ("ATTACK", "fight one round against the monster you met"),
            ("FLEE", "run from it (it strikes once more)"),
            ("DRINK HEALTH POTION <N>", "drink a health potion of level N"),
            ("DRINK VITALITY POTION <N>", "drink a vitality potion of level N"),
            ("HEAL", f"at the {HEALER}: health and vitality to their maximum"),
            ("EXCHANGE <n> GOLD", f"at the {GOLD_EXCHANGER}: gold becomes points at the end of "
             "the week"),
            ("TRANSFER <qty> <currency> [<N>] TO <name>", "e.g. TRANSFER 1 ARMOR 2 TO bob or "
             "TRANSFER 3 GOLD TO bob: to a character at your location, or to the non-player "
             "character whose name is your location"),
            ("LEAVE", "stop being a character (see Leaving the game)"),
        ]),
        heading("Your character"),
        para(f"A new character starts at the {TOWN_SQUARE} at level 1 with experience 0, health "
             f"{BASE_HEALTH} of {BASE_HEALTH}, vitality {BASE_VITALITY} of {BASE_VITALITY} and "
             f"{JOIN_TOKENS} movement tokens. Attack level is the highest level of weapon you "
             "hold, defense level the highest level of armor (0 without)."),
        para(f"When your experience reaches your level x {BASE_EXPERIENCE}, that much experience "
             f"is used up and you gain a level: maximum health and health rise by {BASE_HEALTH}, "
             f"maximum vitality and vitality by {BASE_VITALITY}; repeated while the experience "
             "suffices."),
        para(f"When your health reaches 0 you die: back to the {TOWN_SQUARE} at level 1 with the "
             "values of a new character, every currency you held destroyed (movement tokens "
             "included) and every stairway you knew forgotten."),
        heading("Places and moves"),
        para(f"The places are the {TOWN_SQUARE}, the {HEALER}, the {GOLD_EXCHANGER}, each "
             "non-player character (by name) and Dungeon Level 1, 2, 3 and so on. From the "
             f"{TOWN_SQUARE} you can go to any of the others but the deeper dungeon levels; "
             f"from those you come back to the {TOWN_SQUARE}. Dungeon Level 1 leads back to the "
             "Town Square, level N+1 back to level N, and level N down to N+1 once you have "
             "found the stairway down from level N."),
        para("Every move costs one movement token and 1 vitality. With vitality 0 it costs 1 "
             f"health instead and gives you {EXHAUSTED_VITALITY_PER_LEVEL} x your level "
             "vitality; if that health was your last, you die and there is no encounter."),
        heading("Movement tokens"),
        para(f"At the start of each Agoran week you get level + {TOKEN_FACTOR_BONUS} tokens (the "
             "accumulation factor). Then, as rule 40 is written, a character holding more than "
             "twice the factor drops to the factor (the game master may choose to cap at twice "
             f"the factor instead: option token_cap). Joining gives {JOIN_TOKENS} tokens, unless "
             f"you left this game less than {REJOIN_DAYS} days ago."),
        heading("Exploring: the encounter table"),
        para(f"Moving from Dungeon Level N to Dungeon Level N (EXPLORE) is an encounter: the "
             f"server rolls 1d{ENCOUNTER_DIE}, announces the roll and its purpose, and you "
             "find:"),
        table(encounter_rows(), header=("roll", "what you find")),
        para("A find of level 0 (a level N-1 find on Dungeon Level 1) is a piece of gold "
             "instead. The stairway lets you move down from this level. Until a monster is "
             "beaten or fled from you cannot move."),
        heading("Combat"),
        para(f"A level L monster starts with L x {BASE_MONSTER_HEALTH} health. Each ATTACK is "
             f"one round: you roll 1d{COMBAT_DIE} and the monster loses the roll + your attack "
             f"level. If it is still alive it rolls 1d{COMBAT_DIE} and you lose max(0, roll + L - "
             f"your defense level - {STRIKE_OFFSET}) health. Beating it gives you experience "
             f"equal to its starting health (L x {BASE_MONSTER_HEALTH}) and L gold. FLEE: the "
             "monster strikes once more, then the encounter ends without reward. In a game "
             "with the option combat=gm the game master decides every fight instead."),
        heading("Potions, the Healer and the Gold Exchanger"),
        para(f"A health potion of level N gives {hp_gain} x N health (up to the maximum); drunk "
             f"at full health it raises the maximum by {hp_rise} x N instead. A vitality potion "
             f"of level N gives {vp_gain} x N vitality, or raises the maximum by {vp_rise} x N "
             "at full vitality."),
        para(f"At the {HEALER}, HEAL costs {HEAL_COST_PER_LEVEL} x your level in gold and sets "
             f"health and vitality to their maximum. At the {GOLD_EXCHANGER}, EXCHANGE destroys "
             "gold; at the end of the week you get as many points, first come first served up "
             "to the week's budget if the game master set one; what cannot be awarded comes "
             "back as gold."),
        heading("The weekly report"),
        para("Every week every player gets the report: every tracked attribute of every "
             "character and the text of the contract. Every dice roll is announced to the game "
             "when it is made, with its purpose."),
        heading("Leaving the game"),
        para(f"Send LEAVE. You stop being a character at once: everything you held (gold, items, "
             "potions, movement tokens) is destroyed, and your level, experience and stairways "
             "are gone. You may JOIN again later as a new character at level 1; if fewer than "
             f"{REJOIN_DAYS} days have passed since you left, you start without movement tokens "
             "(rule 39)."),
        heading("Game master commands"),
        para("From the game master's address with the GM password: GM NPC <name>, GM REMOVE "
             "<name>, GM AS <npc> TRANSFER ..., GM SET <name> <attribute> = <value>, GM FIGHT "
             "<name> WON|LOST [DAMAGE <n>], GM LIST <mailing list>."),
        heading("Options"),
        options(opts),
    )
