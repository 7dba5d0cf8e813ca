"""What a viewer of the Fourth Game sees: the data of the status and report
templates.  Everything in this game is public except nothing: every play
is announced, so there is no per-viewer filtering beyond "me"."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from games.base import Section

from .model import FINISHER_BONUS, PLAYS_HEADER, Game, Player, explain_total


def when(iso: str) -> str:
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M UTC")


def status_section(game: Game, handle: str, title: str) -> Section:
    return Section(title=title, template="status.txt", data=status_data(game, handle, ""))

def left_text(player: Player) -> str:
    left = [str(n) for n, _ in player.remaining()]
    return "pieces left: " + (", ".join(left) if left else "none")

def status_data(game: Game, handle: str | None, headline: str) -> dict[str, Any]:
    me = None
    if handle is not None:
        player = game.player(handle)
        me = {
            "handle": handle,
            "score": player.score,
            "mail": player.mail,
            "plays": player.plays_made,
            "next_scores": game.last != handle,
            "pieces": [
                {"number": n, "value": p.value, "multiplier": p.multiplier,
                 "played": player.played[n - 1],
                 "line": f"  Piece {n:2d}: value {p.value:2d}, multiplier {p.multiplier}"
                 + (f"   (used in play {player.played[n - 1]})" if player.played[n - 1] else "")}
                for n, p in enumerate(player.pieces, start=1)
            ],
            "left": " ".join(str(n) for n, _ in player.remaining()) or "none",
        }
    closes = game.options.get("closes")
    return {
        "headline": headline,
        "total": game.total,
        "total_text": explain_total(game.total),
        "play_count": game.play_count,
        "player_count": game.player_count(),
        "closes": when(closes) if closes else None,
        "finished": game.finished,
        "me": me,
        "plays": [],
        "plays_header": PLAYS_HEADER,
        "standings": [],
    }

def report_data(game: Game, game_name: str, plays: bool = True) -> dict[str, Any]:
    """The final report's data (``plays``: with every play; without, for a
    player's part of it only)."""
    standings = game.standings()
    return {
        "game": game_name,
        "plays": game.plays_data() if plays and game.play_count else [],
        "plays_header": PLAYS_HEADER,
        "total": game.total,
        "player_count": game.player_count(),
        "bonuses": game.bonuses,
        "standings": standings,
        "winner": standings[0]["handle"] if standings else None,
        "winning_score": standings[0]["score"] if standings else None,
        "tied": [r["handle"] for r in standings[1:] if standings and r["score"] == standings[0]["score"]],
    }


#: above this many players the final report is too long to mail to everyone
#: (every play: about 490 KB for 250 players): each player gets their own
#: part of it (own_reports), the whole report is kept for ``history``
FULL_REPORT_PLAYERS = 50
#: the standings in a player's own part: the top this many, and their own place
TOP_SHOWN = 10
#: names listed where a list could hold every player (those tied for the win)
NAMES_SHOWN = 10


def some(names: list[str]) -> str:
    """Up to NAMES_SHOWN names, then how many more."""
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def own_reports(game: Game, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(handle, data of templates/sequence/own_report.txt) for every player of
    a large game, from the whole report's ``data`` (report_data)."""
    common = report_summary(game, data)
    return [(row["handle"], own_report(game, data, common, row)) for row in data["standings"]]


def report_summary(game: Game, data: dict[str, Any]) -> dict[str, Any]:
    """What every player's part of the final report says alike: the game in
    numbers, the winner, the bonuses in short."""
    n, plays = len(data["standings"]), game.play_count
    finishers = [b for b in data["bonuses"] if b["points"] == FINISHER_BONUS]
    why = "first half to use all ten pieces, tenth play scored"
    bonus_lines = [
        f"  +{FINISHER_BONUS} each to {len(finishers)} player{'s' if len(finishers) != 1 else ''} ({why})"
        if finishers else f"  +{FINISHER_BONUS}: nobody ({why})",
        *(b["line"] for b in data["bonuses"] if b["points"] != FINISHER_BONUS),
    ]
    tied = data["tied"]
    return {
        "game": data["game"], "players_count": n, "winner": data["winner"],
        "summary": f"{n} players made {plays} play{'s' if plays != 1 else ''}; "
                   f"the final total is {explain_total(game.total)}.",
        "winning_score": data["winning_score"], "tied": some(tied), "tied_count": len(tied),
        "plays_header": PLAYS_HEADER, "bonus_lines": bonus_lines,
    }


def own_report(game: Game, data: dict[str, Any], common: dict[str, Any],
               row: dict[str, Any] | None) -> dict[str, Any]:
    """The part of the final report for the player of standings ``row``
    (None: for someone who did not play): the summary, their own plays,
    bonuses, score and place, and the top of the standings.  Bounded
    whatever the number of players and plays."""
    top = data["standings"][:TOP_SHOWN]
    table = [r["line"] for r in top]
    if row is not None and row["place"] > TOP_SHOWN:
        table += ["  ...", row["line"]]
    handle = row["handle"] if row is not None else None
    return {
        **common, "viewer": handle, "top": len(top), "table": table,
        "plays": game.plays_of(handle) if handle is not None else [],
        "bonuses": [b["line"] for b in data["bonuses"] if b["handle"] == handle],
        "score": row["score"] if row is not None else None,
        "place": row["place"] if row is not None else None,
    }
