"""Creating a game: its name, its options, its first state and seed."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from games import KINDS, get_rules
from games.base import Context, GameError, Rules
from pbm_server.base.errors import ServerRefused
from pbm_server.play.gamestate import set_deadline
from pbm_server.play.seeds import new_seed, rng_from_seed
from pbm_server.store.lookup import audit, find_game
from pbm_server.store.models import Game, Snapshot

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{1,40}$")

RESERVED_NAMES = {"pbm", "postmaster", "abuse", "mailer-daemon", "root", "gm", "admin"}


def parse_options(rules: Rules[Any], raw: dict[str, str]) -> dict[str, Any]:
    known = {o.name: o for o in rules.options}
    out = {o.name: o.default for o in rules.options}
    for key, value in raw.items():
        if key not in known:
            names = ", ".join(sorted(known)) or "none"
            raise ServerRefused(f"{rules.kind} has no option {key!r} (options: {names})")
        try:
            out[key] = known[key].parse(value)
        except (ValueError, TypeError) as exc:
            raise ServerRefused(f"option {key}={value!r}: {exc} ({known[key].help})") from None
    return out


def create_game(
    session: Session,
    kind: str,
    name: str,
    raw_options: dict[str, str],
    deadline: str | None,
    now: datetime,
    actor: str = "cli",
    state: dict[str, Any] | None = None,
) -> Game:
    name = name.lower()
    if kind not in KINDS:
        raise ServerRefused(f"unknown game kind {kind!r}; kinds: {', '.join(KINDS)}")
    if not NAME_RE.match(name) or name in RESERVED_NAMES:
        raise ServerRefused(
            f"{name!r} cannot be a game name: use 2-41 letters, digits, '-' or '_', starting with a letter "
            f"(not {', '.join(sorted(RESERVED_NAMES))})"
        )
    if find_game(session, name):
        raise ServerRefused(f"a game named {name!r} exists already")
    rules = get_rules(kind)
    options = parse_options(rules, raw_options)
    seed = new_seed()
    if state is None:
        try:
            state = rules.new_game(options, Context(now=now, rng=rng_from_seed(seed), turn=1, game_name=name))
        except GameError as exc:
            raise ServerRefused(str(exc)) from None
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
        raise ServerRefused(f"{rules.title} has no turns, so it takes no deadline")
    session.add(game)
    session.flush()
    session.add(Snapshot(game_id=game.id, turn=1, phase="created", version=1, state=game.state, created_at=now))
    audit(session, now, actor, "game new", f"{kind} {name} options={json.dumps(options)} deadline={game.deadline}", game)
    return game
