"""The contract between the server and a game package.

A game package (``games/<kind>/``) is pure: no database, no network, no clock, no
global random state, no file access.  The server hands it plain data and gets
plain data back:

* ``state`` is a JSON-compatible ``dict`` (str keys, lists, ints, strs, bools,
  None; **no floats**).  The server stores it verbatim as the game's versioned
  snapshot.  The server always passes a freshly loaded state that it will not
  reuse, so a game may update it in place and return it in the Outcome (or
  return a new dict).  A refused command must leave the state unchanged:
  validate first, then change.
* ``Context`` carries everything that would otherwise be I/O: the time, a seeded
  random generator, who is acting.
* ``Outcome`` says what happened: the new state, one ``Result`` per command line
  for the sender's reply, extra reply ``Section`` s, ``Notice`` s (mails to other
  players), order sets now held, and audit lines.

The mail's path: the server strips the mail down to its command lines
(``Line``), extracts and verifies the ``$$password$$`` convention, and calls

    commands = rules.parse(lines)              # syntax only, pure, never raises
    # server verifies any Command.credentials (pbmserv-style "userid password")
    outcome  = rules.apply(state, commands, ctx)

A game does not write that plumbing itself: :class:`Rules` implements
``parse`` (calling the game's ``parse_line`` per line, turning an exception
into an error Command) and ``apply`` (one ``Mail`` per call; parse errors
become refusals; every other command goes to the game's ``handle_<name>``
method, and a :class:`Refused` raised there becomes the line's refusal).
See docs/architecture-games.md for the layout of a game package.

For turn-based games ``pbm turn run`` / the scheduler calls
``rules.run_turn(state, ctx)``.  The scheduler also calls ``rules.tick(state,
ctx)`` about once a minute so a game can do time-driven work (digests).

Texts: a game returns either plain ``text`` or a Jinja ``template`` name
(looked up under ``templates/<kind>/``, e.g. ``"report.txt"``) with ``data``.
If a template ``X.txt`` has a sibling ``X.html`` the mail gets an HTML
alternative part rendered from the same data.  Boards that "print
themselves" are best produced by pure Python in the game and passed in
``data`` as a preformatted string.

Secrets: a game never puts a password into any text.  ``Command.credentials``
holds the inline password; ``Command.text`` is the line as echoed back, and a
game that parses inline credentials must return ``text`` with the password
replaced by ``"****"``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

State = dict[str, Any]

#: ``Notice.to`` value meaning "every active player of this game".
ALL_PLAYERS = "*"


class Refused(Exception):
    """A command that cannot be carried out.  ``str(exc)`` is the reason, sent
    to the sender as the line's result.  Raise it before changing anything."""


class GameError(Exception):
    """Raised by a game for a request that cannot be carried out at all
    (e.g. ``run_turn`` on a game without turns, an invalid import file).
    The message is shown to the GM/player as is."""


@dataclass(frozen=True)
class Line:
    """One command line of a mail, as the player wrote it (stripped)."""

    number: int  # 1-based line number in the mail body; 0 for the Subject line
    text: str

    @property
    def where(self) -> str:
        return "Subject" if self.number == 0 else f"line {self.number}"


@dataclass
class Command:
    """A parsed command.

    ``name`` is the game's own keyword ("join", "give", "move", ...) and
    ``args`` its parsed arguments (JSON-compatible).  ``error`` is set when
    the line could not be parsed: say what was wrong and what would be
    accepted ("expected GIVE <n> TO <handle>, e.g. GIVE 2 TO alice").
    ``credentials`` is ``(userid, password)`` for pbmserv-style lines; the
    server verifies it and fills ``actor`` (the verified userid) or sets
    ``error``.  ``text`` is the (password-free) echo of the line.
    """

    line: Line
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    credentials: tuple[str, str] | None = None
    actor: str | None = None
    text: str = ""
    accounts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.text:
            self.text = self.line.text

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Actor:
    """Who sent the mail, as the server established it."""

    handle: str | None  # account handle bound to the From address, None if unregistered
    email: str
    authenticated: bool  # a $$password$$ in the mail matched the account
    is_gm: bool = False  # from PBM_GM_ADDRESS with the GM account's password


