"""Players' votes to extend a turn's deadline or pause a game (issue 44).

A player of a turn-based game mails ``vote extend 24h`` or ``vote pause 7d``
to the game; the others answer ``vote yes`` or ``vote no`` (a player may
change their answer while the vote is open).  The proposer's own vote is a
yes.  The game's rule (``votes=``, votesettings.py, fixed for a vote when it
is proposed) says how many of the players who are not away must say yes:
a majority, two thirds (the default) or all.  Players on vacation are not
counted unless they vote.

A vote is decided the moment its answer is certain: it passes when enough
say yes, fails when it can no longer pass; else it fails when it closes --
at the turn's deadline or 24 hours after it was proposed, whichever is
first (the scheduler closes it: :func:`due_work`).  A vote whose turn ran
before it was decided, or whose game was paused or ended meanwhile, is void.
One vote at a time in a game.  An extension moves the open turn's deadline
on; a pause pauses the game (gmdesk.pause) until the scheduler resumes it
when the time is up.  Every player is told when a vote opens and how it
ended, with who voted how.

Every decision is taken in one transaction with the ballot (or the
scheduler's close) that settles it, on the locked vote row, and only while
the vote is open: it is taken once.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import bindparam, func, select, union
from sqlalchemy.orm import Session

from games import get_rules
from pbm_server.base.durations import parse_duration, show_duration
from pbm_server.base.errors import ServerRefused
from pbm_server.base.localtime import show_time
from pbm_server.play import gmdesk, votesettings
from pbm_server.play.notices import Mailer, tell_players
from pbm_server.play.vacations import absent_handles
from pbm_server.store.lookup import audit
from pbm_server.store.models import Game, Vote, VoteSettings

#: the longest a vote stays open
OPEN_FOR = timedelta(hours=24)
#: the longest extension one vote may give
MAX_EXTEND = 7 * 24 * 60
#: the shortest extension or pause
MIN_MINUTES = 60
USAGE = ("expected: vote extend DURATION (e.g. vote extend 24h), vote pause DURATION (e.g. vote pause 7d), "
         "vote yes or vote no")
_RULE_NAMES = {"majority": "a majority", "two-thirds": "two thirds", "unanimous": "all"}


def needed(rule: str, voters: int) -> int:
    """How many yes votes of ``voters`` pass a vote under ``rule``."""
    if rule == "majority":
        return voters // 2 + 1
    if rule == "unanimous":
        return voters
    return (2 * voters + 2) // 3  # two thirds, rounded up


def open_vote(session: Session, game: Game, lock: bool = False) -> Vote | None:
    q = select(Vote).where(Vote.game_id == game.id, Vote.status == "open").order_by(Vote.id).limit(1)
    if lock:
        q = q.with_for_update().execution_options(populate_existing=True)
    return session.scalar(q)


def _lock_game(session: Session, game: Game) -> None:
    """The game's row locked and read again (PostgreSQL; SQLite has one writer):
    a vote decided here and a turn run by the scheduler take turns."""
    session.execute(select(Game).where(Game.id == game.id).with_for_update()
                    .execution_options(populate_existing=True)).scalar_one()


def _players(game: Game) -> list[str]:
    return list(get_rules(game.kind).players(game.state))


def _player(game: Game, handle: str) -> str:
    """The sender's handle as the game writes it; ServerRefused if they do not play."""
    for h in _players(game):
        if h.lower() == handle.lower():
            return h
    raise ServerRefused(f"you do not play in {game.name}: only its players vote")


def _what(vote: Vote, turn_name: str) -> str:
    if vote.kind == "extend":
        return f"extend the deadline of {turn_name} {vote.turn} by {show_duration(vote.minutes)}"
    return f"pause the game for {show_duration(vote.minutes)}"


def _year_paused(session: Session, game: Game, now: datetime) -> int:
    """Minutes of pause the players' votes gave ``game`` in this calendar year (UTC)."""
    start = datetime(now.astimezone(timezone.utc).year, 1, 1, tzinfo=timezone.utc)
    return int(session.scalar(select(func.coalesce(func.sum(Vote.minutes), 0)).where(
        Vote.game_id == game.id, Vote.kind == "pause", Vote.status == "passed", Vote.decided_at >= start)) or 0)


def _extensions(session: Session, game: Game) -> int:
    return int(session.scalar(select(func.count()).select_from(Vote).where(
        Vote.game_id == game.id, Vote.kind == "extend", Vote.status == "passed", Vote.turn == game.turn)) or 0)


