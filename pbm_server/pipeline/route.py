"""The third stage of a mail's path: where its lines go.

A command mail to pbm@DOMAIN is read as server commands, except the lines of
a game kind that takes its commands there (``Rules.pbm_prefix``, pbmserv
style: "curio move 101 ..."), which go to that kind's game, or to a new game
of that kind if there is none yet.  A mail to NAME@DOMAIN goes to that game,
except the lines the game refuses that are pbm@ commands: ``help`` and
``status`` are answered there as ``help KIND`` and ``status NAME``, any other
is refused with where to send it.
The Subject is read as a line where it is one: a server command the sender
may use, or a line the game parses.  The game lines are parsed here, by the
game's own rules, before any lock is taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from games import KINDS, get_rules, prefixed_kinds
from games.base import Actor, Command, Line
from pbm_server.commands.dispatch import REGISTRY
from pbm_server.pipeline.classify import CommandText
from pbm_server.play.ordercheck import is_check
from pbm_server.store.lookup import game_name_kind
from pbm_server.store.models import Game


@dataclass(frozen=True)
class ToServer:
    """The mail's lines are pbm@ commands (or it went to no known game)."""


@dataclass(frozen=True)
class ToGame:
    """The game lines go to the existing game ``name``."""

    name: str


@dataclass(frozen=True)
class NewGameOf:
    """The game lines are for kind ``kind``, of which no game exists yet:
    one named after the kind is created when the mail is handled."""

    kind: str


Route = ToServer | ToGame | NewGameOf


@dataclass
class Routed:
    """Where a command mail's lines go."""

    route: Route = ToServer()
    #: lines for the pbm@ command registry
    server_lines: list[Line] = field(default_factory=list)
    #: lines for the game of ``route``, and the game's kind
    game_lines: list[Line] = field(default_factory=list)
    game_kind: str | None = None
    #: the game lines as the game's rules parsed them
    commands: list[Command] = field(default_factory=list)
    #: the game the mail was addressed to (NAME@DOMAIN): where its press goes
    press_game: str | None = None
    #: the mail went to NAME@DOMAIN and there is no such game
    no_game: str | None = None
    #: the mail's first line is CHECK: its game lines are checked, not submitted (ordercheck.py)
    check: bool = False
    #: lines to NAME@ that the game refuses and that are pbm@ commands: the reply says where they go
    misdirected: list[Line] = field(default_factory=list)


def route(s: Session, local: str, text: CommandText, actor: Actor) -> Routed:
    """Where the lines of a mail to ``local``@DOMAIN go, sent by ``actor``."""
    routed = _to_server(s, text, actor) if local == "pbm" else _to_game(s, local, text)
    if routed.game_lines and routed.game_kind is not None:
        routed.commands = get_rules(routed.game_kind).parse(routed.game_lines)
        if local != "pbm":
            _server_lines_at_game(routed)
    return routed


#: pbm@ commands every game address answers as well: ``help`` with the
#: game's rule book, ``status`` with the sender's state in that game
AT_EVERY_GAME = ("help", "status")
#: pbm@ commands about one game that its address takes without the game's
#: name: ``vote extend 24h`` there is ``vote NAME extend 24h`` (commands/votes.py)
OF_THE_GAME = ("vote", "ready")
#: pbm@ commands about one game that its address answers too, the game's name
#: understood when the line has none (play/people.py)
AT_GAME_NAMED = ("resign", "take")


def _server_lines_at_game(routed: Routed) -> None:
    """A line to NAME@ that the game refuses and that is a pbm@ command:
    ``help`` and ``status`` are answered as ``help KIND`` and ``status
    NAME``; any other is kept aside, and the reply says where to send it."""
    name = routed.press_game or ""
    kept: list[Command] = []
    for cmd in routed.commands:
        words = cmd.line.text.split()
        first = words[0].lower() if words else ""
        if cmd.ok or REGISTRY.get(first) is None:
            kept.append(cmd)
        elif first == "help":
            bare = len(words) == 1 or (words[1].lower() not in KINDS and words[1].lower() != "press")
            routed.server_lines.append(Line(cmd.line.number, f"help {routed.game_kind}" if bare else cmd.line.text))
        elif first == "status":
            routed.server_lines.append(Line(cmd.line.number, f"status {name}" if len(words) == 1 else cmd.line.text))
        elif first in OF_THE_GAME:
            named = len(words) > 1 and words[1].lower() == name.lower()
            routed.server_lines.append(cmd.line if named else Line(cmd.line.number, " ".join([first, name, *words[1:]])))
        elif first in AT_GAME_NAMED and len(words) == 1:  # resign, take: this game (issue 44.2)
            routed.server_lines.append(Line(cmd.line.number, f"{first} {name}"))
        elif first in AT_GAME_NAMED:
            routed.server_lines.append(cmd.line)
        else:
            routed.misdirected.append(cmd.line)
    routed.commands = kept
    routed.game_lines = [c.line for c in kept]


def _to_server(s: Session, text: CommandText, actor: Actor) -> Routed:
    """Lines to pbm@: server commands, and the lines of a game kind that
    takes its commands there (Rules.pbm_prefix)."""
    routed = Routed()
    prefixed = prefixed_kinds()
    lines = text.lines
    subject = text.subject
    if subject is not None:
        first = subject.text.split()[0].lower()
        if first in prefixed or REGISTRY.is_subject_command(subject.text, actor):
            lines = [subject] + lines
    for line in lines:
        first = line.text.split()[0].lower()
        if first in prefixed:
            routed.game_lines.append(line)
            routed.game_kind = first
        else:
            routed.server_lines.append(line)
    if routed.game_kind is not None:
        game = s.scalar(select(Game).where(Game.kind == routed.game_kind).order_by(Game.id).limit(1))
        routed.route = ToGame(game.name) if game else NewGameOf(routed.game_kind)
    return routed


def _to_game(s: Session, local: str, text: CommandText) -> Routed:
    """Lines to NAME@: the game's lines (the Subject first, if it parses as
    the game's)."""
    named = game_name_kind(s, local)
    if named is None:
        return Routed(no_game=local)
    name, kind = named
    lines = text.lines
    check = bool(lines) and is_check(lines[0].text)
    if check:
        lines = lines[1:]
    if text.subject is not None:
        tried = get_rules(kind).parse([text.subject])
        first = text.subject.text.split()[0].lower()
        if (tried and all(c.ok for c in tried)) or first in AT_EVERY_GAME + OF_THE_GAME:
            lines = [text.subject] + lines
    return Routed(ToGame(name), game_lines=lines, game_kind=kind, press_game=name, check=check)
