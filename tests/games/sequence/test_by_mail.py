"""The Fourth Game played by mail over SMTP, through a real `pbm serve`."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from games.sequence import RULES
from tests.games import driver

GAME = "four"
PLAYERS = {  # handle -> address (pieces 1-5 come from the address's letters)
    "ann": "ann@example.org",        # a n n e x: 1 14 14 5 24
    "bob": "bob@example.org",        # b o b e x: 2 15 2 5 24
    "cid": "cid@example.org",        # c i d e x: 3 9 4 5 24
    "dk": "dklein00@example.org",    # d k l e i: 4 11 12 5 9 (the seed's example)
}


def wait_for_subject(pbm, addr: str, subject: str, timeout: float = 30) -> list:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = [m for m in pbm.inbox(addr) if m["Subject"] == subject]
        if found:
            return found
        time.sleep(0.1)
    got = [m["Subject"] for m in pbm.inbox(addr)]
    raise AssertionError(f"no mail {subject!r} to {addr}; got {got}")


def setup_game(pbm) -> None:
    for handle, email in PLAYERS.items():
        pbm.register(handle, f"pw-{handle}-77", email=email)
    pbm.new_game("sequence", GAME)
    for handle, email in PLAYERS.items():
        reply = flat(pbm.text(pbm.mail(email, GAME, f"JOIN\n$$pw-{handle}-77$$")))
        assert "accepted: you are player" in reply, reply


def flat(text: str) -> str:
    """The text with every run of white space as one space (replies wrap
    long result lines)."""
    return " ".join(text.split())


def play(pbm, handle: str, *lines: str) -> str:
    """Send a mail with these lines; return the reply's text, flattened."""
    body = "\n".join(lines) + f"\n\n$$pw-{handle}-77$$\n"
    return flat(pbm.text(pbm.mail(PLAYERS[handle], GAME, body)))


def test_four_players_play_by_mail_up_to_the_deadline(pbm):
    setup_game(pbm)
    dk = pbm.text(pbm.mail(PLAYERS["dk"], GAME, "PIECES"))
    assert "  Piece  1: value  4, multiplier 1" in dk
    assert "  Piece  5: value  9, multiplier 5" in dk
    assert "  Piece 10: value  6, multiplier 0" in dk

    assert "accepted: you will get a mail for every play" in play(pbm, "bob", "MAIL EACH")
    assert "accepted: no mails about plays" in play(pbm, "cid", "mail none")

    reply = play(pbm, "dk", "Piece Number 3: -12, 3.")
    assert "accepted: play 1, total -12, no multiple of 7 or 24" in reply
    reply = play(pbm, "bob", "Piece 1: -2, 1")
    assert "accepted: play 2, total -14 = -2 x 7, scores 5; your score 5" in reply
    reply = play(pbm, "ann", "Piece 2: 14, 2", "Piece 3: 14, 3")
    assert "accepted: play 3, total 0 = 0 x 7 = 0 x 24, scores 30; your score 30" in reply
    assert "accepted: play 4, total 14 = 2 x 7, no points: nobody played between" in reply
    reply = play(pbm, "cid", "piece 6: -6, 0")
    assert "accepted: play 5, total 8" in reply
    reply = play(pbm, "cid", "Piece 6: -6, 0", "Piece 7: 6, 1")
    assert "piece 6 is used already (play 5)" in reply
    assert "piece 7 has the point multiplier 0, not 1" in reply
    reply = play(pbm, "dk", "Piece 1: 5, 1", "Piece 2: -11, 2")
    assert "piece 1 has the sequence value 4, not 5" in reply
    assert "accepted: play 6, total -3" in reply
    reply = play(pbm, "bob", "Piece 5: 24, 5")
    assert "accepted: play 7, total 21 = 3 x 7, scores 25; your score 30" in reply
    # a player who has not joined
    pbm.register("eve", "pw-eve-77", email="eve@example.org")
    reply = flat(pbm.text(pbm.mail("eve@example.org", GAME, "Piece 1: 5, 1\n$$pw-eve-77$$")))
    assert "you are not a player of this game: send JOIN first" in reply

    # bob asked for a mail per play: one for each play by someone else
    pbm.settle()
    bob_plays = [m for m in pbm.inbox(PLAYERS["bob"]) if m["Subject"].startswith(f"{GAME}: play")]
    assert [m["Subject"] for m in bob_plays] == [
        "four: play 1, total -12", "four: play 3, total 0", "four: play 4, total 14",
        "four: play 5, total 8", "four: play 6, total -3"]
    text = pbm.text(bob_plays[1])
    assert "Play 3: ann played piece 2 (+14, multiplier 2)." in text
    assert "The total is now 0 = 0 x 7 = 0 x 24: scores 30." in text
    assert "    1. ann                      30" in text
    before = {h: len(pbm.inbox(e)) for h, e in PLAYERS.items()}

    # the deadline
    pbm.run_turn(GAME)
    for handle, email in PLAYERS.items():
        mails = pbm.wait_for(email, before[handle] + 1)
        (report,) = [m for m in mails if m["Subject"] == f"{GAME}: final report"]
        text = pbm.text(report)
        lines = text.splitlines()
        assert "     1 dk               3   -12    3    -12  no multiple of 7 or 24" in lines
        assert "     4 ann              3   +14    3     14  no points: nobody played between" in lines
        assert "     7 bob              5   +24    5     21  scores 25" in lines
        assert "  bob +70: the last play that scored (play 7)" in lines
        assert "    1. bob                     100" in lines
        assert "    2. ann                      30" in lines
        assert "The winner is bob with 100 points." in lines
    # cid chose no mails about plays: only replies and the final report
    assert not [m for m in pbm.inbox(PLAYERS["cid"]) if m["Subject"].startswith(f"{GAME}: play")]

    # after the deadline nothing counts any more
    reply = play(pbm, "dk", "Piece 4: 5, 4")
    assert "REFUSED" in reply and "accepted" not in reply


