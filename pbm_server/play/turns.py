"""Running a game's open turn, and rolling a game back to before a turn.

A turn run keeps a snapshot before and after (with the revealed seed and the
reports), so ``history`` can show it and ``turn rollback`` can undo it.
"""

from __future__ import annotations

import json
import random
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.orm import Session

from games import get_rules
from games.base import ALL_PLAYERS, Context, GameError, Outcome, Rules, State
from pbm_server.base.deadlines import DeadlineError, parse_deadline
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.mail.compose import Rendered, wrap
from pbm_server.play import alerting, people, readycheck, reliability
from pbm_server.play.gamestate import record_outcome, save_state, set_deadline
from pbm_server.play.notices import Mailer, tell_players
from pbm_server.play.ordercheck import order_blocks
from pbm_server.play.roster import fill_seats
from pbm_server.play.seeds import keep_rng, new_seed, seed_hash, turn_rng
from pbm_server.play.vacations import absent_handles
from pbm_server.store.lookup import audit, note_for_batch, noted_for_batch
from pbm_server.store.models import Account, Game, Order, Snapshot, TurnReport


def seed_footer(game: Game, revealed: str | None) -> str:
    """The seed lines of a report: each seed and hash on a line of its own
    (64 hex digits, indented), so that they fit a terminal whole."""
    lines = []
    name = get_rules(game.kind).turn_name
    if revealed:
        lines.append(f"Random seed of {name} {game.turn - 1}:")
        lines.append(f"  {revealed}")
        lines.append(f"Its SHA-256, published before the {name}:")
        lines.append(f"  {seed_hash(revealed)}")
    if game.status != "finished":
        lines.append(f"SHA-256 of the seed of {name} {game.turn}:")
        lines.append(f"  {seed_hash(game.turn_seed)}")
    return "\n".join(lines)


#: names listed in the footer every player's report gets (a large game's
#: list of players without orders would otherwise be in every report)
FOOTER_NAMES = 20


def some_names(handles: list[str] | frozenset[str]) -> str:
    names = sorted(handles, key=str.lower)
    more = len(names) - FOOTER_NAMES
    return ", ".join(names[:FOOTER_NAMES]) + (f" and {more} more (the GM's audit log lists them all)" if more > 0 else "")


class Reports:
    """The report each player got for a turn: kept as text only, a copy
    identical to the first one shared (a report to everybody is held once),
    written as one row per player (``turn_reports``) in batches."""

    BATCH = 500

    def __init__(self, footer: str = "") -> None:
        self.footer = footer
        self.texts: dict[str, str] = {}
        self.first: str | None = None

    def add(self, acc: Account, body: Rendered, kind: str) -> None:
        if kind != "report":
            return
        text = body.text + "\n\n" + self.footer if self.footer else body.text
        if self.first is None:
            self.first = text
        elif text == self.first:
            text = self.first
        key = acc.handle_key
        self.texts[key] = self.texts[key] + "\n\n" + text if key in self.texts else text

    def same(self) -> bool:
        return bool(self.texts) and all(t is self.first for t in self.texts.values())

    def store(self, session: Session, snapshot_id: int) -> None:
        rows = [{"snapshot_id": snapshot_id, "handle_key": k, "text": t} for k, t in self.texts.items()]
        for i in range(0, len(rows), self.BATCH):
            session.execute(insert(TurnReport), rows[i:i + self.BATCH])


def why_not_done(outcome: Outcome) -> str:
    """The game's own words on why a turn did not complete."""
    for n in outcome.notices:
        text = n.data.get("text") or n.text
        if text:
            return " ".join(str(text).split())
    return "; ".join(outcome.audit) or "the game did not say why"


