"""Who plays a game, and njudge's conveniences around it: ``who NAME`` (the
roster and when each player last sent orders), ``info NAME`` (the GM's text),
``summary NAME`` (every processed turn and its scores), the waiting list of a
full game (``seats=N``: a JOIN beyond it waits; the first waiting player gets
the seat that frees) and the GM's replacement of a player
(``pbm game replace NAME OLD NEW``).

Everything works in the caller's session and transaction; a refusal raises
ServerRefused.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from games import get_rules
from games.base import (
    ALL_PLAYERS,
    Actor,
    Command,
    Context,
    GameError,
    JoinHint,
    Line,
    Notice,
    Result,
    Rules,
    Section,
)
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.play.gamestate import save_state
from pbm_server.play.moves import apply_commands
from pbm_server.play.notices import Mailer
from pbm_server.play.reliability import records_by_handle
from pbm_server.play.seeds import seed_hash
from pbm_server.store.lookup import account_by_handle, audit
from pbm_server.store.models import (
    Account,
    Game,
    InboundMail,
    Membership,
    Order,
    SeatOffer,
    Snapshot,
    TurnReport,
    WaitingEntry,
)

#: the most players a score line of ``summary`` names (the rest are counted)
SCORE_NAMES = 20
#: the longest text ``pbm game info`` takes
INFO_CHARS = 4000


# -- joining -----------------------------------------------------------------------
def join_offer(game: Game, rules: Rules[Any], domain: str, players: int) -> dict[str, Any]:
    """How a newcomer takes part, as the game's kind says it
    (``Rules.join_hint``), for the web pages and the ``games`` mail:
    ``join_line`` to mail to ``join_address`` with the password, or, when
    ``join_address`` is None, why the game is closed to new players
    (``join_note``).  A paused or finished game is closed."""
    if game.status != "running":
        why = "the game is paused" if game.status == "paused" else "the game is over"
        hint: JoinHint | None = JoinHint(None, why)
    else:
        hint = rules.join_hint(game.state)
    if hint is None or hint.line is None:
        return {"join_address": None, "join_line": None, "join_note": hint.note if hint else ""}
    note = hint.note
    if game.seats is not None and players >= game.seats and not hint.server:
        note = (note + "; " if note else "") + (f"all {game.seats} seats are taken: a join puts you on the "
                                                "waiting list, and you play when a seat is free")
    return {"join_address": f"pbm@{domain}" if hint.server else f"{game.name}@{domain}",
            "join_line": hint.line, "join_note": note}


# -- info --------------------------------------------------------------------------
def set_info(session: Session, game: Game, text: str, now: datetime, actor: str) -> str:
    """The GM's text for ``info NAME`` ("none" or "" takes it away)."""
    text = text.strip()
    if len(text) > INFO_CHARS:
        raise ServerRefused(f"the text is {len(text)} characters long; at most {INFO_CHARS} are kept")
    game.info = None if text.lower() in ("", "none") else text
    audit(session, now, actor, "game info", f"{game.name}: {len(text)} characters" if game.info else f"{game.name}: none", game)
    return f"{game.name}: info " + ("set" if game.info else "removed")


def info_text(game: Game) -> str:
    return game.info or f"The game master has set no information text for {game.name}."


# -- who ---------------------------------------------------------------------------
def _players(rules: Rules[Any], game: Game) -> list[str]:
    try:
        return list(rules.players(game.state))
    except Exception:  # a state the rules cannot read: nobody
        return []


