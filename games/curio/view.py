"""What one person may see of a board.

Every view is built from :meth:`Piece.faces_seen_by`, so a player's data holds
only the faces that player could see at the table, and an observer's only the
faces both players know (those of turned pieces).

The ASCII board is drawn from the viewer's side: Light (and observers) see
rank 1 at the bottom and file a on the left; Dark sees the board turned round,
rank 1 at the top and file a on the right, so each player's home rows are at
the bottom.  Every cell is four characters wide::

    [4]    one of your pieces, showing the face you see (its range)
    (1)    an enemy piece, showing the face you see
    [32]   a piece that has turned: both faces, the one toward you first
     .     an empty square

Observers see ``[..]`` for Light's and ``(..)`` for Dark's pieces, ``?`` for a
face only the players know, and a turned piece's owner-facing face first.
"""

from __future__ import annotations

from typing import Any

from games.curio.boards import Board, same_handle
from games.curio.model import DARK, LIGHT, SIDE_NAME, Move, Piece, Position, Square, replay

LAST_MOVES = 6

LEGEND_PLAYER = (
    "[4] your piece, (1) an enemy piece: the face you see. A turned piece shows\n"
    "both faces, the one toward you first (on your pieces: the range)."
)
LEGEND_OBSERVER = (
    "[ ] Light's pieces, ( ) Dark's pieces; ? is a face only the players know;\n"
    "a turned piece shows both faces, its owner's face (its range) first."
)


def cell(piece: Piece | None, viewer: str | None) -> tuple[str, str]:
    """(four-character token, kind) for one square as ``viewer`` sees it."""
    if piece is None:
        return " .  ", "empty"
    faces = "".join(str(f) for f in piece.faces_seen_by(viewer)) or "?"
    if viewer is None:
        mine = piece.side == LIGHT
        kind = piece.side
    else:
        mine = piece.side == viewer
        kind = "own" if mine else "enemy"
    token = f"[{faces}]" if mine else f"({faces})"
    return f"{token:<4}", kind + (" turned" if piece.revealed else "")


def piece_drawing(piece: Piece | None, viewer: str | None, square: str) -> dict[str, Any]:
    """How the HTML board draws a square: ``side`` ("light", "dark", "" for
    an empty square), the ``faces`` the viewer sees (the one toward them
    first; "?" for a face only the players know) and a ``label`` that reads
    the square out for screen readers and tools, e.g. "b3: your piece, face
    4", "c5: Dark's piece, turned, faces 3 and 2", "a1: empty".  Made from
    :meth:`Piece.faces_seen_by` only, like the ASCII board."""
    if piece is None:
        return {"side": "", "faces": [], "label": f"{square}: empty"}
    seen = [str(f) for f in piece.faces_seen_by(viewer)]
    if viewer is not None and piece.side == viewer:
        who = "your piece"
    else:
        who = f"{SIDE_NAME[piece.side]}'s piece"
    if not seen:
        faces = "face hidden (only the players know it)"
    elif len(seen) == 1:
        faces = f"face {seen[0]}"
    else:
        faces = "faces " + " and ".join(seen)
    turned = ", turned" if piece.revealed else ""
    return {"side": piece.side, "faces": seen or ["?"], "label": f"{square}: {who}{turned}, {faces}"}


def orientation(position: Position, viewer: str | None) -> tuple[list[int], list[int]]:
    """(ranks top to bottom, files left to right) as the viewer sees the board."""
    ranks = list(range(position.setup.rows))
    files = list(range(position.setup.cols))
    if viewer == DARK:
        return ranks, files[::-1]
    return ranks[::-1], files


def grid_rows(position: Position, viewer: str | None,
              marked: frozenset[str] = frozenset()) -> tuple[list[str], list[dict[str, Any]]]:
    """``marked``: the squares of the last move (``last`` in the cell)."""
    ranks, files = orientation(position, viewer)
    letters = [chr(ord("a") + f) for f in files]
    rows = []
    for r in ranks:
        cells = []
        for f in files:
            piece = position.pieces.get(Square(f, r))
            token, kind = cell(piece, viewer)
            name = Square(f, r).name
            cells.append({"text": token.strip() or ".", "token": token, "kind": kind,
                          "square": name, "last": name in marked, **piece_drawing(piece, viewer, name)})
        rows.append({"rank": r + 1, "cells": cells})
    return letters, rows


