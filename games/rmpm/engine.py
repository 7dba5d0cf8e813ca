"""The weekly update: one player's slot (fences, exchanges, chip 1, chip 2,
MN/AN/PN, encounters, buying, MT), the action table, joining and leaving.

Rule references (III/04 ...) are to the sections of the original rules; the
rulings of docs/games/rmpm.md settle the gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dfield

from games.base import Command, Line
from games.rmpm.board import DIR_NAMES, DIRS, PARKING, Field, direction, field_of, fmt, on_board_, step
from games.rmpm.model import START_AN, Game, Player, Position, wrap
from games.rmpm.parse import parse_line

#: what buying a field costs (VI/03), paid to the Bank
FIELD_PRICE = 500
#: MN = (fields moved - 1) * MN_PER_FIELD + the direction's code (IV/01)
MN_PER_FIELD = 4


# -- order sets -----------------------------------------------------------------

def blocks_of(cmds: list[Command]) -> list[list[tuple[int, Command]]]:
    """Split an order set at USE MT into move blocks of (index, command)."""
    blocks: list[list[tuple[int, Command]]] = [[]]
    for i, c in enumerate(cmds):
        if c.name == "use_mt":
            blocks.append([])
        elif c.name in ("move", "fence", "exchange", "buy"):
            blocks[-1].append((i, c))
    return blocks


def validate_orders(game: Position, p: Player, cmds: list[Command]) -> dict[int, str]:
    """Errors of an order set that can never run (index -> reason).  Things
    that depend on the board as others leave it (fences, occupancy,
    ownership) are not errors: the pre-analysis warns about them.  A line
    that could not be read (``error`` set) still counts where it stands, so
    the lines around it are not blamed for it; it is checked no further."""
    errors: dict[int, str] = {}
    names = [c.name for c in cmds]
    for i, c in enumerate(cmds):
        if c.name in ("leave", "cancel") and len(cmds) > 1:
            errors[i] = f"{c.text} must be the only order of the mail"
    mt = [i for i, n in enumerate(names) if n == "use_mt"]
    for i in mt[1:]:
        errors[i] = "only one MT card can be used per week"
    if mt and p.cards.get("MT", 0) < 1:
        errors[mt[0]] = "you hold no MT (move twice) card"
    for b, block in enumerate(blocks_of(cmds)):
        moves = [(i, c) for i, c in block if c.name == "move"]
        buys = [(i, c) for i, c in block if c.name == "buy"]
        for i, _ in moves[2:]:
            errors[i] = ("a move block has two move lines (chip 1, then chip 2); "
                         "send USE MT before a second move")
        if len(moves) == 1:
            errors[moves[0][0]] = ("a move needs two lines: chip 1 one field, then chip 2, "
                                   "e.g. 16-04 -> 16-05 and 22-07 -> 25-07")
        for i, _ in buys[2:]:
            errors[i] = "at most two BUY lines per move (one per chip)"
        if buys and len(moves) < 2:
            for i, _ in buys:
                errors.setdefault(i, "BUY needs a move in the same block: you can only buy a field "
                                     "where your move makes an encounter")
        if len(moves) >= 2 and moves[0][1].ok:
            (i1, m1), (i2, m2) = moves[0], moves[1]
            a, t = field_of(m1.args["from"]), field_of(m1.args["to"], on_board=False)
            d = direction(a, t)
            if d is None or d[1] != 1:
                errors[i1] = f"chip 1 moves exactly one field up, down, left or right, not {m1.text}"
            elif not on_board_(t):
                errors[i1] = f"{m1.text} leaves the board"
        if b == 0:
            chips = p.chips or []
            if len(moves) >= 2 and moves[0][1].ok and moves[1][1].ok:
                (i1, m1), (i2, m2) = moves[0], moves[1]
                f1, f2 = field_of(m1.args["from"]), field_of(m2.args["from"])
                if f1 not in chips:
                    errors.setdefault(i1, f"no chip of yours on {fmt(f1)}; your chips are on "
                                          f"{fmt(chips[0])} and {fmt(chips[1])}")
                else:
                    other = chips[1 - chips.index(f1)]
                    if f2 != other:
                        errors.setdefault(i2, f"chip 2 must be your other chip, on {fmt(other)}")
            for i, c in block:
                if not c.ok:
                    continue
                if c.name == "fence" and field_of(c.args["at"]) not in chips:
                    errors[i] = f"no chip of yours on {c.args['at']}: fences can only be turned around your own chips"
                if c.name == "exchange":
                    mid = _middle(c)
                    if mid not in chips:
                        errors[i] = (f"{c.args['a']} and {c.args['b']} are not the opposite neighbours "
                                     f"of one of your chips ({fmt(chips[0])}, {fmt(chips[1])})")
    return errors


def _middle(c: Command) -> Field:
    a, b = field_of(c.args["a"]), field_of(c.args["b"])
    return ((a[0] + b[0]) // 2, (a[1] + b[1]) // 2)


def parse_held(lines: list[str]) -> list[Command]:
    return [parse_line(Line(i + 1, t)) for i, t in enumerate(lines)]


# -- the slot ---------------------------------------------------------------------

@dataclass
class SlotResult:
    player: Player
    old: list[Field]
    interm: list[Field] | None = None
    new: list[Field] | None = None
    mns: list[int] = dfield(default_factory=list)
    notes: dict[int, list[str]] = dfield(default_factory=dict)  # command index -> what happened
    events: list[str] = dfield(default_factory=list)  # encounters, buys, MT
    landed: list[str] = dfield(default_factory=list)  # where each chip landed (pre-analysis)

    def note(self, i: int, text: str) -> None:
        self.notes.setdefault(i, []).append(text)

    @property
    def mn_text(self) -> str:
        if not self.mns:
            return "-"
        return "+".join(str(m) for m in self.mns)


def run_slot(game: Position, p: Player, cmds: list[Command]) -> SlotResult:
    """Carry out one player's held orders on the board as it stands."""
    res = SlotResult(player=p, old=list(p.fields))
    blocks = blocks_of(cmds)
    for b, block in enumerate(blocks):
        if b == 1:
            if p.cards.get("MT", 0) < 1:
                for i, _ in block:
                    res.note(i, "not executed: no MT card left")
                break
            p.cards["MT"] -= 1
            res.interm = list(p.fields)
            res.events.append("played an MT card: second move")
        _run_block(game, p, block, res)
    res.new = list(p.fields)
    return res


