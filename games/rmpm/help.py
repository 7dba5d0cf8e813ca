"""``help rmpm``: the rule book, built from the tables the engine plays by
(the action table, the MN direction codes, the field numbers, the prices),
so the text cannot drift from the game.  The action table is read as
``engine.ACTION_TABLE`` each time, the very object ``engine.action`` uses."""

from __future__ import annotations

from collections.abc import Sequence

from games.base import Option
from games.helptext import HOW_TO_SEND, bullet, commands, document, heading, options, para, table
from games.rmpm import engine
from games.rmpm.board import DIR_NAMES, DIRS, PARKING, RING, SIZE, fmt
from games.rmpm.engine import FIELD_PRICE, MN_PER_FIELD, ActionRow
from games.rmpm.model import CARD_TEXT, NUMBER_LIMIT, START_AN, START_CAPITAL

#: what each code of the action table does, in words (A: the aggressor, the
#: player who moved onto the field; V: the victim, who was there first)
ACTION_WORDS = {
    "victim_pays": "V pays {amount} WCU to A.",
    "victim_shares": "V gives {amount}% of his capital, split equally among all other players "
                     "(what does not divide stays with V).",
    "pool": "A and V each put in {amount}% of their capital and split the pool equally: "
            "the richer pays {half} of the difference to the poorer.",
    "half": "A takes half of V's capital.",
    "mt_card": "A gets an " + CARD_TEXT["MT"] + ".",
    "kiosk": "A robs the kiosk and gets all the money in it.",
    "victim_fee": "V pays a fee of {amount} WCU to the Bank.",
    "bank_pays": "The Bank pays {amount} WCU to A.",
    "victim_pays_both": "V pays {amount} WCU to A, then {amount} WCU to the Bank.",
    "collect": "Every other player pays {amount} WCU to A.",
    "swap": "A and V exchange their capitals.",
}


def action_words(row: ActionRow) -> str:
    half = f"{row.amount // 2}%" if row.amount % 2 == 0 else f"half of {row.amount}%"
    return ACTION_WORDS[row.code].format(amount=row.amount, half=half)


def _range(row: ActionRow) -> str:
    return str(row.low) if row.low == row.high else f"{row.low}-{row.high}"


def _mn(fields: int, d: str) -> int:
    return (fields - 1) * MN_PER_FIELD + DIRS[d][2]


