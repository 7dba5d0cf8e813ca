"""The server's tables (SQLAlchemy 2.0).  Every change is an Alembic migration
under migrations/versions/.  Game state itself is a JSON document owned by the
game package; the server only stores it."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    delete,
    false,
    select,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, object_session, relationship
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.sql.functions import FunctionElement


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps naive text)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database")
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc)


class minutes_before(FunctionElement[datetime]):  # noqa: N801 (a SQL function, named as one)
    """``minutes_before(moment, minutes)``: the moment that many minutes
    earlier, computed by the database (each its own way).  On SQLite the
    result drops the fraction of a second: up to a second early, so a filter
    ``minutes_before(...) <= now`` may take a row a second too soon -- use it
    to pick candidates that Python then judges exactly."""

    type = UTCDateTime()
    name = "minutes_before"
    inherit_cache = True


@compiles(minutes_before, "sqlite")
def _minutes_before_sqlite(element: minutes_before, compiler: Any, **kw: Any) -> str:
    moment, minutes = (compiler.process(c, **kw) for c in element.clauses)
    return f"datetime({moment}, '-' || ({minutes}) || ' minutes')"


@compiles(minutes_before)
def _minutes_before(element: minutes_before, compiler: Any, **kw: Any) -> str:
    moment, minutes = (compiler.process(c, **kw) for c in element.clauses)
    return f"({moment} - ({minutes}) * INTERVAL '1 minute')"


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UTCDateTime}


def table(model: type[Base]) -> Table:
    """A model's table, for the plain (Core) statements of the hot paths."""
    return cast(Table, model.__table__)


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(primary_key=True)
    handle: Mapped[str] = mapped_column(String(32))
    #: lower-cased handle: handles are unique without regard to case
    handle_key: Mapped[str] = mapped_column(String(32), unique=True)
    #: games.names.name_key(handle): handles that look alike (aIice, alice) share it
    handle_skeleton: Mapped[str] = mapped_column(String(128), index=True)
    #: lower-cased address the account is bound to
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    timezone: Mapped[str | None] = mapped_column(String(64))
    absent_from: Mapped[datetime | None]
    absent_to: Mapped[datetime | None]
    #: alerts (mail/alerts.py): the URL they are posted to (None: no alerts), the
    #: HMAC-SHA256 key of the signed generic JSON, and why the channel stopped
    #: (a 4xx from the target; set again to restart it)
    notify_url: Mapped[str | None] = mapped_column(String(400))
    notify_secret: Mapped[str | None] = mapped_column(String(64))
    notify_error: Mapped[str | None] = mapped_column(Text)