def _last_orders(session: Session, game: Game, rules: Rules[Any], handles: list[str]) -> dict[str, datetime]:
    """handle (lower case) -> when they last sent orders: a turn game's held
    orders; in a game without turns, their last mail whose lines the game
    ran (its inbox row carries the game's stream, execute.py), from the
    address their account has now.  A mail of press only runs nothing in the
    game and never counts: ``who`` must not date anyone's (anonymous) press.
    One grouped query either way (the inbox through ix_inbox_game_received)."""
    out: dict[str, datetime] = {}
    if rules.has_turns:
        rows = session.execute(select(Order.handle, func.max(Order.received_at)).where(Order.game_id == game.id)
                               .group_by(Order.handle)).all()
        for handle, at in rows:
            key = handle.lower()
            if at is not None and (key not in out or at > out[key]):
                out[key] = at
        return out
    keys = [h.lower() for h in handles]
    if not keys:
        return out
    ran = (InboundMail.seed == seed_hash(game.turn_seed)) if game.turn_seed else InboundMail.seed.is_not(None)
    # one pass over the game's mails, grouped by sender; then each sender's account
    sender = func.lower(InboundMail.mail_from)
    last = (select(sender.label("address"), func.max(InboundMail.received_at).label("at"))
            .where(InboundMail.game_id == game.id, InboundMail.status == "done", ran)
            .group_by(sender).subquery())
    rows = session.execute(select(Account.handle_key, last.c.at).join(last, last.c.address == Account.email)
                           .where(Account.handle_key.in_(keys))).all()
    for key, at in rows:
        if at is not None:
            out[key] = at
    return out


def waiting(session: Session, game: Game) -> list[tuple[WaitingEntry, Account]]:
    """The waiting list of ``game``, first come first."""
    rows = session.execute(select(WaitingEntry, Account).join(Account, Account.id == WaitingEntry.account_id)
                           .where(WaitingEntry.game_id == game.id).order_by(WaitingEntry.id)).all()
    return [(w, a) for w, a in rows]


def who(session: Session, game: Game, tz: str | None) -> str:
    """The roster of ``game`` by handle: when each last sent orders, who the
    game still waits for, the seats and the waiting list.  No addresses."""
    rules = get_rules(game.kind)
    handles = sorted(_players(rules, game), key=str.lower)
    last = _last_orders(session, game, rules, handles)
    try:
        owing = {h.lower() for h in rules.waiting_for(game.state)}
    except Exception:
        owing = set()
    what = "orders" if rules.has_turns else "game mail"
    lines = [f"{rules.title} game {game.name}: {game.status}"
             + (f", {rules.turn_name} {game.turn}" if rules.has_turns else "")
             + (f"; {len(handles)} of {game.seats} seats taken" if game.seats else f"; {len(handles)} players")]
    width = max([len(h) for h in handles] + [6])
    recs = records_by_handle(session, handles) if rules.has_turns else {}
    offered = {r.seat.lower(): r.status for r in session.scalars(select(SeatOffer).where(
        SeatOffer.game_id == game.id, SeatOffer.status.in_(("vacant", "offered"))))} if rules.has_turns else {}
    for h in handles:
        at = last.get(h.lower())
        when = f"last {what} {show_time(at, tz)}" if at else f"no {what} yet"
        flag = f"  (no orders yet for {rules.turn_name} {game.turn})" if rules.has_turns and h.lower() in owing else ""
        rec = recs.get(h.lower())
        rel = f"; {rec.text()}" if rec is not None else ""
        seat = {"offered": "  [seat offered: 'take " + game.name + "' to play it]",
                "vacant": "  [seat waits for a substitute]"}.get(offered.get(h.lower(), ""), "")
        lines.append(f"  {h:<{width}}  {when}{rel}{flag}{seat}")
    if not handles:
        lines.append("  (nobody plays yet)")
    queue = waiting(session, game)
    if queue:
        lines.append("Waiting for a seat: " + ", ".join(f"{i}. {a.handle}" for i, (_, a) in enumerate(queue, 1)))
    return "\n".join(lines)


