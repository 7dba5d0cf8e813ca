"""A scripted week of each game, played over SMTP against a real `pbm serve`
(tests/server/test_subjects_threads.py and tests/contract/test_line_widths.py):
players register, join, send orders or moves (one with a refused line), the
GM acts, and the turn runs.  Each script returns the game's name."""

from __future__ import annotations

from email.message import EmailMessage

PW = {h: f"{h}-secret-77" for h in ("ann", "bob", "cat", "dan")}


def addr(handle: str) -> str:
    return f"{handle}@example.org"


def players(pbm, *handles: str) -> None:
    known = {r[0] for r in pbm.sql("SELECT handle FROM accounts")}
    for h in handles:
        if h not in known:
            pbm.register(h, PW[h], email=addr(h))


def send(pbm, handle: str, game: str, *lines: str) -> EmailMessage:
    return pbm.mail(addr(handle), game, "\n".join(lines) + f"\n$${PW[handle]}$$\n")


def giveaway(pbm) -> str:
    players(pbm, "ann", "bob", "cat")
    pbm.new_game("giveaway", "gift")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "JOIN")
    send(pbm, "ann", "gift", "GIVE 3 TO bob")
    send(pbm, "ann", "gift", "GIVE 3 TO bobby")  # refused; the order before still holds
    send(pbm, "bob", "gift", "GIVE 2 TO cat", "GIVE 1 TO ann")
    send(pbm, "cat", "gift", "GIVE 3 TOO ann")  # refused: the bad word
    send(pbm, "cat", "gift", "GIVE 3 TO ann")
    pbm.run_turn("gift")
    return "gift"


def rmpm(pbm) -> str:
    players(pbm, "ann", "bob")
    pbm.new_game("rmpm", "world")
    send(pbm, "ann", "world", "JOIN bd 01-05 25-10 blue dragon")
    send(pbm, "bob", "world", "JOIN ir 01-06 25-11 Irata")
    send(pbm, "bob", "world", "01-06 => 02-06")  # refused
    pbm.run_turn("world")
    send(pbm, "ann", "world", "01-05 -> 01-06", "25-10 -> 24-10")
    pbm.run_turn("world")
    return "world"


def agora(pbm) -> str:
    players(pbm, "ann", "bob")
    pbm.register("gm", "gm-secret-99", email=pbm.gm_address)
    pbm.new_game("agora_rpg", "town")
    send(pbm, "ann", "town", "JOIN", "MOVE Town Square -> Dungeon Level 1")
    send(pbm, "bob", "town", "JOIN", "FLY AWAY")  # one line refused
    send(pbm, "ann", "town", "EXPLORE")
    pbm.mail(pbm.gm_address, "town", "GM SET bob TOKENS = 9\n$$gm-secret-99$$")
    pbm.run_turn("town")
    return "town"


def sequence(pbm) -> str:
    players(pbm, "ann", "bob", "cat")
    pbm.new_game("sequence", "four")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "four", "JOIN")
    send(pbm, "ann", "four", "PIECES")
    send(pbm, "bob", "four", "Piece 1: 99, 1")  # refused: not its value
    pbm.run_turn("four")
    return "four"


def curio(pbm) -> str:
    players(pbm, "ann", "bob", "cat")
    pbm.mail(addr("ann"), "pbm", f"curio challenge -base=3 -cols=3 ann bob\n$${PW['ann']}$$")
    pbm.mail(addr("cat"), "pbm", f"curio challenge -base=3 -cols=3 cat ann\n$${PW['cat']}$$")
    pbm.mail(addr("ann"), "pbm", f"curio move 101 ann {PW['ann']} a1-b3")  # refused: illegal
    legal = first_legal_move(pbm, 101)
    pbm.mail(addr("ann"), "curio", f"move 101 ann {PW['ann']} {legal}")
    pbm.settle()
    return "curio"


def first_legal_move(pbm, board: int) -> str:
    from games.curio.boards import CurioState

    state = CurioState.from_state(pbm.state("curio"))
    pos = state.boards[board].position
    return sorted(m.plain for m in pos.legal_moves(pos.to_move))[0]


WEEKS = {"giveaway": giveaway, "rmpm": rmpm, "agora_rpg": agora, "sequence": sequence, "curio": curio}