def _refuse_unless_votes(session: Session, game: Game) -> VoteSettings:
    rules = get_rules(game.kind)
    if not rules.has_turns:
        raise ServerRefused(f"{rules.title} has no turns or deadlines, so there is nothing to extend or pause by a "
                            "vote; nothing was done")
    row = votesettings.of(session, game)
    if row.rule == "off":
        raise ServerRefused(f"votes are off in {game.name} (the game master's setting votes=off); nothing was done")
    return row


def propose(session: Session, mailer: Mailer, game: Game, handle: str, kind: str, amount: str | None,
            now: datetime) -> str:
    """``vote extend|pause DURATION`` (and ``vote end``, always refused) from ``handle``."""
    rules = get_rules(game.kind)
    row = _refuse_unless_votes(session, game)  # curio boards, votes=off
    if kind == "end":
        raise ServerRefused(f"{rules.title} has no draw or agreed end in its rules, so there is no vote to end "
                            f"{game.name}: it ends by its own rules ('help {game.kind}'), or the game master ends "
                            "it; nothing was done")
    _lock_game(session, game)
    who = _player(game, handle)
    if game.status != "running":
        raise ServerRefused(f"{game.name} is {game.status}: there is nothing to {kind} by a vote now")
    if amount is None:
        raise ServerRefused(f"how long? {USAGE}")
    minutes = parse_duration(amount)
    current = open_vote(session, game, lock=True)
    if current is not None:
        raise ServerRefused(
            f"a vote is already under way in {game.name}: {current.proposer}'s vote to "
            f"{_what(current, rules.turn_name)}, open until {show_time(current.closes_at)}; answer it with "
            "'vote yes' or 'vote no'. One vote at a time: propose yours when it is decided")
    if minutes < MIN_MINUTES:
        raise ServerRefused(f"{amount} is too short: a vote {kind}s by 1h at least")
    if kind == "extend":
        if game.next_deadline is None:
            raise ServerRefused(f"{game.name} has no deadline now, so there is none to extend")
        if game.next_deadline <= now:
            raise ServerRefused(f"the deadline of {rules.turn_name} {game.turn} has passed "
                                f"({show_time(game.next_deadline)}): it can no longer be extended")
        if minutes > MAX_EXTEND:
            raise ServerRefused(f"{amount} is too long: one vote extends by 7d at most")
        done = _extensions(session, game)
        if done >= row.max_extensions:
            raise ServerRefused(
                f"{rules.turn_name} {game.turn} of {game.name} has been extended {done} time(s) by vote already, "
                f"the most the game allows in one {rules.turn_name} (max_extensions={row.max_extensions}); "
                "nothing was done")
    else:
        used = _year_paused(session, game, now)
        left = max(row.max_pause_minutes - used, 0)
        if minutes > left:
            raise ServerRefused(
                f"{game.name} may be paused by vote for {show_duration(row.max_pause_minutes)} a year "
                f"(max_pause); {show_duration(used)} of that has been used this year, so at most "
                f"{show_duration(left)} is left; nothing was done")
    closes = now + OPEN_FOR
    if game.next_deadline is not None and game.next_deadline > now:
        closes = min(closes, game.next_deadline)
    vote = Vote(game_id=game.id, kind=kind, minutes=minutes, turn=game.turn, proposer=who, rule=row.rule,
                opened_at=now, closes_at=closes, ballots={who: "yes"}, status="open")
    session.add(vote)
    session.flush()
    votesettings.touch(game, now)
    audit(session, now, who, "vote", f"{game.name}: {who} proposes to {_what(vote, rules.turn_name)}", game)
    voters = _voters(session, game, vote, now)
    need = needed(vote.rule, len(voters))
    domain = mailer.composer.settings.domain
    if _decide(session, mailer, game, vote, now) is None:
        tell_players(session, mailer, game, f"{game.name}: a vote to {kind} " + (
            f"{rules.turn_name} {game.turn}" if kind == "extend" else "the game"),
            f"{who} proposes to {_what(vote, rules.turn_name)}"
            + (f" (from {show_time(game.next_deadline)} to {show_time(game.next_deadline + timedelta(minutes=minutes))})"
               if kind == "extend" and game.next_deadline else "")
            + f".\n\nAnswer with 'vote yes' or 'vote no' and your $$password$$ to {game.name}@{domain} before "
            f"{show_time(closes)}. It passes when {_RULE_NAMES[vote.rule]} of the players who are not away say yes: "
            f"{need} of {len(voters)} now; {who}'s own vote counts as a yes. If too few say yes by then, "
            "nothing changes.", now)
        return (f"your vote to {_what(vote, rules.turn_name)} is open until {show_time(closes)}: it needs {need} "
                f"yes of {len(voters)} ({vote.rule}); every player has been asked")
    return f"your vote to {_what(vote, rules.turn_name)} {vote.status}: {vote.outcome}"


