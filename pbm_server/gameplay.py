"""Running a game's rules for the server: creating games, applying a mail's
commands, running a turn, ticks.  Here the pure game meets the database: state
is loaded, handed to the rules with the time and a seeded generator, stored
back with a new version, and what the outcome says is turned into memberships,
order rows, snapshots, audit entries and outbox mails.

All functions take the caller's session: the caller owns the transaction, so a
mail or a turn is all-or-nothing.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
from datetime import datetime, timezone
from typing import Any, Callable
from zoneinfo import ZoneInfo

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from games import KINDS, get_rules
from games.base import ALL_PLAYERS, Context, GameError, Notice, Outcome, Rules
from pbm_server.compose import Composer, Rendered
from pbm_server.deadlines import DeadlineError, parse_deadline
from pbm_server.models import Account, AuditEntry, Game, Membership, Order, Snapshot
from pbm_server.outbound import enqueue

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{1,40}$")
RESERVED_NAMES = {"pbm", "postmaster", "abuse", "mailer-daemon", "root", "gm", "admin"}


class DeskError(Exception):
    """A GM/CLI request that cannot be done; the message says why."""


# -- seeds -----------------------------------------------------------------------
def new_seed() -> str:
    return secrets.token_hex(32)


def seed_hash(seed_hex: str) -> str:
    return hashlib.sha256(bytes.fromhex(seed_hex)).hexdigest()


def rng_from_seed(seed_hex: str) -> random.Random:
    return random.Random(int.from_bytes(bytes.fromhex(seed_hex), "big"))


def turn_rng(game: Game) -> random.Random:
    """The open turn's random stream, where the last mail or run left it.

    Every random draw of a turn -- the dice of the mails that arrive during
    it and those of the turn run itself -- comes, in order, from one
    generator seeded with the turn seed; so once the seed is revealed anyone
    can replay every draw of the turn (docs/randomness.md)."""
    rng = rng_from_seed(game.turn_seed)
    if game.rng_state:
        version, internal, gauss = game.rng_state
        rng.setstate((version, tuple(internal), gauss))
    return rng


def fresh_rng() -> random.Random:
    """A generator for a game without turns (curio): nothing is committed or
    revealed for it, so each use gets 256 fresh bits from the OS (secrets),
    and no output of one use tells anything about the next."""
    return random.Random(secrets.randbits(256))


def keep_rng(game: Game, rng: random.Random) -> None:
    version, internal, gauss = rng.getstate()
    stored = [version, list(internal), gauss]
    if stored != game.rng_state:
        game.rng_state = stored


# -- time zones, vacations ---------------------------------------------------------
def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except Exception:
        return ZoneInfo("UTC")


def show_time(moment: datetime | None, tz: str | None = None) -> str:
    """A deadline for a mail: UTC, and the reader's own time zone if set."""
    if moment is None:
        return "none"
    text = moment.astimezone(timezone.utc).strftime("%a %Y-%m-%d %H:%M UTC")
    if tz and tz.upper() != "UTC":
        text += moment.astimezone(zone(tz)).strftime(f" (%a %Y-%m-%d %H:%M {tz})")
    return text


def is_absent(acc: Account, moment: datetime) -> bool:
    return bool(acc.absent_from and acc.absent_to and acc.absent_from <= moment < acc.absent_to)


def absent_handles(session: Session, handles: list[str], moment: datetime) -> frozenset[str]:
    """The handles (as given) whose account is on vacation at ``moment``."""
    out = set()
    for h in handles:
        acc = account_by_handle(session, h)
        if acc is not None and is_absent(acc, moment):
            out.add(h)
    return frozenset(out)


# -- small helpers ---------------------------------------------------------------
def audit(session: Session, now: datetime, actor: str, action: str, detail: str = "", game: Game | None = None) -> None:
    session.add(AuditEntry(at=now, actor=actor, game_id=game.id if game else None, action=action, detail=detail))


def find_game(session: Session, name: str) -> Game | None:
    return session.scalar(select(Game).where(Game.name == name.lower()))


def account_by_handle(session: Session, handle: str) -> Account | None:
    return session.scalar(select(Account).where(Account.handle_key == handle.lower()))


def account_by_email(session: Session, email: str) -> Account | None:
    return session.scalar(select(Account).where(Account.email == email.lower()))


def parse_options(rules: Rules, raw: dict[str, str]) -> dict[str, Any]:
    known = {o.name: o for o in rules.options}
    out = {o.name: o.default for o in rules.options}
    for key, value in raw.items():
        if key not in known:
            names = ", ".join(sorted(known)) or "none"
            raise DeskError(f"{rules.kind} has no option {key!r} (options: {names})")
        try:
            out[key] = known[key].parse(value)
        except (ValueError, TypeError) as exc:
            raise DeskError(f"option {key}={value!r}: {exc} ({known[key].help})") from None
    return out


