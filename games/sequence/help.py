"""``help sequence``: the rule book, built from the numbers the scoring
uses (the two divisors and their points, the bonuses, the pieces) and its
examples worked out by the engine's own functions, so the text cannot drift
from the game."""

from __future__ import annotations

from collections.abc import Sequence

from games.base import Option
from games.helptext import HOW_TO_SEND, commands, document, heading, options, para, table
from games.sequence.model import (
    FILLER_MULTIPLIER,
    FILLER_VALUE,
    FINISHER_BONUS,
    LAST_SCORER_BONUS,
    LETTER_PIECES,
    PIECES_PER_PLAYER,
    SEVEN,
    SEVEN_POINTS,
    TWENTY_FOUR,
    TWENTY_FOUR_POINTS,
    explain_total,
    pieces_from_email,
    points_for,
)
from games.sequence.parse import PLAY_SYNTAX

#: the seed's example address
EXAMPLE_ADDRESS = "dklein00@gmail.com"
#: (running total after a play, the play's multiplier) for the scoring examples
SCORING_EXAMPLES = ((42, 3), (48, 2), (168, 1), (43, 5), (-14, 4))


def rule_book(summary: str, opts: Sequence[Option]) -> str:
    """The whole of ``help sequence``."""
    pieces = pieces_from_email(EXAMPLE_ADDRESS)
    piece_rows = [(f"Piece {n}", f"value {p.value}", f"multiplier {p.multiplier}")
                  for n, p in enumerate(pieces, start=1)]
    score_rows = [(f"total {explain_total(t)}", f"multiplier {m}", f"scores {points_for(t, m, True)}")
                  for t, m in SCORING_EXAMPLES]
    both = SEVEN * TWENTY_FOUR
    return document(
        para(summary),
        heading("Commands"),
        para(HOW_TO_SEND),
        commands([
            ("JOIN", "join; your pieces come from your e-mail address"),
            ("Piece <n>: [+|-]<value>, <multiplier>", "play piece n, e.g. Piece 3: 12, 3 or "
             "Piece 6: -6, 0; the value and multiplier must be the piece's own, the sign is "
             "your choice (+ if left out)"),
            ("PIECES", "your pieces, your score and the running total"),
            ("MAIL EACH", "a mail for every play"),
            ("MAIL DIGEST", "at most one mail an hour about the plays (the default)"),
            ("MAIL NONE", "no mails about plays, only the final report"),
            ("SET PIECES <handle> <v>,<m> ...", "game master only: ten value,multiplier pairs"),
        ]),
        para(f"The form of a play: {PLAY_SYNTAX}. The server is lenient about 'Piece Number 3', "
             "spacing and a trailing full stop. A play is refused, with the reason, for an "
             "unknown or already used piece, a wrong value or multiplier, or after the "
             "deadline."),
        heading("Your pieces"),
        para(f"Each player has {PIECES_PER_PLAYER} pieces, each usable once. Pieces 1 to "
             f"{LETTER_PIECES} take as values the alphabet positions (a = 1 ... z = 26) of the "
             f"first {LETTER_PIECES} letters of your e-mail address before the @ (digits and "
             "symbols skipped; if there are fewer letters, the domain's letters follow), with "
             f"multipliers 1 to {LETTER_PIECES}. Pieces {LETTER_PIECES + 1} to {PIECES_PER_PLAYER} "
             f"have value {FILLER_VALUE} and multiplier {FILLER_MULTIPLIER}. The game master may "
             f"set a player's pieces instead. For {EXAMPLE_ADDRESS}:"),
        table(piece_rows),
        heading("Scoring"),
        para("Plays count in the order the server receives them; each adds its signed value to "
             f"the running total. A play scores {SEVEN_POINTS} x its multiplier if the new total "
             f"is a multiple of {SEVEN}, and {TWENTY_FOUR_POINTS} x its multiplier if it is a "
             f"multiple of {TWENTY_FOUR}; both if it is a multiple of {both}. Zero and negative "
             "totals count as multiples too. Examples:"),
        table(score_rows),
        para("A play scores only if it is your first, or if someone else has played since your "
             "last play: two plays of yours in a row, the second scores nothing."),
        para(f"At the deadline: each of the first half of the players (rounded down) to use all "
             f"{PIECES_PER_PLAYER} pieces gets {FINISHER_BONUS} more points if their last play "
             f"itself scored; the player of the last play that scored in the whole game gets "
             f"{LAST_SCORER_BONUS} more. The highest score wins; a tie goes to whoever reached "
             "that score first."),
        para("Every accepted play is public: it is announced to all players (each as they chose "
             "with MAIL) with the new total."),
        heading("Leaving the game"),
        para("The Fourth Game has no LEAVE, by design: every play is public and stays in the "
             "running total that everyone plays on, so a player cannot be taken out again. You "
             "may simply stop playing: pieces you do not play cost you nothing and your score "
             "stands (you only miss the bonus for using all your pieces). Send MAIL NONE to stop "
             "the mails about plays; the final report still comes. A LEAVE line is refused "
             "with this reason."),
        heading("Options"),
        options(opts),
    )
