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
from pbm_server.play import readycheck, votes
from pbm_server.play.seeds import seed_hash
from pbm_server.store.models import Account, Game, Order, Snapshot, TurnReport


def _voided(snaps: list[Snapshot]) -> dict[int, Snapshot]:
    """The after-snapshots a later rollback undid: snapshot id -> that
    rollback (a rollback to turn R voids every run of a turn >= R before it)."""
    out: dict[int, Snapshot] = {}
    rollbacks = [s for s in snaps if s.phase == "rollback"]
    for s in snaps:
        if s.phase != "after":
            continue
        undo = next((r for r in rollbacks if r.id > s.id and r.turn <= s.turn), None)
        if undo is not None:
            out[s.id] = undo
    return out


def _turn_lines(rules_turn: str, afters: list[Snapshot], voided: dict[int, Snapshot], game: Game) -> list[str]:
    """The list of turns ``history`` shows: every run of a turn in order, a
    run a rollback undid marked so, then the open turn."""
    lines = []
    for s in afters:
        line = f"{rules_turn} {s.turn}: processed {s.created_at:%Y-%m-%d %H:%M} UTC"
        undo = voided.get(s.id)
        if undo is not None:
            lines.append(f"{line}, ROLLED BACK {undo.created_at:%Y-%m-%d %H:%M} UTC (its report no longer holds)")
        else:
            lines.append(line + (f", seed:\n  {s.seed}" if s.seed else ""))
    lines.append(f"{rules_turn} {game.turn}: open, SHA-256 of its seed:\n  {seed_hash(game.turn_seed)}")
    return lines


def _report_text(session: Session, snap: Snapshot, viewer: Account | None, is_gm: bool, rules_turn: str) -> str:
    key = viewer.handle_key if viewer else None
    own = session.get(TurnReport, (snap.id, key)) if key else None
    if snap.report is not None:
        # the report everybody got, or (a large game) the whole of it
        return snap.report
    if own is not None:
        return own.text
    if is_gm and (first := session.scalars(select(TurnReport).where(TurnReport.snapshot_id == snap.id)
                                           .order_by(TurnReport.handle_key).limit(1)).first()) is not None:
        return f"(the copy {first.handle_key} got)\n\n" + first.text
    return f"The reports of {rules_turn} {snap.turn} were private to each player, and you got none."


def history(session: Session, game: Game, turn: int | None, viewer: Account | None, is_gm: bool) -> tuple[str, list[Section]]:
    """The report of a processed turn (default: the last that still holds)
    and the list of turns.  A turn the GM rolled back is marked so; asked for
    by number, its voided report is shown under a line saying so."""
    rules = get_rules(game.kind)
    name = rules.turn_name
    snaps = session.scalars(
        select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase.in_(("after", "rollback")))
        .order_by(Snapshot.id)
    ).all()
    afters = [s for s in snaps if s.phase == "after"]
    if not afters:
        raise ServerRefused(f"no {name} of {game.name} has been processed yet")
    voided = _voided(list(snaps))
    live = sorted({s.turn for s in afters if s.id not in voided})
    done = sorted({s.turn for s in afters})
    if turn is None:
        if not live:
            raise ServerRefused(f"no processed {name} of {game.name} still holds: the game master rolled "
                                f"{game.name} back to before {name} {min(done)}; {name} {game.turn} is open")
        turn = max(live)
    if turn not in done:
        raise ServerRefused(f"{game.name} has no processed {name} {turn}; processed: {', '.join(map(str, done))}")
    held = [s for s in afters if s.turn == turn and s.id not in voided]
    snap = held[-1] if held else [s for s in afters if s.turn == turn][-1]
    text = _report_text(session, snap, viewer, is_gm, name)
    title = f"{game.name}: report of {name} {turn}"
    if snap.id in voided:
        undo = voided[snap.id]
        title += " (rolled back)"
        text = (f"The game master rolled this {name} back on {undo.created_at:%Y-%m-%d %H:%M} UTC: "
                f"this report no longer holds.\n\n" + text)
    sections = [
        Section(title=title, text=text),
        Section(title=f"{game.name}: {name}s", text="\n".join(_turn_lines(name, afters, voided, game))),
    ]
    return f"the report of {name} {turn} and the list of {name}s follow", sections


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
        info.extend(votes.shown(session, game, tz) + readycheck.shown(session, game, tz))
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