class Game(Base):
    __tablename__ = "games"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: lower-case; the game listens at NAME@DOMAIN
    name: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: the state document as last written whole, in a row of its own
    #: (GameDocument), loaded only when read.  The game's state is this
    #: document with its entries (StateEntry) laid over it: read and write it
    #: as ``state``.  The worker keeps recent versions decoded in memory
    #: (statecache.py).
    document: Mapped[GameDocument] = relationship(lazy="select", cascade="all, delete-orphan",
                                                  passive_deletes=True)
    #: bumped on every change of state
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: the turn now open for orders (1-based)
    turn: Mapped[int] = mapped_column(Integer, default=1)
    #: running | paused | finished
    status: Mapped[str] = mapped_column(String(16), default="running")
    deadline: Mapped[str | None] = mapped_column(String(200))
    next_deadline: Mapped[datetime | None]
    #: secret seed of the open turn (hex); its SHA-256 is published before the turn
    turn_seed: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    #: run the turn as soon as every active player (not on vacation) has sent orders
    early: Mapped[bool] = mapped_column(Boolean, default=False)
    #: after the deadline, wait up to this long for missing orders
    grace_minutes: Mapped[int] = mapped_column(Integer, default=0)
    #: remind players without orders this long before the deadline (0: never)
    remind_minutes: Mapped[int] = mapped_column(Integer, default=1440)
    #: the deadline the reminders were sent for (sent once per deadline)
    reminded_for: Mapped[datetime | None]
    #: game.version when the turn was last run early (no retry until the state changes)
    early_version: Mapped[int | None] = mapped_column(Integer)
    #: position of the open turn's random stream (random.Random.getstate());
    #: None: the stream starts at the turn seed
    rng_state: Mapped[list[Any] | None] = mapped_column(JSON)
    #: press between the players (pbm_server/play/press.py): on | off | broadcast (PRESS TO ALL only)
    press_mode: Mapped[str] = mapped_column(String(16), default="on", server_default="on")
    #: grey press: recipients are not told who sent a message (the GM is)
    press_anonymous: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: no public pages (the GM's `pbm game private NAME`): they answer 404
    private: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: PRESS TO ALL is public (the game's page and feed) while on (``pbm game set NAME public_press=on``)
    public_press: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: the text the GM set for ``info NAME`` (``pbm game info NAME TEXT``); None: none
    info: Mapped[str | None] = mapped_column(Text)
    #: most players the game takes (``pbm game set NAME seats=N``): a JOIN beyond
    #: it waits on the waiting list (WaitingEntry); None: no limit
    seats: Mapped[int | None] = mapped_column(Integer)
    #: free the seat of a player who missed this many turns in a row (the GM is
    #: told and may offer it, play/people.py); None: never
    drop_after: Mapped[int | None] = mapped_column(Integer)
    #: missed orders at the deadline: "run" the turn anyway, or "extend" once per turn
    nmr: Mapped[str] = mapped_column(String(16), default="run", server_default="run")
    #: the turn whose automatic extension (nmr=extend) was given
    nmr_extended: Mapped[int | None] = mapped_column(Integer)
    #: a JOIN from an account whose reliability (percent) is below this is refused; None: any
    min_reliability: Mapped[int | None] = mapped_column(Integer)
    #: alerts (mail/alerts.py): the URL they are posted to (None: no alerts), the
    #: HMAC-SHA256 key of the signed generic JSON, and why the channel stopped
    #: (a 4xx from the target; set again to restart it)
    notify_url: Mapped[str | None] = mapped_column(String(400))
    notify_secret: Mapped[str | None] = mapped_column(String(64))
    notify_error: Mapped[str | None] = mapped_column(Text)

    @property
    def base_state(self) -> dict[str, Any]:
        """The state document as last written whole (without its entries)."""
        return self.document.state

    @base_state.setter
    def base_state(self, value: dict[str, Any]) -> None:
        write_document(self, value)

    @property
    def state(self) -> dict[str, Any]:
        """The game's state: the stored document with the entries written
        since it was last stored whole (see :func:`current_state`).  Built
        once per version of the game."""
        return current_state(self)

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        """Store the whole state (its entries, if any, are dropped)."""
        store_whole(self, value)


class GameDocument(Base):
    """A game's state document as last written whole, in a table of its own.
    In the games row it made every change of the row cost the document's
    size: SQLite rewrites a whole row, overflow pages and all, when any
    column changes (a 10,000-player giveaway's document is about a megabyte,
    and an order mail bumps the game's version), and reads through the
    document to reach every column stored after it."""

    __tablename__ = "game_documents"

    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)


class StateEntry(Base):
    """One entry of a mapping at the top of a game's state, written on its
    own (``state[field][key] = value``) so that a mail that changed nothing
    but one player's orders does not rewrite the whole document.  Dropped
    whenever the whole state is written again (a turn run, a join)."""

    __tablename__ = "state_entries"

    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"), primary_key=True)
    #: the top-level key of the state (e.g. "orders")
    field: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    #: the entry's value; None: the entry was removed
    value: Mapped[dict[str, Any] | list[Any] | str | int | None] = mapped_column(JSON)
    #: None: the entry kept its place in the mapping; N: it was (re)added at
    #: game version N and comes after the stored ones, in the order of N
    seq: Mapped[int | None] = mapped_column(Integer)


class Membership(Base):
    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("game_id", "account_id", "role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"))
    role: Mapped[str] = mapped_column(String(16), default="player")
    joined_at: Mapped[datetime]
    left_at: Mapped[datetime | None]