def _save(game: Game, state: dict, now: datetime) -> None:
    # a JSON round trip: the stored document is exactly what the next load sees
    game.state = json.loads(json.dumps(state))
    game.version += 1
    game.updated_at = now


def set_deadline(game: Game, expr: str | None, now: datetime) -> None:
    if not expr or expr.lower() == "none":
        game.deadline, game.next_deadline = None, None
        return
    try:
        dl = parse_deadline(expr)
        game.deadline = expr
        game.next_deadline = dl.next_after(now, game.created_at)
    except DeadlineError as exc:
        raise DeskError(str(exc)) from None


def create_game(
    session: Session,
    kind: str,
    name: str,
    raw_options: dict[str, str],
    deadline: str | None,
    now: datetime,
    actor: str = "cli",
    state: dict | None = None,
) -> Game:
    name = name.lower()
    if kind not in KINDS:
        raise DeskError(f"unknown game kind {kind!r}; kinds: {', '.join(KINDS)}")
    if not NAME_RE.match(name) or name in RESERVED_NAMES:
        raise DeskError(
            f"{name!r} cannot be a game name: use 2-41 letters, digits, '-' or '_', starting with a letter "
            f"(not {', '.join(sorted(RESERVED_NAMES))})"
        )
    if find_game(session, name):
        raise DeskError(f"a game named {name!r} exists already")
    rules = get_rules(kind)
    options = parse_options(rules, raw_options)
    seed = new_seed()
    if state is None:
        try:
            state = rules.new_game(options, Context(now=now, rng=rng_from_seed(seed), turn=1, game_name=name))
        except GameError as exc:
            raise DeskError(str(exc)) from None
    game = Game(
        name=name,
        kind=kind,
        options=options,
        state=json.loads(json.dumps(state)),
        version=1,
        turn=1,
        status="running",
        turn_seed=new_seed(),
        created_at=now,
        updated_at=now,
    )
    if rules.has_turns:
        set_deadline(game, deadline if deadline is not None else rules.default_deadline, now)
    elif deadline:
        raise DeskError(f"{rules.title} has no turns, so it takes no deadline")
    session.add(game)
    session.flush()
    session.add(Snapshot(game_id=game.id, turn=1, phase="created", version=1, state=game.state, created_at=now))
    audit(session, now, actor, "game new", f"{kind} {name} options={json.dumps(options)} deadline={game.deadline}", game)
    return game


# -- outcomes -> database and mail -------------------------------------------------
class Mailer:
    """Turns Notices into outbox rows (one per recipient)."""

    def __init__(self, composer: Composer):
        self.composer = composer

    def recipients(self, session: Session, rules: Rules, state: dict, to: list[str]) -> list[Account]:
        handles: list[str] = []
        for h in to:
            handles.extend(rules.players(state) if h == ALL_PLAYERS else [h])
        seen, accounts = set(), []
        for h in handles:
            if h.lower() in seen:
                continue
            seen.add(h.lower())
            acc = account_by_handle(session, h)
            if acc is not None:
                accounts.append(acc)
        return accounts

    def send_notices(
        self,
        session: Session,
        game: Game,
        rules: Rules,
        notices: list[Notice],
        now: datetime,
        *,
        inbound_id: int | None = None,
        footer: str | Callable[[Account], str] = "",
        secrets_: set[str] = frozenset(),
        skip: set[str] = frozenset(),
    ) -> list[tuple[Account, Rendered, str]]:
        """``footer``: text added to every mail, or a function of the
        recipient's account giving it (e.g. the deadline in their time zone).
        Returns (account, body without a per-recipient footer, kind)."""
        sent = []
        for notice in notices:
            for acc in self.recipients(session, rules, game.state, notice.to):
                if acc.handle_key in skip:
                    continue
                data = dict(notice.data)
                if notice.template:
                    data.setdefault("viewer", acc.handle)
                    body = self.composer.render(notice.template, data, game.kind)
                else:
                    body = Rendered(notice.text)
                kept = body
                extra = footer(acc) if callable(footer) else footer
                if extra:
                    body = Rendered(body.text + "\n\n" + extra, body.html)
                    if not callable(footer):
                        kept = body
                mid, raw = self.composer.message(
                    to_addr=acc.email,
                    to_name=acc.handle,
                    from_local=game.name,
                    subject=notice.subject,
                    body=body,
                    auto="auto-generated",  # a notice answers no mail of its recipient (RFC 3834)
                    now=now,
                    secrets=set(secrets_),
                )
                enqueue(session, to_addr=acc.email, message_id=mid, raw=raw, kind="report" if notice.kind == "report" else "notice", now=now, inbound_id=inbound_id, game_id=game.id)
                sent.append((acc, kept, notice.kind))
        return sent


