"""The one test driver of the rules layer: plays a game through the
:class:`games.base.Rules` interface the way the server does, without the
server.  The per-game tests and the contract suite (tests/contract) use it.

* ``Table.send`` parses a mail's lines, checks pbmserv-style inline
  credentials (``userid password``) against :func:`password`, fills
  ``ctx.emails`` for the accounts a line names, applies the commands and
  checks the game neither changed the state it was given nor lost a line.
* ``Table.run`` runs the turn with the same checks.
* A ``Table`` is the :class:`games.scenario.Table` each game's
  ``scenario.py`` plays on (tests/contract).
* :func:`render` renders a game's template with the server's own Jinja
  environment (``pbm_server.mail.compose.make_environment``).
"""

from __future__ import annotations

import copy
import json
import random
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, TemplateNotFound

from games.base import Actor, Command, Context, Line, Outcome, Rules, Section, State

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def password(handle: str) -> str:
    """The password of every account at the table."""
    return f"{handle.lower()}-pw-7"


def lines(*texts: str) -> list[Line]:
    return [Line(i + 1, t) for i, t in enumerate(texts)]


class Table:
    """One game in memory.  ``history`` holds every state it went through and
    ``outcomes`` every (sender, Outcome), in order.

    A game's own tests subclass it for their shortcuts; class attributes say
    how the server would see the senders."""

    #: senders have proven their password with $$password$$ (curio: False,
    #: its players give ``userid password`` on the line instead)
    authenticated = True
    #: a fresh ``random.Random(seed)`` for every mail and turn, instead of one
    #: stream for the whole game
    fresh_rng = False

    def __init__(
        self,
        rules: Rules[Any],
        options: dict[str, Any] | None = None,
        *,
        now: datetime = NOW,
        game_name: str = "g1",
        seed: int = 1,
        registered: set[str] | None = None,
        passwords: dict[str, str] | None = None,
    ) -> None:
        self.rules = rules
        self.now = now
        self.game_name = game_name
        self.seed = seed
        self.rng = random.Random(seed)
        #: accounts that exist (None: every handle has an account)
        self.registered = registered
        self.passwords = passwords
        self.state: State = rules.new_game(options or {}, self.ctx(None))
        self.history: list[State] = [self.state]
        #: (sender, outcome) of every mail kept and turn run (sender None)
        self.outcomes: list[tuple[str | None, Outcome]] = []

    # -- the server's side ------------------------------------------------------
    def email(self, handle: str) -> str:
        return f"{handle.lower()}@example.org"

    def password(self, handle: str) -> str:
        return self.passwords[handle] if self.passwords is not None else password(handle)

    def known(self, handle: str | None) -> bool:
        return handle is not None and (self.registered is None or handle in self.registered)

    def ctx(
        self,
        handle: str | None = None,
        *,
        authenticated: bool | None = None,
        gm: bool = False,
        rng: random.Random | None = None,
        emails: dict[str, str] | None = None,
        turn: int = 0,
        now: datetime | None = None,
        email: str | None = None,
    ) -> Context:
        actor = None
        if handle is not None or gm:
            auth = self.authenticated if authenticated is None else authenticated
            actor = Actor(handle, email or self.email(handle or "gm"), auth, gm)
        if rng is None:
            rng = random.Random(self.seed) if self.fresh_rng else self.rng
        return Context(now=now or self.now, rng=rng, actor=actor, game_name=self.game_name,
                       emails=emails or {}, turn=turn)

    def commands(self, sender: str | None, texts: tuple[str, ...] | list[str]) -> tuple[list[Command], dict[str, str]]:
        """Parse, then check inline credentials as the server does."""
        commands = self.rules.parse(lines(*texts))
        emails = {sender: self.email(sender)} if sender is not None and self.known(sender) else {}
        for cmd in commands:
            if cmd.credentials:
                userid, given = cmd.credentials
                if userid == sender and self.known(userid) and given == self.password(userid):
                    cmd.actor = userid
                else:
                    cmd.error = "wrong userid or password"
                    # as the server does (pipeline/authenticate.py): the "userid" slot may
                    # hold a misplaced password, so a failed line never echoes it
                    cmd.text = " ".join("****" if w == userid else w for w in cmd.text.split(" "))
            for handle in cmd.accounts:
                if self.known(handle):
                    emails[handle] = self.email(handle)
        return commands, emails

    def apply(self, sender: str | None, *texts: str, **kw: Any) -> Outcome:
        """Apply a mail to the current state without keeping the result
        (``kw``: see ``ctx``)."""
        commands, emails = self.commands(sender, texts)
        before = copy.deepcopy(self.state)
        out = self.rules.apply(self.state, commands, self.ctx(sender, emails=emails, **kw))
        assert len(out.results) == len(commands), "not one result per line"
        assert [r.line for r in out.results] == [c.line for c in commands], "results out of line order"
        assert self.state == before, "apply changed the state it was given"
        # always a JSON document, exactly as it reads back (the server keeps it
        # in memory as returned: pbm_server/play/statecache.py)
        assert json.loads(json.dumps(out.state)) == out.state, "the state is not what JSON gives back"
        return out

    def send(self, sender: str | None, *texts: str, **kw: Any) -> Outcome:
        """Apply a mail and keep its state."""
        out = self.apply(sender, *texts, **kw)
        self.keep(out, sender)
        return out

    def run(self, rng: random.Random | None = None, turn: int = 0, now: datetime | None = None) -> Outcome:
        before = copy.deepcopy(self.state)
        out = self.rules.run_turn(self.state, self.ctx(None, rng=rng, turn=turn, now=now))
        assert self.state == before, "run_turn changed the state it was given"
        assert json.loads(json.dumps(out.state)) == out.state, "the state is not what JSON gives back"
        self.keep(out)
        return out

    def keep(self, out: Outcome, sender: str | None = None) -> None:
        self.state = out.state
        self.history.append(out.state)
        self.outcomes.append((sender, out))