def run_turn(
    session: Session,
    game: Game,
    mailer: Mailer,
    now: datetime,
    actor: str,
    expected_turn: int | None = None,
) -> Outcome:
    """Run the game's open turn in the caller's transaction."""
    rules = get_rules(game.kind)
    _check_runnable(rules, game, expected_turn)
    # a ready check under way holds the deadline, so only the GM runs a turn then: that ends the check
    readycheck.end_for_a_turn_by_hand(session, mailer, game, now)
    turn, seed = game.turn, game.turn_seed
    session.add(
        Snapshot(
            game_id=game.id, turn=turn, phase="before", version=game.version, state=game.state, created_at=now,
            rng={"seed": seed, "state": game.rng_state},
        )
    )
    state = json.loads(json.dumps(game.state))
    absent, no_orders = _absent_and_missing(session, rules, state, now)
    owed = reliability.duties(session, game, rules, state, absent)  # the reliability record (issue 44.1)
    rng = turn_rng(game)
    ctx = Context(now=now, rng=rng, turn=turn, game_name=game.name, absent=absent)
    try:
        outcome = rules.run_turn(state, ctx)
    except GameError as exc:
        raise ServerRefused(str(exc)) from None
    save_state(game, outcome.state, now)
    revealed = _advance(session, game, outcome, seed, rng)
    record_outcome(session, game, outcome, now, actor)
    _use_up_deadline(game, outcome, now, by_hand=not actor.startswith("scheduler"))
    common_text = _common_footer(rules, game, turn, outcome, no_orders, absent, revealed)

    # each player's report ends with their orders to edit and send back (ordercheck.py)
    blocks = order_blocks(session, game, rules, turn, mailer.composer.settings.domain) if outcome.turn_done else {}

    def footer(acc: Account) -> str:
        text = common_text
        if game.next_deadline is not None:
            text += f"\nNext deadline: {show_time(game.next_deadline, acc.timezone)}"
        block = blocks.get(acc.handle_key)
        return text + "\n\n" + block if block else text

    reports = Reports(common_text)
    mailer.send_notices(session, game, rules, outcome.notices, now, footer=footer, each=reports.add)
    if outcome.record is not None:
        # the players of a large game got their own parts; observers get the
        # public whole (Rules.public_reports still decides what of it they see)
        mailer.send_to_observers(session, game, rules, [outcome.record], now)
    report = _public_report(mailer, game, outcome, reports, common_text)
    after = Snapshot(game_id=game.id, turn=turn, phase="after", version=game.version, state=game.state, seed=revealed,
                     report=report, created_at=now)
    session.add(after)
    if report is None or outcome.record is not None:
        session.flush()  # the snapshot's id, for its players' reports
        reports.store(session, after.id)
    detail = f"{game.name} {rules.turn_name} {turn}" + ("" if outcome.turn_done else " (the turn stays open)")
    if no_orders and outcome.turn_done:
        detail += f"; no orders from {', '.join(no_orders)}"
    audit(session, now, actor, "turn run", detail, game)
    if outcome.turn_done:
        reliability.write_turn(session, game, turn, owed, now)
        people.check_drops(session, mailer, game, owed, now)
        alerting.turn_processed(session, game, rules, turn, no_orders, now)
    if outcome.finished:
        alerting.game_ended(session, game, rules, now)
    if outcome.left:  # seats freed by the turn go to the waiting list
        fill_seats(session, mailer, game, now)
    return outcome


def _check_runnable(rules: Rules[Any], game: Game, expected_turn: int | None) -> None:
    """Raise ServerRefused if the game has no open turn to run (or not the one expected)."""
    if not rules.has_turns:
        raise ServerRefused(f"{rules.title} has no turns: moves take effect when they arrive")
    if game.status == "finished":
        raise ServerRefused(f"{game.name} is finished")
    if expected_turn is not None and expected_turn != game.turn:
        raise ServerRefused(f"{game.name} is at {rules.turn_name} {game.turn}, not {expected_turn}: nothing was run")


def _absent_and_missing(session: Session, rules: Rules[Any], state: State, now: datetime) -> tuple[frozenset[str], list[str]]:
    """The players on vacation at ``now``, and those the game still waits
    for who are not (a state the rules cannot read: nobody)."""
    try:
        players = list(rules.players(state))
        waiting = list(rules.waiting_for(state))
    except Exception:
        players, waiting = [], []
    absent = absent_handles(session, players, now)
    absent_keys = {h.lower() for h in absent}
    return absent, [h for h in waiting if h.lower() not in absent_keys]


def _advance(session: Session, game: Game, outcome: Outcome, seed: str, rng: random.Random) -> str | None:
    """Move the game to its next turn if this one is done (returning the
    seed now revealed), or keep the random stream where the run left it."""
    if not outcome.turn_done:
        keep_rng(game, rng)
        return None
    game.turn += 1
    # a turn whose seed's hash was published before a rollback keeps that seed
    game.turn_seed = committed_seed(session, game, game.turn) or new_seed()
    game.rng_state = None
    return seed