def record_outcome(session: Session, game: Game, outcome: Outcome, now: datetime, actor: str, inbound_id: int | None = None) -> None:
    """Memberships, orders and audit lines of an outcome (not the notices)."""
    for handle in outcome.joined:
        acc = account_by_handle(session, handle)
        if acc is None:
            continue
        m = session.scalar(select(Membership).where(Membership.game_id == game.id, Membership.account_id == acc.id, Membership.role == "player"))
        if m is None:
            session.add(Membership(game_id=game.id, account_id=acc.id, role="player", joined_at=now))
        else:
            m.joined_at, m.left_at = now, None
    for handle in outcome.left:
        acc = account_by_handle(session, handle)
        if acc is None:
            continue
        m = session.scalar(select(Membership).where(Membership.game_id == game.id, Membership.account_id == acc.id, Membership.role == "player"))
        if m is not None:
            m.left_at = now
    for handle, lines in outcome.orders.items():
        row = session.scalar(select(Order).where(Order.game_id == game.id, Order.handle == handle, Order.turn == game.turn))
        if row is None:
            session.add(Order(game_id=game.id, handle=handle, turn=game.turn, lines=list(lines), received_at=now, inbound_id=inbound_id))
        else:
            row.lines, row.received_at, row.inbound_id = list(lines), now, inbound_id
    for line in outcome.audit:
        audit(session, now, actor, "game", line, game)
    if outcome.finished:
        game.status = "finished"
        game.next_deadline = None


def seed_footer(game: Game, revealed: str | None) -> str:
    lines = []
    name = get_rules(game.kind).turn_name
    if revealed:
        lines.append(f"Random seed of {name} {game.turn - 1}: {revealed}")
        lines.append(f"  (its SHA-256, published before the {name}: {seed_hash(revealed)})")
    if game.status != "finished":
        lines.append(f"SHA-256 of the seed of {name} {game.turn}: {seed_hash(game.turn_seed)}")
    return "\n".join(lines)


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
    if not rules.has_turns:
        raise DeskError(f"{rules.title} has no turns: moves take effect when they arrive")
    if game.status == "finished":
        raise DeskError(f"{game.name} is finished")
    if expected_turn is not None and expected_turn != game.turn:
        raise DeskError(f"{game.name} is at {rules.turn_name} {game.turn}, not {expected_turn}: nothing was run")
    turn, seed = game.turn, game.turn_seed
    session.add(
        Snapshot(
            game_id=game.id, turn=turn, phase="before", version=game.version, state=game.state, created_at=now,
            rng={"seed": seed, "state": game.rng_state},
        )
    )
    state = json.loads(json.dumps(game.state))
    try:
        players = list(rules.players(state))
        waiting = list(rules.waiting_for(state))
    except Exception:
        players, waiting = [], []
    absent = absent_handles(session, players, now)
    absent_keys = {h.lower() for h in absent}
    no_orders = [h for h in waiting if h.lower() not in absent_keys]
    rng = turn_rng(game)
    ctx = Context(now=now, rng=rng, turn=turn, game_name=game.name, absent=absent)
    try:
        outcome = rules.run_turn(state, ctx)
    except GameError as exc:
        raise DeskError(str(exc)) from None
    _save(game, outcome.state, now)
    revealed = None
    if outcome.turn_done:
        game.turn += 1
        game.turn_seed = new_seed()
        game.rng_state = None
        revealed = seed
    else:
        keep_rng(game, rng)
    record_outcome(session, game, outcome, now, actor)
    if game.deadline and game.status != "finished":
        # the deadline of this turn is used up, also when the turn ran early
        set_deadline(game, game.deadline, max(now, game.next_deadline or now))
    common = []
    if outcome.turn_done and no_orders:
        common.append(f"No orders for {rules.turn_name} {turn} from: {', '.join(sorted(no_orders, key=str.lower))}")
    if outcome.turn_done and absent:
        common.append(f"On vacation (kept out of the no-order rules): {', '.join(sorted(absent, key=str.lower))}")
    common.append(seed_footer(game, revealed))
    common_text = "\n".join(common)

    def footer(acc: Account) -> str:
        if game.next_deadline is None:
            return common_text
        return common_text + f"\nNext deadline: {show_time(game.next_deadline, acc.timezone)}"

    sent = mailer.send_notices(session, game, rules, outcome.notices, now, footer=footer)
    reports: dict[str, str] = {}
    for acc, body, kind in sent:
        if kind == "report":
            text = body.text + "\n\n" + common_text
            reports[acc.handle_key] = reports[acc.handle_key] + "\n\n" + text if acc.handle_key in reports else text
    copies = set(reports.values())
    to_all = all(n.to == [ALL_PLAYERS] for n in outcome.notices if n.kind == "report")
    if len(copies) == 1 and to_all:
        report = copies.pop()  # everybody got the same: it is public
    elif not reports and outcome.notices and outcome.notices[0].text:
        report = outcome.notices[0].text + "\n\n" + common_text
    else:
        report = None
    session.add(
        Snapshot(
            game_id=game.id, turn=turn, phase="after", version=game.version, state=game.state, seed=revealed,
            report=report, reports=reports or None, created_at=now,
        )
    )
    detail = f"{game.name} {rules.turn_name} {turn}" + ("" if outcome.turn_done else " (the turn stays open)")
    if no_orders and outcome.turn_done:
        detail += f"; no orders from {', '.join(no_orders)}"
    audit(session, now, actor, "turn run", detail, game)
    return outcome