#: the refusals every game gives to a sender it cannot act for
NOT_REGISTERED = (
    "this address has no account: register first by mailing 'register HANDLE PASSWORD' "
    "to the server's pbm@ address"
)
NO_PASSWORD = "this needs your password: put it anywhere in the mail between double dollar signs, like $$password$$"


def actor_problem(actor: Actor | None, need_password: bool = True) -> str | None:
    """Why a game cannot act for this sender (None: it can)."""
    if actor is None or not actor.handle:
        return NOT_REGISTERED
    if need_password and not actor.authenticated:
        return NO_PASSWORD
    return None


def sender_handle(ctx: Context, need_password: bool = True) -> str:
    """The handle of the mail's sender; Refused (saying why) when a game cannot act for them."""
    actor = ctx.actor
    if actor is None or not actor.handle:
        raise Refused(NOT_REGISTERED)
    if need_password and not actor.authenticated:
        raise Refused(NO_PASSWORD)
    return actor.handle


@dataclass
class Context:
    now: datetime  # timezone-aware UTC
    rng: random.Random  # seeded by the server; the seed is recorded
    actor: Actor | None = None  # None for turn runs / ticks
    turn: int = 0  # the game's current turn number (1-based once started)
    game_name: str = ""
    # handle -> e-mail address of every handle named in a Command.accounts
    # list of this mail (and of the actor).
    emails: dict[str, str] = field(default_factory=dict)
    # run_turn only: handles of players on vacation (``ABSENT from to``) at
    # this deadline.  A game with no-order rules (forfeit, default orders,
    # removal after missed turns) should leave these players out of them;
    # the server already leaves them out of reminders and early processing.
    absent: frozenset[str] = frozenset()
    # a scratch mapping the server keeps in memory for this game between its
    # mails (empty at first, after a restart, or whenever the server likes).
    # A game may keep what it derived from a state here (an index of its
    # players) to find it again for the next mail, and must check that it
    # belongs to the state it is given, by identity (a state is never
    # changed in place, so the same object means the same content).
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass
class Result:
    """What became of one command line; shown in the sender's reply."""

    line: Line
    ok: bool
    message: str  # "accepted: ..." or the specific reason for refusal
    text: str = ""  # password-free echo of the line; defaults to line.text

    def __post_init__(self) -> None:
        if not self.text:
            self.text = self.line.text


@dataclass
class Section:
    """A block of the sender's reply after the per-line results."""

    title: str = ""
    text: str = ""
    template: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Notice:
    """A mail to players other than (or as well as) the sender.

    ``to`` is a list of handles, or ``[ALL_PLAYERS]``.  ``kind`` is
    ``"report"`` (turn reports, board updates: Auto-Submitted: auto-generated)
    or ``"notice"``.  The server renders a template once per recipient, with
    ``data["viewer"]`` set to the recipient's handle unless the game set it.
    To hide information from some players, send one Notice per player (or
    per group who may see the same) with data already filtered for them:
    the template cannot know what the viewer may see.
    """

    to: list[str]
    subject: str
    text: str = ""
    template: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    kind: str = "notice"