def _use_up_deadline(game: Game, outcome: Outcome, now: datetime, by_hand: bool = False) -> None:
    """Set the next deadline if the run used up this turn's.  A turn run
    ``by_hand`` (the GM's ``turn run``) before its deadline leaves the
    schedule as it was (:func:`kept_deadline`, docs/gm.md)."""
    if by_hand and outcome.turn_done and game.status != "finished" and game.deadline:
        kept = kept_deadline(game.deadline, game.next_deadline, now, game.created_at)
        if kept is not None:
            game.next_deadline = kept
            return
    if game.deadline and game.status != "finished" and (
        outcome.turn_done or game.next_deadline is None or game.next_deadline <= now
    ):
        # the deadline of this turn is used up, also when the turn ran early;
        # a turn that did not complete before its deadline (by hand, or early)
        # keeps the deadline it had.  One that did not complete at its
        # deadline moves on, or it would be tried again at every pass.
        set_deadline(game, game.deadline, max(now, game.next_deadline or now))


def kept_deadline(expr: str, due: datetime | None, now: datetime, anchor: datetime | None) -> datetime | None:
    """The next deadline after a turn the GM ran by hand at ``now``, before
    the deadline ``due``: the schedule does not move, so the next turn's
    deadline is ``due`` itself, or the scheduled one after it when ``due``
    is less than half the schedule's period away (the players always get at
    least that long).  None when the run was not early (the deadline is used
    up as usual) or the schedule has no next deadline."""
    if due is None or due <= now:
        return None
    try:
        after = parse_deadline(expr).next_after(due, anchor)
    except DeadlineError:
        return None
    if after is None:
        return due
    return due if (due - now) * 2 >= after - due else after


def _common_footer(rules: Rules[Any], game: Game, turn: int, outcome: Outcome, no_orders: list[str],
                   absent: frozenset[str], revealed: str | None) -> str:
    """The footer every report of the turn gets: who sent no orders, who
    was on vacation, the seed lines."""
    common = []
    if outcome.turn_done and no_orders:
        common.append(f"No orders for {rules.turn_name} {turn} from: {some_names(no_orders)}")
    if outcome.turn_done and absent:
        common.append(f"On vacation (kept out of the no-order rules): {some_names(absent)}")
    common.append(seed_footer(game, revealed))
    return "\n".join(common)


def _public_report(mailer: Mailer, game: Game, outcome: Outcome, reports: Reports, common_text: str) -> str | None:
    """The turn's report the after-snapshot keeps for all to see, or None if
    the players got different ones (each player's is kept instead)."""
    to_all = all(n.to == [ALL_PLAYERS] for n in outcome.notices if n.kind == "report")
    if outcome.record is not None:
        # a large game: the players got their own parts, this is the whole report
        report: str | None = mailer.composer.render(outcome.record.template, outcome.record.data, game.kind,
                                                    html=False).text if outcome.record.template else outcome.record.text
        return (report or "") + "\n\n" + common_text
    if reports.same() and to_all:
        return reports.first  # everybody got the same: it is public
    if not reports.texts and outcome.notices and outcome.notices[0].text:
        return outcome.notices[0].text + "\n\n" + common_text
    return None


def committed_seed(session: Session, game: Game, turn: int) -> str | None:
    """The seed already committed to for ``turn`` (its hash was published)
    before a rollback took the game back behind it; None if there is none.

    A seed that has since been revealed (some run's report of this game
    showed it, a run a rollback voided included) is never committed to any
    more: every player could work out the turn's draws from it before
    sending orders, so that turn gets a fresh seed instead (issue 41.4)."""
    rows = session.scalars(
        select(Snapshot.rng).where(Snapshot.game_id == game.id, Snapshot.phase == "rollback", Snapshot.turn < turn)
        .order_by(Snapshot.id.desc())
    ).all()
    for rng in rows:
        seed = ((rng or {}).get("committed") or {}).get(str(turn))
        if seed and not seed_revealed(session, game, str(seed)):
            return str(seed)
    return None


