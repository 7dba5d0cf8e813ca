"""Players who vanish (issue 44, items 2 and 5): substitutes standing by
(``available KIND...`` / ``unavailable``), seats that need a new player (a
player missed ``drop_after`` turns in a row, or sent ``resign GAME``), the
GM's ``offer GAME SEAT``, a substitute's ``take GAME``, and the automatic
extension of a deadline when orders are missing (``nmr=extend``).

A seat is a row of ``seat_offers``: ``vacant`` (the GM was told), then
``offered`` (the standing-by players were told), then ``taken`` (the
position, holdings and history go to the substitute through
:func:`roster.replace_player`) or ``closed``.  A take is decided once: the
row moves from ``offered`` to ``taken`` in one conditional UPDATE in the
take's transaction, so of two takes (or a take repeated after a crash) one
wins and the other is refused.

Everything works in the caller's session; a refusal raises ServerRefused.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from games import KINDS, get_rules
from games.base import Notice, Rules
from pbm_server.base.durations import show_duration
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.play import reliability, roster
from pbm_server.play.notices import Mailer, tell_gm
from pbm_server.play.vacations import absent_handles
from pbm_server.store.lookup import account_by_handle, audit
from pbm_server.store.models import Account, Game, SeatOffer, Standby

#: an nmr=extend extension when the game's grace is 0
DEFAULT_EXTENSION_MINUTES = 24 * 60
#: the most available players a GM's mail names
NAMED = 20


def seat_kinds() -> list[str]:
    """The kinds a substitute may stand by for: those with turns."""
    return [k for k in KINDS if get_rules(k).has_turns]


def _turn_game(game: Game, what: str) -> Rules[Any]:
    rules = get_rules(game.kind)
    if not rules.has_turns:
        raise ServerRefused(f"{game.name} is a {rules.title} game: it has no turns and no seats to hand on, "
                            f"so {what} does not apply (a curio board is resigned with 'curio resign')")
    if game.status == "finished":
        raise ServerRefused(f"{game.name} is finished")
    return rules


def _seat_of(rules: Rules[Any], game: Game, handle: str) -> str | None:
    try:
        players = list(rules.players(game.state))
    except Exception:
        players = []
    return next((p for p in players if p.lower() == handle.lower()), None)


# -- standing by ---------------------------------------------------------------------
def available(session: Session, acc: Account, kinds: list[str], now: datetime) -> str:
    allowed = seat_kinds()
    if not kinds:
        mine = standby_kinds(session, acc)
        return ("you stand by as a substitute for: " + ", ".join(mine)) if mine else \
            f"you stand by for no kind; send e.g. 'available {allowed[0]}' (kinds: {', '.join(allowed)})"
    wanted = []
    for word in kinds:
        kind = word.lower()
        if kind not in KINDS:
            raise ServerRefused(f"there is no game kind {word!r}; kinds with seats: {', '.join(allowed)}")
        if kind not in allowed:
            raise ServerRefused(f"{kind} has no turns and no seats to stand in for; kinds with seats: {', '.join(allowed)}")
        wanted.append(kind)
    for kind in dict.fromkeys(wanted):
        if session.get(Standby, (acc.id, kind)) is None:
            session.add(Standby(account_id=acc.id, kind=kind, since=now))
    session.flush()
    audit(session, now, acc.handle, "available", " ".join(wanted))
    return ("you stand by as a substitute for: " + ", ".join(standby_kinds(session, acc))
            + "; when the game master offers a seat of such a game you get a mail, and 'take GAME' gets it")


def unavailable(session: Session, acc: Account, kinds: list[str], now: datetime) -> str:
    rows = session.scalars(select(Standby).where(Standby.account_id == acc.id)).all()
    keep = {k.lower() for k in kinds}
    gone = [r for r in rows if not keep or r.kind in keep]
    if not gone:
        raise ServerRefused("you were not standing by" + (f" for {', '.join(sorted(keep))}" if keep else "")
                            + "; nothing was changed")
    for r in gone:
        session.delete(r)
    session.flush()
    audit(session, now, acc.handle, "unavailable", " ".join(r.kind for r in gone))
    left = standby_kinds(session, acc)
    return (f"you no longer stand by for {', '.join(r.kind for r in gone)}"
            + (f"; still for {', '.join(left)}" if left else ""))


def standby_kinds(session: Session, acc: Account) -> list[str]:
    return list(session.scalars(select(Standby.kind).where(Standby.account_id == acc.id).order_by(Standby.kind)))


def standing_by(session: Session, game: Game) -> list[tuple[Account, reliability.Record]]:
    """The accounts standing by for the game's kind, not playing in it, with
    their records, the most reliable first."""
    rules = get_rules(game.kind)
    try:
        playing = {h.lower() for h in rules.players(game.state)}
    except Exception:
        playing = set()
    accounts = [a for a in session.scalars(select(Account).join(Standby, Standby.account_id == Account.id)
                                           .where(Standby.kind == game.kind).order_by(Standby.since, Account.id))
                if a.handle_key not in playing]
    recs = reliability.records(session, [a.id for a in accounts])
    pairs = [(a, recs.get(a.id, reliability.Record())) for a in accounts]
    pairs.sort(key=lambda p: -(p[1].percent if p[1].percent is not None else -1))
    return pairs


# -- seats ---------------------------------------------------------------------------
def open_seats(session: Session, game: Game) -> list[SeatOffer]:
    """The seats of the game that need a player (vacant or offered), oldest first."""
    return list(session.scalars(select(SeatOffer).where(SeatOffer.game_id == game.id,
                                                        SeatOffer.status.in_(("vacant", "offered")))
                                .order_by(SeatOffer.id)))


def _open_seat(session: Session, game: Game, seat: str) -> SeatOffer | None:
    return next((s for s in open_seats(session, game) if s.seat.lower() == seat.lower()), None)


def _tell_gm_of_seat(session: Session, mailer: Mailer, game: Game, seat: str, why: str, now: datetime) -> None:
    subs = standing_by(session, game)
    named = "\n".join(f"{a.handle}: {r.text()}" for a, r in subs[:NAMED])
    if len(subs) > NAMED:
        named += f"\n... and {len(subs) - NAMED} more"
    tell_gm(session, mailer.composer, mailer.composer.settings.gm_address,
            f"{game.name}: the seat of {seat} needs a new player", [
                ("game", f"{game.name} ({game.kind})"), ("seat", seat), ("why", why),
                ("available players", named or f"nobody stands by for {game.kind} now (players send "
                                                f"'available {game.kind}' to {mailer.composer.settings.server_address})"),
                ("what now", f"offer the seat: 'offer {game.name} {seat}' to {mailer.composer.settings.server_address} "
                             f"(or pbm game offer {game.name} {seat}): the available players are told and the first "
                             f"to send 'take {game.name}' plays it; or hand it to one player: "
                             f"pbm game replace {game.name} {seat} HANDLE"),
            ], now)


def resign(session: Session, mailer: Mailer, game: Game, acc: Account, now: datetime) -> str:
    rules = _turn_game(game, "resign")
    seat = _seat_of(rules, game, acc.handle)
    if seat is None:
        raise ServerRefused(f"you do not play in {game.name}; nothing was changed")
    if _open_seat(session, game, seat) is not None:
        raise ServerRefused(f"your seat in {game.name} already waits for a new player; nothing was changed")
    session.add(SeatOffer(game_id=game.id, seat=seat, reason="resigned", status="vacant", since=now))
    session.flush()
    audit(session, now, acc.handle, "resign", f"{game.name}: {seat}", game)
    _tell_gm_of_seat(session, mailer, game, seat, f"{seat} resigned", now)
    return (f"you have resigned from {game.name}; the game master is told and looks for a substitute. Until one "
            "takes your seat it stays in the game (its turns run without your orders, and they do not count "
            "against your reliability record); then your mail of this game stops")


def check_drops(session: Session, mailer: Mailer, game: Game, owed: dict[str, bool], now: datetime) -> list[str]:
    """After a turn run: the players of a game with ``drop_after=N`` who have
    now missed N turns of it in a row; the GM is told of each seat (once:
    when the count reaches N)."""
    if not game.drop_after:
        return []
    dropped = []
    for handle, sent in owed.items():
        if sent:
            continue
        acc = account_by_handle(session, handle)
        if acc is None or reliability.missed_here(session, game, acc.id) != game.drop_after:
            continue
        if _open_seat(session, game, handle) is not None:
            continue
        session.add(SeatOffer(game_id=game.id, seat=handle, reason="dropped", status="vacant", since=now))
        session.flush()
        audit(session, now, "system", "seat dropped", f"{game.name}: {handle} missed {game.drop_after} turns in a row",
              game)
        _tell_gm_of_seat(session, mailer, game, handle,
                         f"{handle} sent no orders for {game.drop_after} turns in a row (drop_after={game.drop_after})",
                         now)
        dropped.append(handle)
    return dropped


def offer(session: Session, mailer: Mailer, game: Game, seat_name: str, now: datetime, actor: str) -> str:
    """The GM offers a seat to the players standing by for the game's kind."""
    rules = _turn_game(game, "offer")
    seat = _seat_of(rules, game, seat_name)
    if seat is None:
        players = sorted(rules.players(game.state), key=str.lower)
        raise ServerRefused(f"{seat_name} holds no seat in {game.name}; seats: {', '.join(players) or 'none'}")
    row = _open_seat(session, game, seat)
    if row is not None and row.status == "offered":
        raise ServerRefused(f"the seat of {seat} in {game.name} is offered already (since {show_time(row.offered_at)})")
    if row is None:
        row = SeatOffer(game_id=game.id, seat=seat, reason="gm", status="offered", since=now)
        session.add(row)
    row.status, row.offered_at = "offered", now
    session.flush()
    audit(session, now, actor, "seat offer", f"{game.name}: {seat}", game)
    subs = standing_by(session, game)
    domain = mailer.composer.settings.domain
    text = (f"A seat of the {rules.title} game {game.name} is offered to the players standing by: the position of "
            f"{seat}, at {rules.turn_name} {game.turn}"
            + (f", next deadline {show_time(game.next_deadline)}" if game.next_deadline else "")
            + f".\n\nThe first to send 'take {game.name}' (to {game.name}@{domain} or "
            f"{mailer.composer.settings.server_address}, with your $$password$$) plays it: its position, holdings "
            f"and history are kept.\n\n'status {game.name}' and 'who {game.name}' show the game; 'unavailable' "
            "stops these offers.")
    if subs:
        mailer.send_notices(session, game, rules, [Notice(to=[a.handle for a, _ in subs],
                                                          subject=f"a seat is offered: {seat}", text=text)], now)
    return (f"{game.name}: the seat of {seat} is offered; "
            + (f"{len(subs)} available player{'s' if len(subs) != 1 else ''} told: "
               + ", ".join(f"{a.handle} ({r.text()})" for a, r in subs[:NAMED])
               if subs else f"nobody stands by for {game.kind} now; a player may still send 'take {game.name}'"))


