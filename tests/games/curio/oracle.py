"""What a square may show to a viewer, computed from the rules alone (not from
the view code), so the tests can check every board the game draws."""

from __future__ import annotations

from games.curio.model import LIGHT, Piece


def expected_token(piece: Piece | None, viewer: str | None) -> str:
    """The token for ``piece`` as ``viewer`` (a side, or None: an observer) may see it."""
    if piece is None:
        return "."
    if viewer is None:
        faces = f"{piece.own}{piece.other}" if piece.revealed else "?"
        return f"[{faces}]" if piece.side == LIGHT else f"({faces})"
    near, far = (piece.own, piece.other) if piece.side == viewer else (piece.other, piece.own)
    faces = f"{near}{far}" if piece.revealed else f"{near}"
    return f"[{faces}]" if piece.side == viewer else f"({faces})"
