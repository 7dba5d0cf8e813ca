"""The ready check of a turn-based game (issue 44): with ``ready=48h`` set,
when the game starts -- its last seat taken (``seats=N``) while its first
turn is open, or the game master's ``game start NAME`` -- every player is
asked to mail ``ready`` to the game within the window, and no turn runs (the
game has no deadline) until the check is over.

A seat not confirmed in time goes to the first player on the waiting list:
they take over its position as it stands (nothing has been played yet) and
are asked in turn, with a window of their own.  When nobody waits, the
silent player keeps the seat.  The game starts -- its first deadline set
from that moment -- when every seat is ready, or when the only seats not
ready are past their window with nobody waiting for them.  Everyone sees
who is ready (``status``, the game's page).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session

from games import get_rules
from games.base import ALL_PLAYERS, Notice
from pbm_server.base.durations import show_duration
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.play import roster, votesettings
from pbm_server.play.gamestate import save_state, set_deadline
from pbm_server.play.notices import Mailer, tell_players
from pbm_server.store.lookup import audit, note_for_batch, noted_for_batch
from pbm_server.store.models import Account, Game, ReadySeat, VoteSettings, WaitingEntry


def _players(game: Game) -> list[str]:
    return list(get_rules(game.kind).players(game.state))


def seats(session: Session, game: Game) -> list[ReadySeat]:
    return list(session.scalars(select(ReadySeat).where(ReadySeat.game_id == game.id)
                                .order_by(ReadySeat.asked_at, ReadySeat.handle_key)).all())


def _ask(session: Session, mailer: Mailer, game: Game, handle: str, minutes: int, now: datetime) -> None:
    """``handle`` asked to confirm their seat by ``now`` + the window."""
    due = now + timedelta(minutes=minutes)
    votesettings.touch(game, now)
    session.add(ReadySeat(game_id=game.id, handle_key=handle.lower(), handle=handle, asked_at=now, due_at=due))
    domain = mailer.composer.settings.domain
    mailer.send_notices(session, game, get_rules(game.kind), [Notice(
        to=[handle], subject=f"{game.name}: are you ready? Mail 'ready' by {show_time(due)}",
        text=(f"{game.name} is about to start. Confirm that you will play: mail 'ready' with your $$password$$ to "
              f"{game.name}@{domain} by {show_time(due)}. A seat not confirmed by then goes to the first player on "
              "the waiting list. The first turn starts once every seat is ready."))], now)


def gm_start(session: Session, mailer: Mailer, game: Game, now: datetime, actor: str) -> str:
    """``game start NAME``: the ready check begins now, with the players seated."""
    rules = get_rules(game.kind)
    row = votesettings.of(session, game)
    if not rules.has_turns:
        raise ServerRefused(f"{rules.title} has no turns: a game of it has no start to check")
    if not row.ready_minutes:
        raise ServerRefused(f"{game.name} has no ready check (set one with ready=DURATION, e.g. game set "
                            f"{game.name} ready=48h); without one it runs from its first deadline as it is")
    if row.ready_phase == "open":
        raise ServerRefused(f"the ready check of {game.name} is under way already")
    if row.ready_phase == "done":
        raise ServerRefused(f"{game.name} has started already: its ready check is over")
    if game.status != "running":
        raise ServerRefused(f"{game.name} is {game.status}; resume it first")
    if not _players(game):
        raise ServerRefused(f"nobody plays in {game.name} yet: there is nobody to ask")
    _open(session, mailer, game, now, actor)
    return f"{game.name}: the ready check has begun; {len(_players(game))} player(s) asked to mail 'ready'"


def _open(session: Session, mailer: Mailer, game: Game, now: datetime, actor: str) -> None:
    row = votesettings.kept(session, game)
    minutes = row.ready_minutes or 0
    row.ready_phase = "open"
    game.next_deadline = None  # no turn runs until the check is over
    for h in _players(game):
        _ask(session, mailer, game, h, minutes, now)
    audit(session, now, actor, "ready check", f"{game.name}: begun, window {show_duration(minutes)}", game)


def after_change(session: Session, mailer: Mailer, game: Game, now: datetime) -> None:
    """After a mail or a GM's change to the game: the check begins when the
    last seat is taken; while it is under way, a newcomer is asked and a
    player who left is no longer waited for."""
    if not _may_have_check(session, game):
        return
    row = session.get(VoteSettings, game.id)
    if row is None or not row.ready_minutes or game.status != "running" or not get_rules(game.kind).has_turns:
        return
    players = _players(game)
    if row.ready_phase is None:
        if game.turn == 1 and game.seats and len(players) >= game.seats:
            _open(session, mailer, game, now, "system")
        return
    if row.ready_phase != "open":
        return
    held = {s.handle_key: s for s in seats(session, game)}
    keys = {h.lower() for h in players}
    for key, seat in held.items():
        if key not in keys:
            session.delete(seat)
            votesettings.touch(game, now)
    for h in players:
        if h.lower() not in held:
            _ask(session, mailer, game, h, row.ready_minutes, now)
    session.flush()
    _maybe_start(session, mailer, game, now)


_READY_MINUTES = select(VoteSettings.ready_minutes).where(VoteSettings.game_id == bindparam("game"))


def _may_have_check(session: Session, game: Game) -> bool:
    """Whether the game may have a ready check (a settings row with a
    window), asked after every mail: a row in the session (loaded, changed or
    new) says maybe; else one prepared Core statement, without the ORM's
    autoflush and load."""
    key = sa_inspect(VoteSettings).identity_key_from_primary_key((game.id,))
    if key in session.identity_map or any(isinstance(o, VoteSettings) for o in session.new):
        return True
    if noted_for_batch(session, _WITHOUT_CHECK, game.id):
        return False
    return bool(session.connection().execute(_READY_MINUTES, {"game": game.id}).scalar())


def look_ahead(session: Session, game_ids: list[int]) -> None:
    """A batch's games (one mail each) without a ready check, found with one
    SELECT: the first :func:`after_change` of each then asks the database
    nothing (a settings row the mail itself makes is in the session and
    seen there)."""
    with_check = set(session.connection().execute(_WITH_CHECK, {"games": game_ids}).scalars())
    note_for_batch(session, _WITHOUT_CHECK, (i for i in game_ids if i not in with_check))


#: Session.info key: the batch's games known to have no ready check (look_ahead)
_WITHOUT_CHECK = "pbm_games_without_ready_check"
_WITH_CHECK = select(VoteSettings.game_id).where(VoteSettings.game_id.in_(bindparam("games", expanding=True)),
                                                 VoteSettings.ready_minutes != 0)


def confirm(session: Session, mailer: Mailer, game: Game, handle: str, now: datetime) -> str:
    """``ready`` from ``handle``."""
    row = session.get(VoteSettings, game.id)
    if row is None or row.ready_phase is None:
        raise ServerRefused(f"{game.name} has no ready check under way: there is nothing to confirm"
                            + ("" if row is None or not row.ready_minutes else
                               " yet (it begins when every seat is taken, or when the game master starts the game)"))
    if row.ready_phase == "done":
        raise ServerRefused(f"{game.name} has started already: its ready check is over")
    seat = session.get(ReadySeat, (game.id, handle.lower()))
    if seat is None:
        raise ServerRefused(f"you have no seat in {game.name} to confirm")
    if seat.ready_at is not None:
        return f"you were ready already (since {show_time(seat.ready_at)}); {_waiting_for(session, game)}"
    seat.ready_at = now
    votesettings.touch(game, now)
    audit(session, now, seat.handle, "ready", game.name, game)
    session.flush()
    if _maybe_start(session, mailer, game, now):
        return f"you are ready, and so is everyone: {game.name} has started; first deadline {show_time(game.next_deadline)}"
    return f"you are ready; {_waiting_for(session, game)}"


def _waiting_for(session: Session, game: Game) -> str:
    missing = [s.handle for s in seats(session, game) if s.ready_at is None]
    return "still waiting for: " + ", ".join(missing) if missing else "everyone is ready"


def _maybe_start(session: Session, mailer: Mailer, game: Game, now: datetime) -> bool:
    """The game starts if no seat can still come ready: each is ready, or past its window with nobody waiting."""
    held = seats(session, game)
    if not held:
        return False
    queue = roster.waiting(session, game)
    pending = [s for s in held if s.ready_at is None and (s.due_at > now or queue)]
    if pending:
        return False
    row = votesettings.kept(session, game)
    row.ready_phase = "done"
    votesettings.touch(game, now)
    if game.deadline:
        set_deadline(game, game.deadline, now)
    ready = [s.handle for s in held if s.ready_at is not None]
    silent = [s.handle for s in held if s.ready_at is None]
    text = f"Every seat of {game.name} is ready: " + ", ".join(ready) + "." if not silent else (
        f"The ready check of {game.name} is over. Ready: {', '.join(ready) or 'nobody'}. Not confirmed, but kept "
        f"(nobody waits for their seat): {', '.join(silent)}.")
    tell_players(session, mailer, game, f"{game.name} has started",
                 text + f"\n\nThe game has started: the first deadline is {show_time(game.next_deadline)}.", now)
    audit(session, now, "system", "ready check", f"{game.name}: over, ready {len(ready)}, kept {len(silent)}", game)
    return True


def end_for_a_turn_by_hand(session: Session, mailer: Mailer, game: Game, now: datetime) -> None:
    """The GM runs the open turn (``turn run``) while the ready check is under
    way: the GM has started the game, so the check ends there; the players
    are told who had confirmed and who had not (their seats are kept)."""
    row = session.get(VoteSettings, game.id)
    if row is None or row.ready_phase != "open":
        return
    row.ready_phase = "done"
    votesettings.touch(game, now)
    held = seats(session, game)
    ready = [s.handle for s in held if s.ready_at is not None]
    silent = [s.handle for s in held if s.ready_at is None]
    tell_players(session, mailer, game, f"{game.name}: the ready check is over",
                 f"The game master ran the turn of {game.name} before every seat was ready, which ends its ready "
                 f"check. Ready: {', '.join(ready) or 'nobody'}. Not confirmed, but kept: "
                 f"{', '.join(silent) or 'nobody'}.", now)
    audit(session, now, "system", "ready check",
          f"{game.name}: ended by a turn run by hand, ready {len(ready)}, kept {len(silent)}", game)


def due_work(session: Session, mailer: Mailer, game: Game, now: datetime) -> int | None:
    """The scheduler's step: each seat past its window goes to the first
    player waiting; the game starts when it can.  None: nothing to do."""
    row = session.get(VoteSettings, game.id)
    if row is None or row.ready_phase != "open":
        return None
    done = 0
    for seat in seats(session, game):
        if seat.ready_at is not None or seat.due_at > now:
            continue
        queue = roster.waiting(session, game)
        if not queue:
            continue
        entry, acc = queue[0]
        _hand_over(session, mailer, game, seat, entry, acc, row.ready_minutes or 0, now)
        done += 1
    if _maybe_start(session, mailer, game, now):
        done += 1
    return done or None


#: the games with a seat whose window to confirm is over (one Core statement,
#: asked every scheduler pass)
DUE_GAMES = select(ReadySeat.game_id).where(ReadySeat.ready_at.is_(None), ReadySeat.due_at <= bindparam("now")).distinct()


def due_games(session: Session, now: datetime) -> list[int]:
    return sorted(session.connection().execute(DUE_GAMES, {"now": now}).scalars())


def _hand_over(session: Session, mailer: Mailer, game: Game, seat: ReadySeat, entry: WaitingEntry, acc: Account,
               minutes: int, now: datetime) -> None:
    """The silent player's seat, as it stands, to the first on the waiting list, who is asked in turn."""
    rules = get_rules(game.kind)
    old = seat.handle
    save_state(game, rules.replace_player(game.state, old, acc.handle), now)
    roster.move_membership(session, game, old, acc, now)
    session.execute(delete(WaitingEntry).where(WaitingEntry.id == entry.id))
    session.delete(seat)
    session.flush()
    audit(session, now, "system", "ready check", f"{game.name}: {old} did not confirm; the seat goes to {acc.handle}",
          game)
    mailer.send_notices(session, game, rules, [Notice(
        to=[old], subject=f"{game.name}: your seat went to the waiting list",
        text=(f"You did not mail 'ready' to {game.name} in time, so your seat has gone to {acc.handle}, who was "
              "waiting for one. You get no more mail of this game."))], now)
    mailer.send_notices(session, game, rules, [Notice(
        to=[ALL_PLAYERS], subject=f"{game.name}: {acc.handle} takes {old}'s seat",
        text=f"{old} did not confirm their seat of {game.name} in time; it goes to {acc.handle} from the waiting list.")],
        now, skip={acc.handle_key})
    _ask(session, mailer, game, acc.handle, minutes, now)


def shown(session: Session, game: Game, tz: str | None = None) -> list[str]:
    """What ``status`` and the game's page say of the ready check."""
    row = session.get(VoteSettings, game.id)
    if row is None or row.ready_phase != "open":
        return []
    parts = [f"{s.handle} ready" if s.ready_at else f"{s.handle} not yet (by {show_time(s.due_at, tz)})"
             for s in seats(session, game)]
    return ["Ready check under way (the first turn starts when every seat is ready): " + "; ".join(parts) + "."]
