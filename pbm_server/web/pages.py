"""What the public game pages show, as plain data: the HTML pages and their
JSON twins are made from the same dictionaries (docs/web.md; the JSON shapes
are described by the schemas in docs/schema/).

Only what an observer may see: a game's board is ``rules.view(state, None)``,
the view every game already gives its observers (their mails are checked
against ``hidden_from`` by the contract suite, and so are these pages); a
turn's report is shown only where every player got the same one
(``Snapshot.report``); no e-mail address of a player appears anywhere.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from games import get_rules
from pbm_server.accounts import links
from pbm_server.base import clock
from pbm_server.mail.compose import Composer
from pbm_server.play import views
from pbm_server.play.seeds import seed_hash
from pbm_server.store.models import Game, Snapshot


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _summary(game: Game, domain: str) -> dict[str, Any]:
    rules = get_rules(game.kind)
    return {
        "name": game.name,
        "kind": game.kind,
        "title": rules.title,
        "status": game.status,
        "players": len(rules.players(game.state)),
        "has_turns": rules.has_turns,
        "turn_name": rules.turn_name,
        "turn": game.turn if rules.has_turns else None,
        "next_deadline": _iso(game.next_deadline) if rules.has_turns else None,
        "join_address": f"{game.name}@{domain}" if game.status == "running" else None,
    }


def games_index(session: Session, domain: str) -> dict[str, Any]:
    games = session.scalars(select(Game).order_by(Game.name)).all()
    return {"games": [_summary(g, domain) for g in games]}


def _turns(session: Session, game: Game) -> list[dict[str, Any]]:
    afters = session.scalars(select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "after")
                             .order_by(Snapshot.id)).all()
    last: dict[int, Snapshot] = {}
    for snap in afters:  # a turn run again after a rollback: its newest run counts
        last[snap.turn] = snap
    # `pbm turn rollback NAME T` takes the game back before turn T: each run of T or later before it is void
    rollbacks = session.execute(select(Snapshot.turn, Snapshot.id).where(Snapshot.game_id == game.id,
                                                                          Snapshot.phase == "rollback")).all()

    def voided(snap: Snapshot) -> bool:
        return any(back <= snap.turn and rid > snap.id for back, rid in rollbacks)
    return [{
        "turn": t,
        "processed_at": _iso(s.created_at),
        "seed": s.seed,
        "seed_sha256": seed_hash(s.seed) if s.seed else None,
        "public_report": s.report is not None,
        "rolled_back": voided(s),
    } for t, s in sorted(last.items())]


def game_page(session: Session, composer: Composer, name: str, domain: str) -> dict[str, Any] | None:
    """A game's page, or None when there is no such game."""
    game = session.scalar(select(Game).where(func.lower(Game.name) == name.lower()))
    if game is None:
        return None
    rules = get_rules(game.kind)
    board = []
    for section in rules.view(game.state, None):
        title, text, html = composer.section(section, game.kind)
        board.append({"title": title, "text": text, "html": html})
    data = _summary(game, domain)
    data.update({
        "board": board,
        "turns": _turns(session, game) if rules.has_turns else [],
        "open_turn_seed_sha256": seed_hash(game.turn_seed) if rules.has_turns else None,
        "deadline_rule": game.deadline,
    })
    return data


def turn_page(session: Session, name: str, turn: int) -> dict[str, Any] | None:
    """One processed turn of a game: its public report, published seed hash
    and revealed seed; None when there is no such game or turn."""
    game = session.scalar(select(Game).where(func.lower(Game.name) == name.lower()))
    if game is None:
        return None
    snap = session.scalars(select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "after",
                                                  Snapshot.turn == turn).order_by(Snapshot.id.desc()).limit(1)).first()
    if snap is None:
        return None
    rules = get_rules(game.kind)
    return {
        "name": game.name,
        "kind": game.kind,
        "title": rules.title,
        "turn_name": rules.turn_name,
        "turn": turn,
        "processed_at": _iso(snap.created_at),
        "seed": snap.seed,
        "seed_sha256": seed_hash(snap.seed) if snap.seed else None,
        # a report that differed per player (hidden faces, own holdings) is never public
        "report": snap.report,
    }


def own_page(session: Session, composer: Composer, handle: str, name: str, token: str) -> dict[str, Any] | None:
    """A player's own view of a game through a signed link (accounts/links.py),
    or None when the link does not open it."""
    game = session.scalar(select(Game).where(func.lower(Game.name) == name.lower()))
    if game is None:
        return None
    account = links.check(session, "view", handle, game.name, token, clock.now())
    if account is None:
        return None
    sections = []
    for section in views.status(session, game, account):
        title, text, html = composer.section(section, game.kind)
        sections.append({"title": title, "text": text, "html": html})
    expires = token.partition(".")[0]
    return {"name": game.name, "handle": account.handle, "sections": sections,
            "expires": datetime.fromtimestamp(int(expires)).isoformat()}
