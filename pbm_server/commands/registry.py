"""The one list of pbm@DOMAIN commands.

Each command describes itself with a :class:`ServerCommand`: its name (and
aliases), who may use it, its handler, and the rows it shows in ``help``
(``syntax``, one help line).  Dispatch, the ``help`` reply, the "unknown
command" reply and the rule for a command in the Subject all read this list,
so a command added here is everywhere at once.

A module adds its commands with the :func:`command` decorator::

    @command("status", Audience.PLAYER, ("status NAME", "game NAME as you see it ..."))
    def cmd_status(ctx: ServerContext, line: Line, words: list[str]) -> Result: ...

A handler refuses by raising :class:`~pbm_server.base.errors.ServerRefused` with
the reason; dispatch (:meth:`Registry.run_line`) is the one place that turns
it into the line's refused ``Result``.  (``ServerCommand`` is a pbm@
command's self-description; ``games.base.Command`` is a parsed game line.)

The package ``pbm_server.commands`` imports every such module, so importing
it fills the registry; this module imports none of them.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from games.base import Actor, Line, Result, Section
from pbm_server.base.errors import ServerRefused
from pbm_server.base.settings import Settings
from pbm_server.mail.compose import MASK, Composer
from pbm_server.play.notices import Mailer, NoticeBudget
from pbm_server.store.lookup import account_by_handle, audit, find_game
from pbm_server.store.models import Account, Game


class Audience(enum.Enum):
    """Who may use a command."""

    ANYONE = "anyone"
    #: a registered player, with their $$password$$ in the mail
    PLAYER = "player"
    #: the game master: from PBM_GM_ADDRESS with the GM account's $$password$$
    GM = "gm"


@dataclass
class ServerContext:
    """One mail to pbm@DOMAIN, as its commands see it."""

    session: Session
    settings: Settings
    composer: Composer
    sender: str
    now: datetime
    is_gm: bool = False
    #: the sender's account handle (None: unregistered) and whether the mail's
    #: $$password$$ matched it
    handle: str | None = None
    authenticated: bool = False
    #: turns Notices into outbox mails (for commands that run turns)
    mailer: Mailer | None = None
    secrets: set[str] = field(default_factory=set)
    sections: list[Section] = field(default_factory=list)
    audit: list[tuple[str, str]] = field(default_factory=list)
    #: the sender's account, set by dispatch before a PLAYER command runs
    account: Account | None = None
    #: verify(account, password) -> bool; the worker passes the verdict of its
    #: throttled check (throttle.py) so no password is hashed in the write transaction
    verify: Callable[[Account, str], bool] | None = None
    #: the mail's budget of mails to addresses other than the sender's (PBM_MAX_NOTICES_PER_MAIL;
    #: None: no limit, the GM's mail); account commands spend it (recovery.py)
    budget: NoticeBudget | None = None
    #: what this mail's lines have done once already: a line that would do it again is refused
    once: set[tuple[str, str]] = field(default_factory=set)

    @property
    def actor(self) -> str:
        """Who the audit log says did it."""
        return self.handle or self.sender

    def as_actor(self) -> Actor:
        return Actor(handle=self.handle, email=self.sender, authenticated=self.authenticated, is_gm=self.is_gm)

    def player(self) -> Account:
        """The sender's account (a PLAYER command's handler may rely on it)."""
        if self.account is None:
            raise RuntimeError("a player command ran without the sender's account")
        return self.account

    def game(self, name: str, unknown: str = "") -> Game:
        """The game called ``name``; ServerRefused if there is none (``unknown``
        is said after that)."""
        g = find_game(self.session, name)
        if g is None:
            raise ServerRefused(f"there is no game named {name}{unknown}")
        return g

    def outbox(self) -> Mailer:
        if self.mailer is None:
            raise RuntimeError("this command sends mail, but the context has no mailer")
        return self.mailer


Handler = Callable[[ServerContext, Line, list[str]], Result]


@dataclass(frozen=True)
class ServerCommand:
    """One pbm@ command as it describes itself."""

    name: str
    audience: Audience
    handler: Handler
    #: (syntax, help line) rows shown by ``help``; the first is the main form.
    #: A help line may say ``{kinds}``: ``help`` puts the game kinds there.
    rows: tuple[tuple[str, str], ...]
    aliases: tuple[str, ...] = ()
    #: the line as its reply shows it, from its words (None: as written): a
    #: command that takes passwords masks them here
    echo: Callable[[list[str]], str] | None = None

    @property
    def syntax(self) -> str:
        return self.rows[0][0]

    @property
    def help(self) -> str:
        return self.rows[0][1]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def allowed(self, sender: Actor) -> bool:
        """May ``sender`` use the command?  A PLAYER command is open to a
        registered sender; it asks for the password when it runs."""
        if self.audience is Audience.GM:
            return sender.is_gm
        if self.audience is Audience.PLAYER:
            return sender.handle is not None
        return True


class Registry:
    def __init__(self) -> None:
        self._commands: list[ServerCommand] = []
        self._by_name: dict[str, ServerCommand] = {}

    def add(self, cmd: ServerCommand) -> ServerCommand:
        for name in cmd.names:
            if name in self._by_name:
                raise ValueError(f"the pbm@ command {name!r} is registered twice")
            self._by_name[name] = cmd
        self._commands.append(cmd)
        return cmd

    def __iter__(self) -> Iterator[ServerCommand]:
        return iter(self._commands)

    def get(self, word: str) -> ServerCommand | None:
        return self._by_name.get(word.lower())

    def for_audience(self, audience: Audience) -> list[ServerCommand]:
        return [c for c in self._commands if c.audience is audience]

    def names_for(self, sender: Actor) -> list[str]:
        """Every name (aliases included) ``sender`` may use, sorted."""
        return sorted(n for c in self._commands if c.allowed(sender) for n in c.names)

    def is_subject_command(self, text: str, sender: Actor) -> bool:
        """A Subject (its reply/forward prefixes already refused by
        mailtext.subject_command) is a command when its first word names a
        command the sender may use: "Game question" from a player is not
        read as the GM's ``game`` command."""
        words = text.split()
        cmd = self.get(words[0]) if words else None
        return cmd is not None and cmd.allowed(sender)

    def run_line(self, ctx: ServerContext, line: Line) -> Result:
        words = line.text.split()
        cmd = self.get(words[0])
        if cmd is None:
            return Result(line, False, self._unknown(ctx, words), self._unknown_echo(words))
        try:
            _admit(cmd, ctx, line)
            result = cmd.handler(ctx, line, words)
        except ServerRefused as exc:
            # the one place a pbm@ refusal becomes the line's result
            result = Result(line, False, str(exc))
        if cmd.echo is not None:
            result.text = cmd.echo(words)
        return result


    def _unknown(self, ctx: ServerContext, words: list[str]) -> str:
        """Why a line is refused whose first word is no command: a game's
        command (``join ring2``, ``ring2 join``) says where to mail it."""
        for at, other in ((1, 0), (0, 1)):
            game = find_game(ctx.session, words[at]) if len(words) > max(at, other) else None
            if game is not None:
                order = " ".join([words[other].upper(), *words[2:]])
                return (f"{words[other]!r} is not a command here: game commands go to the game's address; "
                        f"mail {order} to {game.name}@{ctx.settings.domain}")
        known = ", ".join(self.names_for(ctx.as_actor()))
        return f"unknown command {words[0]!r}; commands here: {known} (game commands go to the game's address)"

    def _unknown_echo(self, words: list[str]) -> str:
        """The echo of a line whose first word is no command: as written (the
        mail's passwords are masked in all of the reply), unless it looks like a
        mistyped command that takes a password (``regster alice s3cret``):
        then as that command's echo masks it."""
        takes_password = {n: c for c in self._commands if c.echo is not None for n in c.names}
        close = difflib.get_close_matches(words[0].lower(), list(takes_password), n=1, cutoff=0.75)
        if close:
            echo = takes_password[close[0]].echo
            assert echo is not None
            return echo(words)
        return " ".join(words)