def rule_book(summary: str, opts: Sequence[Option]) -> str:
    """The whole of ``help rmpm``."""
    edge = ", ".join(str(n) for n in RING)
    # the rules' own sample: bd moves 08-13 -> 08-12 (1 left), 13-09 -> 16-09 (3 down)
    mn1, mn2 = _mn(1, "l"), _mn(3, "d")
    an, pn = 49, 91
    return document(
        para(summary),
        heading("Commands"),
        para(HOW_TO_SEND),
        commands([
            ("JOIN <abbr> <f1> <f2> <alias>", "join with a 2-character abbreviation, two different "
             "edge fields and an alias, e.g. JOIN bd 01-05 25-10 blue dragon; your chips appear at "
             "the next weekly update, and placing them is your move for that week"),
            ("16-04 -> 16-05", "chip 1: one field up, down, left or right"),
            ("22-07 -> 25-07", "chip 2: in that direction, as far as the number of the field "
             "chip 1 landed on"),
            ("F 15-04 u -> l", "turn a fence next to your chip at 15-04 from one side to another "
             "(u, r, d, l); several F lines are allowed"),
            ("E 16-03 <-> 16-05", "swap the numbers of the two fields on opposite sides of your "
             "chip (up/down or left/right)"),
            ("BUY  or  BUY 16-09", f"buy the field of your encounter for {FIELD_PRICE} WCU"),
            ("USE MT", "play an MT card: a second move block follows in the same mail"),
            ("LEAVE", "leave the game at the next update (alone in its mail)"),
            ("CANCEL", "withdraw this week's orders (alone in its mail)"),
        ]),
        para("A new order mail replaces the whole order set you sent before; every reply shows "
             "the orders the server now holds and a pre-analysis of them on the current board. "
             "Fields are written RR-CC, row first: 01-01 is the upper left corner, 01-25 the "
             "upper right; 16-4 is read as 16-04."),
        heading("Joining"),
        para(f"You start with AN {START_AN}, a capital of {START_CAPITAL} WCU (unless the game "
             "master set another) and PN = the sum of the numbers of your two start fields. You "
             "may only start on the edge of the board; a start field that already holds chips of "
             "two players is refused."),
        heading("The board"),
        para(f"{SIZE} x {SIZE} fields, each with a number. On the standard board a field's number "
             f"depends on its distance from the edge (0 on the edge itself): {edge} for "
             f"distances 0, 1, 2 and so on. The parking is {fmt(PARKING)}: any number of chips "
             "may stand there and no encounter happens there. Fences lie between two fields; "
             "the edge of the board is not a fence and nothing crosses it."),
        heading("The move"),
        para("Each week a player's orders run in this order: fence turns, number exchanges, "
             "chip 1, chip 2. Chip 1 moves exactly one field up, down, left or right. Chip 2 "
             "then moves in the direction of its line as many fields as the number of the field "
             "chip 1 landed on, as the board stands at that moment. A fence or the edge stops "
             "chip 2 early: it goes as far as it can. Only the landing field matters; passing "
             "over other chips is fine."),
        para("A chip may not land on your other chip, nor on a field that holds chips of two "
             "other players (the parking excepted). If chip 1 cannot move, chip 2 stays too; "
             "fence turns and exchanges already made stand. A move line that is not a straight "
             "line up, down, left or right is ignored."),
        heading("Move, action and priority numbers (MN, AN, PN)"),
        para(f"MN = (fields moved - 1) x {MN_PER_FIELD} + the direction's code, added up over "
             "both chips (a chip that did not move adds 0):"),
        table([(DIR_NAMES[d], str(code)) for d, (_, _, code) in DIRS.items()],
              header=("direction", "code")),
        para(f"AN = AN + MN, and PN = PN + the number of each field a chip lands on; whenever "
             f"either passes {NUMBER_LIMIT}, {NUMBER_LIMIT} is subtracted, so both stay in 1 to "
             f"{NUMBER_LIMIT}. A player without orders keeps AN and PN (the report shows MN as "
             "-)."),
        para(f"Example from the rules: bd has AN {an}, PN {pn} and moves 08-13 -> 08-12 (1 field "
             f"left: MN {mn1}), then 13-09 -> 16-09 (3 fields down: MN {mn2}). MN = {mn1 + mn2}, "
             f"AN = {an} + {mn1 + mn2} = {an + mn1 + mn2}."),
        para("At the weekly update the players move one after another, highest PN first; at "
             "equal PN the player who joined earlier moves first. New players' chips are placed "
             "after all moves."),
        heading("Encounters and the table of action codes"),
        para("A chip that lands on a field (not the parking) held by another player's chip makes "
             "an encounter. The player who was there first is the victim (V), the one who moved "
             "there the aggressor (A). The aggressor's AN after the move chooses the action; two "
             "encounters in one move are resolved chip 1 first."),
        table([(_range(r), action_words(r)) for r in engine.ACTION_TABLE], header=("AN", "action")),
        para("Nobody pays more than he has, so no capital goes below 0; the Bank (also called "
             "the National or Central Bank) always pays and may go negative. The kiosk is a pot "
             "the game master pays into."),
        heading("Buying fields"),
        para(f"A player whose move made an encounter may buy that field for {FIELD_PRICE} WCU, "
             "paid to the Bank, with a BUY line in the same move block (BUY 16-09 names the "
             "field; a bare BUY takes the first field of the move's encounters that is for "
             "sale). It happens after the encounter's action. A field already owned and the "
             "parking cannot be bought. The board marks owned fields with $."),
        heading("Cards"),
        bullet(f"{CARD_TEXT['MT']}: USE MT in your orders, followed by a second move block; both "
               "blocks run in your turn, AN and PN are updated after each, and one card is "
               "spent. The second block needs two move lines like the first."),
        bullet(", ".join(CARD_TEXT[c] for c in ("SM", "RM", "DM")) + ": kept in your inventory and "
               "given by the game master; their rules are lost, so they do nothing yet."),
        heading("The weekly report"),
        para("After each update every player gets the board (numbers, $ for owned fields, ** "
             "where two players meet, fences, the chips' abbreviations), the moves table (old, "
             "intermediate and new positions, MN, AN, PN), field ownership, every player's "
             "inventory, the Bank, the kiosk and the champion of the week: the richest player."),
        heading("Leaving the game"),
        para("Send LEAVE alone in an order mail. You leave at the next weekly update: your chips "
             "are taken off the board, your fields become unowned and your money leaves the "
             "game. Until the deadline you can change your mind with CANCEL or a new order set. "
             "A player whose chips are not yet placed leaves at once (the join is withdrawn)."),
        heading("Options"),
        options(opts),
    )