def ascii_board(position: Position, viewer: str | None, marked: frozenset[str] = frozenset()) -> str:
    """The board as preformatted text: ``NN  cell cell ...  NN`` per rank; a
    ``*`` just left of a cell marks a square of the last move (``marked``)."""
    letters, rows = grid_rows(position, viewer, marked)
    head = "     " + "".join(f" {c}   " for c in letters)
    lines = [head.rstrip()]
    for row in rows:
        body = "".join(("*" if c["last"] else " ") + c["token"] for c in row["cells"])
        lines.append(f"{row['rank']:>3} {body}  {row['rank']}")
    lines.append(head.rstrip())
    return "\n".join(lines)


def piece_name(piece: Piece, viewer: str | None) -> str:
    """A piece as ``viewer`` knows it, e.g. "Dark's piece (3)", "your piece [2]"."""
    faces = "".join(str(f) for f in piece.faces_seen_by(viewer))
    if viewer is not None and piece.side == viewer:
        return f"your piece [{faces or '?'}]"
    mark = f"[{faces}]" if viewer is None and piece.side == LIGHT else f"({faces})"
    return f"{SIDE_NAME[piece.side]}'s piece " + (mark if faces else "(a face only the players know)")


def last_move(board: Board, viewer: str | None, at: int | None = None) -> tuple[str, frozenset[str]]:
    """(a line naming the last move and the piece it captured, as the viewer
    knows that piece; the move's two squares); ("", {}) before the first move.
    ``at``: the board as it stood after that move (its last move is move
    ``at``, the one that led to the position), default the board now."""
    upto = len(board.moves) if at is None else at
    if not 0 < upto <= len(board.moves):
        return "", frozenset()
    try:
        move = Move.parse(board.moves[upto - 1])
        before = replay(board.setup, board.seed, board.moves[:upto - 1], board.start)[-1]
    except ValueError:
        return "", frozenset()
    squares = frozenset({move.frm.name, move.to.name})
    mover = before.pieces.get(move.frm)
    side = SIDE_NAME[mover.side] if mover is not None else "?"
    text = f"{'Last move' if at is None else f'Move {upto}'}: {side} {move.frm.name}-{move.to.name}"
    target = before.pieces.get(move.to)
    if target is not None:
        text += f", capturing {piece_name(target, viewer)}"
    return text + ".", squares


def parse_ascii_board(text: str) -> dict[str, str]:
    """Square name -> cell token (stripped) of a board drawn by :func:`ascii_board`
    (also finds it inside a whole mail).  For tests and for tools."""
    lines = text.splitlines()
    out: dict[str, str] = {}
    letters: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        if stripped and all(len(t) == 1 and t.isalpha() for t in stripped.split()):
            letters = stripped.split()
            continue
        parts = line.split()
        if letters and len(parts) >= 2 and parts[0].isdigit() and parts[0] == parts[-1]:
            rank = int(parts[0])
            body = line[5:5 + 5 * len(letters)]
            for i, letter in enumerate(letters):
                out[f"{letter}{rank}"] = body[5 * i:5 * i + 4].strip()
    return out


def status_line(board: Board, viewer_side: str | None) -> str:
    pos = board.position
    after = f"after {pos.ply} move{'' if pos.ply == 1 else 's'}"
    if board.status == "declined":
        return f"The challenge was declined: {board.reason}."
    if board.status == "finished":
        if board.winner:
            won = "You won" if board.side_of(board.winner) == viewer_side and viewer_side \
                else f"{board.winner} ({SIDE_NAME[board.side(board.winner)]}) won"
            return f"Game over {after}. {won}: {board.reason}."
        return f"Game over {after}: a draw, {board.reason}."
    mover = board.handle(pos.to_move)
    if viewer_side == pos.to_move:
        return f"It is your move (move {pos.ply + 1})."
    return f"It is {mover}'s move ({SIDE_NAME[pos.to_move]}, move {pos.ply + 1})."


