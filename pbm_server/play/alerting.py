"""Which alerts a game's events give, and to whom (the rows and their
delivery: mail/alerts.py; the settings: ``notify=URL`` at the GM's desk, a
player's ``notify URL``).

A game's channel (the GM's) gets: the game's start (made with ``notify=``),
every turn processed, each reminder (naming whose orders are missing) and the
game's end.  A player's own channel gets the same of every game they play --
the reminder only while their own orders are missing -- and, on curio boards,
a board's start, "your move" when it is theirs, and the board's end.  Alerts
name players by handle, never by address.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from games.base import Notice, Rules
from pbm_server.base.localtime import show_time
from pbm_server.mail.alerts import enqueue_alert
from pbm_server.store.lookup import account_by_handle
from pbm_server.store.models import Account, Game


def _listening(session: Session, handles: list[str]) -> list[Account]:
    """The accounts of ``handles`` whose alerts are on (one query; most players have none)."""
    keys = {h.lower() for h in handles}
    if not keys:
        return []
    return list(session.scalars(select(Account).where(Account.handle_key.in_(sorted(keys)),
                                                      Account.notify_url.is_not(None), Account.notify_error.is_(None))
                                .order_by(Account.id)))


def _turn_path(game: Game, turn: int) -> str | None:
    return None if game.private else f"/games/{game.name}/turns/{turn}"


def _game_path(game: Game) -> str | None:
    return None if game.private else f"/games/{game.name}"


def names(handles: list[str], most: int = 12) -> str:
    shown = ", ".join(handles[:most])
    return shown + (f" and {len(handles) - most} more" if len(handles) > most else "")


def game_started(session: Session, game: Game, rules: Rules[Any], now: datetime) -> None:
    """A new game (its channel, set with ``notify=`` when it was made)."""
    text = f"{game.name} ({rules.title}) has started."
    if game.next_deadline is not None:
        text += f" First deadline: {show_time(game.next_deadline)}."
    enqueue_alert(session, game, game, "start", text, now, turn=game.turn, path=_game_path(game))


def turn_processed(session: Session, game: Game, rules: Rules[Any], turn: int, no_orders: list[str],
                   now: datetime) -> None:
    """A turn was run and is done: the game's channel and its players'."""
    text = f"{game.name}: {rules.turn_name} {turn} has been processed."
    if no_orders:
        text += f" No orders from: {names(no_orders)}."
    if game.status != "finished" and game.next_deadline is not None:
        text += f" Next deadline: {show_time(game.next_deadline)}."
    path = _turn_path(game, turn)
    enqueue_alert(session, game, game, "turn", text, now, turn=turn, path=path)
    for acc in _listening(session, rules.players(game.state)):
        enqueue_alert(session, acc, game, "turn", text + " Your report is in your mail.", now, turn=turn, path=path)


def reminder(session: Session, game: Game, rules: Rules[Any], owing: list[str], now: datetime) -> None:
    """The reminder before the deadline: whose orders are missing (the game's
    channel), yours are (a player's)."""
    due = show_time(game.next_deadline)
    what = f"{rules.turn_name} {game.turn}"
    if owing:
        enqueue_alert(session, game, game, "reminder",
                      f"{game.name}: the deadline of {what} is {due}; orders are still missing from: {names(owing)}.",
                      now, turn=game.turn, path=_game_path(game))
    for acc in _listening(session, owing):
        enqueue_alert(session, acc, game, "reminder",
                      f"{game.name}: your orders for {what} are still missing; the deadline is "
                      f"{show_time(game.next_deadline, acc.timezone)}.",
                      now, turn=game.turn, path=_game_path(game))


def game_ended(session: Session, game: Game, rules: Rules[Any], now: datetime) -> None:
    """The game is over: its channel and its players'."""
    text = f"{game.name} ({rules.title}) is over."
    path = _game_path(game)
    enqueue_alert(session, game, game, "end", text, now, turn=game.turn, path=path)
    for acc in _listening(session, rules.players(game.state)):
        enqueue_alert(session, acc, game, "end", text, now, turn=game.turn, path=path)


def from_notices(session: Session, game: Game, notices: list[Notice], now: datetime) -> None:
    """Boards in a notice to a player (curio's ``board.txt``: ``number``,
    ``active``, ``your_turn``, ``after_move``): the board's start, the
    player's move, the board's end, to that player's own channel."""
    for notice in notices:
        data = notice.data
        number = data.get("number")
        if "your_turn" not in data or not isinstance(number, int) or isinstance(number, bool):
            continue
        for handle in notice.to:
            acc = account_by_handle(session, handle)
            if acc is None or not acc.notify_url or acc.notify_error:
                continue
            opponent = data.get("dark") if str(data.get("light", "")).lower() == acc.handle_key else data.get("light")
            board = f"{game.name} board {number}"
            if not data.get("active"):
                event, text = "end", f"{board} against {opponent} is over: {data.get('status', '')}".strip()
            elif data.get("your_turn"):
                event = "move"
                started = "has started: " if data.get("after_move") == 0 else ""
                text = f"{board} against {opponent} {started}it is your move (move {int(data.get('after_move') or 0) + 1})."
            elif data.get("after_move") == 0:
                event, text = "start", f"{board} against {opponent} has started: {opponent} moves first."
            else:
                continue
            enqueue_alert(session, acc, game, event, text, now, path=None)
