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

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from games import get_rules
from games.curio.boards import CurioState
from games.curio.ratings import START as RATING_START
from pbm_server.accounts import links
from pbm_server.base import clock
from pbm_server.mail.compose import Composer, redact
from pbm_server.play import readycheck, views, votes
from pbm_server.play.people import open_seats
from pbm_server.play.reliability import Record, record_of
from pbm_server.play.roster import join_offer
from pbm_server.play.seeds import seed_hash
from pbm_server.store.lookup import account_by_handle
from pbm_server.store.models import Game, Press, SeatOffer, Snapshot
from pbm_server.web import charts

#: (game id, its newest processed turn's snapshot id) -> the chart and its table: made once per turn
_CHARTS: dict[tuple[str, int, int], dict[str, Any] | None] = {}
_CHARTS_KEPT = 256
#: (database, game id, after-snapshot id, before-snapshot id) -> a processed turn's drawing (label, sections,
#: figures): made once per turn
_TURNS: dict[tuple[str, int, int, int], tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = {}
_TURNS_KEPT = 64
#: turns a chart shows, at most (the newest)
CHART_TURNS = 30
#: public press a game's page and feed show (the newest)
PRESS_SHOWN = 20
#: plays a sequence game's standings chart shows (spread over the game)
CHART_PLAYS = 20
#: rated boards a player's rating chart and table show (the newest)
RATED_SHOWN = 60
#: handles a game's page names (a large game's page says how many more)
PLAYERS_NAMED = 100


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def game_stamp(session: Session, name: str) -> tuple[Any, ...] | None:
    """What a game's pages depend on, read without its state: a page made
    for the same stamp is the same page (web/app.py keeps it).  None when
    there is no such game or it is private: every page of a private game
    answers as for a game that does not exist (issue 41)."""
    press = select(func.max(Press.id)).where(Press.game_id == Game.id, Press.public.is_(True)).scalar_subquery()
    # a seat offered changes no state, but shows on the page (issue 44.2)
    offered = select(func.max(SeatOffer.offered_at)).where(SeatOffer.game_id == Game.id).scalar_subquery()
    row = session.execute(select(Game.version, Game.updated_at, Game.status, Game.turn, Game.next_deadline,
                                 Game.deadline, Game.private, press, offered)
                          .where(func.lower(Game.name) == name.lower())).first()
    return None if row is None or row.private else tuple(row)


def index_stamp(session: Session) -> tuple[Any, ...]:
    """What the games list, its twin and the player pages depend on: each
    public game's version, status, turn and deadline (a GM's ``pbm game
    deadline`` or ``pause`` changes no version: it must still make them anew)."""
    rows = session.execute(select(Game.id, Game.version, Game.updated_at, Game.status, Game.turn, Game.next_deadline)
                           .where(Game.private.is_(False)).order_by(Game.id)).all()
    # kept as a digest: every kept list and player page holds its stamp, and a server may have many games
    return len(rows), hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()


def everyone(game: Game) -> list[str]:
    """The handles of everyone who plays in the game.  Mostly the game's
    players (``rules.players``: who gets its notices); a curio game is played
    on boards, and a board that ended (won, resigned, drawn) leaves that list
    while its two players still played there: they count too (not a board
    declined before its first move, on which nobody played)."""
    handles = list(get_rules(game.kind).players(game.state))
    if game.kind == "curio":
        seen = {h.casefold() for h in handles}
        for board in CurioState.from_state(game.state).boards.values():
            if board.status == "declined":
                continue
            for handle in (board.light, board.dark):
                if handle.casefold() not in seen:
                    seen.add(handle.casefold())
                    handles.append(handle)
        handles.sort(key=str.casefold)
    return handles


def _summary(game: Game, domain: str, players: list[str] | None = None) -> dict[str, Any]:
    """``players``: the game's players if the caller has them (a large game's
    state is read once per page)."""
    rules = get_rules(game.kind)
    if players is None:
        players = everyone(game)
    return {
        "name": game.name,
        "kind": game.kind,
        "title": rules.title,
        "status": game.status,
        "players": len(players),
        "has_turns": rules.has_turns,
        "turn_name": rules.turn_name,
        "turn": game.turn if rules.has_turns else None,
        "next_deadline": _iso(game.next_deadline) if rules.has_turns else None,
        **join_offer(game, rules, domain, len(players)),
    }


def games_index(session: Session, domain: str) -> dict[str, Any]:
    games = session.scalars(select(Game).where(Game.private.is_(False)).order_by(Game.name)).all()
    return {"games": [_summary(g, domain) for g in games]}


def _turns(session: Session, game: Game, offset: int = 0) -> list[dict[str, Any]]:
    """The processed turns; ``offset``: the turn pages of moves before them
    (sequence: its plays come first, the closing deadline after them)."""
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
        "turn": t + offset,
        "processed_at": _iso(s.created_at),
        "seed": s.seed,
        "seed_sha256": seed_hash(s.seed) if s.seed else None,
        "public_report": s.report is not None,
        "rolled_back": voided(s),
    } for t, s in sorted(last.items())]