def _run_block(game: Position, p: Player, block: list[tuple[int, Command]], res: SlotResult) -> None:
    board = game.board
    for i, c in block:
        if c.name == "fence":
            at, frm, to = field_of(c.args["at"]), c.args["frm"], c.args["to"]
            if at not in p.fields:
                res.note(i, f"not executed: no chip of yours on {fmt(at)}")
            elif not board.fence_at(at, frm):
                res.note(i, f"not executed: no fence on the {DIR_NAMES[frm]} side of {fmt(at)}")
            elif not on_board_(step(at, to)):
                res.note(i, f"not executed: the {DIR_NAMES[to]} side of {fmt(at)} is the board edge")
            elif board.fence_at(at, to):
                res.note(i, f"not executed: there is already a fence on the {DIR_NAMES[to]} side of {fmt(at)}")
            else:
                board.turn_fence(at, frm, to)
                res.note(i, f"fence turned from the {DIR_NAMES[frm]} to the {DIR_NAMES[to]} side of {fmt(at)}")
    for i, c in block:
        if c.name == "exchange":
            a, b = field_of(c.args["a"]), field_of(c.args["b"])
            mid = _middle(c)
            if mid not in p.fields:
                res.note(i, f"not executed: no chip of yours on {fmt(mid)} between the two fields")
            else:
                board.exchange(a, b)
                res.note(i, f"numbers exchanged: {fmt(a)} is now {board.number(a)}, "
                            f"{fmt(b)} is now {board.number(b)}")
    moves = [(i, c) for i, c in block if c.name == "move"]
    mn = 0
    pn_add = 0
    moved = False
    encounters: list[tuple[Field, str]] = []
    if len(moves) >= 2:
        (i1, m1), (i2, m2) = moves[0], moves[1]
        f1 = field_of(m1.args["from"])
        t1 = field_of(m1.args["to"], on_board=False)
        chip1 = p.fields.index(f1) if f1 in p.fields else None
        ok1 = False
        if chip1 is None:
            res.note(i1, f"not executed: no chip of yours on {fmt(f1)}")
        else:
            d = direction(f1, t1)
            if d is None or d[1] != 1:
                res.note(i1, "not executed: chip 1 moves exactly one field")
            else:
                why = board.blocked(f1, d[0])
                refusal = None if why else game.landing_refusal(p, chip1, t1)
                if why == "edge":
                    res.note(i1, f"not executed: {fmt(t1)} is off the board")
                elif why == "fence":
                    res.note(i1, f"not executed: a fence stands between {fmt(f1)} and {fmt(t1)}")
                elif refusal:
                    res.note(i1, f"not executed: {refusal}")
                else:
                    ok1 = True
                    moved = True
                    game.move_chip(p, chip1, t1)
                    num = board.number(t1)
                    mn += DIRS[d[0]][2]
                    pn_add += num
                    res.note(i1, f"chip 1 moves {DIR_NAMES[d[0]]} to {fmt(t1)} (number {num})")
                    res.landed.append(f"{fmt(f1)} -> {fmt(t1)}")
                    enc = _encounter(game, p, t1)
                    if enc:
                        encounters.append((t1, enc))
        f2 = field_of(m2.args["from"])
        t2 = field_of(m2.args["to"], on_board=False)
        if not ok1:
            res.note(i2, "not executed: chip 1 did not move, so chip 2 stays")
        else:
            assert chip1 is not None  # chip 1 moved
            chip2 = 1 - chip1
            if p.fields[chip2] != f2:
                res.note(i2, f"not executed: your other chip is on {fmt(p.fields[chip2])}, not {fmt(f2)}")
            else:
                way = direction(f2, t2)
                assert way is not None  # validate_orders checked the direction
                d2 = way[0]
                dist = board.number(p.fields[chip1])
                cur = f2
                k = 0
                stop = None
                while k < dist:
                    stop = board.blocked(cur, d2)
                    if stop:
                        break
                    cur = step(cur, d2)
                    k += 1
                short = f" ({stop} after {k} of {dist})" if k < dist else ""
                if k == 0:
                    res.note(i2, f"chip 2 cannot move {DIR_NAMES[d2]}: the {stop} is right next to it")
                else:
                    refusal = game.landing_refusal(p, chip2, cur)
                    if refusal:
                        res.note(i2, f"not executed: chip 2 would land on {fmt(cur)}{short}, but {refusal}")
                    else:
                        game.move_chip(p, chip2, cur)
                        num = board.number(cur)
                        mn += (k - 1) * MN_PER_FIELD + DIRS[d2][2]
                        pn_add += num
                        res.note(i2, f"chip 2 moves {k} {DIR_NAMES[d2]}{short} to {fmt(cur)} (number {num})")
                        res.landed.append(f"{fmt(f2)} -> {fmt(cur)}")
                        enc = _encounter(game, p, cur)
                        if enc:
                            encounters.append((cur, enc))
    if len(moves) >= 2 or any(c.name in ("fence", "exchange") for _, c in block):
        res.mns.append(mn)
    if moved:
        p.an = wrap(p.an + mn)
        p.pn = wrap(p.pn + pn_add)
    # encounters, chip 1 first, with the AN after this move
    fought: list[Field] = []
    for f, victim in encounters:
        v = game.find(victim)
        assert v is not None  # a chip on the board is a player's
        text = action(game, p, v, p.an)
        res.events.append(f"encounter on {fmt(f)} with {v.abbr} ({v.alias}), AN {p.an}: {text}")
        fought.append(f)
    bought: set[Field] = set()
    for i, c in block:
        if c.name != "buy":
            continue
        want = field_of(c.args["field"]) if c.args.get("field") else None
        if want is None:
            cands = [f for f in fought if f not in bought and f not in game.owners]
            if not cands:
                res.note(i, "not executed: no encounter field of this move is for sale")
                continue
            want = cands[0]
        failed = None
        if want not in fought:
            failed = f"not executed: your move made no encounter on {fmt(want)}"
        elif want in game.owners:
            owner = game.find(game.owners[want])
            failed = f"not executed: {fmt(want)} is already owned" + (f" by {owner.abbr}" if owner else "")
        elif p.capital < FIELD_PRICE:
            failed = f"not executed: a field costs {FIELD_PRICE} WCU and you have {p.capital}"
        if failed is not None:
            res.note(i, failed)
            # reported where it happened: after the encounters of the move
            res.events.append(f"BUY {failed}")
        else:
            p.capital -= FIELD_PRICE
            game.bank += FIELD_PRICE
            game.owners[want] = p.handle
            bought.add(want)
            res.note(i, f"bought {fmt(want)} for {FIELD_PRICE} WCU")
            res.events.append(f"bought {fmt(want)} for {FIELD_PRICE} WCU")


