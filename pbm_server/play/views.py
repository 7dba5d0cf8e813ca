"""What a player (or the GM) sees of a game on request: its status, and the
report of a processed turn with the list of turns (``status``, ``history``).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from games import get_rules
from games.base import Section
from pbm_server.base.durations import show_duration
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.play.seeds import seed_hash
from pbm_server.store.models import Account, Game, Order, Snapshot, TurnReport


def history(session: Session, game: Game, turn: int | None, viewer: Account | None, is_gm: bool) -> tuple[str, list[Section]]:
    rules = get_rules(game.kind)
    afters = session.scalars(
        select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "after").order_by(Snapshot.id)
    ).all()
    if not afters:
        raise ServerRefused(f"no {rules.turn_name} of {game.name} has been processed yet")
    done = sorted({s.turn for s in afters})
    if turn is None:
        turn = max(done)
    if turn not in done:
        raise ServerRefused(f"{game.name} has no processed {rules.turn_name} {turn}; processed: {', '.join(map(str, done))}")
    snap = [s for s in afters if s.turn == turn][-1]
    key = viewer.handle_key if viewer else None
    own = session.get(TurnReport, (snap.id, key)) if key else None
    if snap.report is not None:
        # the report everybody got, or (a large game) the whole of it
        text = snap.report
    elif own is not None:
        text = own.text
    elif is_gm and (first := session.scalars(select(TurnReport).where(TurnReport.snapshot_id == snap.id)
                                             .order_by(TurnReport.handle_key).limit(1)).first()) is not None:
        text = f"(the copy {first.handle_key} got)\n\n" + first.text
    else:
        text = f"The reports of {rules.turn_name} {turn} were private to each player, and you got none."
    lines = []
    for t in done:
        s = [x for x in afters if x.turn == t][-1]
        lines.append(f"{rules.turn_name} {t}: processed {s.created_at:%Y-%m-%d %H:%M} UTC" + (f", seed:\n  {s.seed}" if s.seed else ""))
    lines.append(f"{rules.turn_name} {game.turn}: open, SHA-256 of its seed:\n  {seed_hash(game.turn_seed)}")
    sections = [
        Section(title=f"{game.name}: report of {rules.turn_name} {turn}", text=text),
        Section(title=f"{game.name}: {rules.turn_name}s", text="\n".join(lines)),
    ]
    return f"the report of {rules.turn_name} {turn} and the list of {rules.turn_name}s follow", sections


def status(session: Session, game: Game, viewer: Account | None) -> list[Section]:
    rules = get_rules(game.kind)
    tz = viewer.timezone if viewer else None
    info = [f"{rules.title} game {game.name}: {game.status}"]
    if rules.has_turns:
        info.append(f"Open {rules.turn_name}: {game.turn}")
        info.append(f"Next deadline: {show_time(game.next_deadline, tz)}" + (f" ({game.deadline})" if game.deadline else ""))
        if game.grace_minutes:
            info.append(f"Grace period after the deadline: {show_duration(game.grace_minutes)}")
        if game.early:
            info.append("The turn runs early once every player has sent orders.")
        info.append(f"SHA-256 of the seed of {rules.turn_name} {game.turn}:\n  {seed_hash(game.turn_seed)}")
    handle = None
    if viewer is not None:
        players = {h.lower(): h for h in rules.players(game.state)}
        handle = players.get(viewer.handle_key)
        if handle is None:
            info.append(f"You ({viewer.handle}) are not playing in this game; you see what an observer sees.")
        elif rules.has_turns:
            held = session.scalar(select(Order).where(Order.game_id == game.id, Order.handle == handle, Order.turn == game.turn))
            waiting = {h.lower() for h in rules.waiting_for(game.state)}
            if held is not None and held.lines:
                info.append(f"Your orders for {rules.turn_name} {game.turn}:")
                info.extend(f"  {line}" for line in held.lines)
            elif viewer.handle_key in waiting:
                info.append(f"You have sent no orders for {rules.turn_name} {game.turn} yet.")
    sections = [Section(title=f"{game.name}: status", text="\n".join(info))]
    sections.extend(rules.view(game.state, handle))
    return sections