def any_game(session: Session, name: str) -> Game | None:
    """The game named ``name``, public or private (a player's own links work for both)."""
    return session.scalar(select(Game).where(func.lower(Game.name) == name.lower()))


def _public_game(session: Session, name: str) -> Game | None:
    """The game named ``name`` if its pages are public (not made private by the GM)."""
    game = session.scalar(select(Game).where(func.lower(Game.name) == name.lower()))
    return None if game is None or game.private else game


def game_page(session: Session, composer: Composer, name: str, domain: str) -> dict[str, Any] | None:
    """A game's page, or None when there is no such game (or it is private)."""
    game = _public_game(session, name)
    if game is None:
        return None
    rules = get_rules(game.kind)
    board = []
    for section in rules.view(game.state, None):
        title, text, html = composer.section(section, game.kind)
        board.append({"title": title, "text": text, "html": html})
    handles = everyone(game)
    colours = rules.colours(game.state)
    data = _summary(game, domain, handles)
    moves = rules.move_turns(game.state)
    scores = dict(rules.scores(game.state))
    data.update({
        "chart": _play_chart(game, colours) if hasattr(rules, "score_history") else
        _chart(session, game, colours) if rules.has_turns else None,
        "handles": handles[:PLAYERS_NAMED],
        # every player, with their colour (the same on the boards and in the charts) and public score
        "roster": [{"handle": h, "colour": colours.get(h, 0), "score": scores.get(h)} for h in handles],
        "colours": colours,
        "press": public_press(session, game),
        "board": board,
        # a game played on several boards (curio): each board, its players, status and moves
        "boards": rules.boards(game.state),
        "turns": _turns(session, game, moves or 0) if rules.has_turns else [],
        "move_turns": moves,
        "move_turns_shown": _move_turns_shown(moves),
        "open_turn_seed_sha256": seed_hash(game.turn_seed) if rules.has_turns else None,
        "deadline_rule": game.deadline,
        # votes under way, who paused the game, who is ready (play/votes.py, readycheck.py)
        "people": votes.shown(session, game) + readycheck.shown(session, game),
        "updated_at": _iso(game.updated_at),
        "seats_offered": [{"seat": r.seat, "since": _iso(r.offered_at), "take": f"take {game.name}"}
                          for r in open_seats(session, game) if r.status == "offered"],
    })
    return data


#: the turn pages of moves (curio, sequence) a game's page links: the first and the newest
MOVE_TURNS_LINKED = 10


def _move_turns_shown(moves: int | None) -> list[int]:
    if not moves:
        return []
    newest = list(range(max(1, moves - MOVE_TURNS_LINKED + 1), moves + 1))
    return ([1] if newest[0] > 1 else []) + newest


