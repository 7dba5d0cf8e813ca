"""Texts for the mails: the round report and the order acknowledgement.

Everything is turned into short, already wrapped lines here (pure Python), so
the templates only lay them out.  Lines stay within 78 characters except the
score table, which is preformatted.
"""

from __future__ import annotations

from typing import Any

from games.giveaway.model import Gift
from games.giveaway.resolve import RoundResult
from games.giveaway.rings import TANGLE_LOOPS

WIDTH = 76
MAX_BREAKERS_SHOWN = 3
MAX_TANGLE_NAMES = 12
#: up to this many players, every player's report is the whole report; in a
#: larger game each player gets their own part of it (own_reports)
FULL_REPORT_PLAYERS = 50
#: the standings in a player's own report: the top this many, and their own place
TOP_SHOWN = 10
#: rings, broken rings and tangles of their own shown in a player's report
OWN_RINGS_SHOWN = 5


def pts(n: int) -> str:
    return f"{n} point" if n == 1 else f"{n} points"


def wrap(text: str, indent: str = "    ", first: str = "") -> list[str]:
    """Greedy word wrap at WIDTH (textwrap is ten times slower, and a report
    for 10,000 players wraps 20,000 lines)."""
    if len(first) + len(text) <= WIDTH:
        return [first + text]
    lines: list[str] = []
    current = first
    fresh = True  # nothing but the indent on the current line yet
    for word in text.split():
        if fresh:
            current += word
            fresh = False
        elif len(current) + 1 + len(word) <= WIDTH:
            current += " " + word
        else:
            lines.append(current)
            current = indent + word
    lines.append(current)
    return lines


def ring_path(names: list[str]) -> str:
    return " > ".join(names + names[:1])


def what_became(result: RoundResult, i: int, handles: list[str], own: bool) -> str:
    """What became of player ``i``'s holding this round, for the round report
    ("is away ... keeps it") or for the player's own part ("were away ...
    keep them", after "You held N and")."""
    p = result.players[i]
    if p.ordered:
        return "gave " + ", ".join(f"{n} to {handles[j]}" for j, n in result.gifts[i].items())
    if p.kept:
        return ("were away (ABSENT) and keep them" if own else "is away (ABSENT) and keeps it") + " for the next round"
    it = "them" if own else "it"
    if p.forfeited == p.holding:
        return f"sent no order and forfeited all of {it}"
    they = "they were" if own else "it was"
    return f"sent no order: {they} split evenly among the others, {p.forfeited} forfeited"


def report_data(result: RoundResult, game_name: str, tangle_loops: int = TANGLE_LOOPS) -> dict[str, Any]:
    """The data of templates/giveaway/report.txt and report.html for one round.

    ``ledger``, ``rings``, ``broken``, ``tangles`` and ``notes`` are wrapped
    text lines; ``players`` (rows of handle, held, gave, received, bonus,
    score, next) and the ``*_texts`` lists are the same facts unwrapped, for
    the HTML part."""
    h = result.handle
    ledger: list[str] = []
    players: list[list[Any]] = []
    incoming = result.received()
    handles = [p.handle for p in result.players]
    for i, p in enumerate(result.players):
        gave = what_became(result, i, handles, own=False)
        received = ", ".join([f"{n} from {giver}" for giver, n in incoming[i]])
        if p.share:
            received = f"{received}; {p.share} from split holdings" if received else f"{p.share} from split holdings"
        received = received or "nothing"
        joiner = ", " if not p.ordered and (p.kept or p.forfeited == p.holding) else " and "
        line = f"{p.handle} held {p.holding}{joiner}{gave}."
        if len(line) <= WIDTH:
            ledger.append(line)
        else:
            ledger.extend(wrap(line))
        line = f"    Received {received}; ring bonus {p.bonus}." if p.bonus else f"    Received {received}."
        if len(line) <= WIDTH:
            ledger.append(line)
        else:
            ledger.extend(wrap(line[4:], first="    "))
        players.append([p.handle, p.holding, gave, received, p.bonus, p.score, None if result.finished else p.next_holding])

    ring_texts = []
    for ring in result.analysis.rings:
        names = [h(m) for m in ring.members]
        ring_texts.append(
            f"{ring_path(names)}: {ring.size} players passing {pts(ring.amount)}, "
            f"each receives {ring.amount * ring.size} instead of {ring.amount} (+{ring.bonus})."
        )
    broken_texts = []
    for b in result.analysis.broken:
        names = [h(m) for m in b.members]
        why = [f"{h(u)} gives {n} to {h(v)}" for u, v, n in b.breakers[:MAX_BREAKERS_SHOWN]]
        more = len(b.breakers) - MAX_BREAKERS_SHOWN
        if more > 0:
            why.append(f"{more} more")
        broken_texts.append(f"{ring_path(names)} ({pts(b.amount)}): broken by {', '.join(why)}.")
    tangle_texts = []
    for t in result.analysis.tangles:
        names = [h(m) for m in t.members[:MAX_TANGLE_NAMES]]
        more = len(t.members) - len(names)
        listed = ", ".join(names) + (f" and {more} more" if more > 0 else "")
        tangle_texts.append(
            f"Gifts of {pts(t.amount)} among {len(t.members)} players ({listed}) form a circle with "
            f"{t.loops} loops, more than {tangle_loops}: a tangle, where no ring of three or more forms."
        )

    return {
        "game": game_name,
        "round": result.round,
        "ledger": ledger,
        "players": players,
        "rings": [line for text in ring_texts for line in wrap(text)],
        "broken": [line for text in broken_texts for line in wrap(text)],
        "tangles": [line for text in tangle_texts for line in wrap(text)],
        "ring_texts": ring_texts,
        "broken_texts": broken_texts,
        "tangle_texts": tangle_texts,
        "table": score_table(result),
        "notes": [line for note in result.notes for line in wrap(note, "")],
        "note_texts": list(result.notes),
        "winner": result.winner,
        "finished": result.finished,
        "next_round": None if result.finished else result.round + 1,
    }