def _encounter(game: Position, p: Player, f: Field) -> str | None:
    if f == PARKING:
        return None
    others = game.others_on(f, p.handle)
    return others[0] if len(others) == 1 else None


# -- the action table (rulings: capital never below 0, the Bank may go negative) --

def _pay(game: Position, payer: Player | None, payee: Player | None, amount: int) -> int:
    """Move up to ``amount`` from payer to payee (None = the Bank); returns
    what was paid.  A player never pays more than it has; the Bank always can."""
    if payer is not None:
        amount = min(amount, payer.capital)
        payer.capital -= amount
    else:
        game.bank -= amount
    if payee is not None:
        payee.capital += amount
    else:
        game.bank += amount
    return amount


@dataclass(frozen=True)
class ActionRow:
    """One row of the table of action codes: for an aggressor's AN from
    ``low`` to ``high``, the action ``code`` with its ``amount`` (WCU, or a
    percentage where the code says so)."""

    low: int
    high: int
    code: str
    amount: int = 0


#: The table of action codes (section VI, as the rulings settle it).  The
#: engine and ``help rmpm`` both read it.
ACTION_TABLE: tuple[ActionRow, ...] = (
    ActionRow(1, 10, "victim_pays", 500),  # V pays amount WCU to A
    ActionRow(11, 20, "victim_shares", 20),  # V gives amount % of his capital to the others
    ActionRow(21, 30, "pool", 30),  # A and V pool amount % of both capitals and split it
    ActionRow(31, 40, "half"),  # A takes half of V's capital
    ActionRow(41, 49, "mt_card"),  # A gets an MT card
    ActionRow(50, 50, "kiosk"),  # A empties the kiosk
    ActionRow(51, 60, "victim_fee", 500),  # V pays amount WCU to the Bank
    ActionRow(61, 70, "bank_pays", 500),  # the Bank pays amount WCU to A
    ActionRow(71, 80, "victim_pays_both", 200),  # V pays amount to A, then amount to the Bank
    ActionRow(81, 90, "collect", 50),  # every other player pays amount WCU to A
    ActionRow(91, 100, "swap"),  # A and V exchange their capitals
)