# -- summary -----------------------------------------------------------------------
def _score_line(scores: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{h} {n}" for h, n in scores[:SCORE_NAMES])
    more = len(scores) - SCORE_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


def summary(session: Session, game: Game, viewer: Account | None, is_gm: bool) -> list[Section]:
    """Every processed turn of ``game`` that still counts (a turn rolled
    back is left out until it runs again): when it ran, the scores after it
    and its report (the one all players got, else the viewer's own)."""
    rules = get_rules(game.kind)
    if not rules.has_turns:
        raise ServerRefused(f"{rules.title} has no turns to sum up; 'status {game.name}' shows the game as it is")
    afters = session.scalars(select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "after",
                                                    Snapshot.turn < game.turn).order_by(Snapshot.id)).all()
    latest: dict[int, Snapshot] = {}
    for snap in afters:  # a turn run again after a rollback: its last run counts
        latest[snap.turn] = snap
    if not latest:
        raise ServerRefused(f"no {rules.turn_name} of {game.name} has been processed yet")
    key = viewer.handle_key if viewer else None
    blocks = []
    for turn in sorted(latest):
        snap = latest[turn]
        head = f"{rules.turn_name.upper()} {turn} (processed {snap.created_at:%Y-%m-%d %H:%M} UTC)"
        try:
            scores = rules.scores(snap.state)
        except Exception:
            scores = []
        body = [head, "Scores: " + _score_line(scores)] if scores else [head]
        report = snap.report
        if report is None and key is not None:
            own = session.get(TurnReport, (snap.id, key))
            report = own.text if own is not None else None
        body.append(report if report is not None else
                    f"(the reports of {rules.turn_name} {turn} were private to each player, and you got none)")
        blocks.append("\n\n".join(body))
    rule = "\n" + "=" * 76 + "\n"
    title = f"{game.name}: the game so far ({len(latest)} {rules.turn_name}{'s' if len(latest) != 1 else ''})"
    return [Section(title=title, text=rule.join(blocks))]


# -- the waiting list --------------------------------------------------------------
def _is_player(rules: Rules[Any], game: Game, handle: str) -> bool:
    return handle.lower() in {h.lower() for h in _players(rules, game)}


def hold_joins(session: Session, game: Game, rules: Rules[Any], commands: list[Command], actor: Actor,
               now: datetime) -> tuple[list[Command], list[Result]]:
    """A JOIN to a game whose seats are all taken puts the sender on its
    waiting list instead of reaching the game: the commands left for the
    game, and the results of those held."""
    commands, below = _below_reliability(session, game, commands, actor)
    if below or game.seats is None or not actor.handle or not actor.authenticated:
        return commands, below
    if _is_player(rules, game, actor.handle) or len(_players(rules, game)) < game.seats:
        return commands, []
    acc = account_by_handle(session, actor.handle)
    if acc is None:
        return commands, []
    rest, held = [], []
    for cmd in commands:
        if cmd.name != "join" or not cmd.ok:
            rest.append(cmd)
            continue
        entry = session.scalar(select(WaitingEntry).where(WaitingEntry.game_id == game.id,
                                                          WaitingEntry.account_id == acc.id))
        if entry is None:
            entry = WaitingEntry(game_id=game.id, account_id=acc.id, line=cmd.text, since=now)
            session.add(entry)
            session.flush()
            audit(session, now, acc.handle, "waiting list", f"{game.name}: {acc.handle} waits for a seat", game)
        else:
            entry.line = cmd.text
        place = 1 + (session.scalar(select(func.count()).select_from(WaitingEntry).where(
            WaitingEntry.game_id == game.id, WaitingEntry.id < entry.id)) or 0)
        held.append(Result(cmd.line, True, (
            f"accepted: {game.name} is full ({game.seats} of {game.seats} seats taken), so you are on its waiting "
            f"list, number {place}; when a seat frees the first on the list gets it, with this line as the "
            f"JOIN, and a mail to say so ('who {game.name}' to pbm@ shows the list)"), cmd.text))
    return rest, held


