"""The plumbing games/base.py does once for every game: the parse guard,
dispatch to handle_<name>, refusals, deferred results, option values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from games.base import Command, Context, GameError, Line, Mail, Option, Outcome, Refused, Rules, State, choice
from tests.games.driver import Table

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb


@dataclass
class EchoMail(Mail):
    seen: list[str]


class Echo(Rules[EchoMail]):
    """A game whose lines are their own command names."""

    kind = "echo"
    options = (Option("mode", "loud", "how", choice("loud", "quiet")), Option("times", 1, "how often", int))

    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        return {"options": self.option_values(options), "said": []}

    def parse_line(self, line: Line) -> Command:
        if line.text == "crash":
            raise ValueError(f"cannot read {line.text} secret-word")
        if line.text == "bad":
            return Command(line, "bad", error="bad is never good")
        return Command(line, line.text.split()[0])

    def safe_echo(self, line: Line) -> str:
        return "****"

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> EchoMail:
        return EchoMail(ctx, commands, Outcome(state=state), seen=list(state["said"]))

    def close_mail(self, mail: EchoMail) -> None:
        mail.outcome.state = {**mail.outcome.state, "said": mail.seen}

    def priority(self, cmd: Command) -> int:
        return 0 if cmd.name == "first" else 1

    def handle_say(self, mail: EchoMail, cmd: Command) -> str:
        mail.seen.append("say")
        return "said"

    def handle_first(self, mail: EchoMail, cmd: Command) -> str:
        mail.seen.append("first")
        return "went first"

    def handle_no(self, mail: EchoMail, cmd: Command) -> str:
        raise Refused("no means no")

    def handle_later(self, mail: EchoMail, cmd: Command) -> None:
        return None  # close_mail would give the result; Echo forgets to

    def players(self, state: State) -> list[str]:
        return []


def test_parse_never_raises_and_masks_the_echo() -> None:
    crash, bad, say = Echo().parse([Line(1, "crash"), Line(2, "bad"), Line(3, "say")])
    assert crash.error == "could not read this line (ValueError)" and crash.text == "****"
    assert "secret-word" not in crash.error
    assert bad.error == "bad is never good"
    assert say.ok and say.name == "say"


def test_apply_dispatches_by_name_in_priority_order() -> None:
    t = Table(Echo())
    out = t.send("alice", "say", "no", "bad", "first", "unknown", "later")
    assert [(r.ok, r.message) for r in out.results] == [
        (True, "accepted: said"),
        (False, "no means no"),
        (False, "bad is never good"),
        (True, "accepted: went first"),
        (False, "not understood: echo has no command 'unknown'"),
        (False, "not understood"),
    ]
    assert out.state["said"] == ["first", "say"]


def test_option_values() -> None:
    rules = Echo()
    assert rules.option_values({}) == {"mode": "loud", "times": 1}
    assert rules.option_values({"mode": "QUIET", "times": "3"}) == {"mode": "quiet", "times": 3}
    assert rules.option_values({"times": 4}) == {"mode": "loud", "times": 4}
    with pytest.raises(GameError, match="echo has no option 'colour'"):
        rules.option_values({"colour": "red"})
    with pytest.raises(GameError, match="option mode='shout': expected one of loud, quiet"):
        rules.option_values({"mode": "shout"})


def test_pbm_prefix_is_declared_by_the_game() -> None:
    from games import KINDS, get_rules

    assert {kind for kind in KINDS if get_rules(kind).pbm_prefix} == {"curio"}
    assert Echo.pbm_prefix is False