def ballot(session: Session, mailer: Mailer, game: Game, handle: str, yes: bool, now: datetime) -> str:
    """``vote yes`` / ``vote no`` from ``handle``."""
    rules = get_rules(game.kind)
    _refuse_unless_votes(session, game)
    _lock_game(session, game)
    who = _player(game, handle)
    vote = open_vote(session, game, lock=True)
    if vote is None:
        raise ServerRefused(f"there is no vote under way in {game.name}; propose one with 'vote extend DURATION' "
                            "or 'vote pause DURATION'")
    if _void_if_stale(session, mailer, game, vote, now):
        raise ServerRefused(f"the vote to {_what(vote, rules.turn_name)} is void: {vote.outcome}")
    answer = "yes" if yes else "no"
    was = vote.ballots.get(who)
    vote.ballots = {**vote.ballots, who: answer}
    votesettings.touch(game, now)
    audit(session, now, who, "vote", f"{game.name}: {who} votes {answer}", game)
    decided = _decide(session, mailer, game, vote, now)
    said = (f"your vote is now {answer} (it was {was})" if was and was != answer else f"you vote {answer}")
    if decided is None:
        voters = _voters(session, game, vote, now)
        yes_n = sum(1 for v in vote.ballots.values() if v == "yes")
        return (f"{said} on {vote.proposer}'s vote to {_what(vote, rules.turn_name)}: {yes_n} yes of the "
                f"{needed(vote.rule, len(voters))} needed so far; it closes {show_time(vote.closes_at)}")
    return f"{said}; the vote to {_what(vote, rules.turn_name)} {vote.status}: {vote.outcome}"


def _voters(session: Session, game: Game, vote: Vote, now: datetime) -> list[str]:
    """Who counts: the players not away, and every player who voted."""
    players = _players(game)
    away = {h.lower() for h in absent_handles(session, players, now)}
    voted = {h.lower() for h in vote.ballots}
    return [h for h in players if h.lower() not in away or h.lower() in voted]


def _void_if_stale(session: Session, mailer: Mailer, game: Game, vote: Vote, now: datetime) -> bool:
    """The vote's turn ran, or its game stopped running, before it was decided: void (the players told)."""
    rules = get_rules(game.kind)
    if game.status != "running":
        why = f"{game.name} is {game.status}"
    elif vote.turn != game.turn:
        why = f"{rules.turn_name} {vote.turn} ran before it was decided"
    else:
        return False
    _close(session, mailer, game, vote, "void", why, now)
    return True


def _decide(session: Session, mailer: Mailer, game: Game, vote: Vote, now: datetime,
            closing: bool = False) -> str | None:
    """Pass or fail the vote if its answer is certain (``closing``: its time
    is up, so it fails unless it passed); returns its status, None while open."""
    voters = _voters(session, game, vote, now)
    keys = {h.lower() for h in voters}
    yes = [h for h, v in vote.ballots.items() if v == "yes" and h.lower() in keys]
    no = [h for h, v in vote.ballots.items() if v == "no" and h.lower() in keys]
    need = needed(vote.rule, len(voters))
    count = f"{len(yes)} yes, {len(no)} no of {len(voters)} players ({need} yes needed, {vote.rule})"
    if len(yes) >= need:
        _close(session, mailer, game, vote, "passed", count, now)
    elif len(no) > len(voters) - need:
        _close(session, mailer, game, vote, "failed", count + ": it can no longer pass", now)
    elif closing:
        _close(session, mailer, game, vote, "failed", count + f": too few by {show_time(vote.closes_at)}", now)
    else:
        return None
    return vote.status