@dataclass
class TurnView:
    """One public turn page of a game (``Rules.turn_view``, ``Rules.move_turn``):
    what an observer may see of it, drawn with the game's templates (the
    sections), and one row of figures per player for programs: ``handle``,
    ``score`` (an int, or None where the kind keeps none), ``standing`` (the
    kind's own words for where they stand) and ``did`` (what they did in it,
    None: nothing), plus any figures of the kind's own (numbers and short
    texts only)."""

    title: str
    sections: list[Section] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Outcome:
    state: State
    results: list[Result] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    #: for turn-based games: handle -> the order lines now held for this turn
    #: (password-free).  The server records them and shows them in the reply.
    orders: dict[str, list[str]] = field(default_factory=dict)
    #: GM or notable actions to write to the audit log.
    audit: list[str] = field(default_factory=list)
    #: handles that joined / left with this outcome (memberships table).
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    #: the turn is over and the server should advance its turn counter.
    turn_done: bool = False
    #: the game has ended (no more turns, no more commands).
    finished: bool = False
    #: set by ``apply`` when the mail changed nothing in the state but entries
    #: of top-level mappings (a player's orders): field -> the keys set or
    #: removed.  ``state`` is then the given state with just those entries
    #: changed (existing keys keep their place, new ones come last), sharing
    #: every other part; the server writes only these entries, so a mail's
    #: cost does not grow with the game.  None: the state is stored whole.
    changed_entries: dict[str, list[str]] | None = None
    #: run_turn of a large game whose players each get their own part of the
    #: report: the whole report, mailed to nobody and kept with the turn for
    #: ``history`` (``to`` is ignored)
    record: Notice | None = None


@dataclass(frozen=True)
class Option:
    """A per-game option set at ``pbm game new KIND NAME --option KEY=VALUE``."""

    name: str
    default: Any
    help: str
    parse: Callable[[str], Any] = str  # converts the string from the CLI/mail; raises ValueError


@dataclass(frozen=True)
class JoinHint:
    """How a newcomer takes part in a game as it stands now, for its web
    pages (:meth:`Rules.join_hint`).  ``line``: the line to mail, as the game
    accepts it (words in capitals, such as YOURHANDLE, are the player's own;
    an example is one the game would accept as it stands); None: the game
    takes no new player now, ``note`` says why.  ``server``: the line goes to
    pbm@DOMAIN (curio's challenge) instead of the game's address.  ``note``:
    one short sentence more, or ""."""

    line: str | None
    note: str = ""
    server: bool = False


@dataclass
class Mail:
    """One ``apply`` call in progress: the commands of one mail, the Outcome
    being built and one result slot per command.  A game subclasses it to
    hold its working state (the decoded game, what to tell whom)."""

    ctx: Context
    commands: list[Command]
    outcome: Outcome
    results: list[Result | None] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.results = [None] * len(self.commands)

    def sender(self, need_password: bool = True) -> str:
        """The sender's handle; Refused when the game cannot act for them."""
        return sender_handle(self.ctx, need_password)

    def begin(self) -> None:
        """Called before each command's handler (e.g. to take a working copy)."""

    def commit(self) -> None:
        """Called after a handler accepted its command."""


MailT = TypeVar("MailT", bound=Mail)


def refusal(cmd: Command, message: str) -> Result:
    """The result of a refused command."""
    return Result(cmd.line, False, message, cmd.text)


def acceptance(cmd: Command, message: str) -> Result:
    """The result of an accepted command; ``message`` says what happened."""
    return Result(cmd.line, True, "accepted: " + message, cmd.text)


def choice(*allowed: str) -> Callable[[str], str]:
    """An Option parser accepting one of ``allowed`` (any case)."""

    def parse(text: str) -> str:
        t = str(text).strip().lower()
        if t not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, not {text!r}")
        return t

    return parse


