"""The Fourth Game's domain model: pieces, plays, players and the game.

The state is a JSON document (see ``docs/games/sequence.md``).  It is designed
so that one play costs the same whether it is the 1st or the 2,500th:

* the game keeps running aggregates (the total, who played last, the last
  scoring play, the players who used all ten pieces, each player's score), so
  applying a play never scans the list of earlier plays;
* each play is stored as one short string (``Play.encode``), e.g.
  ``"alice 3 +12 3 42 15"``, so the history stays small and cheap to load and
  store as JSON after every mail.

``Game.from_state`` / ``Game.to_state`` are the only places that know the JSON layout.
``Game.dump`` never mutates the state it was loaded from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

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
STATE_VERSION = 1


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


@dataclass
class Game:
    """The game as the rules see it.

    Players are loaded from the JSON state only when touched (a mail touches
    one or two of up to 250), and ``dump`` writes back only those.
    """

    raw: dict[str, Any]
    options: dict[str, Any]
    total: int
    plays: list[str]  # encoded plays, oldest first (see Play.encode)
    last: str | None  # handle of the most recent play
    last_scoring: int  # number of the most recent play that scored, 0: none yet
    finishers: list[list[Any]]  # [handle, points of the tenth play], in the order they finished
    finished: bool
    bonuses: list[dict[str, Any]]
    _touched: dict[str, Player] = field(default_factory=dict)
    _plays_changed: bool = False

    # -- JSON --------------------------------------------------------------
    @classmethod
    def new(cls, options: dict[str, Any], now: datetime) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "created": now.isoformat(),
            "options": dict(options),
            "total": 0,
            "plays": [],
            "last": None,
            "last_scoring": 0,
            "finishers": [],
            "finished": False,
            "bonuses": [],
            "players": {},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Game:
        return cls(
            raw=state,
            options=state["options"],
            total=state["total"],
            plays=state["plays"],
            last=state["last"],
            last_scoring=state["last_scoring"],
            finishers=state["finishers"],
            finished=state["finished"],
            bonuses=state["bonuses"],
        )

    def to_state(self) -> dict[str, Any]:
        """A new state dict; the loaded one is left as it was."""
        state = dict(self.raw)
        if self._touched:
            players = dict(self.raw["players"])
            for handle, player in self._touched.items():
                players[handle] = player.to_json()
            state["players"] = players
        state.update(
            total=self.total,
            plays=self.plays,
            last=self.last,
            last_scoring=self.last_scoring,
            finishers=self.finishers,
            finished=self.finished,
            bonuses=self.bonuses,
        )
        return state

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
            joined=len(self.raw["players"]) + len(
                [h for h in self._touched if h not in self.raw["players"]]
            ) + 1,
            pieces=pieces_from_email(email),
            played=[0] * PIECES_PER_PLAYER,
            seen=len(self.plays),
            digest_at=now.isoformat(),
        )
        self._touched[handle] = player
        return player

    def choosing(self, mail: str) -> list[str]:
        """Handles of the players whose mail preference is ``mail``."""
        out = []
        for handle, data in self.raw["players"].items():
            player = self._touched.get(handle)
            if (player.mail if player else data["mail"]) == mail:
                out.append(handle)
        out += [h for h, p in self._touched.items() if h not in self.raw["players"] and p.mail == mail]
        return out

    def player_count(self) -> int:
        return len(set(self.raw["players"]) | set(self._touched))

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
        rows = sorted(self._scores(), key=lambda r: (-r[1], r[2], r[3]))
        return [
            {"place": i, "handle": h, "score": s, "line": f"{i:5d}. {h:<20} {s:6d}"}
            for i, (h, s, _, _) in enumerate(rows, start=1)
        ]

    # -- plays ---------------------------------------------------------------
    @property
    def play_count(self) -> int:
        return len(self.plays)

    def play_at(self, number: int) -> Play:
        return Play.decode(number, self.plays[number - 1])

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

    def record(self, play: Play) -> None:
        if not self._plays_changed:
            self.plays = list(self.plays)  # copy once: the loaded state stays as it was
            self.finishers = [list(f) for f in self.finishers]
            self._plays_changed = True
        self.plays.append(play.encode())

    # -- the deadline --------------------------------------------------------
    def closes_at(self) -> datetime | None:
        closes = self.options.get("closes")
        return datetime.fromisoformat(closes) if closes else None

    def digest_interval(self) -> timedelta:
        return timedelta(minutes=int(self.options.get("digest_minutes", 60)))