def test_digest_by_mail_at_most_hourly(pbm_stopped):
    pbm = pbm_stopped
    start = datetime(2007, 12, 7, 12, 0, tzinfo=UTC)
    pbm.set_clock(start)
    pbm.start()
    setup_game(pbm)
    ann = PLAYERS["ann"]
    play(pbm, "dk", "Piece 3: 12, 3")
    play(pbm, "bob", "Piece 1: 2, 1")
    pbm.settle()
    assert not [m for m in pbm.inbox(ann) if "plays" in m["Subject"]]  # not an hour yet
    pbm.set_clock(start + timedelta(minutes=61))
    (digest,) = [m for m in wait_for_subject(pbm, ann, f"{GAME}: plays 1-2, total 14")]
    text = pbm.text(digest)
    assert "     1 dk               3   +12    3     12  no multiple of 7 or 24" in text
    assert "     2 bob              1    +2    1     14  scores 5" in text
    assert "Your score: 0; pieces left: 1 2 3 4 5 6 7 8 9 10." in text


def test_game_master_sets_pieces(pbm):
    setup_game(pbm)
    done = pbm.cli("game", "do", GAME, "SET PIECES cid 7,1 7,2 7,3 7,4 7,5 7,0 7,0 7,0 7,0 7,0")
    assert "ok" in done.stdout and "the pieces of cid are now 7,1 7,2" in done.stdout
    (notice,) = wait_for_subject(pbm, PLAYERS["cid"], f"{GAME}: your pieces were set by the game master")
    text = pbm.text(notice)
    assert "The game master set your pieces." in text
    assert "  Piece  5: value  7, multiplier 5" in text.splitlines()
    reply = play(pbm, "cid", "Piece 5: 7, 5")
    assert "accepted: play 1, total 7 = 1 x 7, scores 25; your score 25" in reply
    # not from a player
    reply = play(pbm, "ann", "SET PIECES ann " + "9,9 " * 10)
    assert "only the game master may set a player's pieces" in reply


class Mirror(driver.Table):
    """The same game played on the rules alone, the state always whole in
    memory: what the server must answer, whatever it stores."""

    def __init__(self, now: datetime) -> None:
        super().__init__(RULES, now=now, game_name=GAME)

    def email(self, handle: str) -> str:
        return PLAYERS[handle]