class InboundBody(Base):
    """The bytes of one accepted mail, stored once however many of our
    addresses it was sent to: each of its inbox rows (one per recipient)
    points here (issue 41: a row each with the whole mail let one 1 MB mail
    to 100 addresses write 100 MB)."""

    __tablename__ = "inbox_bodies"

    id: Mapped[int] = mapped_column(primary_key=True)
    #: the mail as received
    raw: Mapped[bytes] = mapped_column(LargeBinary)
    #: the envelope's recipients, one inbox row each (inbound.one_row_each), for
    #: a mail to more than one: the one answer to a mail that proved no sender
    #: names them (pipeline/reply.py); None (SQL NULL) for a mail to one address
    rcpt_tos: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    #: the inbox row whose reply is the one answer to the whole mail when its
    #: sender proved nothing (None: no row answered such a reply yet)
    answered_by: Mapped[int | None] = mapped_column(Integer)


#: the stored bytes of an inbox row, as a correlated subquery of SQL text: the
#: tests read ``SELECT id, {INBOX_RAW} AS raw FROM inbox`` (the server reads
#: them through :data:`inbox_raw`, the same thing as a Core expression)
INBOX_RAW = "(SELECT inbox_bodies.raw FROM inbox_bodies WHERE inbox_bodies.id = inbox.body_id)"


class InboundMail(Base):
    """Every accepted message, stored before the listener answers 250: one
    row per recipient of ours, its bytes in :class:`InboundBody`."""

    __tablename__ = "inbox"
    __table_args__ = (Index("ix_inbox_status_id", "status", "id"), Index("ix_inbox_dedup", "dedup_key"),
                      # `who NAME` of a game without turns: the game's mails (roster.py)
                      Index("ix_inbox_game_received", "game_id", "received_at"),
                      Index("ix_inbox_imap_uid", "imap_uidvalidity", "imap_uid"))

    id: Mapped[int] = mapped_column(primary_key=True)
    received_at: Mapped[datetime]
    mail_from: Mapped[str] = mapped_column(String(320))
    rcpt_tos: Mapped[list[str]] = mapped_column(JSON)
    #: the mail's bytes, shared with the other rows of the same transaction
    body_id: Mapped[int] = mapped_column(ForeignKey("inbox_bodies.id"))
    #: new | done | dropped | duplicate | shunted
    status: Mapped[str] = mapped_column(String(16), default="new")
    #: sha256 of Message-ID and body: a redelivered copy has the same key
    dedup_key: Mapped[str | None] = mapped_column(String(64))
    processed_at: Mapped[datetime | None]
    #: why it was dropped, or the error that shunted it
    note: Mapped[str | None] = mapped_column(Text)
    #: SHA-256 of the turn seed whose random stream this mail's commands drew from
    seed: Mapped[str | None] = mapped_column(String(64))
    game_id: Mapped[int | None] = mapped_column(ForeignKey("games.id", ondelete="SET NULL"))
    #: how many times a worker started handling it (committed before each
    #: start): a mail started twice without finishing is set aside (worker.py)
    tries: Mapped[int] = mapped_column(default=0, server_default="0")
    #: a mail read from an IMAP mailbox (mail/imapin.py): the mailbox's UIDVALIDITY and the
    #: message's UID, so that a kill between the commit and the move never stores it twice
    imap_uidvalidity: Mapped[int | None] = mapped_column(BigInteger)
    imap_uid: Mapped[int | None] = mapped_column(BigInteger)