def seed_revealed(session: Session, game: Game, seed: str) -> bool:
    """Whether a report of ``game`` has revealed ``seed`` (the after-snapshot
    of a completed run keeps the seed its report revealed)."""
    return session.scalar(
        select(Snapshot.id).where(Snapshot.game_id == game.id, Snapshot.phase == "after", Snapshot.seed == seed).limit(1)
    ) is not None


def same_seed_hold(session: Session, game: Game) -> bool:
    """Whether the game's open turn was rolled back with ``--same-seed`` and
    has not run (to completion) since: its seed is public, so the turn takes
    no orders until it has run again (docs/gm.md).  The newest rollback
    decides; running the turn to its end moves the game past it.

    Asked of every player's mail to a game with turns, so it is one prepared
    Core statement on the transaction's connection (no ORM statement built
    and no autoflush: a rollback snapshot not yet flushed is flushed first)."""
    if any(isinstance(o, Snapshot) for o in session.new):
        session.flush()
    if noted_for_batch(session, _NEVER_ROLLED_BACK, game.id):
        return False
    conn = session.connection()
    # the common case in one lookup on (game_id, turn): no same-seed rollback to the open turn
    row = conn.execute(_NEWEST_ROLLBACK, {"game": game.id, "turn": game.turn}).first()
    if row is None or not (row.rng or {}).get("same_seed"):
        return False
    # a later rollback (to an earlier turn, rerun since) gave the game new seeds
    return conn.execute(_LATER_ROLLBACK, {"game": game.id, "id": row.id}).first() is None


def look_ahead(session: Session, game_ids: list[int]) -> None:
    """What a worker's batch (one mail per game) asks of each game's mail,
    found for all its games at once: the games never rolled back (so no
    :func:`same_seed_hold`) and those without a ready check
    (readycheck.after_change), two SELECTs for the batch instead of two a
    mail.  Each game's first question is answered from them, once: a
    player's mail makes no rollback, and a ready check it sets up is in the
    session."""
    if not game_ids:
        return
    rolled = set(session.connection().execute(_ROLLED_BACK, {"games": game_ids}).scalars())
    note_for_batch(session, _NEVER_ROLLED_BACK, (i for i in game_ids if i not in rolled))
    readycheck.look_ahead(session, game_ids)


#: Session.info key: the batch's games never rolled back (look_ahead)
_NEVER_ROLLED_BACK = "pbm_games_never_rolled_back"
_ROLLED_BACK = (select(Snapshot.game_id).distinct()
                .where(Snapshot.game_id.in_(bindparam("games", expanding=True)), Snapshot.phase == "rollback"))
_NEWEST_ROLLBACK = (select(Snapshot.id, Snapshot.rng)
                    .where(Snapshot.game_id == bindparam("game"), Snapshot.turn == bindparam("turn"),
                           Snapshot.phase == "rollback")
                    .order_by(Snapshot.id.desc()).limit(1))
_LATER_ROLLBACK = (select(Snapshot.id)
                   .where(Snapshot.game_id == bindparam("game"), Snapshot.phase == "rollback",
                          Snapshot.id > bindparam("id")).limit(1))


def rollback_said(game: Game, turn: int, same_seed: bool) -> str:
    """The GM's answer to a rollback (CLI and mail): which seed the turn has."""
    name = f"{get_rules(game.kind).turn_name} {turn}"
    if same_seed:
        return (f"{game.name} is back before {name}, with the same seed (no orders are taken until it has run); "
                "the players are told")
    return f"{game.name} is back before {name}, with a new seed; the players are told"