def test_plays_are_entries_and_read_back_the_same(pbm_stopped):
    """Every mail to a sequence game writes entries of the state (its player,
    its plays), never the document; the replies, the play mails and the
    final report are what the rules give on the whole state, and the state
    read fresh from the database -- also by a restarted server -- is the one
    the worker had in memory."""
    pbm = pbm_stopped
    start = datetime(2007, 12, 7, 12, 0, tzinfo=UTC)
    pbm.set_clock(start)
    pbm.start()
    for handle, email in PLAYERS.items():
        pbm.register(handle, f"pw-{handle}-77", email=email)
    pbm.new_game("sequence", GAME)
    document = pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = :n", n=GAME)[0][0]
    mirror = Mirror(start)
    assert pbm.state(GAME) == mirror.state

    def both(handle: str, *lines: str) -> str:
        """The mail to the server and to the mirror: every line's result is in the reply."""
        reply = play(pbm, handle, *lines)
        out = mirror.send(handle, *lines)
        for result in out.results:
            assert flat(result.message) in reply, (result.message, reply)
        assert pbm.state(GAME) == mirror.state  # a fresh read of the database
        return reply

    for handle in PLAYERS:
        assert "accepted: you are player" in both(handle, "JOIN")
    both("bob", "MAIL EACH")
    both("cid", "MAIL NONE")
    assert "accepted: play 1, total -12" in both("dk", "Piece 3: -12, 3")
    assert "accepted: play 2, total -14 = -2 x 7, scores 5" in both("bob", "Piece 1: -2, 1")
    both("ann", "Piece 2: 14, 2", "Piece 3: 14, 3")  # two plays in one mail
    assert "piece 6 is used already" in both("cid", "Piece 6: -6, 0", "Piece 6: -6, 0", "Piece 7: 6, 1")
    both("dk", "PIECES")  # changes nothing
    assert "accepted: play 6, total 32, no multiple" in both("bob", "Piece 5: 24, 5")
    # nothing rewrote the document: the joins and plays are rows of their own
    assert pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = :n", n=GAME)[0][0] == document
    rows = pbm.sql("SELECT field, count(*) FROM state_entries GROUP BY field ORDER BY field")
    assert rows == [("players", 4), ("plays", 6)]

    # bob's mails about the plays of others are the rules' own
    pbm.settle()
    got = [m for m in pbm.inbox(PLAYERS["bob"]) if m["Subject"].startswith(f"{GAME}: play")]
    sent = [n for _, out in mirror.outcomes for n in out.notices if "bob" in n.to]
    assert [m["Subject"] for m in got] == [n.subject for n in sent]
    for mail, notice in zip(got, sent, strict=True):
        assert flat(driver.render("sequence", "play.txt", {**notice.data, "viewer": "bob"})) in flat(pbm.text(mail))

    # status: the same from the worker's memory and from a restarted server
    def status() -> str:
        return pbm.text(pbm.mail(PLAYERS["ann"], "pbm", f"status {GAME}\n$$pw-ann-77$$"))

    before = status()
    (section,) = RULES.view(mirror.state, "ann")
    assert flat(driver.render("sequence", section.template, section.data)) in flat(before)
    pbm.stop()
    pbm.start()
    assert status() == before
    assert "accepted: play 8, total 44" in both("cid", "Piece 7: 6, 0", "Piece 8: 6, 0")

    # the deadline: the final report is the rules' own; the state is whole again
    outbox = {h: len(pbm.inbox(e)) for h, e in PLAYERS.items()}
    pbm.run_turn(GAME)
    (final,) = mirror.run().notices
    for handle, email in PLAYERS.items():
        (report,) = [m for m in pbm.wait_for(email, outbox[handle] + 1) if m["Subject"] == f"{GAME}: final report"]
        assert flat(driver.render("sequence", "report.txt", {**final.data, "viewer": handle})) in flat(pbm.text(report))
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0
    assert pbm.state(GAME) == mirror.state