def inbox_raw() -> Any:
    """The stored bytes of an inbox row, as a scalar subquery to select
    beside the row's own columns (:data:`INBOX_RAW` as Core)."""
    bodies = table(InboundBody)
    return select(bodies.c.raw).where(bodies.c.id == table(InboundMail).c.body_id).scalar_subquery()


class Order(Base):
    """The order set a player holds for a turn (the last valid one wins)."""

    __tablename__ = "orders"
    __table_args__ = (UniqueConstraint("game_id", "handle", "turn"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    handle: Mapped[str] = mapped_column(String(32))
    turn: Mapped[int]
    lines: Mapped[list[str]] = mapped_column(JSON)
    received_at: Mapped[datetime]
    inbound_id: Mapped[int | None] = mapped_column(ForeignKey("inbox.id", ondelete="SET NULL"))


class Snapshot(Base):
    """A game's state at a turn boundary: before a turn ran and after it."""

    __tablename__ = "snapshots"
    __table_args__ = (Index("ix_snapshots_game_turn", "game_id", "turn"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    turn: Mapped[int]
    #: created | before | after | import | rollback
    phase: Mapped[str] = mapped_column(String(16))
    version: Mapped[int]
    state: Mapped[dict[str, Any]] = mapped_column(JSON, deferred=True)
    #: the revealed seed of the turn (after) or None
    seed: Mapped[str | None] = mapped_column(String(64))
    #: the report of the turn as mailed (plain text), for `history`
    report: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    #: ("before" only, never shown) {"seed": hex, "state": random stream position}
    rng: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class TurnReport(Base):
    """The report one player got for a turn (``history``): one row each, so a
    turn of a large game never stores all its reports in one row."""

    __tablename__ = "turn_reports"

    snapshot_id: Mapped[int] = mapped_column(ForeignKey("snapshots.id", ondelete="CASCADE"), primary_key=True)
    #: the player's lower-cased handle
    handle_key: Mapped[str] = mapped_column(String(32), primary_key=True)
    text: Mapped[str] = mapped_column(Text)


class OutboundMail(Base):
    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_status_next", "status", "next_attempt_at"),
        Index("ix_outbox_to_created", "to_addr", "created_at"),
        Index("ix_outbox_message_id", "message_id"),
        # the rate limits count one kind's rows of the last hour (outbound.outbox_count)
        Index("ix_outbox_kind_created", "kind", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime]
    inbound_id: Mapped[int | None] = mapped_column(ForeignKey("inbox.id", ondelete="SET NULL"))
    game_id: Mapped[int | None] = mapped_column(ForeignKey("games.id", ondelete="SET NULL"))
    #: reply | reply-unproven (to a mail without a password) | reply-code (one of those carrying a confirmation code) | report | notice | gm | gm-shunts | gm-quiet | press | gm-press (press.py) | alert (mail/alerts.py: to_addr names the channel, raw is the alert as JSON)
    kind: Mapped[str] = mapped_column(String(16))
    to_addr: Mapped[str] = mapped_column(String(320))
    message_id: Mapped[str] = mapped_column(String(255))
    raw: Mapped[bytes] = mapped_column(LargeBinary)
    #: pending | sent | failed | bounced (sent, then a bounce came back) | held (its address is on hold)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime]
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None]
    #: which outbound process is delivering the row, and until when its claim holds
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    claimed_until: Mapped[datetime | None]
    #: when a bounce for this mail came back (status bounced)
    bounced_at: Mapped[datetime | None]


class AuthThrottle(Base):
    """Failed password checks per account and sender address
    ("pair:HANDLE:ADDRESS"), per sender address ("from:ADDRESS") and per
    account ("acct:HANDLE"): see throttle.py; and code mails sent to an
    address within the hour ("mailto:ADDRESS"): see commands/recovery.py."""

    __tablename__ = "auth_throttle"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    #: failed checks since window_start
    failures: Mapped[int] = mapped_column(Integer, default=0)
    window_start: Mapped[datetime]
    #: no password is checked for this key before then
    blocked_until: Mapped[datetime | None]
    #: how many times the key was blocked in a row (the block doubles each time)
    level: Mapped[int] = mapped_column(Integer, default=0)
    #: the account's owner was told about the lockout
    notified: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime]


class AuditEntry(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime]
    #: handle, "gm", "cli", "scheduler", "system"
    actor: Mapped[str] = mapped_column(String(64))
    game_id: Mapped[int | None] = mapped_column(ForeignKey("games.id", ondelete="SET NULL"))
    action: Mapped[str] = mapped_column(String(64))
    detail: Mapped[str] = mapped_column(Text, default="")


class Confirmation(Base):
    """A request that must be confirmed from an address before it takes effect
    (``register``: the account exists only after ``confirm CODE`` comes back from
    that address).  Only a hash of the code is kept; the code itself was mailed
    to ``email`` and nowhere else."""

    __tablename__ = "confirmations"
    __table_args__ = (Index("ix_confirmations_email", "email"), Index("ix_confirmations_handle", "handle"))

    id: Mapped[int] = mapped_column(primary_key=True)
    #: register | reset (forgot HANDLE: a new password) | email (moving the account to ``email``) |
    #: undo (moving it back to ``email``, 7 days) | unlock (past a password block at ``email``); see confirm.py
    purpose: Mapped[str] = mapped_column(String(16))
    #: the lower-cased address that must send the code back
    email: Mapped[str] = mapped_column(String(320))
    handle: Mapped[str] = mapped_column(String(32))
    #: the Argon2 hash of the password chosen at ``register`` ("" for reset and email)
    password_hash: Mapped[str] = mapped_column(String(200))
    #: SHA-256 (hex) of the normalised code
    code_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    #: wrong codes sent from this address for this request
    attempts: Mapped[int] = mapped_column(Integer, default=0)


class TurnDuty(Base):
    """One account's duty at one turn of one game: it owed orders, and
    whether it sent them (the reliability record, play/reliability.py)."""

    __tablename__ = "turn_duties"
    __table_args__ = (Index("ix_turn_duties_account_at", "account_id", "at"),)

    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"), primary_key=True)
    turn: Mapped[int] = mapped_column(Integer, primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True)
    sent: Mapped[bool] = mapped_column(Boolean)
    #: when the turn ran
    at: Mapped[datetime]


class Standby(Base):
    """A player available as a substitute in games of ``kind`` (``available KIND``)."""

    __tablename__ = "standby"

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    since: Mapped[datetime]


class SeatOffer(Base):
    """A seat of a game that needs a new player (play/people.py): its
    player ``dropped`` out (drop_after) or ``resigned``; the GM ``offered``
    it; a substitute ``taken`` it; or it was ``closed`` (the GM replaced or
    removed the player, or the player came back)."""

    __tablename__ = "seat_offers"
    __table_args__ = (Index("ix_seat_offers_game_status", "game_id", "status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    #: the handle that holds the seat in the game's state
    seat: Mapped[str] = mapped_column(String(32))
    #: dropped | resigned | gm
    reason: Mapped[str] = mapped_column(String(16))
    #: vacant | offered | taken | closed
    status: Mapped[str] = mapped_column(String(16))
    since: Mapped[datetime]
    offered_at: Mapped[datetime | None]
    taken_by: Mapped[int | None] = mapped_column(ForeignKey("accounts.id", ondelete="SET NULL"))
    taken_at: Mapped[datetime | None]


class WaitingEntry(Base):
    """A player waiting for a seat of a full game (pbm_server/play/roster.py),
    with the JOIN line they sent (password-free): it is run for them when a
    seat frees, first come first served."""

    __tablename__ = "waiting_list"
    __table_args__ = (UniqueConstraint("game_id", "account_id", name="uq_waiting_game_account"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    line: Mapped[str] = mapped_column(Text)
    since: Mapped[datetime]


class Observer(Base):
    """An account that receives the public view of a game's reports
    (``observe NAME``); never orders, press or anything a player's own view hides."""

    __tablename__ = "observers"
    __table_args__ = (UniqueConstraint("game_id", "account_id", name="uq_observers_game_account"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    since: Mapped[datetime]


class Press(Base):
    """One press message a player sent through the server (pbm_server/play/press.py),
    as relayed: for the GM's `pbm game press NAME` and the rate limit."""

    __tablename__ = "press"
    __table_args__ = (Index("ix_press_game_id", "game_id", "id"), Index("ix_press_sender_sent", "sender", "sent_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    #: the sender's handle ("gm" for the game master's press)
    sender: Mapped[str] = mapped_column(String(32))
    #: handles it was delivered to
    recipients: Mapped[list[str]] = mapped_column(JSON)
    #: len(recipients): what the sender's hourly limit (PBM_PRESS_PER_HOUR) counts
    recipient_count: Mapped[int] = mapped_column(Integer)
    #: sent as PRESS TO ALL
    to_all: Mapped[bool] = mapped_column(Boolean)
    #: the recipients were not told who sent it
    anonymous: Mapped[bool] = mapped_column(Boolean)
    #: the message as relayed
    body: Mapped[str] = mapped_column(Text)
    #: a PRESS TO ALL sent while the game's public_press was on: shown on the game's page
    public: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    sent_at: Mapped[datetime]
    inbound_id: Mapped[int | None] = mapped_column(ForeignKey("inbox.id", ondelete="SET NULL"))


class SchedulerFault(Base):
    """A scheduler step (tick, reminders, turn) that fails for a game: the
    GM is told once per error; the row goes when the step succeeds again."""

    __tablename__ = "scheduler_faults"

    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[str] = mapped_column(String(16), primary_key=True)
    error: Mapped[str] = mapped_column(Text)
    since: Mapped[datetime]
    told_at: Mapped[datetime]


class ServerSecret(Base):
    """Keys the server makes for itself (``bounce_key``: the HMAC key of the
    VERP return paths, made by migration 0008).  Never mailed, never shown."""

    __tablename__ = "server_secrets"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime]


class Bounce(Base):
    """A bounce (non-delivery report) that came back for one outbox row."""

    __tablename__ = "bounces"
    __table_args__ = (Index("ix_bounces_address_at", "address", "at"), Index("ix_bounces_told_at", "told_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime]
    outbox_id: Mapped[int] = mapped_column(ForeignKey("outbox.id", ondelete="CASCADE"), unique=True)
    #: the outbox row's address (lower case), not what the report claims
    address: Mapped[str] = mapped_column(String(320))
    #: the DSN status (5.1.1) or "unknown"
    status: Mapped[str] = mapped_column(String(16))
    diagnostic: Mapped[str] = mapped_column(Text)
    inbound_id: Mapped[int | None] = mapped_column(ForeignKey("inbox.id", ondelete="SET NULL"))
    #: when a GM summary listed it (None: not yet)
    told_at: Mapped[datetime | None]


class MailStop(Base):
    """A stream of mail an address asked not to get any more (one click on
    List-Unsubscribe, the settings page, or `unsubscribe` by mail): a game's
    reports, press, reminders or observer boards (game_id None: of every game)."""

    __tablename__ = "mail_stops"
    __table_args__ = (UniqueConstraint("address", "stream", "game_id", name="uq_mail_stops"),
                      Index("ix_mail_stops_address", "address"))

    id: Mapped[int] = mapped_column(primary_key=True)
    #: lower case
    address: Mapped[str] = mapped_column(String(320))
    stream: Mapped[str] = mapped_column(String(16))
    game_id: Mapped[int | None] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    since: Mapped[datetime]


class MailHold(Base):
    """An address no mail is sent to (it bounced repeatedly); lifted when mail
    comes from it or by `pbm mail unhold ADDRESS`."""

    __tablename__ = "mail_holds"

    address: Mapped[str] = mapped_column(String(320), primary_key=True)
    since: Mapped[datetime]
    reason: Mapped[str] = mapped_column(Text)


# -- a game's state: the stored document and the entries laid over it ----------
def remember_state(game: Game, state: dict[str, Any]) -> None:
    game.__dict__["_state_memo"] = (game.version, state)


def current_state(game: Game) -> dict[str, Any]:
    """The state: the stored document with its entries laid over it, in the
    order the rules had them (an entry added later comes after the others)."""
    memo = game.__dict__.get("_state_memo")
    if memo is not None and memo[0] == game.version:
        return memo[1]  # type: ignore[no-any-return]
    state: dict[str, Any] = game.base_state
    session = object_session(game)
    if session is not None and game.id is not None:
        state = _laid_over(state, _entries(session, [game.id]).get(game.id))
    remember_state(game, state)
    return state


def _entries(session: Session, game_ids: list[int]) -> dict[int, list[tuple[Any, ...]]]:
    """The entries (field, key, value, seq) of each of the games, in one
    order on every database."""
    found: dict[int, list[tuple[Any, ...]]] = {}
    for game_id, *entry in session.execute(
            select(StateEntry.game_id, StateEntry.field, StateEntry.key, StateEntry.value, StateEntry.seq)
            .where(StateEntry.game_id.in_(game_ids)).order_by(StateEntry.game_id, StateEntry.field, StateEntry.key)):
        found.setdefault(game_id, []).append(tuple(entry))
    return found


def _laid_over(document: dict[str, Any], entries: list[tuple[Any, ...]] | None) -> dict[str, Any]:
    return overlay(document, entries) if entries else document


def preload_states(session: Session, games: list[Game]) -> None:
    """The states of ``games`` built as :func:`current_state` builds them,
    with two SELECTs for all of them instead of two each (a worker's batch
    of games whose states it has not decoded at their versions).  A game
    whose document is loaded already, or whose state is built, is left as
    it is."""
    todo = {g.id: g for g in games if g.id is not None and "document" in sa_inspect(g).unloaded}
    if not todo:
        return
    docs = {doc.game_id: doc for doc in session.scalars(select(GameDocument).where(GameDocument.game_id.in_(todo)))}
    entries = _entries(session, list(todo))
    for game_id, game in todo.items():
        if game_id in docs:
            set_committed_value(game, "document", docs[game_id])
            remember_state(game, _laid_over(docs[game_id].state, entries.get(game_id)))


def overlay(state: dict[str, Any], rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """``state`` with entries (field, key, value, seq) laid over it (a new
    document; ``state`` is not changed).  Entries that kept their place come
    first, then the ones (re)added, in the order they were added."""
    out = dict(state)
    copied: set[str] = set()
    for field, key, value, seq in sorted(rows, key=lambda r: (r[3] is not None, r[3] or 0)):
        if field not in copied:
            out[field] = dict(out.get(field) or {})
            copied.add(field)
        mapping = out[field]
        if seq is not None:
            mapping.pop(key, None)
        if value is None:
            mapping.pop(key, None)
        else:
            mapping[key] = value
    return out


def write_document(game: Game, state: dict[str, Any]) -> None:
    """Store ``state`` as the game's document, without reading the old one
    when it is not loaded (a large game's is big)."""
    session = object_session(game)
    loaded = None
    if session is not None and game.id is not None:
        loaded = session.identity_map.get(sa_inspect(GameDocument).identity_key_from_primary_key((game.id,)))
    if session is None or game.id is None or loaded is not None or "document" not in sa_inspect(game).unloaded:
        if loaded is not None and "document" in sa_inspect(game).unloaded:
            set_committed_value(game, "document", loaded)
        if game.document is None:
            game.document = GameDocument(state=state)
        else:
            game.document.state = state
        return
    done = session.execute(update(GameDocument).where(GameDocument.game_id == game.id).values(state=state)
                           .execution_options(synchronize_session=False))
    if not done.rowcount:  # type: ignore[attr-defined]
        game.document = GameDocument(state=state)


def store_whole(game: Game, state: dict[str, Any]) -> None:
    """Write the whole document; the entries laid over the old one go."""
    game.base_state = state
    session = object_session(game)
    if session is not None and game.id is not None:
        session.execute(delete(StateEntry).where(StateEntry.game_id == game.id))
    remember_state(game, state)


class VoteSettings(Base):
    """A turn-based game's rules for votes and its ready check, and who paused
    it (pbm_server/play/votes.py, readycheck.py).  No row: the defaults."""

    __tablename__ = "vote_settings"

    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"), primary_key=True)
    #: majority | two-thirds | unanimous | off
    rule: Mapped[str] = mapped_column(String(16), default="two-thirds")
    #: extensions that may pass in one turn
    max_extensions: Mapped[int] = mapped_column(Integer, default=2)
    #: pause the players may vote for in one calendar year (UTC)
    max_pause_minutes: Mapped[int] = mapped_column(Integer, default=14 * 24 * 60)
    #: the ready check's window (None: no ready check)
    ready_minutes: Mapped[int | None] = mapped_column(Integer)
    #: None (not started) | open | done
    ready_phase: Mapped[str | None] = mapped_column(String(8))
    #: who paused the game: "gm" (game pause) or "vote"; when; until when (a vote's pause)
    paused_by: Mapped[str | None] = mapped_column(String(8))
    paused_at: Mapped[datetime | None]
    paused_until: Mapped[datetime | None] = mapped_column(index=True)


class Vote(Base):
    """A players' vote to extend a turn's deadline or pause a game."""

    __tablename__ = "votes"
    __table_args__ = (Index("ix_votes_status_closes", "status", "closes_at"),
                      Index("ix_votes_game_status", "game_id", "status"))

    id: Mapped[int] = mapped_column(primary_key=True)
    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"))
    #: extend | pause
    kind: Mapped[str] = mapped_column(String(8))
    minutes: Mapped[int] = mapped_column(Integer)
    #: the turn open when it was proposed
    turn: Mapped[int] = mapped_column(Integer)
    proposer: Mapped[str] = mapped_column(String(32))
    #: the game's rule when it was proposed (majority | two-thirds | unanimous)
    rule: Mapped[str] = mapped_column(String(16))
    opened_at: Mapped[datetime]
    closes_at: Mapped[datetime]
    #: handle -> "yes" | "no"
    ballots: Mapped[dict[str, str]] = mapped_column(JSON)
    #: open | passed | failed | void
    status: Mapped[str] = mapped_column(String(8), default="open")
    decided_at: Mapped[datetime | None]
    outcome: Mapped[str | None] = mapped_column(Text)


class ReadySeat(Base):
    """A seat of a game's ready check: whose, by when it must be confirmed,
    and when it was."""

    __tablename__ = "ready_seats"
    __table_args__ = (Index("ix_ready_seats_due", "ready_at", "due_at"),)

    game_id: Mapped[int] = mapped_column(ForeignKey("games.id", ondelete="CASCADE"), primary_key=True)
    handle_key: Mapped[str] = mapped_column(String(32), primary_key=True)
    handle: Mapped[str] = mapped_column(String(32))
    asked_at: Mapped[datetime]
    due_at: Mapped[datetime]
    ready_at: Mapped[datetime | None]


class MailboxState(Base):
    """The IMAP mailbox the server reads (PBM_IMAP_URL; mail/imapin.py): when
    it was last read, and since when and why it fails (the GM is told once
    per outage: ``told_at``)."""

    __tablename__ = "mailbox_state"

    mailbox: Mapped[str] = mapped_column(String(512), primary_key=True)
    last_read_at: Mapped[datetime | None]
    fault_since: Mapped[datetime | None]
    fault: Mapped[str | None] = mapped_column(Text)
    told_at: Mapped[datetime | None]