def rollback(session: Session, game: Game, mailer: Mailer, turn: int, now: datetime, actor: str) -> Snapshot:
    """Put the game back as it was just before ``turn`` was processed: its
    state, turn number, turn seed and random stream; orders held in the game
    state are kept.  The players are told.  Returns the snapshot restored."""
    rules = get_rules(game.kind)
    if not rules.has_turns:
        raise DeskError(f"{rules.title} has no turns to roll back")
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
    if turn > game.turn or not ran:
        raise DeskError(
            f"{game.name} has no processed {rules.turn_name} {turn} to roll back "
            f"(now open: {rules.turn_name} {game.turn}); nothing was changed"
        )
    current = game.turn
    game.state = json.loads(json.dumps(snap.state))
    game.version += 1
    game.updated_at = now
    game.turn = turn
    game.turn_seed = (snap.rng or {}).get("seed") or game.turn_seed
    game.rng_state = (snap.rng or {}).get("state")
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
    session.add(Snapshot(game_id=game.id, turn=turn, phase="rollback", version=game.version, state=game.state, created_at=now))
    audit(session, now, actor, "turn rollback", f"{game.name} back to before {rules.turn_name} {turn} (was at {current})", game)
    text = (
        f"The game master has rolled {game.name} back to the moment before {rules.turn_name} {turn} was processed. "
        f"The orders held for {rules.turn_name} {turn} are kept; you may change them until the turn runs again.\n\n"
        f"The seed of {rules.turn_name} {turn} stays the one whose SHA-256 was published before it: "
        f"{seed_hash(game.turn_seed)}, so running the turn again draws the same random numbers."
    )

    def footer(acc: Account) -> str:
        return f"Next deadline: {show_time(game.next_deadline, acc.timezone)}" if game.next_deadline else ""

    mailer.send_notices(
        session, game, rules, [Notice(to=[ALL_PLAYERS], subject=f"{game.name}: {rules.turn_name} {turn} rolled back", text=text)],
        now, footer=footer,
    )
    return snap


def tick(session: Session, game: Game, mailer: Mailer, now: datetime) -> bool:
    rules = get_rules(game.kind)
    state = json.loads(json.dumps(game.state))
    rng = turn_rng(game) if rules.has_turns else fresh_rng()
    outcome = rules.tick(state, Context(now=now, rng=rng, turn=game.turn, game_name=game.name))
    if outcome is None:
        return False
    if rules.has_turns:
        keep_rng(game, rng)
    _save(game, outcome.state, now)
    record_outcome(session, game, outcome, now, "scheduler")
    mailer.send_notices(session, game, rules, outcome.notices, now)
    return True


def apply_commands(
    session: Session, game: Game, rules: Rules, commands, ctx: Context, inbound_id: int | None, gm_actor: str | None = None
) -> Outcome:
    """A mail's (or the GM's) command lines through the game.  Lines run as
    the game master are written to the audit log (``gm_actor``: who)."""
    state = json.loads(json.dumps(game.state))
    # the dice come from the turn's stream, whatever generator the caller made;
    # a game without turns has no published stream: fresh OS randomness each time
    ctx.rng = turn_rng(game) if rules.has_turns else fresh_rng()
    outcome = rules.apply(state, commands, ctx)
    if rules.has_turns:
        keep_rng(game, ctx.rng)
    _save(game, outcome.state, ctx.now)
    actor = ctx.actor.handle if ctx.actor and ctx.actor.handle else "unknown"
    record_outcome(session, game, outcome, ctx.now, "gm" if ctx.actor and ctx.actor.is_gm else actor, inbound_id)
    if ctx.actor and ctx.actor.is_gm and commands:
        how = f" (mail {inbound_id})" if inbound_id else ""
        audit(session, ctx.now, gm_actor or ctx.actor.handle or "gm", "game do",
              f"{game.name}: " + " | ".join(c.text for c in commands) + how, game)
    return outcome


def player_count(session: Session, game: Game) -> int:
    try:
        return len(get_rules(game.kind).players(game.state))
    except Exception:
        return session.scalar(select(func.count()).select_from(Membership).where(Membership.game_id == game.id, Membership.left_at.is_(None)))
