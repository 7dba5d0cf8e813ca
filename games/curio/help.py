"""``help curio``: the rule book, built from the tables the boards are
played by (the capture rules, the default setup, the directions, the
command syntax), so the text cannot drift from the game."""

from __future__ import annotations

from collections.abc import Sequence

from games.base import Option
from games.curio.model import CAPTURE_RULES, DEFAULT_SETUP, DIRECTIONS, FACES, CaptureRule
from games.curio.parse import USAGE
from games.helptext import commands, document, heading, options, para, table

#: what each option of ``curio challenge`` does (the flags come from parse.FLAGS)
FACE_WORDS = {
    "large": "each piece is placed with its larger number facing its owner",
    "small": "each piece is placed with its smaller number facing its owner",
    "random": "each piece is placed facing either way at random",
}

def capture_words(rule: CaptureRule) -> str:
    if rule.code == "any":
        return "any enemy piece"
    if rule.total:
        return f"enemy pieces of {rule.words}, both faces of both pieces added up"
    return f"enemy pieces showing you a {rule.words} value, compared with your piece's range"


def rule_book(summary: str, opts: Sequence[Option]) -> str:
    """The whole of ``help curio``."""
    std = DEFAULT_SETUP
    kinds = " ".join(f"{a}{b}" for a, b in std.piece_kinds())
    syntax = [(u.split(", e.g.")[0], "") for u in USAGE.values()]
    rule = CAPTURE_RULES[std.capture]
    capture_rows = [(f"-capture_{code}" + (" (default)" if code == std.capture else ""), capture_words(r))
                    for code, r in CAPTURE_RULES.items()]
    flags = [
        (f"-base=N (default {std.base})", "the numbers on the pieces run from 1 to N; every pair i, j "
         "with i <= j is a piece"),
        (f"-rows=N (default {std.rows})", "the length of the board"),
        (f"-cols=N (default {std.cols})", "the width of the board"),
        ("-num_pieces=N", "pieces per side, a multiple of the number of different pieces (default: "
         "one of each)"),
        ("-turn" + (" (default)" if std.turn else ""), "a piece turns round after it captures"),
        ("-no_turn" + ("" if std.turn else " (default)"), "pieces never turn"),
        ("-limit" + (" (default)" if std.limit else ""), "a piece moves at most as far as its face"),
        ("-no_limit" + ("" if std.limit else " (default)"), "pieces move any distance"),
        *((f"-face_{f}" + (" (default)" if f == std.face else ""), FACE_WORDS[f]) for f in FACES),
        (f"-draw_moves=N (default {std.draw_moves})", "moves in a row without a capture that draw the "
         "game (0: never)"),
        ("-clock=2d", "a move clock: the player to move has that long for each move (d, h, m; 1h to 60d); "
         "a reminder comes when a quarter is left, and when it runs out the other player wins on time "
         "(at once, or by curio claim)"),
    ]
    return document(
        para(summary),
        heading("Commands"),
        para("Mail them to pbm@ or to this game's address; the word curio may be left out in "
             "mail to the game's address. Lines with a password carry it in place, as on "
             "pbmserv; the server never shows it again."),
        commands(syntax, column=0),
        para("Example: curio move 101 alice PASSWORD d2-d4#1. The #1 is the move number, so a "
             "mail that arrives twice is not played twice. In place of the move, curio move "
             "also takes resign, propose, accept or reject (pbmserv's forms). A challenge needs "
             "your $$password$$ in the mail, since it mails the other player."),
        heading("The pieces"),
        para(f"Each player has one piece for every pair of numbers i <= j from 1 to the base "
             f"(default {std.base}, so {std.pieces_per_side} pieces: {kinds}). The number on one "
             "side of a piece faces its owner, the other faces the opponent. Royal pieces are "
             f"those that carry the base number ({std.base} by default)."),
        para(f"Light, the first player named in the challenge, starts on rows 1-2 and moves "
             f"first; Dark starts on the two top rows. The board is {std.cols} x {std.rows} "
             "unless the challenge says otherwise. The server places and shuffles both sides "
             f"at random; by default ({FACE_WORDS[std.face]}) you see your own pieces' larger "
             "numbers and the opponent's smaller ones."),
        heading("What you see"),
        para("You see the face of each piece that points at you: your own pieces' owner-facing "
             "faces, and the other faces of the opponent's pieces. A piece that has turned shows "
             "both faces to both players. No mail ever shows you a face you could not see at "
             "the table."),
        heading("Moving"),
        para(f"On your turn you move one of your pieces in a straight unimpeded line in any of "
             f"the {len(DIRECTIONS)} directions (orthogonally or diagonally, like a chess queen), "
             "from 1 square up to its range: the number you see on it. No jumping over pieces, "
             "no passing, and you cannot land on your own piece."),
        heading("Capturing and turning"),
        para(f"A piece captures by landing on an enemy piece; the move ends there. By default "
             f"(-capture_{rule.code}) it may capture {capture_words(rule)}. A challenge may "
             "choose another rule:"),
        table(capture_rows),
        para("After a capture the capturing piece turns round" + ("" if std.turn else
             " (with -turn)") + ": its two faces swap sides, both players now know both of its "
             "numbers, and the face now pointing at its owner is its range from then on. It "
             "turns again on every capture."),
        heading("Winning and drawing"),
        para("You win when you have captured all of your opponent's royal pieces. The game is "
             "drawn by agreement (curio draw ... propose, then accept), when no capture is "
             "possible any more for either side (for instance one piece each left), when the "
             "player to move has no legal move, or after "
             f"{std.draw_moves} moves in a row without a capture (the -draw_moves option)."),
        heading("Challenge options"),
        commands(flags, column=28),
        para("and one of the -capture_ options above."),
        heading("Leaving the game"),
        para("Curio has no LEAVE: every board is a game of its own between two players. To stop "
             "playing a board you resign it (curio resign <board> <userid> <password>, or curio "
             "move <board> <userid> <password> resign): your opponent wins that board and both "
             "players and the board's observers are told. Resigning before the first move "
             "declines the challenge: the board closes with no winner. Your other boards go on. "
             "A LEAVE line is refused with this reason."),
        heading("Game options"),
        options(opts, intro="The game master sets the defaults for new boards of this game; a "
                            "challenge's own options override them:"),
    )
