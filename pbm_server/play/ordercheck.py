"""Eressea's order template and order check.

The template: each turn report ends with the player's current orders as a
block to edit and send back (``Rules.order_template``: the orders held for
the new turn, else those of the turn just run).  The check: a mail to a game
whose first line is ``CHECK`` has the lines below it run through the game's
rules on a copy of the state, and the reply says what would be accepted and
what refused; nothing is stored, sent or drawn from the turn's dice.
"""

from __future__ import annotations

import json
import random
import re
import textwrap
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from games.base import Command, Context, Result, Rules, State
from pbm_server.store.models import Game, Order

#: the first line of a mail to a game that asks for a check only
CHECK_WORD = "CHECK"

CHECK_NOTE = ("CHECK: the lines below the CHECK line were checked, not submitted. Nothing was changed: the orders "
              "the server holds for you stay as they were, no other player was told, and no dice were rolled "
              "from the turn's stream (a check that draws dice uses its own). Send the same lines without the "
              "CHECK line to submit them.")


def is_check(text: str) -> bool:
    return text.strip().upper() == CHECK_WORD


def forecast(ok: bool, message: str) -> str:
    """A result's words as a forecast: "would be accepted" (never "would be
    accepted: accepted"), "would be refused: why"; a game's "now: ORDERS"
    (the order set it holds after the line) becomes what it would hold."""
    if not ok:
        return "would be refused: " + message
    rest = re.sub(r"^accepted\s*[:;,.]?\s*", "", message, flags=re.I)
    if rest.startswith("now: "):
        rest = "your orders would then be: " + rest[len("now: "):]
    return "would be accepted" + (f": {rest}" if rest else "")


def check_orders(rules: Rules[Any], state: State, commands: list[Command], ctx: Context) -> list[Result]:
    """What ``commands`` would come to, sent now by ``ctx.actor``: the game's
    own results, worded as a forecast.  The stored state is not touched (the
    rules get a copy), nothing is written."""
    copy = json.loads(json.dumps(state))
    ctx.rng = random.Random()  # never the turn's stream: a check must not move it
    ctx.memo = {}
    outcome = rules.apply(copy, commands, ctx)
    out = []
    for r in outcome.results:
        out.append(Result(r.line, r.ok, forecast(r.ok, r.message), r.text))
    return out


def order_blocks(session: Session, game: Game, rules: Rules[Any], turn_run: int, domain: str) -> dict[str, str]:
    """Each player's order template (handle, lower case -> the block that
    ends their report of ``turn_run``); empty for a game without templates."""
    state = game.state
    if game.status == "finished":
        return {}
    last = {o.handle.lower(): list(o.lines) for o in session.scalars(
        select(Order).where(Order.game_id == game.id, Order.turn == turn_run)).all()}
    out = {}
    try:
        players = list(rules.players(state))
    except Exception:
        return {}
    for handle in players:
        lines = rules.order_template(state, handle, last.get(handle.lower(), []))
        if lines is None:
            return {}
        head = (f"YOUR ORDERS FOR {rules.turn_name.upper()} {game.turn}: edit them and send them back to "
                f"{game.name}@{domain} with your $$password$$ (put CHECK on the first line to have them "
                "checked without submitting them):")
        done = bool(last.get(handle.lower()))  # orders were sent, and none of them applies any more
        body = "\n".join(lines) if lines else (
            f"({'your orders of' if done else 'no orders from you for'} {rules.turn_name} {turn_run}"
            f"{' were carried out and none applies again' if done else ''}; "
            f"'help {game.kind}' to pbm@{domain} lists the orders)")
        out[handle.lower()] = textwrap.fill(head, 76, break_long_words=False, break_on_hyphens=False) + "\n\n" + (
            body if lines else textwrap.fill(body, 76, break_long_words=False, break_on_hyphens=False))
    return out