def check_reliability(session: Session, game: Game, acc: Account, what: str) -> None:
    """Refuse ``acc`` below the game's ``min_reliability`` (new accounts pass)."""
    if not game.min_reliability:
        return
    rec = reliability.record_of(session, acc)
    if rec.below(game.min_reliability):
        raise ServerRefused(f"{game.name} takes players whose reliability is at least {game.min_reliability} %; "
                            f"yours is {rec.percent} % ({rec.text()}), so {what} is refused")


def take(session: Session, mailer: Mailer, game: Game, acc: Account, now: datetime) -> str:
    """The first ``take GAME`` of a seat offered gets it (decided once)."""
    rules = _turn_game(game, "take")
    # a seat whose player has left the game since (LEAVE, game remove) is no seat to take
    offered = [s for s in open_seats(session, game) if s.status == "offered" and _seat_of(rules, game, s.seat)]
    if not offered:
        raise ServerRefused(f"no seat of {game.name} is offered now, so there is nothing to take; "
                            f"the game master offers seats ('available {game.kind}' to be told when one is)")
    if _seat_of(rules, game, acc.handle) is not None:
        raise ServerRefused(f"you play in {game.name} already")
    check_reliability(session, game, acc, f"taking a seat of {game.name}")
    row = offered[0]
    won = session.execute(update(SeatOffer).where(SeatOffer.id == row.id, SeatOffer.status == "offered")
                          .values(status="taken", taken_by=acc.id, taken_at=now)
                          .execution_options(synchronize_session=False))
    if not getattr(won, "rowcount", 0):
        raise ServerRefused(f"the seat of {row.seat} in {game.name} was taken just now by another player")
    session.expire(row)
    was = row.seat
    roster.replace_player(session, mailer, game, was, acc.handle, now, acc.handle, by=f"{acc.handle} took it")
    tell_gm(session, mailer.composer, mailer.composer.settings.gm_address,
            f"{game.name}: {acc.handle} took the seat of {was}", [
                ("game", game.name), ("seat", was), ("new player", f"{acc.handle}: {reliability.record_of(session, acc).text()}"),
            ], now)
    return (f"the seat of {was} in {game.name} is yours: its position, holdings and history are kept; "
            f"mail your orders to {game.name}@{mailer.composer.settings.domain} with your $$password$$")


