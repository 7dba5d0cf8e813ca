"""What a viewer of the Fourth Game sees: the data of the status and report
templates.  Everything in this game is public except nothing: every play
is announced, so there is no per-viewer filtering beyond "me"."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from games.base import Section

from .model import PLAYS_HEADER, Game, Player, explain_total


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

def report_data(game: Game, game_name: str) -> dict[str, Any]:
    standings = game.standings()
    return {
        "game": game_name,
        "plays": game.plays_data() if game.play_count else [],
        "plays_header": PLAYS_HEADER,
        "total": game.total,
        "player_count": game.player_count(),
        "bonuses": game.bonuses,
        "standings": standings,
        "winner": standings[0]["handle"] if standings else None,
        "winning_score": standings[0]["score"] if standings else None,
        "tied": [r["handle"] for r in standings[1:] if standings and r["score"] == standings[0]["score"]],
    }