def last_moves(board: Board, upto: int | None = None) -> list[str]:
    """The last few moves played (up to move ``upto``, default all)."""
    end = len(board.moves) if upto is None else upto
    first = max(0, end - LAST_MOVES)
    out = []
    for i in range(first, end):
        side = board.mover(i + 1)
        out.append(f"{i + 1:>3}. {SIDE_NAME[side]:<5} {board.moves[i]}")
    return out


def history_status(board: Board, at: int) -> str:
    """The status line of a board drawn as it stood after move ``at``."""
    total = len(board.moves)
    when = "before the first move" if at == 0 else f"after move {at}"
    if board.status == "declined":
        now = "the challenge was later declined"
    elif board.status == "finished":
        now = f"the game ended after move {total}"
    else:
        now = f"the board is now at move {total + 1}"
    return (f"The board as it stood {when} ({SIDE_NAME[board.mover(at + 1)]} to move then); "
            f"{now}.")


def board_data(board: Board, viewer_side: str | None, headlines: list[str] | None = None,
               *, ratings: str = "", at: int | None = None) -> dict[str, Any]:
    """The template data of one board for one viewer (a side, or None for an
    observer).  Contains only what that viewer may see.  ``at``: the board as
    it stood after that move (0: the start), with only what the viewer could
    see then; ``ratings``: the players' ratings line."""
    if at is not None:
        data = board_data(board, viewer_side, headlines, ratings=ratings)
        pos = board.position_after(at)
        # the move that led to this position, not the board's latest move
        then_text, then_marked = last_move(board, viewer_side, at)
        letters, rows = grid_rows(pos, viewer_side, then_marked)
        data.update({
            "status": history_status(board, at),
            "draw_offer": "",
            "your_turn": False,
            "after_move": at,
            "last_moves": last_moves(board, at),
            "last_move": then_text,
            "grid": ascii_board(pos, viewer_side, then_marked),
            "files": letters,
            "rows": rows,
            "counts": f"Pieces left then: Light {pos.count(LIGHT)}, Dark {pos.count(DARK)}.",
            "hint": "",
        })
        return data
    pos = board.position
    last_text, marked = last_move(board, viewer_side)
    letters, rows = grid_rows(pos, viewer_side, marked)
    you = board.handle(viewer_side) if viewer_side else None
    offer = ""
    if board.active and board.draw_offer:
        who = board.handle(board.draw_offer)
        if viewer_side == board.draw_offer:
            offer = "You have proposed a draw; it stands until your opponent answers or moves."
        elif viewer_side:
            offer = (f"{who} proposes a draw: answer with curio draw {board.number} "
                     f"{you} <password> accept (or reject).")
        else:
            offer = f"{who} has proposed a draw."
    hint = ""
    if board.active and viewer_side == pos.to_move:
        hint = (f"To move: curio move {board.number} {you} <password> <from>-<to>"
                f"#{pos.ply + 1}")
    return {
        "headlines": list(headlines or []),
        "number": board.number,
        "light": board.light,
        "dark": board.dark,
        "you": you,
        "side": SIDE_NAME[viewer_side] if viewer_side else None,
        "observer": viewer_side is None,
        "status": status_line(board, viewer_side),
        "active": board.active,
        "your_turn": bool(board.active and viewer_side == pos.to_move),
        "after_move": pos.ply,
        "last_moves": last_moves(board),
        "last_move": last_text,
        "grid": ascii_board(pos, viewer_side, marked),
        "files": letters,
        "rows": rows,
        "legend": LEGEND_OBSERVER if viewer_side is None else LEGEND_PLAYER,
        "counts": f"Pieces left: Light {pos.count(LIGHT)}, Dark {pos.count(DARK)}.",
        "draw_offer": offer,
        "hint": hint,
        "options": board.setup.flags(),
        "ratings": ratings,
    }