def _below_reliability(session: Session, game: Game, commands: list[Command],
                       actor: Actor) -> tuple[list[Command], list[Result]]:
    """A JOIN to a game with ``min_reliability=P`` from an account whose
    record is below P % is refused with the figure (new accounts pass)."""
    if not game.min_reliability or not actor.handle or not actor.authenticated:
        return commands, []
    joins = [c for c in commands if c.name == "join" and c.ok]
    if not joins:
        return commands, []
    acc = account_by_handle(session, actor.handle)
    if acc is None:
        return commands, []
    rec = records_by_handle(session, [acc.handle]).get(acc.handle_key)
    if rec is None or not rec.below(game.min_reliability):
        return commands, []
    why = (f"refused: {game.name} takes players whose reliability is at least {game.min_reliability} %; yours is "
           f"{rec.percent} % ({rec.text()}). Nothing was changed")
    return [c for c in commands if all(c is not j for j in joins)], [Result(c.line, False, why, c.text) for c in joins]


def fill_seats(session: Session, mailer: Mailer, game: Game, now: datetime) -> list[str]:
    """Seats that are free go to the first players on the waiting list: each
    one's JOIN line is run for them, and they are told.  Returns what was done."""
    if game.seats is None or game.status != "running":
        return []
    rules = get_rules(game.kind)
    done = []
    for entry, acc in waiting(session, game):
        if len(_players(rules, game)) >= game.seats:
            break
        session.delete(entry)
        session.flush()
        done.append(_seat(session, mailer, game, rules, entry.line, acc, now))
    return done


def _seat(session: Session, mailer: Mailer, game: Game, rules: Rules[Any], line: str, acc: Account,
          now: datetime) -> str:
    """A freed seat given to ``acc``: their JOIN line run, and they are told."""
    actor = Actor(handle=acc.handle, email=acc.email, authenticated=True)
    ctx = Context(now=now, rng=random.Random(), actor=actor, turn=game.turn, game_name=game.name,
                  emails={acc.handle: acc.email})
    outcome = apply_commands(session, game, rules, rules.parse([Line(1, line)]), ctx, None)
    mailer.send_notices(session, game, rules, outcome.notices, now)
    result = outcome.results[0] if outcome.results else None
    domain = mailer.composer.settings.domain
    if result is not None and result.ok:
        text = (f"A seat of {game.name} has come free and it is yours: your waiting JOIN ({line}) was sent to the "
                f"game.\n\n{result.message}\n\nMail your orders to {game.name}@{domain} with your $$password$$.")
        subject, what = f"{game.name}: a seat is yours", "seated"
    else:
        why = result.message if result is not None else "no answer from the game"
        text = (f"A seat of {game.name} came free, but the game refused your waiting JOIN ({line}): {why}\n\n"
                f"You are off the waiting list; mail JOIN to {game.name}@{domain} to try again.")
        subject, what = f"{game.name}: your JOIN from the waiting list was refused", "refused"
    mailer.send_notices(session, game, rules, [Notice(to=[acc.handle], subject=subject, text=text)], now)
    audit(session, now, "system", "waiting list", f"{game.name}: {acc.handle} {what} ({line})", game)
    return f"{acc.handle} {what}"