def turn_page(session: Session, composer: Composer, name: str, turn: int) -> dict[str, Any] | None:
    """Turn page ``turn`` of a game, or None when there is none (or the game
    is private).  A kind's turns (docs/web.md): its processed turns (rmpm,
    giveaway, agora_rpg), drawn as their report mails (``Rules.turn_view``),
    or its moves (``Rules.move_turns``: curio's move N on every board,
    sequence's plays, then its closing deadline).  Each with its previous
    and next turn, and one row of figures per player; only what an observer
    may see (a report that differed per player is never shown)."""
    game = _public_game(session, name)
    if game is None or turn < 1:
        return None
    rules = get_rules(game.kind)
    moves = rules.move_turns(game.state) or 0
    processed = sorted(t + moves for t in session.scalars(select(Snapshot.turn).where(
        Snapshot.game_id == game.id, Snapshot.phase == "after").distinct()).all())
    data: dict[str, Any] = {
        "name": game.name, "kind": game.kind, "title": rules.title, "turn_name": rules.turn_name, "turn": turn,
        "processed_at": None, "seed": None, "seed_sha256": None, "report": None,
        "previous": turn - 1 if turn > 1 and (turn - 1 <= moves or turn - 1 in processed) else None,
        "next": turn + 1 if turn + 1 <= moves or turn + 1 in processed else None,
    }
    if turn <= moves:
        view = rules.move_turn(game.state, turn, game.name)
        if view is None:
            return None
        data.update({"label": view.title, "sections": _drawn(composer, view.sections, game.kind),
                     "figures": _coloured(rules.colours(game.state), view.figures), "move": True})
        return data
    snap = session.scalars(select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "after",
                                                  Snapshot.turn == turn - moves)
                           .order_by(Snapshot.id.desc()).limit(1)).first()
    if snap is None:
        return None
    before = session.scalars(select(Snapshot).where(Snapshot.game_id == game.id, Snapshot.phase == "before",
                                                    Snapshot.turn == snap.turn, Snapshot.id < snap.id)
                             .order_by(Snapshot.id.desc()).limit(1)).first()
    # a processed turn never changes: drawn once (a 10,000-player round takes seconds), whatever the game does since
    key = (str(session.connection().engine.url), game.id, snap.id, before.id if before is not None else 0)
    drawing = _TURNS.get(key)
    if drawing is None:
        # a report that differed per player (hidden faces, own holdings) is never public: no drawing of it either
        view = rules.turn_view(before.state if before is not None else None, snap.state, snap.turn, game.name) \
            if snap.report is not None else None
        if view is not None:
            drawing = (view.title, _drawn(composer, view.sections, game.kind), view.figures)
        else:  # the report kept as text, the public scores after the turn where the kind keeps them
            drawing = (f"{rules.turn_name} {turn}", [],
                       [{"handle": h, "score": int(v), "standing": f"score {v}", "did": None}
                        for h, v in rules.scores(snap.state)])
        if len(_TURNS) >= _TURNS_KEPT:
            _TURNS.pop(next(iter(_TURNS)))
        _TURNS[key] = drawing
    label, sections, figures = drawing
    data.update({
        "label": label,
        "processed_at": _iso(snap.created_at),
        "seed": snap.seed,
        "seed_sha256": seed_hash(snap.seed) if snap.seed else None,
        "report": snap.report,
        "sections": sections,
        "figures": _coloured(rules.colours(game.state), figures),
        "move": False,
    })
    return data