def board_text(data: dict[str, Any]) -> str:
    """Plain-text rendering of :func:`board_data` (the same as templates/curio/board.txt;
    used by ``view`` for the CLI)."""
    out = list(data["headlines"])
    if out:
        out.append("")
    who = f"you are {data['side']}" if data["side"] else "observer's view"
    out.append(f"Curio board {data['number']}: {data['light']} (Light) vs {data['dark']} (Dark), {who}")
    out.append(data["status"])
    if data["draw_offer"]:
        out.append(data["draw_offer"])
    if data["last_moves"]:
        out.append("Last moves:")
        out.extend(data["last_moves"])
    out.append("")
    if data.get("last_move"):
        out.append(data["last_move"] + " Its squares are marked * on the board.")
    out.append(f"Position after move {data['after_move']}:")
    out.append(data["grid"])
    out.append(data["legend"])
    out.append(data["counts"])
    if data["hint"]:
        out.append(data["hint"])
    if data.get("ratings"):
        out.append(data["ratings"])
    out.append(f"Options: {data['options']}")
    return "\n".join(out)


def history_text(board: Board) -> str:
    """Every move of a board, numbered, with who made it and its captures.
    Moves are public (both players and observers see each one), so this is
    the same for everyone; it names no face."""
    total = len(board.moves)
    lines = [f"Curio board {board.number}: {board.light} (Light) vs {board.dark} (Dark)"
             + (f", started {board.started[:10]}" if board.started else "") + ".",
             f"Options: {board.setup.flags()}", ""]
    if not total:
        lines.append("No move has been played yet.")
    width = max((len(board.handle(s)) for s in (LIGHT, DARK)), default=5) + 8
    for i, move in enumerate(board.moves, 1):
        side = board.mover(i)
        who = f"{board.handle(side)} ({SIDE_NAME[side]})"
        note = "  capture" if "x" in move else ""
        lines.append(f"{i:>4}. {who:<{width}} {move}{note}".rstrip())
    captures = sum(1 for m in board.moves if "x" in m)
    lines.append("")
    lines.append(f"{total} move{'s' if total != 1 else ''}, {captures} capture{'s' if captures != 1 else ''}.")
    if board.status == "declined":
        lines.append(f"The challenge was declined: {board.reason}.")
    elif board.status == "finished":
        result = f"{board.winner} won" if board.winner else "a draw"
        lines.append(f"Game over: {result}, {board.reason}.")
    else:
        pos = board.position
        lines.append(f"Still running: move {pos.ply + 1}, {board.handle(pos.to_move)} "
                     f"({SIDE_NAME[pos.to_move]}) to move.")
    lines.append(f"The position after a move, from your side: curio show {board.number}#<n> "
                 f"(n from 0, the start, to {total}).")
    return "\n".join(lines)


def games_text(handle: str, boards: list[Board], rating: str) -> str:
    """The boards of one player for ``curio games <userid>``: opponent, colour
    and whose move, running boards first.  Nothing hidden in it."""
    running = [b for b in boards if b.active]
    to_move = [b for b in running if same_handle(b.handle(b.position.to_move), handle)]
    done = [b for b in boards if not b.active]
    lines = [f"Curio boards of {handle}: {len(running)} running"
             f" ({handle} to move on {len(to_move)}), {len(done)} over. Rating: {rating}.", ""]
    if not boards:
        lines.append(f"{handle} has no curio boards here.")
    for b in running + done:
        side = b.side(handle)
        other = b.handle(DARK if side == LIGHT else LIGHT)
        head = f"{b.number}  against {other}, {b.handle(side)} plays {SIDE_NAME[side]}: "
        pos = b.position
        if b.status == "declined":
            tail = "declined"
        elif b.status == "finished":
            tail = f"over after {pos.ply} moves, " + (f"{b.winner} won" if b.winner else "drawn")
        else:
            tail = f"move {pos.ply + 1}, {b.handle(pos.to_move)} to move"
        lines.append(head + tail)
    return "\n".join(lines)
