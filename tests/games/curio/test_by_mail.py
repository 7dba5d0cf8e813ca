"""A whole game of curio played by mail over SMTP, and a scan of every mail
each player (and an observer) received: no mail ever shows anyone a face
they could not see at the table.

The players choose their moves only from the boards in their own mails (with
the default -capture_le rule a player's own view is enough to know every
legal move).  At the end the test takes the board's seed and moves from
`pbm game export`, replays the game with the engine, and checks every board
in every mail against what that person may see after that move.
"""

from __future__ import annotations

import json
import re

from games.curio.model import DARK, LIGHT, Move, Piece, Position, Setup, Square, replay
from games.curio.view import parse_ascii_board
from tests.games.curio.oracle import expected_token

PW = {"alice": "alice-secret-1", "bob": "bob-secret-2", "carol": "carol-secret-3"}
AFTER = re.compile(r"Position after move (\d+):")
TD = re.compile(r'<td (?=[^>]*\btitle="([a-z][0-9]+)")(?=[^>]*\bdata-token="([^"]*)")[^>]*>')  # any attribute order




def flat(text: str) -> str:
    """The mail text with all runs of white space made one space (the server
    wraps long lines)."""
    return " ".join(text.split())


def boards_in(text: str) -> list[tuple[int, dict[str, str]]]:
    """(after move N, square -> token) for every board drawn in a mail."""
    found = []
    starts = [m for m in AFTER.finditer(text)]
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        found.append((int(m.group(1)), parse_ascii_board(text[m.end():end])))
    return found


def latest_board(pbm, who: str) -> tuple[int, dict[str, str]]:
    boards = [b for msg in pbm.inbox(f"{who}@example.org") for b in boards_in(pbm.text(msg))]
    return max(boards, key=lambda b: b[0])


def choose(grid: dict[str, str], side: str, setup: Setup) -> Move:
    """A move chosen from what the player sees: a capture if there is one (the
    one taking the highest visible number), else the move that gets closest to
    an enemy piece."""
    enemy = DARK if side == LIGHT else LIGHT
    pieces = {}
    for name, token in grid.items():
        if token == ".":
            continue
        near = int(token[1])
        if token.startswith("["):
            pieces[Square.parse(name)] = Piece(side, near, near)
        else:
            pieces[Square.parse(name)] = Piece(enemy, near, near)
    pos = Position(setup, pieces, side)
    moves = pos.legal_moves(side)
    assert moves, "the mail shows a position without a legal move"
    captures = [m for m in moves if m.capture]
    if captures:
        return max(captures, key=lambda m: (pieces[m.to].other, m.plain))
    targets = [s for s, p in pieces.items() if p.side == enemy]

    def gap(m: Move) -> tuple[int, str]:
        return min(max(abs(m.to.file - t.file), abs(m.to.rank - t.rank)) for t in targets), m.plain
    return min(moves, key=gap)


def positions_end_reason(board: dict) -> str:
    """Why the engine says the exported game is over."""
    final = replay(Setup.from_dict(board["setup"]), board["seed"], board["moves"])[-1]
    winner, reason = final.result()
    assert (winner is None) == (board["winner"] is None)
    return reason