def _coloured(colours: dict[str, int], figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each player's row with their colour (the game's, as on its boards and charts)."""
    known = charts.colour_map([f["handle"] for f in figures], colours)
    return [{**f, "colour": known[f["handle"]]} for f in figures]


def _drawn(composer: Composer, sections: list[Any], kind: str) -> list[dict[str, Any]]:
    out = []
    for section in sections:
        title, text, html = composer.section(section, kind)
        out.append({"title": title, "text": text, "html": html})
    return out


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


def _chart(session: Session, game: Game, colours: dict[str, int]) -> dict[str, Any] | None:
    """The public scores after each processed turn (``Rules.scores``) as a
    chart and a table; None for a game that keeps no public score."""
    rules = get_rules(game.kind)
    snaps = session.execute(select(Snapshot.id, Snapshot.turn).where(
        Snapshot.game_id == game.id, Snapshot.phase == "after").order_by(Snapshot.id)).all()
    if not snaps:
        return None
    # the database too: ids start again in another one (a restored backup, the tests' databases)
    key = (str(session.connection().engine.url), game.id, snaps[-1].id)
    if key in _CHARTS:
        return _CHARTS[key]
    newest: dict[int, int] = {}
    for sid, turn in snaps:  # a turn run again after a rollback: its newest run
        newest[turn] = sid
    series: dict[str, list[tuple[int, float]]] = {}
    more: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for turn in sorted(newest)[-CHART_TURNS:]:
        snap = session.get(Snapshot, newest[turn])
        if snap is None:
            continue
        state = snap.state
        for handle, score in rules.scores(state):
            series.setdefault(handle, []).append((turn, float(score)))
        for name, figures in rules.trends(state).items():
            for handle, value in figures:
                more.setdefault(name, {}).setdefault(handle, []).append((turn, float(value)))
    # one colour per player in every chart of the game: the game's own (join order, rmpm's number), then
    # the players who have left in the order they first appear
    known = charts.colour_map([h for s in (series, *more.values()) for h in s], colours)
    chart = _table(series, rules.turn_name, f"{game.name}: scores by {rules.turn_name}",
                   f"The public scores after each {rules.turn_name} of the leaders after the last one.", known)
    if chart is not None:
        chart["more"] = {name: _table(s, rules.turn_name, f"{game.name}: {name} by {rules.turn_name}",
                                      f"{name} after each {rules.turn_name} of the leaders after the last one.",
                                      known, ident=f"chart-{name.lower()}")
                         for name, s in more.items()}
    if len(_CHARTS) >= _CHARTS_KEPT:
        _CHARTS.pop(next(iter(_CHARTS)))
    _CHARTS[key] = chart
    return chart


def _table(series: dict[str, list[tuple[int, float]]], x_name: str, title: str, caption: str,
           colours: dict[str, int], ident: str = "chart") -> dict[str, Any] | None:
    """A chart of ``series`` and the table of its figures (the lines it draws);
    with a single turn the table alone ("svg" is "")."""
    if not series:
        return None
    shown = charts.leaders(series)
    turns = sorted({t for h in shown for t, _ in series[h]})
    colours = charts.colour_map(list(series), colours)
    return {"svg": charts.line_chart(series, x_name, title, colours=colours, ident=ident), "x_name": x_name,
            "caption": caption, "turns": turns,
            "rows": [{"handle": h, "scores": dict(series[h]), "colour": colours[h]} for h in shown]}


def _play_chart(game: Game, colours: dict[str, int]) -> dict[str, Any] | None:
    """A sequence game's standings after its plays (``score_history``): every
    play's public mail shows them, so they are public from the first play on."""
    rules: Any = get_rules(game.kind)
    series: dict[str, list[tuple[int, float]]] = {}
    for number, standings in rules.score_history(game.state, CHART_PLAYS):
        for handle, score in standings:
            series.setdefault(handle, []).append((number, float(score)))
    chart = _table(series, "play", f"{game.name}: scores by play",
                   "The public scores after the plays (at most "
                   f"{CHART_PLAYS}, spread over the game) of the leaders after the last one"
                   + ("; the last point has the deadline's bonuses." if game.state.get("finished") else "."), colours)
    if chart is not None:
        chart["after"] = "play"
    return chart


#: processed turns and turns of moves the feed has entries for (the newest)
FEED_TURNS = 20
FEED_MOVES = 10
#: scores an entry names (the leaders)
FEED_SCORES = 10


def feed_entries(session: Session, composer: Composer, name: str, page: dict[str, Any]) -> list[dict[str, Any]]:
    """The feed's entries of turns, newest first: each processed turn (its
    revealed seed and the leaders' public scores after it) and each of the
    newest turns of moves (curio: move N on every board; sequence: play N),
    with what was played and the scores.  The games keep no time per move:
    such an entry's ``updated`` is the game's last change."""
    game = _public_game(session, name)
    if game is None:
        return []
    rules = get_rules(game.kind)
    chart = page.get("chart")
    by_turn: dict[int, list[tuple[str, float]]] = {}
    if chart and chart.get("after", "turn") == "turn":
        for row in chart["rows"]:
            for t, v in row["scores"].items():
                by_turn.setdefault(t, []).append((row["handle"], v))
    moves = page.get("move_turns") or 0
    final = [(r["handle"], r["score"]) for r in page["roster"] if r["score"] is not None]
    out = []
    for t in reversed(page["turns"][-FEED_TURNS:]):
        scores = by_turn.get(t["turn"] - moves) or (final if moves else [])
        title = f"turn {t['turn']}: the {rules.turn_name} processed" if moves else \
            f"{rules.turn_name} {t['turn']} processed"
        out.append({"turn": t["turn"], "title": title, "updated": t["processed_at"],
                    "summary": f"{rules.turn_name.capitalize()} {t['turn']} of {game.name} was processed"
                               + (f"; revealed seed {t['seed']}" if t["seed"] else "") + "."
                               + _scores_text(scores)})
    for n in range(moves, max(0, moves - FEED_MOVES), -1):
        view = rules.move_turn(game.state, n, game.name)
        if view is None:
            continue
        did = "; ".join(f"{f['handle']}" + (f" (board {f['board']})" if "board" in f else "") + f": {f['did']}"
                        for f in view.figures if f["did"])
        scores = [(f["handle"], f["score"]) for f in view.figures if f["score"] is not None]
        out.append({"turn": n, "title": view.title, "updated": _iso(game.updated_at),
                    "summary": (did + "." if did else f"{view.title.capitalize()}.") + _scores_text(scores)})
    return out


