"""Tally: JOIN, then ADD to your own tally; a SECRET word stays yours until the turn."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from games.base import ALL_PLAYERS, Command, Context, Line, Mail, Notice, Outcome, Refused, Rules, Section, State

from . import parse, view
from .state import validated


@dataclass
class TallyMail(Mail):
    state: State

    def handle(self) -> str:
        actor = self.ctx.actor
        if actor is None or actor.handle is None or not actor.authenticated:
            raise Refused("register and put your password between $$ signs")
        return actor.handle


class TallyRules(Rules[TallyMail]):
    kind = "tally"
    title = "Tally"
    summary = "A toy: add numbers to your tally; the turn reveals the secrets."

    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        self.option_values(options)
        return {"round": 1, "tally": {}, "secrets": {}}

    def import_state(self, data: dict[str, Any]) -> State:
        return validated(data)

    def parse_line(self, line: Line) -> Command:
        return parse.parse_line(line)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> TallyMail:
        return TallyMail(ctx, commands, Outcome(state=state), state=copy.deepcopy(state))

    def close_mail(self, mail: TallyMail) -> None:
        mail.outcome.state = mail.state

    def handle_join(self, mail: TallyMail, cmd: Command) -> str:
        me = mail.handle()
        if me in mail.state["tally"]:
            raise Refused("you are playing already")
        mail.state["tally"][me] = 0
        mail.outcome.joined.append(me)
        return "you are in"

    def handle_add(self, mail: TallyMail, cmd: Command) -> str:
        me = mail.handle()
        if me not in mail.state["tally"]:
            raise Refused("JOIN first")
        mail.state["tally"][me] += cmd.args["n"]
        return f"your tally is {mail.state['tally'][me]}"

    def handle_secret(self, mail: TallyMail, cmd: Command) -> str:
        me = mail.handle()
        if me not in mail.state["tally"]:
            raise Refused("JOIN first")
        mail.state["secrets"][me] = cmd.args["word"]
        return "kept until the turn"

    def run_turn(self, state: State, ctx: Context) -> Outcome:
        new = copy.deepcopy(state)
        revealed = "\n".join(f"{h}: {w}" for h, w in sorted(new["secrets"].items())) or "(no secrets)"
        new["round"] += 1
        new["secrets"] = {}
        notice = Notice(to=[ALL_PLAYERS], subject=f"Tally round {state['round']}", text=revealed, kind="report")
        return Outcome(state=new, notices=[notice], turn_done=True)

    def players(self, state: State) -> list[str]:
        return sorted(state["tally"])

    def view(self, state: State, viewer: str | None) -> list[Section]:
        return view.sections(state, viewer)

    def hidden_from(self, state: State, viewer: str | None) -> list[str]:
        return sorted(w for h, w in state["secrets"].items() if h != viewer)
