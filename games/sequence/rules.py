"""The Fourth Game (``sequence``): the rules as the server runs them.

See ``docs/games/sequence.md`` for the rules in full and every ruling.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from games.base import (
    ALL_PLAYERS,
    Command,
    Context,
    GameError,
    JoinHint,
    Line,
    Mail,
    Notice,
    Option,
    Outcome,
    Refused,
    Rules,
    Section,
    State,
    TurnView,
    sender_handle,
)
from games.sequence.help import rule_book

from . import parse, view
from .model import (
    FINISHER_BONUS,
    LAST_SCORER_BONUS,
    PIECES_PER_PLAYER,
    Game,
    Piece,
    Play,
    explain_total,
    play_note,
    points_for,
    ranked,
)
from .state import plays_in_order, validated
from .view import FULL_REPORT_PLAYERS


@dataclass
class SequenceMail(Mail):
    game: Game


def _parse_closes(text: str) -> str | None:
    """Option ``closes``: an ISO 8601 time (UTC if no offset given), or empty."""
    text = (text or "").strip()
    if not text or text.lower() == "none":
        return None
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _parse_count(text: str) -> int:
    value = int(str(text).strip())
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def _parse_minutes(text: str) -> int:
    value = int(str(text).strip())
    if value < 1:
        raise ValueError("must be at least 1 minute")
    return value


class SequenceRules(Rules[SequenceMail]):
    kind = "sequence"
    title = "The Fourth Game"
    summary = (
        "A public number-sequence game for up to 250 players.  Each player has ten "
        "pieces (a value and a multiplier) and plays them one at a time, adding or "
        "subtracting the value to a running total shared by everyone.  A play that "
        "brings the total to a multiple of 7 or of 24 scores points, unless the "
        "player also made the play before it.  Bonuses at the deadline; the highest "
        "score wins."
    )
    has_turns = True
    #: The game closes at 05:00 US Eastern time; the first such deadline after
    #: the game is created closes it (the GM can give another with --deadline).
    default_deadline = "every day 05:00 America/New_York"
    turn_name = "deadline"
    options = (
        Option(
            "closes", None,
            "ISO 8601 time of the deadline (UTC unless an offset is given): plays that "
            "arrive at or after it are refused even before the deadline has been run. "
            "Empty: only running the deadline closes the game.",
            _parse_closes,
        ),
        Option("max_players", 250, "most players that may join (0: no limit)", _parse_count),
        Option(
            "digest_minutes", 60,
            "least time between two digest mails to a player, in minutes", _parse_minutes,
        ),
    )

    # -- life cycle -------------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        return Game.new(self.option_values(options), ctx.now)

    def import_state(self, data: dict[str, Any]) -> State:
        """Check a hand-written or exported state: every running figure must
        be what the plays give."""
        return validated(data)

    def export_state(self, state: State) -> dict[str, Any]:
        """The state in the current shape, its plays in the order of their
        numbers (a state read from the database may hold the plays one mail
        made in another order: the game never relies on it)."""
        out = Game.from_state(state).to_state()
        plays = out["plays"]
        out["plays"] = {str(n): plays[str(n)] for n in range(1, len(plays) + 1)}
        return out

    # -- mail -----------------------------------------------------------------
    def parse_line(self, line: Line) -> Command:
        return parse.parse_line(line)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> SequenceMail:
        return SequenceMail(ctx, commands, Outcome(state=state), game=Game.from_state(state))

    def close_mail(self, mail: SequenceMail) -> None:
        # every command changes only entries of ``players`` and ``plays``: the
        # server writes those rows, not the document (Game.changes)
        game = mail.game
        mail.outcome.state, mail.outcome.changed_entries = game.changes()
        if mail.outcome.state is not game.raw:
            game.keep_each_index(mail.ctx.memo, mail.outcome.state, game.changed_players())

    # -- checks -----------------------------------------------------------------
    def _member(self, game: Game, ctx: Context, need_password: bool = True) -> str:
        handle = sender_handle(ctx, need_password)
        found = game.find(handle)
        if found is None:
            raise Refused("you are not a player of this game: send JOIN first")
        return found

    @staticmethod
    def _open(game: Game, ctx: Context) -> None:
        if game.finished:
            raise Refused("the game is over: the deadline has passed and plays no longer count")
        closes = game.closes_at()
        if closes is not None and ctx.now >= closes:
            raise Refused(
                f"the game closed at {closes.strftime('%Y-%m-%d %H:%M UTC')}: "
                "plays after the deadline do not count"
            )

    # -- commands -----------------------------------------------------------------
    def handle_join(self, mail: SequenceMail, cmd: Command) -> str:
        game, ctx, out = mail.game, mail.ctx, mail.outcome
        handle = sender_handle(ctx)
        self._open(game, ctx)
        if game.find(handle) is not None:
            raise Refused("you have joined this game already")
        limit = int(game.options.get("max_players") or 0)
        if limit and game.player_count() >= limit:
            raise Refused(f"the game is full: it takes at most {limit} players")
        player = game.add_player(handle, ctx.actor.email if ctx.actor else "", ctx.now)
        out.joined.append(handle)
        out.sections.append(view.status_section(game, handle, "Your pieces"))
        return f"you are player {player.joined}; your pieces are below"

    def handle_play(self, mail: SequenceMail, cmd: Command) -> str:
        game, ctx, out = mail.game, mail.ctx, mail.outcome
        handle = self._member(game, ctx)
        self._open(game, ctx)
        player = game.player(handle)
        args = cmd.args
        number = args["piece"]
        if not 1 <= number <= PIECES_PER_PLAYER:
            raise Refused(f"there is no piece {number}: your pieces are numbered 1 to 10")
        if player.played[number - 1]:
            raise Refused(
                f"piece {number} is used already (play {player.played[number - 1]}); "
                + view.left_text(player)
            )
        piece = player.piece(number)
        if args["value"] != piece.value:
            raise Refused(
                f"piece {number} has the sequence value {piece.value}, not {args['value']}: "
                f"play it as Piece {number}: {piece.value}, {piece.multiplier} or "
                f"Piece {number}: -{piece.value}, {piece.multiplier}"
            )
        if args["multiplier"] != piece.multiplier:
            raise Refused(
                f"piece {number} has the point multiplier {piece.multiplier}, not "
                f"{args['multiplier']}: play it as Piece {number}: "
                f"{args['sign'] if args['sign'] == '-' else ''}{piece.value}, {piece.multiplier}"
            )

        # accepted: from here on the game changes
        value = piece.value if args["sign"] == "+" else -piece.value
        repeated = game.last == handle
        total = game.total + value
        points = points_for(total, piece.multiplier, eligible=not repeated)
        play = Play(game.play_count + 1, handle, number, value, piece.multiplier, total, points)
        game.record(play)
        player.played[number - 1] = play.number
        if points:
            player.score += points
            player.reached = play.number
        if player.seen == play.number - 1:  # nothing else pending for this player's digest
            player.seen = play.number

        self._announce(game, play, repeated, ctx, out)
        note = play_note(total, piece.multiplier, points, repeated)
        return (
            f"play {play.number}, total {explain_total(total)}, {note}; "
            f"your score {player.score}, {len(player.remaining())} pieces left"
        )

    def _announce(self, game: Game, play: Play, repeated: bool, ctx: Context, out: Outcome) -> None:
        """A mail per play to the players who asked for one (the player who
        made the play has the reply already).  Digest players get it from
        ``tick``.  The notice is made even when no player asked for it (its
        ``to`` then empty): the play is public, and observers get it
        (:meth:`public_reports`)."""
        each = [h for h in game.choosing_each(ctx.memo) if h != play.handle]
        data = play.as_data(repeated)
        out.notices.append(
            Notice(
                to=each,
                subject=f"{ctx.game_name or self.title}: play {play.number}, total {play.total}",
                template="play.txt",
                data={
                    "game": ctx.game_name,
                    "play": data,
                    "total": play.total,
                    # every player's score: worked out only if someone reads it
                    "standings": game.standings_later(),
                },
                kind="report",
            )
        )

    def handle_pieces(self, mail: SequenceMail, cmd: Command) -> str:
        game, ctx, out = mail.game, mail.ctx, mail.outcome
        handle = self._member(game, ctx, need_password=False)
        # a JOIN in the same mail already showed the pieces: this fuller section takes its place
        out.sections[:] = [s for s in out.sections if s.title != "Your pieces"]
        out.sections.append(view.status_section(game, handle, "Where you stand"))
        player = game.player(handle)
        return (
            f"total {game.total}, your score {player.score}, "
            f"{len(player.remaining())} pieces left"
        )

    def handle_mail(self, mail: SequenceMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        handle = self._member(game, ctx)
        if game.finished:
            raise Refused("the game is over: there is nothing more to announce")
        player = game.player(handle)
        choice = cmd.args["choice"]
        if choice == "digest" and player.mail != "digest":
            player.seen = game.play_count  # the digest starts from now
        player.mail = choice
        minutes = int(game.options.get("digest_minutes", 60))
        return {
            "each": "you will get a mail for every play",
            "digest": f"you will get a digest of the plays at most every {minutes} minutes",
            "none": "no mails about plays; you will get the final report",
        }[choice]

    def handle_setpieces(self, mail: SequenceMail, cmd: Command) -> str:
        game, ctx, out = mail.game, mail.ctx, mail.outcome
        if ctx.actor is None or not ctx.actor.is_gm:
            raise Refused("only the game master may set a player's pieces")
        if game.finished:
            raise Refused("the game is over")
        handle = game.find(cmd.args["handle"])
        if handle is None:
            raise Refused(f"{cmd.args['handle']} is not a player of this game")
        player = game.player(handle)
        if player.plays_made:
            raise Refused(
                f"{handle} has played already; pieces can only be set before the first play"
            )
        player.pieces = [Piece(v, m) for v, m in cmd.args["pieces"]]
        listing = " ".join(f"{p.value},{p.multiplier}" for p in player.pieces)
        out.audit.append(f"GM set the pieces of {handle} in {ctx.game_name or 'the game'}: {listing}")
        out.notices.append(
            Notice(
                to=[handle],
                subject=f"{ctx.game_name or self.title}: your pieces were set by the game master",
                template="status.txt",
                data=view.status_data(game, handle, "The game master set your pieces"),
            )
        )
        return f"the pieces of {handle} are now {listing}"

    # -- time ---------------------------------------------------------------------
    def tick(self, state: State, ctx: Context) -> Outcome | None:
        """Digests: a player who chose MAIL DIGEST gets the plays made since
        their last digest, once at least ``digest_minutes`` have passed since
        that digest (or since they joined or chose DIGEST), and only when
        something happened."""
        if state["finished"] or not state["plays"]:
            return None
        count = len(state["plays"])
        due = [
            handle
            for handle, data in state["players"].items()
            if data["mail"] == "digest" and data["seen"] < count
        ]
        if not due:
            return None
        game = Game.from_state(state)
        interval = game.digest_interval()
        notices = []
        standings = None
        for handle in due:
            if ctx.now - datetime.fromisoformat(state["players"][handle]["digest_at"]) < interval:
                continue
            player = game.player(handle)
            if standings is None:
                standings = game.standings()
            data = view.status_data(game, handle, "")
            data["plays"] = game.plays_data(player.seen + 1, count)
            data["standings"] = standings
            notices.append(
                Notice(
                    to=[handle],
                    subject=(
                        f"{ctx.game_name or self.title}: plays {player.seen + 1}-{count}, "
                        f"total {game.total}"
                    ),
                    template="digest.txt",
                    data=data,
                    kind="report",
                )
            )
            player.seen = count
            player.digest_at = ctx.now.isoformat()
        if not notices:
            return None
        return Outcome(state=game.to_state(), notices=notices)

    def run_turn(self, state: State, ctx: Context) -> Outcome:
        """The deadline: bonuses, the final report, the end of the game."""
        game = Game.from_state(state)
        if game.finished:
            raise GameError("The Fourth Game is over already: its deadline has been run.")
        event = game.play_count
        bonuses = []
        half = game.player_count() // 2
        for handle, points in game.finishers()[:half]:
            if points > 0:
                event += 1
                player = game.player(handle)
                player.score += FINISHER_BONUS
                player.reached = event
                bonuses.append({
                    "handle": handle, "points": FINISHER_BONUS,
                    "reason": "among the first half to use all ten pieces; tenth play scored",
                })
        last_scoring = game.last_scoring
        if last_scoring:
            handle = game.play_at(last_scoring).handle
            event += 1
            player = game.player(handle)
            player.score += LAST_SCORER_BONUS
            player.reached = event
            bonuses.append({
                "handle": handle, "points": LAST_SCORER_BONUS,
                "reason": f"the last play that scored (play {last_scoring})",
            })
        for bonus in bonuses:
            bonus["line"] = f"  {bonus['handle']} +{bonus['points']}: {bonus['reason']}"
        game.bonuses = bonuses
        game.finished = True
        state = game.to_state()
        data = view.report_data(game, ctx.game_name)
        subject = f"{ctx.game_name or self.title}: final report"
        report = Notice(to=[ALL_PLAYERS], subject=subject, template="report.txt", data=data, kind="report")
        notices, record = [report], None
        if game.player_count() > FULL_REPORT_PLAYERS:
            # a large game: each player gets their own part, the whole report
            # (every play) is kept with the game for ``history``
            record = report
            notices = [Notice(to=[handle], subject=subject, template="own_report.txt", data=own, kind="report")
                       for handle, own in view.own_reports(game, data)]
        return Outcome(
            state=state, notices=notices, record=record, turn_done=True, finished=True,
            audit=[f"deadline run: {game.play_count} plays, winner {data['winner'] or 'none'}"],
        )

    # -- what people see -----------------------------------------------------------
    def players(self, state: State) -> list[str]:
        return list(state["players"])

    def waiting_for(self, state: State) -> list[str]:
        """Nobody: plays take effect when they arrive, there are no orders to
        wait for.  (Returning the players with pieces left would let a GM's
        grace period hold the game open past its deadline.)"""
        return []

    def view(self, state: State, viewer: str | None) -> list[Section]:
        game = Game.from_state(state)
        handle = game.find(viewer)
        if game.finished:
            large = game.player_count() > FULL_REPORT_PLAYERS
            data = view.report_data(game, "", plays=not large)
            if not large:
                return [Section(title="Final report", template="report.txt", data=data)]
            # a large game: the viewer's part of the report, as they were mailed it
            row = next((r for r in data["standings"] if r["handle"] == handle), None)
            own = view.own_report(game, data, view.report_summary(game, data), row)
            return [Section(title="Final report", template="own_report.txt", data=own)]
        data = view.status_data(game, handle, "")
        data["standings"] = game.standings()
        first = max(1, game.play_count - 9)
        data["plays"] = game.plays_data(first) if game.play_count else []
        return [Section(title=self.title, template="status.txt", data=data)]

    def standing(self, state: State, handle: str) -> list[str]:
        """Plays take effect when they arrive: the player's pieces and score."""
        game = Game.from_state(state)
        found = game.find(handle)
        if found is None:
            return []
        if game.finished:
            return ["the game is over"]
        player = game.player(found)
        left = len(player.remaining())
        return [f"{left} piece{'s' if left != 1 else ''} left, score {player.score}, total {game.total}"
                + ("; play whenever you like (plays take effect when they arrive)" if left else "")]

    def public_reports(self, state: State, notices: list[Notice]) -> list[Notice]:
        """Every play (the play mail, made for each accepted play) and the
        final report: the plays, totals and scores are public.  Never a
        digest or a player's status (their own pieces), never an address."""
        out = []
        for n in notices:
            if n.template == "play.txt" or (n.template == "report.txt" and n.to == [ALL_PLAYERS]):
                out.append(Notice(to=[], subject=n.subject, template=n.template,
                                  data={**n.data, "viewer": None}, kind="report"))
        return out

    def score_history(self, state: State, most: int = 60) -> list[tuple[int, list[tuple[str, int]]]]:
        """The standings as every play's public mail shows them, after each
        play (at most ``most`` of them, evenly spread, the last always
        included): ``[(play number, [(handle, score), ...]), ...]``.  Plays
        and scores are public from the first play on (``public_reports``); a
        finished game's last point has the deadline's bonuses too."""
        encoded = plays_in_order(state)
        if not encoded:
            return []
        step = -(-len(encoded) // max(1, most))
        running = dict.fromkeys(state["players"], 0)
        out: list[tuple[int, list[tuple[str, int]]]] = []
        for number, text in enumerate(encoded, 1):
            play = Play.decode(number, text)
            running[play.handle] = running.get(play.handle, 0) + play.points
            if number % step == 0 or number == len(encoded):
                out.append((number, sorted(running.items(), key=lambda r: (-r[1], r[0].lower()))))
        if state["finished"]:
            final = {h: int(p["score"]) for h, p in state["players"].items()}
            out[-1] = (out[-1][0], sorted(final.items(), key=lambda r: (-r[1], r[0].lower())))
        return out

    def move_turns(self, state: State) -> int | None:
        """Each play is a turn page (the closing deadline, with its bonuses,
        is the one after the last play)."""
        return len(plays_in_order(state))

    def move_turn(self, state: State, number: int, name: str) -> TurnView | None:
        """Play ``number``: who played which piece, what it scored and why,
        the plays up to it (the last ten) and the standings after it, as the
        play's public mail showed them."""
        encoded = plays_in_order(state)
        if not 1 <= number <= len(encoded):
            return None
        players = state["players"]
        running = {h: [0, 0, int(p.get("joined", 0))] for h, p in players.items()}
        for n, text in enumerate(encoded[:number], 1):
            play = Play.decode(n, text)
            row = running.setdefault(play.handle, [0, 0, len(running) + 1])
            if play.points:
                row[0] += play.points
                row[1] = n
        standings = ranked((h, s, r, j) for h, (s, r, j) in running.items())
        game = Game.from_state(state)
        plays = game.plays_data(max(1, number - 9), number)
        this = plays[-1]
        data = {"game": name, "number": number, "play": this, "plays": plays, "standings": standings,
                "count": len(encoded), "finished": bool(state.get("finished")) and number == len(encoded)}
        place = {r["handle"]: r for r in standings}
        figures = [{"handle": r["handle"], "score": r["score"], "standing": f"place {r['place']}",
                    "did": (f"piece {this['piece']}: {this['signed']} x {this['multiplier']}, total {this['total']}, "
                            f"{this['note']}") if r["handle"] == this["handle"] else None}
                   for r in standings]
        return TurnView(f"play {number}", [Section(title=f"Play {number} of {len(encoded)}", template="turn.txt",
                                                   data=data)],
                        sorted(figures, key=lambda f: place[f["handle"]]["place"]))

    def turn_view(self, before: State | None, after: State, turn: int, name: str) -> TurnView | None:
        """The closing deadline: the final report (bonuses, final standings)."""
        if not after.get("finished"):
            return None
        game = Game.from_state(after)
        standings = game.standings()
        bonuses: dict[str, list[str]] = {}
        for b in game.bonuses:
            bonuses.setdefault(b["handle"], []).append(f"+{b['points']}: {b['reason']}")
        figures = [{"handle": r["handle"], "score": r["score"], "standing": f"place {r['place']}",
                    "did": "; ".join(bonuses[r["handle"]]) if r["handle"] in bonuses else None} for r in standings]
        return TurnView("the deadline", self.view(after, None), figures)

    def hidden_from(self, state: State, viewer: str | None) -> list[str]:
        """Plays and pieces are public; the e-mail addresses the pieces came
        from are not."""
        return sorted({p["email"] for handle, p in state["players"].items() if handle != viewer and p["email"]})

    def join_hint(self, state: State) -> JoinHint | None:
        """JOIN while the game is open and not full (handle_join)."""
        game = Game.from_state(state)
        if game.finished:
            return JoinHint(None, "the game is over")
        limit = int(game.options.get("max_players") or 0)
        if limit and game.player_count() >= limit:
            return JoinHint(None, f"the game is full: it takes at most {limit} players")
        return JoinHint("JOIN", "the reply brings your ten pieces to play before the deadline")

    def help_text(self) -> str:
        return rule_book(self.summary, self.options)