def _scores_text(scores: list[tuple[str, Any]]) -> str:
    if not scores:
        return ""
    best = sorted(scores, key=lambda r: (-r[1], r[0].lower()))[:FEED_SCORES]
    return " Scores: " + ", ".join(f"{h} {v:g}" for h, v in best) + (
        f" and {len(scores) - FEED_SCORES} more" if len(scores) > FEED_SCORES else "") + "."


def public_press(session: Session, game: Game) -> list[dict[str, Any]]:
    """The newest public press of a game, newest first: PRESS TO ALL sent while
    the GM's public_press was on (never press to single players); the sender's
    handle unless it was anonymous; the text as relayed, any ``$$`` pair masked."""
    rows = session.scalars(select(Press).where(Press.game_id == game.id, Press.public.is_(True))
                           .order_by(Press.id.desc()).limit(PRESS_SHOWN)).all()
    return [{"id": p.id, "sent_at": _iso(p.sent_at),
             "sender": "the game master" if p.sender == "gm" else None if p.anonymous else p.sender,
             "text": redact(p.body, set())} for p in rows]


def player_stamp(session: Session) -> tuple[Any, ...]:
    """What a player's page depends on: the public games (their states)."""
    return index_stamp(session)


def player_page(session: Session, handle: str) -> dict[str, Any] | None:
    """A player's page: the handle, the public games they play, their curio
    rating history in each public curio game; None when they play in no
    public game (an unknown handle looks the same: the page is no way to
    find out who has an account)."""
    key = handle.lower()
    games = []
    ratings = []
    shown = handle
    for game in session.scalars(select(Game).where(Game.private.is_(False)).order_by(Game.name)).all():
        rules: Any = get_rules(game.kind)
        found = next((p for p in rules.players(game.state) if p.lower() == key), None)
        # curio: a player of finished boards only has played there too
        history = rules.rating_history(game.state, found or handle) if hasattr(rules, "rating_history") else []
        if history and found is None:
            found = next(r["handle"] for r in history)
        if found is None:
            continue
        shown = found
        games.append({"name": game.name, "kind": game.kind, "title": rules.title, "status": game.status})
        if hasattr(rules, "rating_history"):
            ratings.append(_rating(game.name, found, history))
    if not games:
        return None
    account = account_by_handle(session, shown)
    record = record_of(session, account) if account is not None else Record()
    return {"handle": account.handle if account is not None else shown, "games": games, "ratings": ratings,
            "reliability": record.as_json() | {"text": record.text()}}


def _rating(game: str, handle: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    """One curio game's rating history of a player: the chart (the rating after
    each rated board, from the start) and its rows."""
    rows = [dict(row, n=i) for i, row in enumerate(history, 1)][-RATED_SHOWN:]
    points = [(0, float(RATING_START))] if len(rows) == len(history) else []
    points += [(r["n"], float(r["rating"])) for r in rows]
    svg = charts.line_chart({handle: points}, "rated board", f"{handle}: curio rating in {game}",
                            ident=f"rating-{game}") if rows else ""
    return {"game": game, "start": RATING_START, "svg": svg, "history": rows}