class Rules(Generic[MailT]):
    """Base class of a game's rules.  Subclass in ``games/<kind>/rules.py``
    and expose an instance as ``RULES`` in ``games/<kind>/__init__.py``.

    A subclass writes ``parse_line`` (one line -> Command), ``open_mail`` /
    ``close_mail`` (decode the state into its Mail, encode it back) and one
    ``handle_<name>(mail, cmd) -> str | None`` method per command name.  A
    handler returns what was done (the reply says "accepted: " and that),
    raises :class:`Refused`, or returns None to leave the line's result to
    ``close_mail`` (commands carried out together, such as one mail's
    order set)."""

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""
    #: one paragraph shown in ``games`` / ``help``
    summary: ClassVar[str] = ""
    #: True: orders are collected and resolved by run_turn (rmpm, giveaway,
    #: agora_rpg's weekly tick, sequence's closing deadline).  curio: False.
    has_turns: ClassVar[bool] = True
    #: deadline expression used when the GM gives none, e.g.
    #: "every Saturday 03:00 UTC"; None: no scheduled turns.
    default_deadline: ClassVar[str | None] = None
    #: what a turn is called in mails: "week", "round", "turn".
    turn_name: ClassVar[str] = "turn"
    options: ClassVar[tuple[Option, ...]] = ()
    #: lines starting with this game's kind, mailed to pbm@DOMAIN, are this
    #: game's commands (curio's pbmserv-style "curio move ...").
    pbm_prefix: ClassVar[bool] = False

    # -- life cycle ---------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        """Initial state for a new game with the (already parsed) options."""
        raise NotImplementedError

    def option_values(self, options: dict[str, Any]) -> dict[str, Any]:
        """Every option's value: the defaults, overridden by ``options``.  A
        string value is converted with the option's ``parse``; an unknown
        name or a value ``parse`` rejects raises GameError."""
        known = {o.name: o for o in self.options}
        values = {o.name: o.default for o in self.options}
        for name, value in (options or {}).items():
            option = known.get(name)
            if option is None:
                raise GameError(f"{self.kind} has no option {name!r} (options: {', '.join(known) or 'none'})")
            if isinstance(value, str):
                try:
                    value = option.parse(value)
                except (ValueError, TypeError) as exc:
                    raise GameError(f"option {name}={value!r}: {exc}") from None
            values[name] = value
        return values

    def import_state(self, data: dict[str, Any]) -> State:
        """Validate an exported/hand-written JSON document and return a state.
        Raise GameError naming what is wrong."""
        return data

    def export_state(self, state: State) -> dict[str, Any]:
        return state

    def turn_of(self, state: State) -> int | None:
        """The turn now open in ``state`` by the game's own count (what the
        server's turn number must be when a bare state is imported); None:
        the state does not say."""
        return None

    # -- mail ---------------------------------------------------------------
    def parse(self, lines: list[Line]) -> list[Command]:
        """Parse command lines.  Never raises: a bad line becomes a Command
        with ``error`` set.  Lines that are not for this game at all may be
        returned as errors too ("unknown command ..., expected one of ...")."""
        out = []
        for line in lines:
            try:
                out.append(self.parse_line(line))
            except Exception as exc:  # noqa: BLE001 - parse never raises
                # the exception's text may quote the line, password and all
                error = f"could not read this line ({type(exc).__name__})"
                out.append(Command(line, "error", error=error, text=self.safe_echo(line)))
        return out

    def safe_echo(self, line: Line) -> str:
        """The line as echoed back when ``parse_line`` failed on it: a game
        whose lines carry inline passwords masks them here."""
        return line.text

    def parse_line(self, line: Line) -> Command:
        """One line -> one Command (``error`` set for a bad line)."""
        raise NotImplementedError

    def apply(self, state: State, commands: list[Command], ctx: Context) -> Outcome:
        """Carry out the commands of one mail from ``ctx.actor``.  Returns
        exactly one Result per command, in the order of the commands."""
        mail = self.open_mail(state, commands, ctx)
        order = sorted(range(len(commands)), key=lambda i: self.priority(commands[i]))
        for i in order:
            mail.results[i] = self.carry_out(mail, commands[i])
        self.close_mail(mail)
        # a deferred line close_mail left without a result is not lost
        mail.outcome.results = [
            r if r is not None else refusal(cmd, cmd.error or "not understood")
            for r, cmd in zip(mail.results, commands, strict=True)
        ]
        return mail.outcome

    def carry_out(self, mail: MailT, cmd: Command) -> Result | None:
        """One command: refused for its sender or its syntax, else handed to
        ``handle_<name>``.  None: ``close_mail`` gives the result."""
        refused = self.sender_refusal(mail, cmd)
        if refused is not None:
            return refusal(cmd, refused)
        if cmd.error is not None:
            return refusal(cmd, cmd.error)
        handler: Callable[[MailT, Command], str | None] | None = getattr(self, "handle_" + cmd.name, None)
        if handler is None:
            return refusal(cmd, f"not understood: {self.kind} has no command {cmd.name!r}")
        mail.begin()
        try:
            message = handler(mail, cmd)
        except Refused as exc:
            return refusal(cmd, str(exc))
        mail.commit()
        return None if message is None else acceptance(cmd, message)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> MailT:
        """Decode ``state`` into this game's Mail for ``commands``."""
        raise NotImplementedError

    def close_mail(self, mail: MailT) -> None:
        """After the last command: give the deferred results, add sections and
        notices, and set ``mail.outcome.state``."""

    def priority(self, cmd: Command) -> int:
        """Commands run in order of priority, then of their lines (default:
        all 0, so in line order)."""
        return 0

    def sender_refusal(self, mail: MailT, cmd: Command) -> str | None:
        """Why this sender cannot give ``cmd`` at all, checked before the
        line's own syntax error; None: go on."""
        return None

    def run_turn(self, state: State, ctx: Context) -> Outcome:
        """Resolve the current turn (weekly update, round, tick, deadline)."""
        raise GameError(f"{self.title} has no turns: moves take effect when they arrive.")

    def tick(self, state: State, ctx: Context) -> Outcome | None:
        """Time-driven work between turns (digests, timeouts); None: nothing."""
        return None

    @property
    def ticks(self) -> bool:
        """Does the kind do anything as time passes (its own :meth:`tick`)?
        The scheduler leaves the games of other kinds alone between turns."""
        return type(self).tick is not Rules.tick

    # -- what people see ----------------------------------------------------
    def players(self, state: State) -> list[str]:
        """Handles of the active players (who get ALL_PLAYERS notices)."""
        raise NotImplementedError

    def waiting_for(self, state: State) -> list[str]:
        """Handles of active players who have not yet sent orders this turn
        (reminders, early processing).  Games without orders: []."""
        return []

    def view(self, state: State, viewer: str | None) -> list[Section]:
        """The game as ``viewer`` may see it (None: an observer / the public).
        Used by ``pbm game show NAME [--as PLAYER]`` and ``status`` mails."""
        raise NotImplementedError

    def hidden_from(self, state: State, viewer: str | None) -> list[str]:
        """Strings that must not appear in anything ``viewer`` is shown now
        (other players' secret orders, hidden faces).  The contract tests
        check ``view`` against it.  Nothing hidden: []."""
        return []

    def standing(self, state: State, handle: str) -> list[str]:
        """Short lines on where ``handle`` stands in the game now, for the
        player's list of their games (``status`` with no name): whether the
        server holds their orders, whether it is their move.  The default,
        for games whose orders are collected for a turn: from
        :meth:`waiting_for`.  Games without orders override it."""
        if not self.has_turns:
            return []
        if handle.lower() in {h.lower() for h in self.waiting_for(state)}:
            return [f"no orders from you yet for this {self.turn_name}"]
        return [f"your orders for this {self.turn_name} are held"]

    def public_reports(self, state: State, notices: list[Notice]) -> list[Notice]:
        """What an observer of the game gets of ``notices`` (the mails one
        mail or turn made; ``state`` is the game after it): only the public
        view, never orders, press or anything a player's own view hides.
        The default passes on the reports sent alike to every player
        (``to == [ALL_PLAYERS]``, ``kind == "report"``): the same text went
        to everybody, so it is public.  A game whose reports differ per
        player (hidden faces, secret holdings) builds the public one here.
        The notices returned are sent to each observer; their ``to`` is
        ignored and ``data["viewer"]`` is None."""
        out = []
        for n in notices:
            if n.kind == "report" and n.to == [ALL_PLAYERS]:
                out.append(Notice(to=[], subject=n.subject, text=n.text, template=n.template,
                                  data={**n.data, "viewer": None}, kind="report"))
        return out

    def thread_of(self, item: Notice | Section | Command) -> tuple[str, str] | None:
        """The thread inside the game that a mail about ``item`` (a Notice, a
        reply Section or a Command of the mail answered) belongs to, as
        ``(key, label)``, e.g. ``("board.101", "board 101")``: the server
        threads each one's mails together in the players' mail clients and
        names it in the Subject.  None (the default): the game's one thread."""
        return None

    def trends(self, state: State) -> dict[str, list[tuple[str, int]]]:
        """More public figures per player than the score, by name (rmpm: AN
        and PN), for the game page's charts; each as ``scores`` gives its one."""
        return {}

    def scores(self, state: State) -> list[tuple[str, int]]:
        """Every player's score in ``state`` as all players may see it (the
        ``summary`` of a game lists it for each turn), highest first; []:
        the game keeps no public score."""
        return []

    def colours(self, state: State) -> dict[str, int]:
        """Each player's colour index (0-11: the boards' chip colours, the
        charts' lines), stable for the game's life: the order in which
        ``players`` lists them (join order for most kinds); a kind with a
        player number of its own (rmpm) uses that.  Never by rank, so a
        player keeps their colour in every chart and on every board."""
        return {h: i % 12 for i, h in enumerate(self.players(state))}

    def boards(self, state: State) -> list[dict[str, Any]]:
        """For a kind played on several boards at once (curio), each board as
        anyone may see it, for the game's JSON twin: its number, its players
        by side, its status, whose move it is, the moves made, the result; []
        (the default): the game is one board, described by ``view``.  Never a
        hidden face."""
        return []

    def turn_view(self, before: State | None, after: State, turn: int, name: str) -> TurnView | None:
        """The public page of processed turn ``turn`` of game ``name``
        (``before``: the state it ran on, ``after``: the state it left), drawn as its report mail was;
        None (the default): the page shows the report kept as text and the
        public scores of ``after``.  Only what every player was told."""
        return None

    def move_turns(self, state: State) -> int | None:
        """For a kind whose turns are not processed turns (curio: moves on
        boards; sequence: plays): how many turn pages ``state`` holds, each
        made by ``move_turn``.  None (the default): the turns are the
        processed turns."""
        return None

    def move_turn(self, state: State, number: int, name: str) -> TurnView | None:
        """Turn page ``number`` (1 to ``move_turns``) of such a kind, as an
        observer sees it; None when there is none."""
        return None

    def join_hint(self, state: State) -> JoinHint | None:
        """What a newcomer mails to take part in the game as ``state`` stands
        (with their $$password$$ in the mail), for the game's web pages; None
        (the default) or a hint without a line: the game is closed to new
        players.  A kind says it here, in its own syntax, so no page offers a
        JOIN the game would refuse."""
        return None

    def order_template(self, state: State, handle: str, last: list[str]) -> list[str] | None:
        """The order lines ``handle`` gets at the end of each turn report, to
        edit and send back (``state``: the game after the turn; ``last``: the
        orders they gave for the turn just run).  None: no template."""
        return None

    def replace_player(self, state: State, old: str, new: str) -> State:
        """``state`` with the position of player ``old`` handed to the
        handle ``new`` (``pbm game replace``).  The default renames every
        mapping key and every string equal to ``old`` (either exactly or,
        for keys, without regard to case); a game that keeps the handle in
        other shapes overrides it.  Returns a new state."""
        renamed: State = _renamed(state, old, new)
        return renamed

    def help_text(self) -> str:
        """Rules summary and command syntax, for ``help KIND``."""
        return self.summary


def _renamed(value: Any, old: str, new: str) -> Any:
    """``value`` (JSON data) with ``old`` renamed ``new`` in keys and strings."""
    if isinstance(value, dict):
        return {_key(k, old, new): _renamed(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, old, new) for v in value]
    if isinstance(value, str) and value == old:
        return new
    if isinstance(value, str) and value == old.casefold():
        return new.casefold()
    return value


def _key(k: str, old: str, new: str) -> str:
    if k == old:
        return new
    if k.casefold() == old.casefold():
        return new.casefold() if k == k.casefold() else new
    return k