# -- replacement -------------------------------------------------------------------
def replace_player(session: Session, mailer: Mailer, game: Game, old: str, new: str, now: datetime,
                   actor: str, by: str | None = None) -> str:
    """The GM hands the position of player ``old`` to the account ``new``:
    the game's state, the orders held for the open turn and the memberships
    move to ``new``; both and the other players are told.  ``by``: a
    substitute took the seat offered (play/people.py), not the GM's choice."""
    rules = get_rules(game.kind)
    players = {h.lower(): h for h in _players(rules, game)}
    was = players.get(old.lower())
    if was is None:
        raise ServerRefused(f"{old} does not play in {game.name}; players: {', '.join(sorted(players.values())) or 'none'}")
    acc = account_by_handle(session, new)
    if acc is None:
        raise ServerRefused(f"there is no account named {new}; the new player must register first")
    if acc.handle.lower() in players:
        raise ServerRefused(f"{acc.handle} already plays in {game.name}")
    try:
        state = rules.replace_player(game.state, was, acc.handle)
    except GameError as exc:
        raise ServerRefused(str(exc)) from None
    save_state(game, state, now)
    for order in session.scalars(select(Order).where(Order.game_id == game.id, Order.handle == was,
                                                     Order.turn == game.turn)).all():
        order.handle = acc.handle
    move_membership(session, game, was, acc, now)
    session.execute(delete(WaitingEntry).where(WaitingEntry.game_id == game.id, WaitingEntry.account_id == acc.id))
    audit(session, now, actor, "game replace", f"{game.name}: {was} -> {acc.handle}" + (f" ({by})" if by else ""), game)
    if by is None:  # the GM chose: the seat needs no offer any more
        for row in session.scalars(select(SeatOffer).where(SeatOffer.game_id == game.id,
                                                           SeatOffer.status.in_(("vacant", "offered")))).all():
            if row.seat.lower() == was.lower():
                row.status = "closed"
    domain = mailer.composer.settings.domain
    if by is not None:
        _substituted(session, mailer, game, rules, was, acc, domain, now)
        return f"{game.name}: {acc.handle} now plays the position of {was}"
    notices = [
        Notice(to=[acc.handle], subject=f"{game.name}: you take over {was}'s position", text=(
            f"The game master has handed you the position {was} held in {game.name}: from now on it is yours. "
            f"Mail 'status {game.name}' to pbm@{domain} to see it, and your orders to {game.name}@{domain} "
            "with your $$password$$.")),
        Notice(to=[was], subject=f"{game.name}: your position was handed on", text=(
            f"The game master has handed your position in {game.name} to {acc.handle}. You get no more mail "
            "of this game. Ask the game master if you think this is a mistake.")),
    ]
    mailer.send_notices(session, game, rules, notices, now)
    mailer.send_notices(session, game, rules, [Notice(to=[ALL_PLAYERS], subject=f"{game.name}: {acc.handle} replaces {was}",
                                                      text=f"The game master has handed {was}'s position in {game.name} "
                                                           f"to {acc.handle}.")],
                        now, skip={acc.handle_key})
    return f"{game.name}: {acc.handle} now plays the position of {was}"


def _substituted(session: Session, mailer: Mailer, game: Game, rules: Rules[Any], was: str, acc: Account,
                 domain: str, now: datetime) -> None:
    """The mails of a seat taken by a substitute (``take GAME``)."""
    notices = [
        Notice(to=[acc.handle], subject=f"{game.name}: you take over {was}'s position", text=(
            f"You have taken the seat of {was} in {game.name}: its position, holdings and history are now yours. "
            f"Mail 'status {game.name}' to pbm@{domain} to see it, and your orders to {game.name}@{domain} "
            "with your $$password$$.")),
        Notice(to=[was], subject=f"{game.name}: a substitute took your seat", text=(
            f"{acc.handle} has taken your seat in {game.name} (offered by the game master). You get no more mail "
            "of this game. Ask the game master if you think this is a mistake.")),
    ]
    mailer.send_notices(session, game, rules, notices, now)
    mailer.send_notices(session, game, rules, [Notice(to=[ALL_PLAYERS], subject=f"{game.name}: {acc.handle} replaces {was}",
                                                      text=f"{acc.handle} has taken over the seat of {was} in "
                                                           f"{game.name}, offered by the game master, and plays "
                                                           "its position from now on.")],
                        now, skip={acc.handle_key})


def move_membership(session: Session, game: Game, old: str, acc: Account, now: datetime) -> None:
    """``old``'s seat in ``game`` to ``acc``: the membership and the orders of the open turn."""
    gone = account_by_handle(session, old)
    if gone is not None:
        for m in session.scalars(select(Membership).where(Membership.game_id == game.id, Membership.account_id == gone.id,
                                                          Membership.role == "player")).all():
            m.left_at = now
    seat = session.scalar(select(Membership).where(Membership.game_id == game.id, Membership.account_id == acc.id,
                                                   Membership.role == "player"))
    if seat is None:
        session.add(Membership(game_id=game.id, account_id=acc.id, role="player", joined_at=now))
    else:
        seat.joined_at, seat.left_at = now, None
