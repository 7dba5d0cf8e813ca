"""Mail players can sort by eye (issue 17, "What it must do besides"): a
scripted week of each game over SMTP, then every mail the server sent is
read as a player's mail client would show it:

* the Subject names the game (and turn or board) and says whether anything
  was refused;
* every mail of one game names the game's thread root in References, so the
  client keeps them together; a curio board is a thread of its own; a reply
  still answers the player's own mail (In-Reply-To);
* a mail with an HTML part says there what its text part says: the next
  deadline, the seed lines, "No orders for ... from".
"""

from __future__ import annotations

import html as html_lib
import re

import pytest

from tests.harness import PbmServer
from tests.server.weeks import PW, WEEKS, addr, players, send

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

DOMAIN = "pbm.test"


def root_of(pbm: PbmServer, game: str, thread: str = "") -> str:
    (gid,) = pbm.sql("SELECT id FROM games WHERE name = :n", n=game)[0]
    return f"<game.{game}.{gid}{'.' + thread if thread else ''}@{DOMAIN}>"


def from_game(pbm: PbmServer, game: str) -> list:
    pbm.settle()
    return [m for m in pbm.all_sent() if m["From"].addresses[0].addr_spec == f"{game}@{DOMAIN}"]


def html_text(msg) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", PbmServer.html(msg) or "")).split())