def masked_after_two(words: list[str]) -> str:
    """The first two words of a line, each word after them masked."""
    return " ".join(words[:2] + [MASK] * len(words[2:]))


GM_REFUSED = (
    "game master commands are accepted only from the game master's address with the GM password "
    "in the mail ($$password$$); nothing was done"
)


def _admit(cmd: ServerCommand, ctx: ServerContext, line: Line) -> None:
    """ServerRefused if the sender may not run ``cmd``; for a PLAYER
    command, also finds the sender's account."""
    if cmd.audience is Audience.GM and not ctx.is_gm:
        audit(ctx.session, ctx.now, ctx.actor, "gm refused", f"{ctx.sender}: {line.text[:200]}")
        raise ServerRefused(GM_REFUSED)
    if cmd.audience is Audience.PLAYER:
        if not ctx.handle:
            raise ServerRefused(f"you are not registered: first send 'register HANDLE PASSWORD' to {ctx.settings.server_address}")
        if not ctx.authenticated:
            raise ServerRefused("this needs your password: put $$yourpassword$$ anywhere in the mail")
        ctx.account = account_by_handle(ctx.session, ctx.handle)


#: every pbm@ command; filled by the modules of pbm_server.commands
REGISTRY = Registry()


def command(name: str, audience: Audience, *rows: tuple[str, str], aliases: tuple[str, ...] = (),
            echo: Callable[[list[str]], str] | None = None) -> Callable[[Handler], Handler]:
    """Register the decorated handler as the pbm@ command ``name``."""

    def register(handler: Handler) -> Handler:
        REGISTRY.add(ServerCommand(name, audience, handler, tuple(rows), aliases, echo))
        return handler

    return register