def check_commands(rules: Rules[Any], given: list[Line], commands: list[Command]) -> None:
    """What ``parse`` must return: one Command per line, in order; a line it
    read has a handler in the game, a line it could not read says why."""
    assert [c.line for c in commands] == given, "not one command per line, in order"
    for cmd in commands:
        if cmd.error is None:
            assert cmd.ok
            assert callable(getattr(rules, "handle_" + cmd.name, None)), f"{cmd.name!r} parses but has no handler"
        else:
            assert not cmd.ok and isinstance(cmd.error, str) and cmd.error.strip(), f"empty error for {cmd.line}"


# -- rendering, as the server does ----------------------------------------------------------
_ENV: Environment | None = None


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        from pbm_server.mail.compose import make_environment

        _ENV = make_environment()
    return _ENV


def render(kind: str, template: str, data: dict[str, Any], html: bool = False) -> str:
    """``templates/<kind>/<template>`` rendered with the server's environment
    (``html``: its ``.html`` sibling; TemplateNotFound if there is none),
    with the ``domain`` the server's Composer gives every template."""
    name = f"{kind}/{template}"
    if html:
        name = name[: -len(".txt")] + ".html"
    return environment().get_template(name).render(**{"domain": "pbm.test", **data})


def render_all(kind: str, template: str, data: dict[str, Any]) -> list[str]:
    """The text and, where the template has one, the HTML sibling."""
    out = [render(kind, template, data)]
    if template.endswith(".txt"):
        try:
            out.append(render(kind, template, data, html=True))
        except TemplateNotFound:
            pass
    return out


def section_texts(kind: str, section: Section) -> list[str]:
    """What a reader of ``section`` gets to see, in every form."""
    shown = [section.title]
    if section.template:
        shown += render_all(kind, section.template, section.data)
    else:
        shown.append(section.text)
    return shown