def facts(text: str) -> list[str]:
    """What both parts must carry: the deadline, the seed lines and who sent
    no orders (each as one flattened line), and every seed and hash."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("Next deadline:", "No orders for", "On vacation")):
            found.append(" ".join(line.split()))
        if line.startswith(("Random seed of", "SHA-256 of the seed of", "Its SHA-256")):
            found.append(" ".join((line + " " + lines[i + 1]).split()))
    return found


def check_both_parts(msg) -> int:
    """Every fact of the text part is in the HTML part; how many there were."""
    if PbmServer.html(msg) is None:
        return 0
    wanted = facts(PbmServer.text(msg))
    shown = html_text(msg)
    missing = [f for f in wanted if f not in shown]
    assert not missing, f"{msg['Subject']}: the HTML part lacks {missing}"
    return len(wanted)


def check_game_mail(pbm: PbmServer, game: str, roots: set[str]) -> list:
    """Every mail of the game: its Subject names the game, its References
    start at one of the game's thread roots; a reply's Subject says REFUSED
    exactly when its text does."""
    mails = from_game(pbm, game)
    assert mails
    for m in mails:
        subject = str(m["Subject"])
        assert game in subject.lower(), subject
        refs = str(m["References"]).split()
        assert refs and refs[0] in roots, (subject, refs, roots)
        assert m["In-Reply-To"], subject
        if m["Auto-Submitted"] == "auto-replied":
            assert refs[-1] == m["In-Reply-To"] != refs[0]  # answers the player's own mail
            assert ("REFUSED" in subject) == ("REFUSED" in pbm.text(m)), (subject, pbm.text(m))
            assert subject != "Your mail to pbm-server" and not subject.startswith("Re:")
        else:
            assert m["In-Reply-To"] == refs[0]
    return mails


def subjects_to(pbm: PbmServer, handle: str, game: str) -> list[str]:
    return [str(m["Subject"]) for m in from_game(pbm, game) if m["To"] == addr(handle)]


@pytest.mark.parametrize("kind", sorted(WEEKS))
def test_a_week_of_each_game_reads_well_in_a_mail_client(pbm, kind):
    game = WEEKS[kind](pbm)
    roots = {root_of(pbm, game)}
    if kind == "curio":
        roots = {root_of(pbm, game, "board.101"), root_of(pbm, game, "board.102")}
    mails = check_game_mail(pbm, game, roots)
    assert sum(check_both_parts(m) for m in mails) > 0 or kind == "curio"
    # the mails to pbm@ (register, confirm) say so, and name no game
    for m in pbm.inbox(addr("ann")):
        if m["From"].addresses[0].addr_spec == f"pbm@{DOMAIN}":
            assert str(m["Subject"]).startswith("pbm-server: "), m["Subject"]


def test_giveaway_subjects_say_what_became_of_each_order(pbm):
    WEEKS["giveaway"](pbm)
    ann, bob, cat = (subjects_to(pbm, h, "gift") for h in ("ann", "bob", "cat"))
    assert "gift round 1: JOIN accepted" in ann
    assert "gift round 1: order held (1 line)" in ann
    assert "gift round 1: order held (2 lines)" in bob
    assert "gift round 1: 1 line REFUSED" in cat
    assert any(s.startswith("gift: round 1 report") for s in cat)
    # a refused line beside a kept order says both
    assert "gift round 1: 1 line REFUSED, order held (1 line)" in ann
    reply = send(pbm, "ann", "gift", "GIVE 1 TO nobody")
    assert reply["Subject"] == "gift round 2: 1 line REFUSED"
    # a wrong password: nothing done, and the Subject says so
    wrong = pbm.mail(addr("bob"), "gift", "GIVE 18 TO cat\n$$not-bobs-password$$")
    assert wrong["Subject"] == "gift: password not accepted, nothing done"


def test_rmpm_report_names_the_game_and_marks_the_readers_chips(pbm):
    WEEKS["rmpm"](pbm)
    reports = [m for m in from_game(pbm, "world") if "report of week 2" in str(m["Subject"])]
    to_ann = next(m for m in reports if m["To"] == addr("ann"))
    assert to_ann["Subject"] == "world: report of week 2"
    assert "No orders for week 2 from: bob" in pbm.text(to_ann)
    assert "No orders for week 2 from: bob" in html_text(to_ann)
    assert "Next deadline:" in html_text(to_ann) and "SHA-256 of the seed of week 3" in html_text(to_ann)
    # the reader's own chips are framed and named in words (no hover needed)
    html = pbm.html(to_ann)
    assert html.count('class="mine"') == 2, html
    assert "Your chips (bd): " in html_text(to_ann)
    # the text report stays the same for every player (it is the game's public report)
    assert "Your chips" not in pbm.text(to_ann)
    to_bob = next(m for m in reports if m["To"] == addr("bob"))
    assert "Your chips (ir): " in html_text(to_bob)


def test_a_curio_board_is_a_thread_and_names_the_last_move(pbm):
    WEEKS["curio"](pbm)
    b101, b102 = root_of(pbm, "curio", "board.101"), root_of(pbm, "curio", "board.102")
    mails = from_game(pbm, "curio")
    assert {str(m["References"]).split()[0] for m in mails} == {b101, b102}
    for m in mails:
        board = "102" if str(m["References"]).split()[0] == b102 else "101"
        assert f"board {board}" in str(m["Subject"]).lower(), m["Subject"]
    refused = [m for m in mails if "REFUSED" in str(m["Subject"])]
    assert [str(m["Subject"]) for m in refused] == ["curio board 101: 1 line REFUSED"]
    bob_board = [m for m in pbm.inbox(addr("bob")) if "played" in str(m["Subject"])][-1]
    text = pbm.text(bob_board)
    assert "Last move: Light " in text and "Its squares are marked * on the board." in text
    assert text.count("*") >= 3  # the line above and the two squares
    assert "Last move: Light " in html_text(bob_board) and "framed on the board" in html_text(bob_board)
    assert len(re.findall(r'<td [^>]*class="[a-z]+ last"', pbm.html(bob_board))) == 2


def test_curio_names_the_captured_piece_as_each_side_saw_it(pbm):
    from games.curio.boards import CurioState
    from games.curio.model import Move

    WEEKS["curio"](pbm)
    state = CurioState.from_state(pbm.state("curio"))
    for _ in range(12):  # play until someone captures
        pos = state.boards[101].position
        side = pos.to_move
        who = state.boards[101].handle(side)
        moves = pos.legal_moves(side)
        capture = next((m for m in moves if m.capture), None)
        move: Move = capture or sorted(moves, key=lambda m: m.plain)[0]
        pbm.mail(addr(who), "curio", f"move 101 {who} {PW[who]} {move.plain}")
        state = CurioState.from_state(pbm.state("curio"))
        if capture:
            break
    assert capture is not None, "no capture within 12 moves"
    pbm.settle()
    victim = "bob" if who == "ann" else "ann"
    told = [m for m in pbm.inbox(addr(victim)) if "board 101" in str(m["Subject"]).lower()][-1]
    assert "capturing your piece [" in pbm.flat(told), pbm.text(told)
    reply = [m for m in pbm.inbox(addr(who)) if "board 101" in str(m["Subject"]).lower()][-1]
    assert re.search(r"capturing (Light|Dark)'s piece \(\d\)", pbm.flat(reply)), pbm.text(reply)


def test_gm_actions_are_announced_to_the_players_they_touch(pbm):
    players(pbm, "ann", "bob", "cat", "dan")
    pbm.new_game("giveaway", "gift")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "JOIN")
    pbm.cli("game", "add-player", "gift", "dan")
    pbm.settle()
    told = [m for m in from_game(pbm, "gift") if m["Subject"] == "gift: the game master added you"]
    assert [m["To"] for m in told] == [addr("dan")]
    assert "added you to gift" in pbm.flat(told[0]) and "gift@pbm.test" in pbm.flat(told[0])
    assert "gift: the game master added dan" in subjects_to(pbm, "ann", "gift")
    pbm.cli("game", "remove-player", "gift", "cat")
    pbm.settle()
    told = [m for m in from_game(pbm, "gift") if m["Subject"] == "gift: the game master removed you"]
    assert [m["To"] for m in told] == [addr("cat")]
    assert "removed you from gift" in pbm.flat(told[0])
    assert "gift: the game master removed cat" in subjects_to(pbm, "bob", "gift")
    assert "gift: the game master removed cat" not in subjects_to(pbm, "cat", "gift")
    pbm.cli("game", "set", "gift", "grace=6h")
    pbm.settle()
    (changed,) = [m for m in from_game(pbm, "gift") if m["To"] == addr("ann") and "settings" in str(m["Subject"])]
    assert "grace period after the deadline: 6h" in pbm.flat(changed)
    pbm.cli("game", "pause", "gift")
    pbm.cli("game", "resume", "gift")
    pbm.settle()
    assert {"gift is paused", "gift is running again"} <= set(subjects_to(pbm, "dan", "gift"))
    check_game_mail(pbm, "gift", {root_of(pbm, "gift")})


def test_gm_set_is_announced_to_the_character_s_player(pbm):
    WEEKS["agora_rpg"](pbm)
    (told,) = [m for m in from_game(pbm, "town") if "changed your tokens" in str(m["Subject"])]
    assert told["To"] == addr("bob") and told["Subject"] == "town: the game master changed your tokens"
    assert "The Game Master has set the tokens of your character: bob's tokens is now 9." in pbm.flat(told), pbm.flat(told)
    assert not [m for m in pbm.inbox(addr("ann")) if "changed your" in str(m["Subject"])]