def action_row(an: int) -> ActionRow:
    """The row of the action table for ``an``."""
    for row in ACTION_TABLE:
        if an <= row.high:
            return row
    return ACTION_TABLE[-1]


def action(game: Position, a: Player, v: Player, an: int) -> str:
    """Carry out the action of the aggressor's AN; returns what happened."""
    row = action_row(an)
    amount = row.amount
    code = row.code
    if code == "victim_pays":
        paid = _pay(game, v, a, amount)
        return f"{v.abbr} pays {paid} WCU to {a.abbr}"
    if code == "victim_shares":
        share, n = game.share_out(v, amount)
        return f"{v.abbr} gives {share} WCU to each of the {n} other players"
    if code == "pool":
        rich, poor = (a, v) if a.capital >= v.capital else (v, a)
        # each puts in amount %, the pool is split equally: the richer pays
        # half of amount % of the difference to the poorer
        moved = (rich.capital - poor.capital) * amount // 200
        _pay(game, rich, poor, moved)
        return (f"{a.abbr} and {v.abbr} share {amount}% of their capitals: "
                f"{rich.abbr} pays {moved} WCU to {poor.abbr}")
    if code == "half":
        paid = _pay(game, v, a, v.capital // 2)
        return f"{a.abbr} takes half of {v.abbr}'s capital: {paid} WCU"
    if code == "mt_card":
        a.cards["MT"] = a.cards.get("MT", 0) + 1
        return f"{a.abbr} gets an MT (move twice) card"
    if code == "kiosk":
        taken = game.kiosk
        a.capital += taken
        game.kiosk = 0
        return f"{a.abbr} robs the kiosk and gets {taken} WCU"
    if code == "victim_fee":
        paid = _pay(game, v, None, amount)
        return f"{v.abbr} pays a fee of {paid} WCU to the Bank"
    if code == "bank_pays":
        _pay(game, None, a, amount)
        return f"the Bank pays {amount} WCU to {a.abbr}"
    if code == "victim_pays_both":
        p1 = _pay(game, v, a, amount)
        p2 = _pay(game, v, None, amount)
        return f"{v.abbr} pays {p1} WCU to {a.abbr} and {p2} WCU to the Bank"
    if code == "collect":
        n, total = game.collect(a, amount)
        return f"each of the {n} other players pays up to {amount} WCU to {a.abbr}: {total} WCU in all"
    if code == "swap":
        a.capital, v.capital = v.capital, a.capital
        return f"{a.abbr} and {v.abbr} exchange their capitals"
    raise ValueError(f"the action table has an unknown code {code!r}")


# -- joining, leaving, the update ---------------------------------------------------

def placement_refusal(game: Position, p: Player, fields: list[Field]) -> str | None:
    for f in fields:
        if f != PARKING and len(game.others_on(f, p.handle)) >= 2:
            return f"start field {fmt(f)} already holds chips of two players"
    return None


def place(game: Game, p: Player) -> str | None:
    """Put a pending player's chips on the board; returns the reason if not."""
    start = p.start
    assert start is not None, "only a pending join is placed"
    why = placement_refusal(game, p, start)
    if why:
        return why
    p.chips = list(start)
    p.start = None
    game.placed_now()
    for f in p.chips:
        game.place_chip(p.handle, f)
    p.an = START_AN
    p.pn = wrap(sum(game.board.number(f) for f in p.chips))
    return None


@dataclass
class UpdateResult:
    week: int
    slots: dict[str, SlotResult]  # handle -> slot of players that moved
    idle: list[Player]  # active players without orders
    left: list[Player]
    placed: list[Player]
    not_placed: list[tuple[Player, str]]


def weekly_update(game: Game) -> UpdateResult:
    week = game.week
    left = []
    for h, lines in list(game.orders.items()):
        if [x.strip().upper() for x in lines] == ["LEAVE"] and h in game.players:
            left.append(game.remove_player(h))
    slots: dict[str, SlotResult] = {}
    idle: list[Player] = []
    for p in game.play_order():
        held = game.orders.get(p.handle)
        if not held:
            idle.append(p)
            continue
        cmds = [c for c in parse_held(held) if c.ok and c.name in ("move", "fence", "exchange", "buy", "use_mt")]
        slots[p.handle] = run_slot(game, p, cmds)
    placed, not_placed = [], []
    for p in sorted(game.pending(), key=lambda q: q.number):
        if p.start is None:
            continue
        why = place(game, p)
        if why:
            p.start = None
            not_placed.append((p, why))
        else:
            placed.append(p)
    game.orders = {}
    game.week = week + 1
    return UpdateResult(week=week, slots=slots, idle=idle, left=left, placed=placed, not_placed=not_placed)