def _close(session: Session, mailer: Mailer, game: Game, vote: Vote, status: str, why: str, now: datetime) -> None:
    """The vote decided ``status``: done, and every player told who voted how."""
    rules = get_rules(game.kind)
    vote.status, vote.decided_at, vote.outcome = status, now, why
    votesettings.touch(game, now)
    players = _players(game)
    away = {h.lower() for h in absent_handles(session, players, now)}
    lines = []
    for h in players:
        v = vote.ballots.get(h)
        lines.append(f"  {h}: {v}" + (" (proposed it)" if h == vote.proposer else "") if v else
                     f"  {h}: " + ("away, not counted" if h.lower() in away else "did not vote"))
    what = _what(vote, rules.turn_name)
    after = ""
    if status == "passed" and vote.kind == "extend" and game.next_deadline is not None:
        game.next_deadline = game.next_deadline + timedelta(minutes=vote.minutes)
        after = f"\n\nThe deadline of {rules.turn_name} {game.turn} is now {show_time(game.next_deadline)}."
    audit(session, now, "vote", f"vote {status}", f"{game.name}: {vote.proposer}'s vote to {what}: {why}", game)
    tell_players(session, mailer, game, f"{game.name}: the vote to {what} {status}",
                 f"{vote.proposer}'s vote to {what} {status}: {why}.{after}\n\nWho voted how:\n" + "\n".join(lines), now)
    if status == "passed" and vote.kind == "pause":
        until = now + timedelta(minutes=vote.minutes)
        gmdesk.pause(session, mailer, game, now, "vote", vote=(until, (
            f"The players have voted to pause {game.name} for {show_duration(vote.minutes)}: no turn runs and no "
            f"orders are taken until {show_time(until)}, when it runs again by itself (or sooner, if the game master "
            "resumes it).")))


def due_work(session: Session, mailer: Mailer, game: Game, now: datetime) -> int | None:
    """The scheduler's step for a game: its open vote closed if its time is
    up (or void if its turn ran), a pause by vote ended when its time is up.
    None when there was nothing to do."""
    done = 0
    vote = open_vote(session, game, lock=True)
    if vote is not None and not _void_if_stale(session, mailer, game, vote, now) and vote.closes_at <= now:
        _decide(session, mailer, game, vote, now, closing=True)
        done += 1
    elif vote is not None and vote.status == "void":
        done += 1
    row = session.get(VoteSettings, game.id)
    if (row is not None and row.paused_by == "vote" and row.paused_until is not None and row.paused_until <= now
            and game.status == "paused"):
        gmdesk.resume(session, mailer, game, now, "vote", said=(
            f"The pause of {game.name} the players voted for is over: it runs again."))
        done += 1
    return done or None


#: the games with a vote whose time is up, a pause by vote that is over, or an
#: open vote whose turn has run (void at once: turns run by the scheduler or
#: the GM); one Core statement, asked every scheduler pass
DUE_GAMES = union(
    select(Vote.game_id).where(Vote.status == "open", Vote.closes_at <= bindparam("now")),
    select(VoteSettings.game_id).where(VoteSettings.paused_until <= bindparam("now"), VoteSettings.paused_by == "vote"),
    select(Vote.game_id).join(Game, Game.id == Vote.game_id).where(
        Vote.status == "open", (Vote.turn != Game.turn) | (Game.status != "running")),
)


def due_games(session: Session, now: datetime) -> list[int]:
    """The games with a vote whose time is up, or a pause by vote that is over."""
    return sorted(session.connection().execute(DUE_GAMES, {"now": now}).scalars())


def shown(session: Session, game: Game, tz: str | None = None) -> list[str]:
    """What ``status`` and the game's page say of votes and pauses."""
    rules = get_rules(game.kind)
    if not rules.has_turns:
        return []
    out = []
    row = session.get(VoteSettings, game.id)
    if game.status == "paused" and row is not None and row.paused_by == "gm" and row.paused_at is not None:
        out.append(f"Paused by the game master since {show_time(row.paused_at, tz)}.")
    elif game.status == "paused" and row is not None and row.paused_by == "vote" and row.paused_until is not None:
        out.append(f"Paused by a vote of the players until {show_time(row.paused_until, tz)}.")
    vote = open_vote(session, game)
    if vote is not None:
        yes = sorted(h for h, v in vote.ballots.items() if v == "yes")
        no = sorted(h for h, v in vote.ballots.items() if v == "no")
        out.append(f"Vote under way: {vote.proposer} proposes to {_what(vote, rules.turn_name)} "
                   f"({vote.rule}; open until {show_time(vote.closes_at, tz)}); yes: {', '.join(yes) or 'nobody'}; "
                   f"no: {', '.join(no) or 'nobody'}.")
    return out
