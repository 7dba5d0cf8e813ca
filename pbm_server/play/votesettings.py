"""A game's settings for players' votes and its ready check (issue 44):
``votes=majority|two-thirds|unanimous|off``, ``max_extensions=N``,
``max_pause=DURATION`` and ``ready=DURATION|off``, set with ``game set`` like
the other desk settings (gmdesk.py reads them through this module), and who
paused the game.  Kept in ``vote_settings``, one row a game, made when
first needed; a game without a row has the defaults.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from pbm_server.base.durations import parse_duration, plain_number, show_duration
from pbm_server.base.errors import ServerRefused
from pbm_server.store.models import Game, VoteSettings

#: the settings this module reads, for gmdesk.py
KEYS = ("votes", "max_extensions", "max_pause", "ready")
USAGE = "votes=majority|two-thirds|unanimous|off, max_extensions=N, max_pause=DURATION (e.g. 14d), ready=DURATION|off"
RULES = ("majority", "two-thirds", "unanimous", "off")
DEFAULT_RULE = "two-thirds"
DEFAULT_MAX_EXTENSIONS = 2
DEFAULT_MAX_PAUSE = 14 * 24 * 60
#: the longest ready window (a month)
MAX_READY = 30 * 24 * 60


def of(session: Session, game: Game) -> VoteSettings:
    """The game's row; a transient one with the defaults when it has none
    (never added: reading does not write)."""
    row = session.get(VoteSettings, game.id)
    if row is None:
        row = VoteSettings(game_id=game.id, rule=DEFAULT_RULE, max_extensions=DEFAULT_MAX_EXTENSIONS,
                           max_pause_minutes=DEFAULT_MAX_PAUSE)
    return row


def kept(session: Session, game: Game) -> VoteSettings:
    """The game's row, added if it had none (for a change)."""
    row = session.get(VoteSettings, game.id)
    if row is None:
        row = of(session, game)
        session.add(row)
    return row


def parse(key: str, value: str) -> object:
    """One ``key=value`` of :data:`KEYS`, read; ServerRefused with what is accepted."""
    v = value.strip().lower()
    if key == "votes":
        if v not in RULES:
            raise ServerRefused(f"votes={value} is not a voting rule: expected votes=majority, votes=two-thirds "
                                "(the default), votes=unanimous or votes=off")
        return v
    if key == "max_extensions":
        n = plain_number(v, 3)
        if n is None:
            raise ServerRefused(f"max_extensions={value} is not a number: expected max_extensions=N, e.g. "
                                "max_extensions=2 (0: no extension may pass)")
        return n
    if key == "max_pause":
        if v in ("0", "off", "none"):
            return 0
        return parse_duration(value)
    if key == "ready":
        if v in ("0", "off", "none"):
            return None
        minutes = parse_duration(value)
        if minutes < 60 or minutes > MAX_READY:
            raise ServerRefused(f"ready={value}: a ready check's window is from 1h to 30d, e.g. ready=48h; "
                                "ready=off takes the check away")
        return minutes
    raise ServerRefused(f"unknown setting {key!r}: expected {USAGE}")


def apply(session: Session, game: Game, parsed: dict[str, object]) -> None:
    """The settings of :data:`KEYS` among ``parsed`` (read by :func:`parse`) set."""
    mine = {k: v for k, v in parsed.items() if k in KEYS}
    if not mine:
        return
    row = kept(session, game)
    if "votes" in mine:
        row.rule = str(mine["votes"])
    if "max_extensions" in mine:
        row.max_extensions = int(str(mine["max_extensions"]))
    if "max_pause" in mine:
        row.max_pause_minutes = int(str(mine["max_pause"]))
    if "ready" in mine:
        ready = mine["ready"]
        if row.ready_phase is not None:
            raise ServerRefused(f"the ready check of {game.name} has "
                                + ("begun" if row.ready_phase == "open" else "been done") + "; its window stays")
        row.ready_minutes = None if ready is None else int(str(ready))


def said(session: Session, game: Game, key: str) -> str | None:
    """What players are told of a change of ``key`` (None: not one of these)."""
    row = of(session, game)
    if key == "votes":
        return ("votes to extend or pause are off" if row.rule == "off"
                else f"a vote to extend or pause passes with {row.rule} of the players not away")
    if key == "max_extensions":
        return f"at most {row.max_extensions} extension(s) by vote in one turn"
    if key == "max_pause":
        return f"at most {show_duration(row.max_pause_minutes) if row.max_pause_minutes else 'no'} of pause by vote a year"
    if key == "ready":
        return (f"ready check: when the game starts every player confirms with 'ready' within "
                f"{show_duration(row.ready_minutes)}" if row.ready_minutes else "no ready check")
    return None


def summary(session: Session, game: Game) -> str:
    row = of(session, game)
    return (f" votes={row.rule} max_extensions={row.max_extensions} max_pause={show_duration(row.max_pause_minutes)}"
            + (f" ready={show_duration(row.ready_minutes)}" if row.ready_minutes else ""))


def note_pause(session: Session, game: Game, by: str | None, now: datetime, until: datetime | None = None) -> None:
    """Who paused the game (``by``: "gm" or "vote"; None: it runs again)."""
    if by is None and session.get(VoteSettings, game.id) is None:
        return
    row = kept(session, game)
    row.paused_by = by
    row.paused_at = now if by else None
    row.paused_until = until


def touch(game: Game, now: datetime) -> None:
    """A vote or the ready check changed what the game's pages show: their
    stamp (web/pages.py game_stamp) moves on, even on a clock standing still."""
    before = game.updated_at
    game.updated_at = now if before is None or now > before else before + timedelta(microseconds=1)