def rollback(session: Session, game: Game, mailer: Mailer, turn: int, now: datetime, actor: str,
             same_seed: bool = False) -> Snapshot:
    """Put the game back as it was just before ``turn`` was processed: its
    state and turn number; orders held in the game state are kept.  The
    players are told.  Returns the snapshot restored.

    The seed of ``turn`` was revealed by its report, so by default the turn
    gets a fresh seed (and a fresh stream), whose hash the mail to the
    players publishes: nobody can order knowing its draws.  ``same_seed``
    (the GM's ``--same-seed``) keeps the old seed and random stream instead,
    to run the turn again exactly as it was after correcting a GM error; the
    turn then takes no orders until it has run (:func:`same_seed_hold`)."""
    rules = get_rules(game.kind)
    if not rules.has_turns:
        raise ServerRefused(f"{rules.title} has no turns to roll back")
    # a rollback to turn R makes the snapshots of turns >= R taken before it history
    cut = session.scalar(
        select(func.max(Snapshot.id)).where(Snapshot.game_id == game.id, Snapshot.phase == "rollback", Snapshot.turn <= turn)
    ) or 0
    snap = session.scalar(
        select(Snapshot)
        .where(Snapshot.game_id == game.id, Snapshot.turn == turn, Snapshot.phase == "before", Snapshot.id > cut)
        .order_by(Snapshot.id.desc())
        .limit(1)
    )
    ran = snap is not None and session.scalar(
        select(Snapshot.id).where(Snapshot.game_id == game.id, Snapshot.turn == turn, Snapshot.phase == "after", Snapshot.id > snap.id).limit(1)
    ) is not None
    if turn > game.turn or not ran or snap is None:
        raise ServerRefused(
            f"{game.name} has no processed {rules.turn_name} {turn} to roll back "
            f"(now open: {rules.turn_name} {game.turn}); nothing was changed"
        )
    current = game.turn
    # the seeds of the turns after ``turn`` whose hashes are published: a rerun
    # draws from the same ones unless they were revealed (committed_seed)
    committed: dict[str, str] = {}
    for later in range(turn + 1, current + 1):
        before = session.scalar(
            select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.turn == later, Snapshot.phase == "before",
                                   Snapshot.id > cut).order_by(Snapshot.id.desc()).limit(1)
        )
        seed = (before.rng or {}).get("seed") if before is not None else None
        committed[str(later)] = seed or (game.turn_seed if later == current else "")
    committed = {t: sd for t, sd in committed.items() if sd}
    game.state = json.loads(json.dumps(snap.state))
    game.version += 1
    game.updated_at = now
    game.turn = turn
    if same_seed:
        game.turn_seed = (snap.rng or {}).get("seed") or game.turn_seed
        game.rng_state = (snap.rng or {}).get("state")
    else:
        # the draws the mails of the turn made before it first ran came from the
        # old seed (revealed, and checkable with it); the rest come from this one
        game.turn_seed = new_seed()
        game.rng_state = None
    # early processing waits for a change: all orders are still in, and the
    # GM rolled back to change something before the turn runs again
    game.early_version = game.version
    if game.status == "finished":
        game.status = "running"
    if game.deadline:
        set_deadline(game, game.deadline, now)
    # orders for the turns after ``turn`` belonged to states that no longer exist
    # (the mails themselves stay in the inbox); those of ``turn`` itself are kept
    for stale in session.scalars(select(Order).where(Order.game_id == game.id, Order.turn > turn)).all():
        session.delete(stale)
    session.add(Snapshot(game_id=game.id, turn=turn, phase="rollback", version=game.version, state=game.state, created_at=now,
                         rng={"committed": committed, "same_seed": same_seed}))
    how = "the same seed, no orders until it runs" if same_seed else "a new seed"
    audit(session, now, actor, "turn rollback",
          f"{game.name} back to before {rules.turn_name} {turn} (was at {current}); {how}", game)
    # prose wrapped here (not cut by fit_lines' hanging indent), the hash on a
    # line of its own, whole, as docs/players.md promises for every seed and hash
    name = f"{rules.turn_name} {turn}"
    if same_seed:
        text = wrap(
            f"The game master has rolled {game.name} back to the moment before {name} was processed, to run it "
            f"again with the same random numbers (to correct a game master's error). The orders held for {name} "
            f"are kept, and no orders are taken until {name} has run again: its seed was revealed with its "
            "report, so new orders could be made knowing its dice.\n\n"
            f"The seed of {name} stays the one revealed, whose SHA-256 was published before it:\n"
            f"  {seed_hash(game.turn_seed)}\n"
            "so running the turn again draws the same random numbers."
        )
    else:
        text = wrap(
            f"The game master has rolled {game.name} back to the moment before {name} was processed. "
            f"The orders held for {name} are kept; you may change them until the turn runs again.\n\n"
            f"The seed of {name} was revealed with its report, so the turn gets a new seed: its random "
            "numbers will differ from those of the run rolled back. The SHA-256 of the new seed:\n"
            f"  {seed_hash(game.turn_seed)}\n"
            "The seed itself is revealed when the turn has run."
        )

    tell_players(session, mailer, game, f"{game.name}: {rules.turn_name} {turn} rolled back", text, now)
    return snap
