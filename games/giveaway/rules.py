"""Giveaway (v0.02, 1997): the rules object the server talks to.

Mail syntax (to NAME@domain, with $$password$$):

    JOIN                    before round 1 is resolved
    GIVE <n> TO <handle>    one line per gift; lines to the same player add up;
                            a mail's GIVE lines are one order for the round
    LEAVE                   leave the game; your holding is forfeited
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

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
    acceptance,
    actor_problem,
    refusal,
)
from games.giveaway import parse
from games.giveaway.help import rule_book
from games.giveaway.model import (
    JOINING,
    JOINS,
    MIN_PLAYERS,
    NO_ORDER_CHOICES,
    OVER,
    ROUND_BONUS,
    START_HOLDING,
    Game,
    Gift,
    Player,
    Roster,
    key,
)
from games.giveaway.resolve import advance, resolve_round
from games.giveaway.state import dump, load, validated
from games.giveaway.view import FULL_REPORT_PLAYERS, order_data, own_reports, pts, report_data, what_became


def parse_no_order(text: str) -> str:
    value = str(text).strip().lower()
    if value not in NO_ORDER_CHOICES:
        raise ValueError(f"no_order must be 'forfeit' or 'split', not {text!r}")
    return value


def parse_round_limit(text: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"round_limit must be a whole number of rounds (0: no limit), not {text!r}") from None
    if value < 0:
        raise ValueError("round_limit must be 0 (no limit) or a positive number of rounds")
    return value


class Look(Protocol):
    """What an order needs of a game: a decoded Game or a Roster."""

    round: int

    @property
    def over(self) -> bool: ...

    @property
    def started(self) -> bool: ...

    def find(self, handle: str) -> Player | None: ...

    def player(self, handle: str) -> Player: ...

    def order_of(self, handle: str) -> list[Gift] | None: ...

    def order_lines(self, handle: str) -> list[str]: ...


@dataclass
class GiveawayMail(Mail):
    """``state``: the state given, with this mail's joins (``joined``: their
    keys) once they are taken; ``decoded``: the Game, once a command needed
    all of it (LEAVE, a JOIN after one).  A mail of JOIN and GIVE lines
    never decodes it: each join and the order are one entry of the state."""

    state: State
    decoded: Game | None = None
    joined: list[str] = field(default_factory=list)
    changed: bool = False  # the decoded game was changed (set with ``game = ...``)

    @property
    def game(self) -> Game:
        if self.decoded is None:
            self.decoded = load(self.state)
        return self.decoded

    @game.setter
    def game(self, value: Game) -> None:
        self.decoded = value
        self.changed = True


class GiveawayRules(Rules[GiveawayMail]):
    kind = "giveaway"
    title = "Giveaway"
    summary = (
        "Giveaway: every round each player must give away every point held, in whole points, "
        "to other players. Equal gifts passed round a circle of players form a co-operation ring "
        "that multiplies them by the number of players in it, unless another gift between its "
        "members breaks it. The first round to produce a score of 100 or more ends the game: "
        "the highest score nobody else shares wins."
    )
    has_turns = True
    default_deadline = "every Saturday 12:00 UTC"
    turn_name = "round"
    options = (
        Option(
            "no_order",
            "forfeit",
            "what happens to the points of a player who sends no valid order: 'forfeit' (they are "
            "lost) or 'split' (shared evenly among the other players, the remainder lost)",
            parse_no_order,
        ),
        Option(
            "round_limit",
            0,
            "end the game after this many rounds even if nobody reached 100 (0: no limit); "
            "the highest unique score then wins",
            parse_round_limit,
        ),
    )

    # -- life cycle ---------------------------------------------------------
    def new_game(self, options: dict[str, Any], ctx: Context) -> State:
        values = self.option_values(options)
        return dump(Game(no_order=values["no_order"], round_limit=values["round_limit"]))

    def import_state(self, data: dict[str, Any]) -> State:
        return validated(data)

    def export_state(self, state: State) -> dict[str, Any]:
        return dump(load(state))

    def turn_of(self, state: State) -> int | None:
        return load(state).round

    # -- mail ---------------------------------------------------------------
    def parse_line(self, line: Line) -> Command:
        return parse.parse_line(line)

    def open_mail(self, state: State, commands: list[Command], ctx: Context) -> GiveawayMail:
        return GiveawayMail(ctx, commands, Outcome(state={}), state=state)

    def close_mail(self, mail: GiveawayMail) -> None:
        gives = [i for i, cmd in enumerate(mail.commands) if cmd.name == "give"]
        if not mail.changed:
            # nothing changed the whole game: each join and the order (if any) are one entry
            look = Roster(mail.state, mail.ctx.memo)
            changed = {JOINS: mail.joined} if mail.joined else {}
            mail.outcome.state, mail.outcome.changed_entries = mail.state, {**changed, "orders": []}
            if gives:
                taken = self._give(mail, gives, look)
                if taken is not None:
                    mail.outcome.state = look.with_order(*taken)
                    mail.outcome.changed_entries = {**changed, "orders": [taken[0]]}
            return
        if gives:
            taken = self._give(mail, gives, mail.game)
            if taken is not None:
                mail.game = replace(mail.game, orders={**mail.game.orders, taken[0]: taken[1]})
        mail.outcome.state = dump(mail.game)

    # -- the commands ---------------------------------------------------------
    def handle_join(self, mail: GiveawayMail, cmd: Command) -> str:
        handle = mail.sender()
        game: Look = mail.game if mail.decoded is not None else Roster(mail.state, mail.ctx.memo)
        if game.over:
            raise Refused("the game is over: nobody can join any more")
        p = game.find(handle)
        if p is not None and p.active:
            raise Refused("you are already playing in this game")
        if game.started:
            raise Refused(
                f"round 1 has been played: players can join only before round 1 is resolved "
                f"(this game is in round {game.round})"
            )
        if isinstance(game, Roster) and p is None:
            # one entry of the joins mapping; the players list is not touched
            mail.state = game.with_join(handle)
            mail.joined.append(key(handle))
            n = game.active_count() + 1
        else:
            # the game is decoded already, or an imported state lists the sender as gone
            mail.game = decoded = replace(mail.game, players=[*mail.game.players, Player(handle=handle)])
            n = len(decoded.active)
        mail.outcome.joined.append(handle)
        return (
            f"you are in the game with {pts(START_HOLDING)} for round 1 "
            f"({n} player{'s' if n != 1 else ''} so far; a round needs at least {MIN_PLAYERS})"
        )

    def handle_give(self, mail: GiveawayMail, cmd: Command) -> None:
        """A mail's GIVE lines are one order: ``close_mail`` takes or refuses them together."""
        return

    def handle_leave(self, mail: GiveawayMail, cmd: Command) -> str:
        game, handle, out, ctx = mail.game, mail.sender(), mail.outcome, mail.ctx
        p = game.find(handle)
        if p is None or not p.active:
            raise Refused("you are not playing in this game")
        if game.over:
            raise Refused("the game is over")
        k = p.key
        if game.started:
            players = [replace(q, active=False, left_round=game.round) if q.key == k else q for q in game.players]
            message = f"you have left the game; your {pts(p.holding)} are forfeited"
        else:
            players = [q for q in game.players if q.key != k]
            message = "you have left the game before round 1"
        orders = {}
        dropped = []
        for giver, gifts in game.orders.items():
            if giver == k:
                continue
            if any(key(g.to) == k for g in gifts):
                dropped.append(giver)
                continue
            orders[giver] = gifts
        if k in game.orders:
            out.orders[p.handle] = []
        game = replace(game, players=players, orders=orders)
        out.left.append(p.handle)
        for giver in dropped:
            q = game.player_index()[giver]
            out.orders[q.handle] = []
            out.notices.append(
                Notice(
                    to=[q.handle],
                    subject=f"{ctx.game_name}: {p.handle} left, your order no longer holds",
                    template="dropped.txt",
                    data={"game": ctx.game_name, "left": p.handle, "round": game.round, "holding": q.holding},
                )
            )
        if game.started and len(game.active) < MIN_PLAYERS:
            note = (
                f"{p.handle} left and only {len(game.active)} players remain; a round needs at least "
                f"{MIN_PLAYERS}, so the game ends here without a winner."
            )
            game = replace(game, status=OVER, orders={}, end_note=note)
            out.finished = True
            out.notices.append(
                Notice(
                    to=[ALL_PLAYERS],
                    subject=f"{ctx.game_name}: the game is over",
                    template="over.txt",
                    data={"game": ctx.game_name, "note": note},
                    kind="report",
                )
            )
            message += "; the game is over, too few players remain"
        mail.game = game
        return message

    def _give(self, mail: GiveawayMail, where: list[int], game: Look) -> tuple[str, list[Gift]] | None:
        """A mail's GIVE lines are one order set: all taken, or all refused.
        Returns (the giver's key, the gifts) of an order taken; None: refused."""
        actor, out, results = mail.ctx.actor, mail.outcome, mail.results
        problem = actor_problem(actor)
        cmds = [mail.commands[i] for i in where]
        messages: list[str | None] = [None] * len(cmds)
        me = game.find(actor.handle) if actor is not None and actor.handle else None
        for j, cmd in enumerate(cmds):
            if not cmd.ok:
                messages[j] = cmd.error
            elif problem:
                messages[j] = problem
            elif game.over:
                messages[j] = "the game is over: no more orders"
            elif me is None:
                messages[j] = "you are not playing in this game: send JOIN first (before round 1 is resolved)"
            elif not me.active:
                messages[j] = "you have left the game"
            else:
                messages[j] = _recipient_problem(game, me, cmd.args["to"])
        refused = any(m is not None for m in messages)
        total = sum(cmd.args.get("amount", 0) for cmd in cmds if cmd.ok)
        if refused:
            for j in range(len(cmds)):
                if messages[j] is None:
                    messages[j] = "not taken: a mail's GIVE lines are one order and another line of it was refused"
        elif me is not None and total != me.holding:
            short = "short of" if total < me.holding else "more than"
            reason = (
                f"your GIVE lines add up to {pts(total)}, {short} your holding of {me.holding}: "
                f"an order must give away exactly {me.holding} (rule 3)"
            )
            messages = [reason] * len(cmds)
            refused = True
        if refused:
            for j, cmd in enumerate(cmds):
                results[where[j]] = refusal(cmd, messages[j] or "")
            if me is not None and me.active and not game.over:
                if game.order_of(me.handle):
                    out.orders[me.handle] = game.order_lines(me.handle)
                out.sections.append(_order_section(game, me.handle, refused=True))
            return None
        assert me is not None  # else every line was refused
        merged: dict[str, Gift] = {}
        for cmd in cmds:
            target = game.player(cmd.args["to"])
            g = merged.get(target.key)
            merged[target.key] = Gift(cmd.args["amount"] + (g.amount if g else 0), target.handle)
        gifts = list(merged.values())
        for j, cmd in enumerate(cmds):
            target = game.player(cmd.args["to"])
            results[where[j]] = acceptance(cmd, f"{pts(cmd.args['amount'])} to {target.handle}")
        out.orders[me.handle] = [g.line() for g in gifts]
        out.sections.append(Section(
            title=f"Your order for round {game.round}", template="order.txt",
            data=order_data(game, me.handle, False, False, gifts),
        ))
        return me.key, gifts

    # -- turns ----------------------------------------------------------------
    def run_turn(self, state: State, ctx: Context) -> Outcome:
        game = load(state)
        if game.over:
            raise GameError(f"this Giveaway game is over: {game.end_note or 'no more rounds'}")
        active = game.active
        if len(active) < MIN_PLAYERS:
            # Only possible before round 1: a LEAVE that drops a started game
            # below three players ends it.  The round waits for the next deadline.
            names = ", ".join(p.handle for p in active) or "nobody"
            text = (
                f"Round {game.round} of {ctx.game_name} cannot be played yet: a round needs at least "
                f"{MIN_PLAYERS} players and {len(active)} have joined ({names}). It will be tried again "
                f"at the next deadline; more players can still JOIN."
            )
            return Outcome(
                state=dump(game),
                notices=[
                    Notice(
                        to=[ALL_PLAYERS],
                        subject=f"{ctx.game_name}: round {game.round} cannot start yet",
                        template="waiting.txt",
                        data={"game": ctx.game_name, "text": text},
                        kind="report",
                    )
                ],
                audit=[f"round {game.round} not played: {len(active)} players, {MIN_PLAYERS} needed"],
                turn_done=False,
            )
        result = resolve_round(game, absent=getattr(ctx, "absent", frozenset()))
        new = advance(game, result)
        data = report_data(result, ctx.game_name)
        subject = (f"{ctx.game_name}: round {result.round} report"
                   + (f" - {result.winner} wins" if result.winner else " - game over" if result.finished else ""))
        notice = Notice(to=[ALL_PLAYERS], subject=subject, template="report.txt", data=data, kind="report")
        notices = [notice]
        record = None
        if len(result.players) > FULL_REPORT_PLAYERS:
            # a large game: each player gets their own part, the whole report is kept
            record = notice
            notices = [Notice(to=[handle], subject=subject, template="own_report.txt", data=own, kind="report")
                       for handle, own in own_reports(result, data)]
        audit = [
            f"round {result.round} resolved: {len(result.players)} players, {len(result.analysis.rings)} rings"
            + (f", winner {result.winner}" if result.winner else "")
            + (", game over" if result.finished else "")
        ]
        return Outcome(state=dump(new), notices=notices, record=record, turn_done=True, finished=result.finished,
                       audit=audit)

    # -- what people see --------------------------------------------------------
    def players(self, state: State) -> list[str]:
        # read from the state as stored, without building the game: a 10,000-player
        # game's page and every notice ask for it (the same list as load(state).active)
        return ([str(p["handle"]) for p in state["players"] if p.get("active", True)]
                + [str(h) for h in (state.get(JOINS) or {}).values()])

    def waiting_for(self, state: State) -> list[str]:
        game = load(state)
        if game.over:
            return []
        return [p.handle for p in game.active if p.key not in game.orders]

    def view(self, state: State, viewer: str | None) -> list[Section]:
        game = load(state)
        lines = []
        if game.over:
            lines.append(f"The game is over after round {game.round}.")
            if game.winner:
                lines.append(f"Winner: {game.winner}.")
            if game.end_note:
                lines.append(game.end_note)
        elif game.status == JOINING:
            lines.append(f"Round 1 has not been played yet: players may still JOIN ({len(game.active)} so far).")
        else:
            lines.append(f"Orders are being collected for round {game.round}.")
        if not game.over:
            ordered = sum(1 for p in game.active if p.key in game.orders)
            lines.append(f"Orders received: {ordered} of {len(game.active)}.")
        text = "\n".join(lines) + "\n\n" + str(game)
        # the text as before (status, game show) and, for the HTML part and the web, the same as a table
        data = {"text": text, "lines": lines, "colours": self.colours(state),
                "rows": [{"handle": p.handle, "holding": p.holding, "score": p.score} for p in game.active],
                "gone": [p.handle for p in game.players if not p.active],
                "rings": [{"round": last["round"], "amount": amount, "path": " > ".join(names + names[:1])}
                          for last in [game.last or {}] for amount, names in last.get("rings", [])]}
        sections = [Section(title=f"Giveaway - round {game.round}", text=text, template="standing.txt", data=data)]
        me = game.find(viewer) if viewer else None
        if me is not None and me.active and not game.over:
            sections.append(_order_section(game, me.handle, refused=False, show_lines=True))
        return sections

    def public_reports(self, state: State, notices: list[Notice]) -> list[Notice]:
        """The round report (every gift of the round just played, the rings,
        the scores: revealed to all players alike), a round that cannot start
        and the end of the game.  Never the gifts held for the coming round
        (they are hidden until it is resolved), nor a player's own notice
        that their order no longer holds."""
        public = ("report.txt", "waiting.txt", "over.txt")
        return [n for n in super().public_reports(state, notices) if n.template in public]

    def hidden_from(self, state: State, viewer: str | None) -> list[str]:
        """The order lines other players hold for the coming round."""
        game = load(state)
        own = set(game.order_lines(viewer)) if viewer else set()
        others = {line for p in game.active if viewer is None or key(p.handle) != key(viewer)
                  for line in game.order_lines(p.handle)}
        return sorted(others - own)

    def scores(self, state: State) -> list[tuple[str, int]]:
        """Each player's score of the last round (the report shows them to all)."""
        rows = [(p.handle, p.score) for p in load(state).players if p.score is not None]
        return sorted(((h, int(n)) for h, n in rows), key=lambda r: (-r[1], r[0].lower()))

    def turn_view(self, before: State | None, after: State, turn: int, name: str) -> TurnView | None:
        """The round report as it was mailed, worked out again from the
        orders the round ran on (``before``) -- the round is pure -- and
        checked against the scores it left (``after``).  Who was away
        (ABSENT, kept their holding) is read from ``after``: their next
        holding is their score, the round bonus and what they kept."""
        if before is None:
            return None
        old, new = load(before), load(after)
        if not new.last or new.last.get("round") != old.round:
            return None  # the round could not start: the kept text says why
        now = {p.handle: p for p in new.players}
        absent = frozenset(p.handle for p in old.active if p.key not in old.orders
                           and (q := now.get(p.handle)) is not None and q.score is not None
                           and q.holding - q.score - ROUND_BONUS > 0)
        result = resolve_round(old, absent=absent)
        if any(now[h].score != s for h, s in result.scores.items() if h in now):
            return None  # not the round that was run (an imported or edited state): the kept text
        data = report_data(result, name)
        handles = [p.handle for p in result.players]
        figures = []
        for i, p in enumerate(result.players):
            figures.append({"handle": p.handle, "score": p.score,
                            "standing": f"score {p.score}" + ("" if result.finished else
                                                              f", holds {p.next_holding} for round {result.round + 1}"),
                            "did": what_became(result, i, handles, own=False),
                            "held": p.holding, "received": p.got, "bonus": p.bonus,
                            "next": None if result.finished else p.next_holding})
        return TurnView(f"round {result.round}", [Section(template="report.txt", data=data)], figures)

    def join_hint(self, state: State) -> JoinHint | None:
        """JOIN until round 1 is resolved; closed after it (handle_join)."""
        game = Roster(state, {})
        if game.over:
            return JoinHint(None, "the game is over")
        if game.started:
            return JoinHint(None, f"round 1 has been played (the game is in round {game.round}): "
                                  "players join only before round 1 is resolved")
        return JoinHint("JOIN", "players may join until round 1 is resolved")

    def help_text(self) -> str:
        return rule_book(self.summary, self.options)


def _recipient_problem(game: Look, me: Player, to: str) -> str | None:
    target = game.find(to)
    if target is None:
        if isinstance(game, Roster):
            names = [h for h in game.active_handles(21) if key(h) != me.key][:20]
            more = game.active_count() - 1 - len(names) if len(names) == 20 else 0
        else:
            assert isinstance(game, Game)
            everyone = [p.handle for p in game.active if p.key != me.key]
            names, more = everyone[:20], len(everyone) - 20
        listed = ", ".join(names) + (f" and {more} more" if more > 0 else "")
        return f"there is no player {to!r} in this game; you can give to: {listed or 'nobody yet'}"
    if target.key == me.key:
        return "you cannot give points to yourself (rule 3): give them to other players"
    if not target.active:
        return f"{target.handle} has left the game: give to players still in it"
    return None


def _order_section(game: Look, handle: str, refused: bool, show_lines: bool = False) -> Section:
    return Section(
        title=f"Your order for round {game.round}",
        template="order.txt",
        data=order_data(game, handle, refused, show_lines),
    )
