"""``help giveaway``: the rule book, built from the engine's constants, and
its ring examples worked out by the engine's own ring finder, so the text
cannot drift from the game."""

from __future__ import annotations

from collections.abc import Sequence

from games.base import Option
from games.giveaway.model import MIN_PLAYERS, ROUND_BONUS, START_HOLDING, WINNING_SCORE
from games.giveaway.rings import TANGLE_LOOPS, find_rings
from games.giveaway.view import ring_path
from games.helptext import HOW_TO_SEND, commands, document, heading, options, para, table

#: the examples of rules 5 and 6: (what it shows, the gifts as giver, receiver, points)
RING_EXAMPLES: tuple[tuple[str, tuple[tuple[str, str, int], ...]], ...] = (
    ("two players", (("A", "B", 1), ("B", "A", 1))),
    ("three players", (("A", "B", 1), ("B", "C", 1), ("C", "A", 1))),
    ("rule 6", (("A", "B", 1), ("B", "A", 1), ("B", "C", 1), ("C", "A", 1))),
    ("other amounts", (("A", "B", 2), ("B", "C", 2), ("C", "A", 3))),
)


def ring_example(gifts: Sequence[tuple[str, str, int]]) -> tuple[str, str]:
    """(the gifts, what the engine's ring finder makes of them)."""
    names = sorted({n for g in gifts for n in g[:2]})
    out: list[dict[int, int]] = [{} for _ in names]
    for giver, to, n in gifts:
        out[names.index(giver)][names.index(to)] = n
    found = find_rings(out)
    text = ", ".join(f"{g} gives {t} {n}" for g, t, n in gifts)
    parts = []
    for ring in found.rings:
        members = [names[m] for m in ring.members]
        parts.append(f"ring {ring_path(members)} ({ring.amount} each): its {ring.size} members "
                     f"receive {ring.amount} x {ring.size} = {ring.amount * ring.size} for that gift")
    for broken in found.broken:
        members = [names[m] for m in broken.members]
        why = ", ".join(f"{names[g]} gives {names[t]} {n}" for g, t, n in broken.breakers)
        parts.append(f"no ring {ring_path(members)}: rule 6, {why}")
    if not parts:
        parts.append("no ring: every player receives what was given to them")
    return text, "; ".join(parts)


def rule_book(summary: str, opts: Sequence[Option]) -> str:
    """The whole of ``help giveaway``."""
    examples = []
    for _, gifts in RING_EXAMPLES:
        given, result = ring_example(gifts)
        examples.append(("-", f"{given}: {result}."))
    return document(
        para(summary),
        heading("Commands"),
        para(HOW_TO_SEND),
        commands([
            ("JOIN", "join the game (only until round 1 is played)"),
            ("GIVE <n> TO <handle>", "one line per gift, e.g. GIVE 2 TO alice; the GIVE lines of "
             "one mail are your whole order for the round"),
            ("LEAVE", "leave the game (see Leaving the game)"),
        ]),
        heading("A round"),
        para(f"Everybody holds {START_HOLDING} points in round 1. Each round you must give away "
             "every point you hold, in whole points of at least 1, to other players: not to "
             "yourself, no fractions, nothing kept. Lines to the same player add up. An order "
             "that does not add up exactly to your holding is refused with the reason, and your "
             "previous order (if any) stays. A later valid order replaces the earlier one; the "
             "last one before the deadline counts."),
        para(f"Your score for the round is the points you receive, ring bonuses included. Your "
             f"holding for the next round is that score + {ROUND_BONUS}."),
        para("A player who sends no valid order loses the whole holding (or, if the game master "
             "chose the option no_order=split, it is shared evenly among the other players and "
             "the remainder is lost). A player on vacation (ABSENT) keeps it instead."),
        heading("Co-operation rings"),
        para("A ring is a circle of two or more players in which each gives the next the same "
             "number of points x, and the last gives x to the first. Every member of the ring "
             "receives x times the number of players in the ring for that gift instead of x."),
        para("Rule 6: any other gift from one member of the ring to another breaks the ring. "
             "Gifts to or from players outside the ring do not. Two valid rings may share a "
             "gift; each pays its bonus. What the server makes of the rules' examples:"),
        table(examples, indent="  ", gap=" "),
        para(f"A tangle of equal gifts among many players (a group of circles with more than "
             f"{TANGLE_LOOPS} loops) forms no ring of three or more; two players who give each "
             "other the same amount always form a ring. The round report lists the rings, the "
             "rings that rule 6 broke and why."),
        heading("The end"),
        para(f"The game ends after the first round in which some player scores {WINNING_SCORE} or "
             "more. Players whose score is tied with another's drop out of contention; the "
             "highest score that nobody else has wins. If every score is tied, another round is "
             f"played. A round needs at least {MIN_PLAYERS} players. The game master may set a "
             "round limit: after that round the highest unique score wins."),
        heading("Leaving the game"),
        para("Send LEAVE. You leave at once: the points you hold are forfeited (they go to "
             "nobody), your order for this round is dropped, and a player whose order gave "
             "points to you is told that the order was dropped and must send a new one. Before "
             "round 1 is played, LEAVE simply takes your name off the list. You cannot join "
             f"again once round 1 has been played. If a LEAVE after round 1 leaves fewer than "
             f"{MIN_PLAYERS} players, the game ends there without a winner."),
        heading("Options"),
        options(opts),
    )