def test_a_whole_game_by_mail_never_shows_a_hidden_face(pbm):
    for who in ("alice", "bob", "carol"):
        pbm.register(who, PW[who])
    A, B, C = (f"{w}@example.org" for w in ("alice", "bob", "carol"))

    reply = pbm.mail(A, "pbm", f"curio challenge -base=3 -cols=3 -draw_moves=8 alice bob\n$${PW['alice']}$$")
    text = flat(pbm.text(reply))
    assert "accepted: board 101: alice (Light) vs bob (Dark), alice moves first" in text
    assert "you play Light" in text and "It is your move (move 1)." in text
    bob_mail = pbm.wait_for(B, 3)[-1]  # after the code and the confirmation
    assert "alice has challenged you to Curio on board 101; you play Dark." in flat(pbm.text(bob_mail))
    assert pbm.html(bob_mail) is not None and "<table" in pbm.html(bob_mail)

    reply = pbm.mail(C, "pbm", f"curio subscribe 101 $${PW['carol']}$$")
    assert "you will get every move on board 101 (observer's view)" in flat(pbm.text(reply))

    # a move the rules do not allow: refused with the reason, the board from alice's side
    reply = pbm.mail(A, "pbm", f"curio move 101 alice {PW['alice']} a1-b3")
    text = pbm.text(reply)
    assert "REFUSED" in flat(text) and "illegal move: a1 to b3 is not a straight line" in flat(text)
    assert "curio move 101 alice **** a1-b3" in text and PW["alice"] not in text
    assert "you play Light" in text and boards_in(text)[0][0] == 0
    # and a move out of turn
    reply = pbm.mail(B, "curio", f"move 101 bob {PW['bob']} a4-a3")
    assert "it is alice's move on board 101, not yours" in flat(pbm.text(reply))

    setup = Setup(base=3, cols=3, draw_moves=8)
    players = {LIGHT: ("alice", A), DARK: ("bob", B)}
    side, played, over = LIGHT, 0, False
    while not over:
        assert played < 60, "the game should be over by now"
        who, addr = players[side]
        other_addr = players[DARK if side == LIGHT else LIGHT][1]
        after, grid = latest_board(pbm, who)
        assert after == played
        move = choose(grid, side, setup)
        line = f"move 101 {who} {PW[who]} {move.plain}#{played + 1}"
        waiting = len(pbm.inbox(other_addr)), len(pbm.inbox(C))
        # Light writes to pbm@ with the curio prefix, Dark to the game's own address
        reply = pbm.mail(addr, "pbm" if side == LIGHT else "curio",
                         ("curio " + line) if side == LIGHT else line)
        text = flat(pbm.text(reply))
        assert f"accepted: {move} on board 101" in text, text
        played += 1
        over = "Game over" in text
        pbm.wait_for(other_addr, waiting[0] + 1)
        pbm.wait_for(C, waiting[1] + 1)
        if played == 2:  # the same mail again: refused, nothing happens twice
            again = flat(pbm.text(pbm.mail(addr, "curio", line)))
            assert "move #2 has already been played on board 101; the next is move #3" in again
        side = DARK if side == LIGHT else LIGHT
    pbm.settle()

    # the end is in both players' last mails and the observer's
    for addr in (A, B, C):
        assert "Game over" in flat(pbm.text(pbm.inbox(addr)[-1]))

    # replay the game from its seed and moves, as exported
    doc = json.loads(pbm.cli("game", "export", "curio").stdout)
    board = doc["state"]["boards"]["101"]
    assert board["status"] == "finished" and len(board["moves"]) == played
    assert positions_end_reason(board) == board["reason"]
    positions = replay(Setup.from_dict(board["setup"]), board["seed"], board["moves"])
    assert positions[-1].to_json() == board["position"]
    assert any(p.revealed for p in positions[-1].pieces.values()) or "x" not in "".join(board["moves"])

    scanned = {}
    for who, addr, viewer in (("alice", A, LIGHT), ("bob", B, DARK), ("carol", C, None)):
        count = 0
        for msg in pbm.inbox(addr):
            text = pbm.text(msg)
            assert PW[who] not in text and PW[who] not in msg["Subject"]
            found = boards_in(text)
            html = pbm.html(msg)
            if found:
                assert html is not None
                cells = dict(TD.findall(html))
            for after, grid in found:
                pos = positions[after]
                assert len(grid) == 15
                for name, token in grid.items():
                    assert token == expected_token(pos.pieces.get(Square.parse(name)), viewer), (
                        who, after, name, token)
                    assert cells[name] == token  # the HTML part shows the same
                count += 1
        scanned[who] = count
    # every move reached both players and the observer as a board
    assert scanned["alice"] >= played // 2 + 2 and scanned["bob"] >= played // 2 + 1
    assert scanned["carol"] >= played


def test_show_and_showas_by_mail(pbm):
    for who in ("alice", "bob"):
        pbm.register(who, PW[who])
    A, B = "alice@example.org", "bob@example.org"
    pbm.mail(B, "pbm", f"curio challenge alice bob\n$${PW['bob']}$$")
    text = pbm.text(pbm.mail(A, "pbm", "curio show 101"))
    [(after, grid)] = boards_in(text)
    assert after == 0 and sorted(set(grid.values())) == ["(?)", ".", "[?]"]
    text = pbm.text(pbm.mail(A, "pbm", f"curio showas alice {PW['alice']} 101"))
    [(after, grid)] = boards_in(text)
    own = sorted(int(t[1]) for t in grid.values() if t.startswith("["))
    enemy = sorted(int(t[1]) for t in grid.values() if t.startswith("("))
    assert own == [1, 2, 2, 3, 3, 3, 4, 4, 4, 4]  # the larger face of each own piece
    assert enemy == [1, 1, 1, 1, 2, 2, 2, 3, 3, 4]  # the smaller face of each enemy piece
    assert "curio showas alice **** 101" in text and PW["alice"] not in text
    text = flat(pbm.text(pbm.mail(B, "pbm", f"curio showas alice {PW['alice']} 101")))
    assert "REFUSED" in text and PW["alice"] not in text
    text = flat(pbm.text(pbm.mail(A, "pbm", f"curio resign 101 alice {PW['alice']}")))
    assert "accepted: challenge declined on board 101" in text
    assert "alice declined the challenge on board 101" in flat(pbm.text(pbm.wait_for(B, 4)[-1]))