def score_table(result: RoundResult) -> str:
    rows = [("Player", "Held", "Received", "Bonus", "Score", "Next")]
    for p in result.players:
        rows.append((p.handle, str(p.holding), str(p.got), str(p.bonus), str(p.score), "-" if result.finished else str(p.next_holding)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=False)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def order_data(game: Any, handle: str, refused: bool, show_lines: bool, gifts: list[Gift] | None = None) -> dict[str, Any]:
    """Data of templates/giveaway/order.txt: the order held and the holding.
    ``game``: a Game or a Roster; ``gifts``: the order just taken (default:
    the one held).  ``show_lines``: list the order (replies leave that to the
    server, which lists the orders held after the per-line results)."""
    p = game.find(handle)
    if gifts is None:
        gifts = game.order_of(handle) or []
    return {
        "round": game.round,
        "holding": p.holding if p else 0,
        "lines": [g.line() for g in gifts],
        "total": sum(g.amount for g in gifts),
        "held": bool(gifts),
        "refused": refused,
        "show_lines": show_lines,
    }


def own_reports(result: RoundResult, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(handle, data of templates/giveaway/own_report.txt) for every player of
    a large game: the round in numbers, the player's own gifts, the rings,
    broken rings and tangles they were in, the top of the standings and their
    own place.  Each is bounded whatever the number of players; the whole
    report (``data``) is kept with the game for ``history``."""
    n = len(result.players)
    incoming = result.received()
    handles = [p.handle for p in result.players]
    order = sorted(range(n), key=lambda i: (-result.players[i].score, handles[i].casefold()))
    rank = [0] * n
    for pos, i in enumerate(order):
        before = order[pos - 1] if pos else None
        same = before is not None and result.players[before].score == result.players[i].score
        rank[i] = rank[before] if same and before is not None else pos + 1
    rings_of: list[list[str]] = [[] for _ in range(n)]
    for text, ring in zip(data["ring_texts"], result.analysis.rings, strict=True):
        for m in ring.members:
            rings_of[m].append(text)
    broken_of: list[list[str]] = [[] for _ in range(n)]
    for text, b in zip(data["broken_texts"], result.analysis.broken, strict=True):
        for m in {*b.members, *(u for u, _, _ in b.breakers)}:
            broken_of[m].append(text)
    tangles_of: list[list[str]] = [[] for _ in range(n)]
    for text, t in zip(data["tangle_texts"], result.analysis.tangles, strict=True):
        for m in t.members:
            tangles_of[m].append(text)
    header = ("Place", "Player", "Held", "Received", "Bonus", "Score", "Next")

    def row(i: int) -> tuple[str, ...]:
        p = result.players[i]
        return (str(rank[i]), p.handle, str(p.holding), str(p.got), str(p.bonus), str(p.score),
                "-" if result.finished else str(p.next_holding))

    top = order[:TOP_SHOWN]
    summary = (f"{n} players; {len(result.analysis.rings)} ring{'s' if len(result.analysis.rings) != 1 else ''} formed, "
               f"{len(result.analysis.broken)} broken by rule 6, {len(result.analysis.tangles)} "
               f"tangle{'s' if len(result.analysis.tangles) != 1 else ''}.")
    common = {k: data[k] for k in ("game", "round", "winner", "finished", "next_round", "notes")}
    out = []
    for i, p in enumerate(result.players):
        rows = [header] + [row(j) for j in top]
        gap = i not in top
        if gap:
            rows.append(row(i))
        widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
        lines = []
        for k, r in enumerate(rows):
            if gap and k == len(rows) - 1:
                lines.append("...")
            cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])] + [c.rjust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
            lines.append("  ".join(cells).rstrip())
        gave = what_became(result, i, handles, own=True)
        got = incoming[i]
        received = ", ".join(f"{m} from {giver}" for giver, m in got[:OWN_RINGS_SHOWN * 4])
        if len(got) > OWN_RINGS_SHOWN * 4:
            received += f" and {len(got) - OWN_RINGS_SHOWN * 4} more gifts"
        if p.share:
            received = f"{received}; {p.share} from split holdings" if received else f"{p.share} from split holdings"
        mine = [
            *wrap(f"You held {p.holding} and {gave}.", "    "),
            *wrap(f"You received {received or 'nothing'}" + (f"; ring bonus {p.bonus}." if p.bonus else "."), "    "),
        ]

        def cut(texts: list[str]) -> list[str]:
            shown = [line for text in texts[:OWN_RINGS_SHOWN] for line in wrap(text)]
            if len(texts) > OWN_RINGS_SHOWN:
                shown.append(f"    and {len(texts) - OWN_RINGS_SHOWN} more")
            return shown

        out.append((p.handle, {
            **common, "viewer": p.handle, "summary": summary, "players_count": n, "mine": mine,
            "score": p.score, "rank": rank[i], "next": None if result.finished else p.next_holding,
            "rings": cut(rings_of[i]), "broken": cut(broken_of[i]), "tangles": cut(tangles_of[i]),
            "table": "\n".join(lines), "top": len(top),
        }))
    return out
