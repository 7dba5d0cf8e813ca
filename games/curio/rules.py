"""CurioRules: one curio game holds many numbered boards (101, 102, ...)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from games.base import (
    NOT_REGISTERED,
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
    choice,
    sender_handle,
)
from games.curio import clock as move_clock
from games.curio import parse
from games.curio.boards import FIRST_BOARD, Board, CurioState, OpenChallenge, same_handle
from games.curio.clock import parse_clock, show_clock, show_moment
from games.curio.help import rule_book
from games.curio.model import (
    CAPTURE_RULES,
    DARK,
    DEFAULT_SETUP,
    FACES,
    LIGHT,
    SIDE_NAME,
    IllegalMove,
    Move,
    Position,
    Setup,
    SetupError,
    opponent,
)
from games.curio.parse import USAGE
from games.curio.ratings import Ratings
from games.curio.state import dump, load, validated
from games.curio.view import board_data, board_text, games_text, history_text, status_line

REGISTER_FIRST = NOT_REGISTERED
#: new boards one mail may start: each one mails the other player
MAX_CHALLENGES_PER_MAIL = 5
#: open challenges one player may have waiting at once
MAX_OPEN_PER_PLAYER = 3


def _bool(text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected yes or no, not {text!r}")


@dataclass
class CurioMail(Mail):
    """One mail's commands; collects what they say per (recipient, board), so
    a player gets one mail per board with every event in it."""

    game: CurioState
    sections: dict[tuple[int, str | None], list[str]] = field(default_factory=dict)
    notices: dict[tuple[str, int], tuple[str | None, list[str], str]] = field(default_factory=dict)
    #: boards started by this mail (at most MAX_CHALLENGES_PER_MAIL)
    challenges: int = 0

    def reply(self, board: Board, side: str | None, headline: str = "") -> None:
        lines = self.sections.setdefault((board.number, side), [])
        if headline:
            lines.append(headline)

    def tell(self, handle: str, board: Board, side: str | None, headline: str, subject: str) -> None:
        key = (handle, board.number)
        old = self.notices.get(key)
        lines = (old[1] if old else []) + [headline]
        self.notices[key] = (side, lines, subject)


def open_text(waiting: list[OpenChallenge]) -> str:
    """``curio open``: the challenges waiting for an opponent."""
    if not waiting:
        return "No open challenge is waiting. Start one with: curio challenge [-options] YOURHANDLE"
    lines = []
    for c in waiting:
        opts = " ".join(f"-{k}" if v is True else f"-no_{k}" if v is False else f"-{k}={v}"
                        for k, v in sorted(c.options.items()))
        clock = f", move clock {show_clock(c.clock)}" if c.clock else ""
        lines.append(f"{c.number:>3}. {c.by} (plays Light){clock}, since {c.since[:16].replace('T', ' ')} UTC"
                     + (f", options {opts}" if opts else ""))
    lines.append("")
    lines.append("Accept one with: curio accept N (with your $$password$$ in the mail); you play Dark.")
    return "\n".join(lines)


def rating_line(board: Board, ratings: Ratings | None) -> str:
    """``Ratings: alice 1516 (3 rated boards), bob 1500 (no rated boards yet).``"""
    if ratings is None:
        return ""
    return f"Ratings: {ratings.of(board.light).describe()}, {ratings.of(board.dark).describe()}."


class CurioRules(Rules[CurioMail]):
    kind = "curio"
    title = "Curio"
    summary = (
        "Curio (Tavener and Browne, 2008): two players move two-faced pieces like chess "
        "queens, as far as the face they see on them.  Each player sees only the face "
        "pointing at them; a piece turns round after a capture and shows both faces.  "
        "Capture all enemy royal pieces to win.  Many boards run in one game."
    )
    has_turns = False
    pbm_prefix = True
    default_deadline = None
    turn_name = "move"
    options = (
        Option("base", DEFAULT_SETUP.base, "default -base: digits 1..base, every pair i<=j is a piece", int),
        Option("rows", DEFAULT_SETUP.rows, "default -rows of a new board", int),
        Option("cols", DEFAULT_SETUP.cols, "default -cols of a new board", int),
        Option("num_pieces", DEFAULT_SETUP.num_pieces, "default -num_pieces per side (0: one of each pair)", int),
        Option("turn", DEFAULT_SETUP.turn, "pieces turn round after a capture (-turn / -no_turn)", _bool),
        Option("limit", DEFAULT_SETUP.limit, "pieces move at most their face value (-limit / -no_limit)", _bool),
        Option("face", DEFAULT_SETUP.face, "which face points at the owner: large, small or random",
               choice(*FACES)),
        Option("capture", DEFAULT_SETUP.capture, "capture rule: " + ", ".join(CAPTURE_RULES), choice(*CAPTURE_RULES)),
        Option("draw_moves", DEFAULT_SETUP.draw_moves, "moves in a row without a capture that draw (0: never)", int),
        Option("clock", 0, "default move clock of a new board, e.g. 2d or 36h (0: none; -clock=... in a "
               "challenge overrides it)", parse_clock),
    )

    # -- life cycle -------------------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        values = self.option_values(options)
        clock = int(values.pop("clock", 0) or 0)
        try:
            defaults = Setup(**values).validate()
        except (SetupError, TypeError) as e:
            raise GameError(f"curio options: {e}") from None
        return dump(CurioState(defaults=defaults, clock=clock))

    def import_state(self, data: dict[str, Any]) -> State:
        return validated(data)

    def export_state(self, state: State) -> dict[str, Any]:
        return dump(load(state))

    # -- mail -------------------------------------------------------------------------
    def parse_line(self, line: Line) -> Command:
        return parse.parse_line(line)

    def safe_echo(self, line: Line) -> str:
        return parse.masked(line)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> CurioMail:
        return CurioMail(ctx, commands, Outcome(state=state), game=load(state))

    def close_mail(self, mail: CurioMail) -> None:
        game, outcome = mail.game, mail.outcome
        ratings = Ratings(game.boards.values()) if mail.sections or mail.notices else None
        for (number, side), headlines in mail.sections.items():
            board = game.boards[number]
            data = board_data(board, side, headlines, ratings=rating_line(board, ratings))
            data["clock"] = move_clock.clock_line(board)
            outcome.sections.append(Section(
                title=f"Curio board {number}", template="board.txt", data=data))
        for (handle, number), (side, headlines, subject) in mail.notices.items():
            board = game.boards[number]
            data = board_data(board, side, headlines, ratings=rating_line(board, ratings))
            data["clock"] = move_clock.clock_line(board)
            outcome.notices.append(Notice(
                to=[handle], subject=subject, template="board.txt", data=data, kind="report"))
        outcome.state = dump(game)

    def thread_of(self, item: Notice | Section | Command) -> tuple[str, str] | None:
        """Each board is a thread of its own."""
        if isinstance(item, Command):
            number = item.args.get("board")
        else:
            number = item.data.get("number") if item.template == "board.txt" else None
        if isinstance(number, int) and not isinstance(number, bool):
            return f"board.{number}", f"board {number}"
        return None

    # -- helpers ----------------------------------------------------------------------
    @staticmethod
    def _board(game: CurioState, number: int) -> Board:
        board = game.boards.get(number)
        if board is None:
            known = ", ".join(str(n) for n in sorted(game.boards)[-5:])
            raise Refused(f"there is no curio board {number}"
                          + (f" (boards here: {known}{', ...' if len(game.boards) > 5 else ''})"
                             if known else f" (boards are numbered from {FIRST_BOARD})"))
        return board

    @staticmethod
    def _player(board: Board, cmd: Command) -> str:
        """The side of the verified userid on this board."""
        if not cmd.actor:
            raise Refused("the userid and password could not be checked")
        side = board.side_of(cmd.actor)
        if side is None:
            raise Refused(f"{cmd.actor} is not playing on board {board.number} "
                          f"({board.light} and {board.dark} are)")
        return side

    @staticmethod
    def _observers(board: Board, mail: CurioMail, headline: str, subject: str) -> None:
        for handle in board.subscribers:
            mail.tell(handle, board, None, headline, subject)

    @staticmethod
    def _end(board: Board, winner_side: str | None, reason: str, ended: str,
             status: str = "finished") -> None:
        board.status = status
        board.ended = ended
        board.winner = board.handle(winner_side) if winner_side else None
        board.reason = reason
        board.draw_offer = None

    @staticmethod
    def _end_headline(board: Board) -> str:
        if board.winner:
            return (f"Game over: {board.winner} ({SIDE_NAME[board.side(board.winner)]}) won, "
                    f"{board.reason}.")
        return f"Game over: a draw, {board.reason}."

    # -- commands ---------------------------------------------------------------------
    def handle_challenge(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        actor = ctx.actor
        # a challenge mails someone else and starts a board for them: never on a
        # From alone, which anyone can write (docs/security.md, "Mail bombs")
        sender_handle(ctx, need_password=True)
        assert actor is not None
        if mail.challenges >= MAX_CHALLENGES_PER_MAIL:
            raise Refused(f"at most {MAX_CHALLENGES_PER_MAIL} new boards per mail: send the other "
                          f"challenges in a later mail")
        players = []
        for name in cmd.args["players"]:
            known = next((h for h in ctx.emails if h.casefold() == name.casefold()), None)
            if known is None:
                raise Refused(f"there is no account {name}: both players must be registered "
                              f"(`register HANDLE PASSWORD` to pbm@ this server)")
            players.append(known)
        if len(players) == 1:
            return self._open_challenge(mail, players[0], dict(cmd.args["options"]))
        light, dark = players
        if not actor.is_gm and not any(same_handle(actor.handle, p) for p in players):
            raise Refused(f"you ({actor.handle}) can only challenge with yourself as one of "
                          f"the two players")
        opts = dict(cmd.args["options"])
        clock = int(opts.pop("clock", game.clock))
        board = self._start_board(mail, light, dark, self._setup(game, opts), clock)
        number = board.number
        head = f"Board {number} started: {light} (Light, moves first) vs {dark} (Dark)."
        sender_side = board.side_of(actor.handle)
        mail.reply(board, sender_side, head)
        for side in (LIGHT, DARK):
            if side != sender_side:
                who = f"{actor.handle} has challenged you" if not actor.is_gm else "The game master has started a game for you"
                mail.tell(board.handle(side), board, side,
                          f"{who} to Curio on board {number}; you play {SIDE_NAME[side]}.",
                          f"Curio board {number}: new game, you play {SIDE_NAME[side]}")
        return f"board {number}: {light} (Light) vs {dark} (Dark), {light} moves first"

    @staticmethod
    def _setup(game: CurioState, opts: dict[str, Any]) -> Setup:
        """The set-up of a new board: the game's defaults with ``opts`` (the
        -options of a challenge, the clock taken out); Refused if it cannot be."""
        base = dataclasses.asdict(game.defaults)
        if "base" in opts and "num_pieces" not in opts:
            base["num_pieces"] = 0  # one set for the new base
        try:
            setup = Setup(**{**base, **opts}).validate()
        except SetupError as e:
            raise Refused(f"this board cannot be set up: {e}") from None
        return Setup.from_dict(setup.to_dict())

    def _start_board(self, mail: CurioMail, light: str, dark: str, setup: Setup, clock: int) -> Board:
        """A new board between ``light`` and ``dark``, its clock started."""
        game, ctx = mail.game, mail.ctx
        # 128 bits: the layout must not be found by trying every seed from a first board mail
        seed = ctx.rng.getrandbits(128)
        start = Position.initial(setup, seed)
        ended = start.result()
        if ended is not None:
            raise Refused(f"with these options the game would be over before the first move "
                          f"({ended[1]}): choose other options")
        number = game.next_board
        board = Board(number=number, light=light, dark=dark, setup=setup, seed=seed,
                      position=start, started=ctx.now.isoformat(), clock=clock)
        move_clock.start(board, ctx.now)
        game.boards[number] = board
        game.next_board = number + 1
        mail.challenges += 1
        who = ctx.actor.handle if ctx.actor else "?"
        mail.outcome.audit.append(f"curio board {number} started by {who}: {light} vs {dark}, "
                                  f"{setup.flags()}" + (f", clock {show_clock(clock)}" if clock else "")
                                  + f", seed {seed}")
        return board

    # -- open challenges ----------------------------------------------------------------
    def _open_challenge(self, mail: CurioMail, handle: str, opts: dict[str, Any]) -> str:
        game, ctx = mail.game, mail.ctx
        me = sender_handle(ctx, need_password=True)
        if not same_handle(me, handle):
            raise Refused(f"an open challenge names only yourself ({me}): curio challenge [-options] {me}; "
                          f"to challenge {handle}, name both: curio challenge {me} {handle}")
        mine = [c for c in game.open_challenges if same_handle(c.by, me)]
        if len(mine) >= MAX_OPEN_PER_PLAYER:
            raise Refused(f"you have {len(mine)} open challenges waiting already (at most {MAX_OPEN_PER_PLAYER}); "
                          f"'curio cancel N' takes one back")
        clock = int(opts.pop("clock", game.clock))
        self._setup(game, dict(opts))  # refused now if the options cannot make a board
        number = game.next_open
        game.open_challenges.append(OpenChallenge(number, me, opts, clock, ctx.now.isoformat()))
        game.next_open = number + 1
        mail.outcome.audit.append(f"curio open challenge {number} by {me}")
        return (f"open challenge {number}: it waits in 'curio open' until someone accepts it with "
                f"'curio accept {number}'; you will play Light and move first")

    @staticmethod
    def _open_of(game: CurioState, number: int) -> OpenChallenge:
        found = next((c for c in game.open_challenges if c.number == number), None)
        if found is None:
            waiting = ", ".join(str(c.number) for c in game.open_challenges) or "none"
            raise Refused(f"there is no open challenge {number} (waiting now: {waiting}; 'curio open' lists them)")
        return found

    def handle_open(self, mail: CurioMail, cmd: Command) -> str:
        waiting = mail.game.open_challenges
        mail.outcome.sections.append(Section(title="Curio: open challenges", text=open_text(waiting)))
        return f"{len(waiting)} open challenge{'s' if len(waiting) != 1 else ''} listed"

    def handle_accept_open(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        me = sender_handle(ctx, need_password=True)
        if mail.challenges >= MAX_CHALLENGES_PER_MAIL:
            raise Refused(f"at most {MAX_CHALLENGES_PER_MAIL} new boards per mail")
        offer = self._open_of(game, cmd.args["number"])
        if same_handle(offer.by, me):
            raise Refused(f"open challenge {offer.number} is your own; 'curio cancel {offer.number}' takes it back")
        board = self._start_board(mail, offer.by, me, self._setup(game, dict(offer.options)), offer.clock)
        game.open_challenges = [c for c in game.open_challenges if c.number != offer.number]
        head = (f"{me} accepted {offer.by}'s open challenge {offer.number}: board {board.number} started, "
                f"{offer.by} (Light, moves first) vs {me} (Dark).")
        mail.reply(board, DARK, head)
        mail.tell(offer.by, board, LIGHT, head, f"Curio board {board.number}: {me} accepted your open challenge")
        return f"board {board.number}: {offer.by} (Light) vs {me} (Dark), {offer.by} moves first"

    def handle_cancel_open(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        me = sender_handle(ctx, need_password=True)
        offer = self._open_of(game, cmd.args["number"])
        if not same_handle(offer.by, me):
            raise Refused(f"open challenge {offer.number} is {offer.by}'s, not yours")
        game.open_challenges = [c for c in game.open_challenges if c.number != offer.number]
        return f"open challenge {offer.number} taken back"

    # -- the move clock -------------------------------------------------------------------
    def handle_claim(self, mail: CurioMail, cmd: Command) -> str:
        board = self._board(mail.game, cmd.args["board"])
        side = self._player(board, cmd)
        if not board.active:
            raise Refused(f"board {board.number} is over: {board.reason}")
        if not board.clock:
            raise Refused(f"board {board.number} has no move clock, so nobody can lose it on time")
        mover = board.position.to_move
        if mover == side:
            raise Refused(f"it is your move on board {board.number}: your own clock is running, not "
                          f"{board.handle(opponent(side))}'s")
        end = move_clock.due(board)
        if end is not None and mail.ctx.now < end:
            raise Refused(f"{board.handle(mover)} has until {show_moment(end)} to move on board {board.number}: "
                          "the clock has not run out")
        head = self._time_out(board, mail.ctx.now)
        mail.reply(board, side, head)
        mail.tell(board.handle(mover), board, mover, head, f"Curio board {board.number}: lost on time")
        self._observers(board, mail, head, f"Curio board {board.number}: won on time")
        return f"board {board.number} won on time"

    def _time_out(self, board: Board, now: datetime) -> str:
        """The player to move loses on time; the headline that says so."""
        mover = board.position.to_move
        loser = board.handle(mover)
        self._end(board, opponent(mover), f"{loser} ran out of time ({show_clock(board.clock)} a move)",
                  now.isoformat())
        return f"{loser}'s move clock on board {board.number} ran out: {board.winner} wins on time."

    def tick(self, state: State, ctx: Context) -> Outcome | None:
        """The move clocks: a reminder to the player to move when a quarter
        of the clock is left (at most a day), a loss on time when it runs out."""
        game = load(state)
        mail = CurioMail(ctx, [], Outcome(state=state), game=game)
        for board in game.boards.values():
            end = move_clock.due(board)
            if end is None:
                continue
            mover = board.position.to_move
            if ctx.now >= end:
                head = self._time_out(board, ctx.now)
                for side in (LIGHT, DARK):
                    mail.tell(board.handle(side), board, side, head,
                              f"Curio board {board.number}: " + ("lost on time" if side == mover else "won on time"))
                self._observers(board, mail, head, f"Curio board {board.number}: won on time")
                mail.outcome.audit.append(f"curio board {board.number}: {head}")
            elif not board.reminded and ctx.now >= (move_clock.remind_at(board) or end):
                board.reminded = True
                mail.tell(board.handle(mover), board, mover,
                          f"Reminder: it is your move on board {board.number}, and your move clock runs out at "
                          f"{show_moment(end)}; after that {board.handle(opponent(mover))} wins on time.",
                          f"Curio board {board.number}: reminder, your move clock runs out {show_moment(end)}")
        if not mail.notices:
            return None
        self.close_mail(mail)
        return mail.outcome

    def handle_move(self, mail: CurioMail, cmd: Command) -> str:
        game = mail.game
        board = self._board(game, cmd.args["board"])
        side = self._player(board, cmd)
        try:
            if not board.active:
                raise Refused(f"board {board.number} is over: {board.reason}")
            pos = board.position
            number = cmd.args.get("number")
            if number is not None and number != pos.ply + 1:
                if number <= pos.ply:
                    raise Refused(f"move #{number} has already been played on board "
                                  f"{board.number}; the next is move #{pos.ply + 1}")
                raise Refused(f"board {board.number} is at move #{pos.ply + 1}, not #{number}")
            if pos.to_move != side:
                raise Refused(f"it is {board.handle(pos.to_move)}'s move on board {board.number}, "
                              f"not yours")
            try:
                move = pos.check(side, Move.parse(cmd.args["move"]))
            except (IllegalMove, ValueError) as e:
                raise Refused(f"illegal move: {e}") from None
        except Refused:
            mail.reply(board, side)
            raise
        board.position = pos.play(move)
        board.moves.append(str(move))
        move_clock.start(board, mail.ctx.now)  # now the other player's clock runs
        if board.draw_offer == opponent(side):
            board.draw_offer = None  # moving instead of answering turns the offer down
        me, them = board.handle(side), board.handle(opponent(side))
        head = f"Move {pos.ply + 1}: {me} ({SIDE_NAME[side]}) played {move}" + (
            ", capturing" + (" and turning round" if board.setup.turn else "") if move.capture else "") + "."
        subject = f"Curio board {board.number}: {me} played {move}"
        result = board.position.result()
        if result is not None:
            winner, reason = result
            self._end(board, winner, reason, mail.ctx.now.isoformat())
            end = self._end_headline(board)
            head = f"{head} {end}"
            subject = f"Curio board {board.number}: game over"
        else:
            subject = f"Curio board {board.number}: your move ({me} played {move})"
        mail.reply(board, side, head)
        mail.tell(them, board, opponent(side), head, subject)
        self._observers(board, mail, head, f"Curio board {board.number}: {me} played {move}")
        return f"{move} on board {board.number}" + (f"; {board.reason}" if result else "")

    def handle_resign(self, mail: CurioMail, cmd: Command) -> str:
        game = mail.game
        board = self._board(game, cmd.args["board"])
        side = self._player(board, cmd)
        if not board.active:
            raise Refused(f"board {board.number} is over: {board.reason}")
        me = board.handle(side)
        if board.position.ply == 0:
            self._end(board, None, f"{me} declined before the first move", mail.ctx.now.isoformat(),
                      status="declined")
            head = f"{me} declined the challenge on board {board.number}; the board is closed."
            what = "challenge declined"
        else:
            self._end(board, opponent(side), f"{me} resigned", mail.ctx.now.isoformat())
            head = f"{me} resigned on board {board.number}: {board.winner} wins."
            what = "resigned"
        mail.reply(board, side, head)
        mail.tell(board.handle(opponent(side)), board, opponent(side), head,
                  f"Curio board {board.number}: {what}")
        self._observers(board, mail, head, f"Curio board {board.number}: {what}")
        return f"{what} on board {board.number}"

    def handle_draw(self, mail: CurioMail, cmd: Command) -> str:
        game = mail.game
        board = self._board(game, cmd.args["board"])
        side = self._player(board, cmd)
        if not board.active:
            raise Refused(f"board {board.number} is over: {board.reason}")
        me, them = board.handle(side), board.handle(opponent(side))
        action = cmd.args["action"]
        if action == "propose" and board.draw_offer == opponent(side):
            action = "accept"  # both want a draw
        n = board.number
        if action == "propose":
            if board.draw_offer == side:
                raise Refused(f"you have already proposed a draw on board {n}")
            board.draw_offer = side
            head = f"{me} proposes a draw on board {n}."
            mail.reply(board, side, head)
            mail.tell(them, board, opponent(side), head, f"Curio board {n}: {me} proposes a draw")
            return f"draw proposed on board {n}; {them} may accept or reject it"
        if board.draw_offer != opponent(side):
            raise Refused(f"{them} has not proposed a draw on board {n}"
                          + ("" if action == "reject" else
                             f"; propose one with curio draw {n} {me} <password> propose"))
        if action == "reject":
            board.draw_offer = None
            head = f"{me} rejected the draw on board {n}; the game goes on."
            mail.reply(board, side, head)
            mail.tell(them, board, opponent(side), head, f"Curio board {n}: draw rejected")
            return f"draw rejected on board {n}"
        self._end(board, None, "drawn by agreement", mail.ctx.now.isoformat())
        head = f"{me} accepted the draw on board {n}: the game is drawn."
        mail.reply(board, side, head)
        mail.tell(them, board, opponent(side), head, f"Curio board {n}: drawn")
        self._observers(board, mail, head, f"Curio board {n}: drawn")
        return f"draw agreed on board {n}"

    def handle_show(self, mail: CurioMail, cmd: Command) -> str:
        game = mail.game
        board = self._board(game, cmd.args["board"])
        at = cmd.args.get("at")
        if at is None:
            mail.reply(board, None)
            return f"board {board.number} as an observer sees it"
        # from the requester's side only when the mail proves who they are:
        # a From alone, which anyone can write, gets the observer's view
        actor = mail.ctx.actor
        side = board.side_of(actor.handle) if actor and actor.authenticated else None
        note = ""
        if side is None and actor and board.side_of(actor.handle):
            note = (f"This is the observer's view: to see it from your side, put your $$password$$ "
                    f"in the mail (or write curio showas {actor.handle} <password> {board.number}#{at}).")
        return self._show_at(mail, board, side, at, note)

    def handle_showas(self, mail: CurioMail, cmd: Command) -> str:
        game = mail.game
        board = self._board(game, cmd.args["board"])
        side = self._player(board, cmd)
        at = cmd.args.get("at")
        if at is not None:
            return self._show_at(mail, board, side, at)
        mail.reply(board, side)
        return f"board {board.number} as {board.handle(side)} sees it"

    def _show_at(self, mail: CurioMail, board: Board, side: str | None, at: int, note: str = "") -> str:
        """The board after move ``at`` as ``side`` saw it then (None: as an
        observer could, i.e. only faces both players knew then)."""
        total = len(board.moves)
        if not 0 <= at <= total:
            played = "no move has been played yet, so only #0 (the start)" if not total else \
                f"{total} move{'s have' if total != 1 else ' has'} been played: #0 (the start) to #{total}"
            raise Refused(f"board {board.number} has no move #{at}; {played}")
        ratings = Ratings(mail.game.boards.values())
        data = board_data(board, side, [note] if note else [], ratings=rating_line(board, ratings), at=at)
        mail.outcome.sections.append(Section(
            title=f"Curio board {board.number} after move {at}", template="board.txt", data=data))
        seen = f"as {board.handle(side)} saw it" if side else "as an observer could see it"
        return f"board {board.number} after move {at}, {seen}"

    def handle_history(self, mail: CurioMail, cmd: Command) -> str:
        board = self._board(mail.game, cmd.args["board"])
        mail.outcome.sections.append(Section(title=f"Curio board {board.number}: every move",
                                             text=history_text(board)))
        n = len(board.moves)
        return f"the {n} move{'s' if n != 1 else ''} of board {board.number} follow"

    def handle_games(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        wanted = cmd.args["userid"]
        handle = next((h for h in ctx.emails if same_handle(h, wanted)), None)
        if handle is None:
            raise Refused(f"there is no account {wanted}; expected {USAGE['games']}")
        boards = [b for _, b in sorted(game.boards.items()) if b.side_of(handle)]
        rating = Ratings(game.boards.values()).of(handle).describe(name=False)
        mail.outcome.sections.append(Section(title=f"Curio boards of {handle}",
                                             text=games_text(handle, boards, rating)))
        return f"{len(boards)} board{'s' if len(boards) != 1 else ''} of {handle} listed"

    def handle_ratings(self, mail: CurioMail, cmd: Command) -> str:
        ratings = Ratings(mail.game.boards.values())
        mail.outcome.sections.append(Section(title="Curio ratings", text=ratings.text()))
        n = len(ratings.table())
        return f"{n} rated player{'s' if n != 1 else ''} listed"

    def handle_subscribe(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        board = self._board(game, cmd.args["board"])
        # it mails the subscriber after every move: not on a From alone
        handle = sender_handle(ctx, need_password=True)
        if board.side_of(handle):
            raise Refused(f"you are playing on board {board.number}: you get every move already")
        if any(same_handle(handle, h) for h in board.subscribers):
            raise Refused(f"you already follow board {board.number}")
        if not board.active:
            raise Refused(f"board {board.number} is over: {board.reason}")
        board.subscribers.append(handle)
        mail.reply(board, None, f"You now follow board {board.number} as an observer.")
        return f"you will get every move on board {board.number} (observer's view)"

    def handle_unsubscribe(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx = mail.game, mail.ctx
        board = self._board(game, cmd.args["board"])
        handle = ctx.actor.handle if ctx.actor else None
        if not handle:
            raise Refused(REGISTER_FIRST)
        kept = [h for h in board.subscribers if not same_handle(h, handle)]
        if len(kept) == len(board.subscribers):
            raise Refused(f"you do not follow board {board.number}")
        board.subscribers = kept
        return f"you no longer follow board {board.number}"

    def handle_boards(self, mail: CurioMail, cmd: Command) -> str:
        game, ctx, out = mail.game, mail.ctx, mail.outcome
        handle = ctx.actor.handle if ctx.actor else None
        shown = [b for b in game.boards.values() if b.active or b.side_of(handle)]
        text = "\n".join(b.summary() for b in shown) or "No boards yet: start one with " + USAGE["challenge"]
        out.sections.append(Section(title="Curio boards", text=text))
        return f"{len(shown)} board{'s' if len(shown) != 1 else ''} listed"

    # -- what people see --------------------------------------------------------------
    def players(self, state: State) -> list[str]:
        return load(state).players()

    def view(self, state: State, viewer: str | None) -> list[Section]:
        game = load(state)
        sections = []
        ratings = Ratings(game.boards.values())
        for number, board in sorted(game.boards.items()):
            side = board.side_of(viewer)
            data = board_data(board, side, ratings=rating_line(board, ratings))
            data["clock"] = move_clock.clock_line(board)
            # the board's template, as the mails draw it: pieces on the web, the grid in text
            sections.append(Section(title=f"Curio board {number}", template="board.txt", data=data,
                                    text=board_text(data) + (f"\n{data['clock']}" if data["clock"] else "")))
        if not sections:
            sections.append(Section(title="Curio", text="No boards yet."))
        return sections

    def boards(self, state: State) -> list[dict[str, Any]]:
        out = []
        for number, board in sorted(load(state).boards.items()):
            active = board.status == "active"
            out.append({
                "number": number, "light": board.light, "dark": board.dark, "status": board.status,
                "to_move": board.handle(board.position.to_move) if active else None,
                "moves": len(board.moves), "last_move": board.moves[-1] if board.moves else None,
                "winner": board.winner, "reason": board.reason or None,
                "started": board.started or None, "ended": board.ended or None,
            })
        return out

    def move_turns(self, state: State) -> int | None:
        """Turn N is move N on every board that has one: the most moves any
        board of the game has made."""
        return max((len(b.moves) for b in load(state).boards.values()), default=0)

    def move_turn(self, state: State, number: int, name: str) -> TurnView | None:
        """Every board that made a move ``number``, as an observer saw it
        just after that move (faces only the players know stay hidden, as
        ``curio show <board>#<n>`` shows an observer); per player on such a
        board their side, the move if it was theirs, and the board's state."""
        boards = [b for _, b in sorted(load(state).boards.items()) if len(b.moves) >= number >= 1]
        if not boards:
            return None
        sections, figures = [], []
        for board in boards:
            data = board_data(board, None, at=number)
            sections.append(Section(title=f"Board {board.number}: move {number}", template="board.txt", data=data))
            mover = board.mover(number)
            over = number == len(board.moves) and not board.active
            standing = status_line(board, None) if over else \
                f"{SIDE_NAME[opponent(mover)]} to move (move {number + 1})"
            for side in (LIGHT, DARK):
                figures.append({"handle": board.handle(side), "score": None, "board": board.number,
                                "side": SIDE_NAME[side], "standing": standing,
                                "did": board.moves[number - 1] if side == mover else None})
        return TurnView(f"move {number}", sections, figures)

    def rating_history(self, state: State, handle: str) -> list[dict[str, Any]]:
        """``handle``'s Elo rating after each of their finished boards, in the
        order ``curio ratings`` rates them: board, opponent, result, the date
        it ended and the rating as shown (whole points).  Finished boards are
        public (their result and moves are in every observer's mail)."""
        out = []
        for board, value in Ratings(load(state).boards.values()).history(handle):
            side = board.side_of(handle) or LIGHT
            result = "draw" if board.winner is None else ("won" if same_handle(board.winner, handle) else "lost")
            out.append({"board": board.number, "handle": board.handle(side), "opponent": board.handle(opponent(side)),
                        "result": result,
                        "ended": board.ended[:10], "rating": int(value + 0.5)})
        return out

    def standing(self, state: State, handle: str) -> list[str]:
        """One line per board of ``handle`` in play: whose move it is."""
        lines = []
        for number, board in sorted(load(state).boards.items()):
            side = board.side_of(handle)
            if side is None or not board.active:
                continue
            other = board.handle(opponent(side))
            mover = board.position.to_move
            whose = "your move" if mover == side else f"{other}'s move"
            lines.append(f"board {number} vs {other} (you play {SIDE_NAME[side]}): {whose} "
                         f"(move {board.position.ply + 1})")
        return lines

    def public_reports(self, state: State, notices: list[Notice]) -> list[Notice]:
        """Each board a mail changed, as an observer sees it: only the faces
        both players know (turned pieces), never a player's own headlines."""
        game = load(state)
        seen: list[int] = []
        for n in notices:
            number = n.data.get("number") if n.template == "board.txt" else None
            if isinstance(number, int) and number in game.boards and number not in seen:
                seen.append(number)
        out = []
        for number in seen:
            board = game.boards[number]
            out.append(Notice(
                to=[], subject=f"curio board {number}: {board.light} vs {board.dark}, after move {board.position.ply}",
                template="board.txt", data={**board_data(board, None), "viewer": None}, kind="report"))
        return out

    def hidden_from(self, state: State, viewer: str | None) -> list[str]:
        """Both faces of a piece that has not turned, as a board cell would
        show them to this viewer: nobody knows both faces of such a piece
        (its owner does not see the face toward the opponent)."""
        hidden: set[str] = set()
        shown: set[str] = set()
        for board in load(state).boards.values():
            side = board.side_of(viewer)
            for piece in board.position.pieces.values():
                mine = piece.side == (side or LIGHT)
                left, right = ("[", "]") if mine else ("(", ")")
                tokens = {f"{left}{piece.own}{piece.other}{right}", f"{left}{piece.other}{piece.own}{right}"}
                (shown if piece.revealed else hidden).update(tokens)
        return sorted(hidden - shown)

    def join_hint(self, state: State) -> JoinHint | None:
        """Curio boards are not joined: a challenge to pbm@DOMAIN starts one
        (handle_challenge), or waits in ``curio open`` for anyone."""
        return JoinHint("curio challenge YOURHANDLE OPPONENT",
                        "curio boards are not joined: a challenge starts a board between two registered "
                        "players (curio challenge YOURHANDLE alone waits in 'curio open' until someone "
                        "accepts it with 'curio accept N')", server=True)

    def help_text(self) -> str:
        return rule_book(self.summary, self.options)