def close_seat(session: Session, game: Game, seat: str) -> None:
    """The GM replaced or removed the player of ``seat`` by hand: it needs no offer any more."""
    row = _open_seat(session, game, seat)
    if row is not None:
        row.status = "closed"


# -- missed orders (nmr) -------------------------------------------------------------
def extend_for_missing(session: Session, mailer: Mailer, game: Game, now: datetime) -> bool:
    """``nmr=extend`` at a passed deadline: when orders are missing from a
    player who sent orders in one of the game's last two turns, the deadline
    moves by ``grace`` (24 h when grace is 0), once per turn; that player
    and the GM are told.  True when it did."""
    if game.nmr != "extend" or game.nmr_extended == game.turn:
        return False
    rules = get_rules(game.kind)
    state = game.state
    try:
        players = list(rules.players(state))
    except Exception:
        return False
    absent = absent_handles(session, players, now)
    owed = reliability.duties(session, game, rules, state, absent)
    lately = reliability.sent_lately(session, game)
    late = sorted((h for h, sent in owed.items() if not sent and h.lower() in lately), key=str.lower)
    if not late:
        return False
    minutes = game.grace_minutes or DEFAULT_EXTENSION_MINUTES
    old = game.next_deadline
    game.next_deadline = max(now, old or now) + timedelta(minutes=minutes)
    game.nmr_extended = game.turn
    game.reminded_for = game.next_deadline  # the mail below is their reminder
    audit(session, now, "scheduler", "nmr extend",
          f"{game.name} {rules.turn_name} {game.turn}: no orders from {', '.join(late)}; deadline "
          f"{show_time(old)} -> {show_time(game.next_deadline)}", game)
    for h in late:
        acc = account_by_handle(session, h)
        text = (f"The deadline of {rules.turn_name} {game.turn} of {game.name} has passed without your orders. "
                f"This game gives one extension per {rules.turn_name} in that case (nmr=extend): the new "
                f"deadline is {show_time(game.next_deadline, acc.timezone if acc else None)} "
                f"({show_duration(minutes)} more). Mail your orders to {game.name}@{mailer.composer.settings.domain} "
                "with your $$password$$; at the new deadline the turn runs whatever is missing.")
        mailer.send_notices(session, game, rules, [Notice(to=[h], subject=f"{rules.turn_name} {game.turn}: "
                                                          "the deadline is extended for your orders", text=text)], now)
    tell_gm(session, mailer.composer, mailer.composer.settings.gm_address,
            f"{game.name}: {rules.turn_name} {game.turn} extended for missing orders", [
                ("game", game.name), ("missing orders from", ", ".join(late)),
                ("new deadline", f"{show_time(game.next_deadline)} ({show_duration(minutes)} more; once per "
                                 f"{rules.turn_name}: then the turn runs whatever is missing)"),
            ], now)
    return True
