"""The Fourth Game's domain model: pieces, plays, players and the game.

The state is a JSON document (see ``docs/games/sequence.md``).  It is designed
so that one play costs the same whether it is the 1st or the 2,500th, and
whether the game has 10 players or 250:

* each play is stored as one short string (``Play.encode``), e.g.
  ``"alice 3 +12 3 42 15"``, under its number in the mapping ``plays``; the
  running total and who played last are those of the latest play, each
  player's score and used pieces are kept with the player, so applying a
  play never scans earlier plays or other players;
* a mail changes nothing but entries of the two mappings ``players`` and
  ``plays`` (``Game.changes``), so the server writes those entries alone
  (``Outcome.changed_entries``), not the document.

``Game.from_state`` / ``Game.to_state`` are the only places that know the JSON
layout; ``from_state`` also reads the first shape (version 1, plays a list).
``Game.to_state`` never mutates the state it was loaded from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, overload

#: Every player has ten pieces, numbered 1 to 10.
PIECES_PER_PLAYER = 10
#: Score for a total that is a multiple of 7 / of 24, per point of multiplier.
SEVEN, SEVEN_POINTS = 7, 5
TWENTY_FOUR, TWENTY_FOUR_POINTS = 24, 10
#: End-of-game bonuses.
FINISHER_BONUS = 40
LAST_SCORER_BONUS = 70
#: Pieces 1..LETTER_PIECES take their values from the e-mail address's
#: letters (multipliers 1 to LETTER_PIECES); the others are FILLER_PIECE.
LETTER_PIECES = 5
FILLER_VALUE, FILLER_MULTIPLIER = 6, 0

MAIL_CHOICES = ("each", "digest", "none")
#: The head of a table of plays (see Play.line).
PLAYS_HEADER = "  Play Player       Piece Value Mult  Total  Result"
#: 2: ``plays`` is a mapping (play number -> play), and the running figures
#: follow from it; 1 (read, written whole in shape 2 at its first change):
#: ``plays`` a list, the running figures stored (LEGACY_FIELDS)
STATE_VERSION = 2
LEGACY_FIELDS = ("total", "last", "last_scoring", "finishers")


# --------------------------------------------------------------------------
# pieces
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """A game piece: its sequence value (played as + or -) and its multiplier."""

    value: int
    multiplier: int

    def __str__(self) -> str:
        return f"value {self.value}, multiplier {self.multiplier}"


def _letters(text: str) -> list[int]:
    """Alphabet positions (a=1 ... z=26) of the plain letters in ``text``."""
    return [ord(c) - ord("a") + 1 for c in text.lower() if "a" <= c <= "z"]


def pieces_from_email(email: str) -> list[Piece]:
    """A player's ten pieces, derived from their e-mail address.

    Pieces 1-5: the alphabet positions of the first five letters of the local
    part (digits and symbols skipped), continuing with the domain's letters if
    the local part has fewer than five; multipliers 1 to 5.  Pieces 6-10:
    value 6, multiplier 0.  An address with fewer than five letters in all
    repeats its letters from the start (no letters at all: "a").
    """
    local, _, domain = email.strip().rpartition("@")
    if not local:  # no "@": the whole text is the local part
        local, domain = domain, ""
    values = _letters(local)
    if len(values) < LETTER_PIECES:
        values += _letters(domain)
    if not values:
        values = [1]
    while len(values) < LETTER_PIECES:
        values += values
    first = [Piece(v, m) for m, v in enumerate(values[:LETTER_PIECES], start=1)]
    return first + [Piece(FILLER_VALUE, FILLER_MULTIPLIER) for _ in range(PIECES_PER_PLAYER - LETTER_PIECES)]


# --------------------------------------------------------------------------
# scoring
# --------------------------------------------------------------------------


def points_for(total: int, multiplier: int, eligible: bool) -> int:
    """Points a play earns: 5 x multiplier when the new total is a multiple
    of 7, 10 x multiplier when it is a multiple of 24 (both can apply; 0 and
    negative totals count too), nothing when the play is not eligible."""
    if not eligible:
        return 0
    points = 0
    if total % SEVEN == 0:
        points += SEVEN_POINTS * multiplier
    if total % TWENTY_FOUR == 0:
        points += TWENTY_FOUR_POINTS * multiplier
    return points


def explain_total(total: int) -> str:
    """'42 = 6 x 7', '48 = 2 x 24', '168 = 24 x 7 = 7 x 24' or '43'."""
    parts = [str(total)]
    if total % SEVEN == 0:
        parts.append(f"{total // SEVEN} x 7")
    if total % TWENTY_FOUR == 0:
        parts.append(f"{total // TWENTY_FOUR} x 24")
    return " = ".join(parts)


# --------------------------------------------------------------------------
# plays
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Play:
    """One accepted play, as it stands in the history."""

    number: int  # 1-based, in the order the server received the plays
    handle: str
    piece: int  # 1..10
    value: int  # signed: the amount added to the total
    multiplier: int
    total: int  # the running total after this play
    points: int  # what the play scored (0: no multiple, or not eligible)

    def encode(self) -> str:
        return (
            f"{self.handle} {self.piece} {self.value:+d} {self.multiplier} "
            f"{self.total} {self.points}"
        )

    @classmethod
    def decode(cls, number: int, text: str) -> Play:
        handle, piece, value, multiplier, total, points = text.split()
        return cls(number, handle, int(piece), int(value), int(multiplier), int(total), int(points))

    def as_data(self, repeated: bool) -> dict[str, Any]:
        """Plain data for templates.  ``repeated``: the player also made the
        play before this one (which is why a play on a multiple may not score)."""
        note = play_note(self.total, self.multiplier, self.points, repeated)
        return {
            "number": self.number,
            "handle": self.handle,
            "piece": self.piece,
            "value": self.value,
            "signed": f"{self.value:+d}",
            "multiplier": self.multiplier,
            "total": self.total,
            "total_text": explain_total(self.total),
            "points": self.points,
            "eligible": not repeated,
            "note": note,
            "line": self.line(note),
        }

    def line(self, note: str) -> str:
        """The play as one line of a table (digests, the final report)."""
        return (
            f"{self.number:6d} {self.handle:<12} {self.piece:5d} {self.value:+5d} "
            f"{self.multiplier:4d} {self.total:6d}  {note}"
        )


def standings_line(place: int, handle: str, score: int) -> str:
    return f"{place:5d}. {handle:<20} {score:6d}"


def play_note(total: int, multiplier: int, points: int, repeated: bool) -> str:
    """Why a play scored what it scored, in a few words."""
    hits = total % SEVEN == 0 or total % TWENTY_FOUR == 0
    if points:
        return f"scores {points}"
    if not hits:
        return "no multiple of 7 or 24"
    if repeated:
        return "no points: nobody played between"
    return "no points: multiplier 0"


# --------------------------------------------------------------------------
# players
# --------------------------------------------------------------------------


@dataclass
class Player:
    handle: str
    email: str
    joined: int  # join order, 1-based
    pieces: list[Piece]
    played: list[int]  # per piece: the number of the play that used it, 0 = unused
    score: int = 0
    reached: int = 0  # the event (play number, or bonus after the last play) that gave the score
    mail: str = "digest"  # "each", "digest" or "none"
    seen: int = 0  # digest: plays up to this number have been reported
    digest_at: str = ""  # ISO time of the last digest (or of joining)

    # -- questions the rules ask -------------------------------------------
    def piece(self, number: int) -> Piece:
        return self.pieces[number - 1]

    def remaining(self) -> list[tuple[int, Piece]]:
        return [(n, p) for n, p in enumerate(self.pieces, start=1) if not self.played[n - 1]]

    @property
    def plays_made(self) -> int:
        return sum(1 for n in self.played if n)

    @property
    def done(self) -> bool:
        return all(self.played)

    # -- JSON ----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "email": self.email,
            "joined": self.joined,
            "pieces": [[p.value, p.multiplier] for p in self.pieces],
            "played": list(self.played),
            "score": self.score,
            "reached": self.reached,
            "mail": self.mail,
            "seen": self.seen,
            "digest_at": self.digest_at,
        }

    @classmethod
    def from_json(cls, handle: str, data: dict[str, Any]) -> Player:
        return cls(
            handle=handle,
            email=data["email"],
            joined=data["joined"],
            pieces=[Piece(v, m) for v, m in data["pieces"]],
            played=list(data["played"]),
            score=data["score"],
            reached=data["reached"],
            mail=data["mail"],
            seen=data["seen"],
            digest_at=data["digest_at"],
        )


# --------------------------------------------------------------------------
# the game
# --------------------------------------------------------------------------


#: Context.memo key of the index of the players who chose MAIL EACH:
#: (the players mapping it was made from, [(joined, handle)] in join order)
EACH = "sequence.each"


def each_index(players: dict[str, Any], memo: dict[str, Any]) -> list[tuple[int, str]]:
    """[(joined, handle)] of the players in ``players`` who chose MAIL EACH,
    from ``memo`` if it holds the index of this very mapping, else made and
    kept there."""
    found = memo.get(EACH)
    if found is not None and found[0] is players:
        return found[1]  # type: ignore[no-any-return]
    index = sorted((data["joined"], handle) for handle, data in players.items() if data["mail"] == "each")
    memo[EACH] = (players, index)
    return index


def ranked(scores: Iterable[tuple[str, int, int, int]]) -> list[dict[str, Any]]:
    """(handle, score, reached, joined) rows as standings, best first."""
    rows = sorted(scores, key=lambda r: (-r[1], r[2], r[3]))
    return [
        {"place": i, "handle": h, "score": s, "line": standings_line(i, h, s)}
        for i, (h, s, _, _) in enumerate(rows, start=1)
    ]


class Standings(Sequence[dict[str, Any]]):
    """The standings at one moment, worked out when first read: the stored
    players (a mapping never changed in place) with the current (score,
    reached, joined) of those a mail touched."""

    def __init__(self, stored: dict[str, Any], current: dict[str, tuple[int, int, int]]) -> None:
        self._stored, self._current = stored, current
        self._rows: list[dict[str, Any]] | None = None

    def rows(self) -> list[dict[str, Any]]:
        if self._rows is None:
            scores = [(h, *(self._current.get(h) or (d["score"], d["reached"], d["joined"])))
                      for h, d in self._stored.items()]
            scores += [(h, *v) for h, v in self._current.items() if h not in self._stored]
            self._rows = ranked(scores)
        return self._rows

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self.rows()[i]

    def __len__(self) -> int:
        return len(self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Standings):
            return self.rows() == other.rows()
        if isinstance(other, list):
            return self.rows() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Standings({self.rows()!r})"


@dataclass
class Game:
    """The game as the rules see it.

    Players are loaded from the JSON state only when touched (a mail touches
    one or two of up to 250), and ``to_state`` writes back only those that
    changed.  The plays are looked up by their number, never by the order of
    the mapping that holds them.  The running figures (the total, who played
    last, the last play that scored, who finished) follow from the plays and
    the players: the total and the last player are those of the latest play,
    so a play costs the same whatever came before it.
    """

    raw: dict[str, Any]
    options: dict[str, Any]
    plays: dict[str, str]  # play number (decimal text) -> encoded play (see Play.encode)
    finished: bool
    bonuses: list[dict[str, Any]]
    #: loaded from a version-1 document (plays a list, running figures
    #: stored): the first change writes it whole, in the current shape
    legacy: bool = False
    _touched: dict[str, Player] = field(default_factory=dict)
    _new_plays: dict[str, str] = field(default_factory=dict)  # made by this mail

    # -- JSON --------------------------------------------------------------
    @classmethod
    def new(cls, options: dict[str, Any], now: datetime) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "created": now.isoformat(),
            "options": dict(options),
            "plays": {},
            "finished": False,
            "bonuses": [],
            "players": {},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Game:
        plays = state["plays"]
        legacy = isinstance(plays, list)
        if legacy:
            plays = {str(n): text for n, text in enumerate(plays, start=1)}
        return cls(
            raw=state,
            options=state["options"],
            plays=plays,
            finished=state["finished"],
            bonuses=state["bonuses"],
            legacy=legacy,
        )

    def changed_players(self) -> dict[str, dict[str, Any]]:
        """handle -> JSON of every player added or changed since loading."""
        stored = self.raw["players"]
        out = {}
        for handle, player in self._touched.items():
            data = player.to_json()
            if stored.get(handle) != data:
                out[handle] = data
        return out

    def to_state(self) -> dict[str, Any]:
        """A new state dict in the current shape; the loaded one is left as it
        was, and shares every part that did not change."""
        state = dict(self.raw)
        if self.legacy:
            for gone in LEGACY_FIELDS:
                state.pop(gone, None)
            state["version"] = STATE_VERSION
        changed = self.changed_players()
        if changed:
            state["players"] = {**self.raw["players"], **changed}
        if self._new_plays or self.legacy:
            state["plays"] = {**self.plays, **self._new_plays}
        state["finished"] = self.finished
        state["bonuses"] = self.bonuses
        return state

    def changes(self) -> tuple[dict[str, Any], dict[str, list[str]] | None]:
        """(the new state, its changed entries) after a mail: nothing but
        entries of ``players`` and ``plays`` changed, unless the document is
        of the old shape or the game ended (None: store it whole).  Nothing
        changed at all: the given state itself and no entries."""
        changed = self.changed_players()
        if not changed and not self._new_plays and self.finished == self.raw["finished"] \
                and self.bonuses is self.raw["bonuses"]:
            return self.raw, {}
        if self.legacy or self.finished != self.raw["finished"] or self.bonuses is not self.raw["bonuses"]:
            return self.to_state(), None
        return self.to_state(), {"players": list(changed), "plays": list(self._new_plays)}

    # -- players -------------------------------------------------------------
    def handles(self) -> list[str]:
        return list(self.raw["players"])

    def find(self, name: str | None) -> str | None:
        """The handle of player ``name`` (case-insensitive), or None."""
        if not name:
            return None
        players = self.raw["players"]
        if name in players or name in self._touched:
            return name
        low = name.lower()
        for handle in [*players, *self._touched]:
            if handle.lower() == low:
                return str(handle)
        return None

    def player(self, handle: str) -> Player:
        if handle not in self._touched:
            self._touched[handle] = Player.from_json(handle, self.raw["players"][handle])
        return self._touched[handle]

    def add_player(self, handle: str, email: str, now: datetime) -> Player:
        player = Player(
            handle=handle,
            email=email,
            joined=self.player_count() + 1,
            pieces=pieces_from_email(email),
            played=[0] * PIECES_PER_PLAYER,
            seen=self.play_count,
            digest_at=now.isoformat(),
        )
        self._touched[handle] = player
        return player

    def choosing_each(self, memo: dict[str, Any]) -> list[str]:
        """Handles of the players who chose MAIL EACH, in the order they
        joined.  The index of the stored ones is kept in ``memo`` (the
        server's scratch for this game, Context.memo) for the players
        mapping it was made from, so a play need not look at every player."""
        rows = [(j, h) for j, h in each_index(self.raw["players"], memo) if h not in self._touched]
        rows += [(p.joined, h) for h, p in self._touched.items() if p.mail == "each"]
        return [h for _, h in sorted(rows)]

    def keep_each_index(self, memo: dict[str, Any], state: dict[str, Any], changed: dict[str, Any]) -> None:
        """After a mail: the index of ``memo`` made for the new ``state`` from
        the one of the given state and the players ``changed`` (no scan)."""
        found = memo.get(EACH)
        if found is None or found[0] is not self.raw["players"] or state["players"] is self.raw["players"]:
            return
        rows = [(j, h) for j, h in found[1] if h not in changed]
        rows += [(data["joined"], h) for h, data in changed.items() if data["mail"] == "each"]
        memo[EACH] = (state["players"], sorted(rows))

    def player_count(self) -> int:
        return len(self.raw["players"]) + sum(1 for h in self._touched if h not in self.raw["players"])

    def _scores(self) -> Iterator[tuple[str, int, int, int]]:
        """(handle, score, reached, joined) of every player, current values."""
        for handle, data in self.raw["players"].items():
            if handle in self._touched:
                p = self._touched[handle]
                yield handle, p.score, p.reached, p.joined
            else:
                yield handle, data["score"], data["reached"], data["joined"]
        for handle, p in self._touched.items():
            if handle not in self.raw["players"]:
                yield handle, p.score, p.reached, p.joined

    def standings(self) -> list[dict[str, Any]]:
        """Players best first: highest score; a tie goes to the player who
        reached that score first (then to the earlier joiner)."""
        return ranked(self._scores())

    def standings_later(self) -> Standings:
        """The standings as they are now, worked out only when read (a play's
        announcement carries them; nobody may get it)."""
        now = {h: (p.score, p.reached, p.joined) for h, p in self._touched.items()}
        return Standings(self.raw["players"], now)

    def finishers(self) -> list[tuple[str, int]]:
        """(handle, points of the tenth play) of the players who used all
        their pieces, in the order they did."""
        done = []
        for handle in [*self.raw["players"], *(h for h in self._touched if h not in self.raw["players"])]:
            played = self.player(handle).played if handle in self._touched else self.raw["players"][handle]["played"]
            if all(played):
                done.append((max(played), handle))
        done.sort()
        return [(handle, self.play_at(number).points) for number, handle in done]

    # -- plays ---------------------------------------------------------------
    @property
    def play_count(self) -> int:
        return len(self.plays) + len(self._new_plays)

    def play_at(self, number: int) -> Play:
        key = str(number)
        text = self._new_plays.get(key)
        return Play.decode(number, text if text is not None else self.plays[key])

    @property
    def total(self) -> int:
        """The running total: that after the latest play."""
        return self.play_at(self.play_count).total if self.play_count else 0

    @property
    def last(self) -> str | None:
        """Who made the latest play (None: nobody yet)."""
        return self.play_at(self.play_count).handle if self.play_count else None

    @property
    def last_scoring(self) -> int:
        """The number of the latest play that scored; 0: none.  Looks back
        from the latest play (at the deadline only)."""
        for number in range(self.play_count, 0, -1):
            if self.play_at(number).points:
                return number
        return 0

    def plays_data(self, first: int = 1, last: int | None = None) -> list[dict[str, Any]]:
        """Template data of plays ``first``..``last`` (1-based, inclusive)."""
        last = self.play_count if last is None else last
        out = []
        previous = self.play_at(first - 1).handle if first > 1 else None
        for number in range(first, last + 1):
            play = self.play_at(number)
            out.append(play.as_data(repeated=play.handle == previous))
            previous = play.handle
        return out

    def plays_of(self, handle: str) -> list[dict[str, Any]]:
        """Template data of the plays ``handle`` made, in order."""
        numbers = sorted(n for n in self.player(handle).played if n)
        out = []
        for number in numbers:
            play = self.play_at(number)
            before = self.play_at(number - 1).handle if number > 1 else None
            out.append(play.as_data(repeated=before == handle))
        return out

    def record(self, play: Play) -> None:
        self._new_plays[str(play.number)] = play.encode()

    # -- the deadline --------------------------------------------------------
    def closes_at(self) -> datetime | None:
        closes = self.options.get("closes")
        return datetime.fromisoformat(closes) if closes else None

    def digest_interval(self) -> timedelta:
        return timedelta(minutes=int(self.options.get("digest_minutes", 60)))
