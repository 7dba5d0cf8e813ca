"""Games at their design size through the whole server (issue 15.6): the
server's real turn path, the reports delivered to the relay sink and read
there, the database rows they leave.  Nothing is timed; what is checked is
what a player or the operator would see: every player gets one report, it
holds their own part of the game and stays small, the whole report is there
for `history`, and no row holds every player's report.

The games and their players' accounts are stored directly (one password hash
for all: 10,000 Argon2 hashes would take minutes); the orders that change go
in as mails over one SMTP connection.  Marked ``scale``: CI runs them in a
step of their own (.ci/run)."""

from __future__ import annotations

import re
import smtplib
from datetime import timedelta
from email import message_from_bytes
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.policy import compat32
from email.utils import make_msgid

import pytest

from benchmarks.bench_giveaway import make_state
from tests.harness import PbmServer, wait_until

pytestmark = pytest.mark.scale

PASSWORD = "scale-secret-1"


def store_game(pbm: PbmServer, kind: str, name: str, state: dict, handles: list[str]) -> None:
    """The game and one account per player, as the server's own code writes them."""
    from pbm_server.accounts.passwords import hash_password
    from pbm_server.play.creation import create_game
    from pbm_server.store.db import Database
    from pbm_server.store.models import Account, Membership

    db = Database(pbm.db_url)
    db.upgrade()
    now = pbm.now()  # the server's clock (a test's, not the real one)
    hashed = hash_password(PASSWORD)
    pbm.secrets.add(PASSWORD)
    with db.write() as s:
        game = create_game(s, kind, name, {}, None, now, state=state)
        s.add_all(Account(handle=h, handle_key=h.lower(), handle_skeleton=h.lower(), email=f"{h.lower()}@example.org",
                          password_hash=hashed, created_at=now) for h in handles)
        s.flush()
        ids = dict(s.execute(Account.__table__.select().with_only_columns(Account.handle, Account.id)).all())
        s.add_all(Membership(game_id=game.id, account_id=ids[h], role="player", joined_at=now) for h in handles)
    db.dispose()


def send_many(pbm: PbmServer, mails: list[tuple[str, str, str]]) -> list[str]:
    """(sender, recipient, body) over one SMTP connection; the Message-IDs."""
    ids = []
    with smtplib.SMTP("127.0.0.1", pbm.port, timeout=60) as smtp:
        for frm, to, body in mails:
            msg = EmailMessage()
            msg["From"], msg["To"], msg["Subject"] = frm, pbm.address(to), "orders"
            msg["Message-ID"] = make_msgid(domain="example.org")
            msg.set_content(body)
            smtp.send_message(msg)
            ids.append(msg["Message-ID"])
    return ids


def reports_of(pbm: PbmServer, subject: str) -> dict[str, str]:
    """recipient -> text of every mail with ``subject`` the relay got.
    Read with the email package's compat32 policy, which leaves headers as
    strings (a fifth of the test's time went to parsing 10,000 reports with
    the default policy's header objects); a Subject that is an encoded word
    is decoded as the default policy would."""
    out = {}
    for rcpts, raw in pbm.sink.raw():
        msg = message_from_bytes(raw, policy=compat32)
        if subject in str(make_header(decode_header(msg["Subject"] or ""))):
            assert rcpts[0] not in out, f"{rcpts[0]} got two reports"
            out[rcpts[0]] = _plain_text(msg)
    return out


def _plain_text(msg) -> str:
    """The mail's text/plain part, decoded (as PbmServer.text reads it)."""
    for part in msg.walk():
        if part.get_content_type() == "text/plain" and not part.get_filename():
            payload = part.get_payload(decode=True)
            return payload.decode(part.get_content_charset() or "ascii").replace("\r\n", "\n")
    return ""


def turn_run(pbm: PbmServer, name: str, reports: int, subject: str, timeout: float = 300) -> dict[str, str]:
    """Run the open turn (the CLI, as the GM would) and read the reports the
    relay got: ``reports`` of them, and no more."""
    before = len(pbm.sink.handler.messages)
    proc = pbm.cli("turn", "run", name)
    assert "processed" in proc.stdout, proc.stdout + proc.stderr
    # counted raw: parsing every mail on every look would cost more than the server's work
    wait_until(lambda: len(pbm.sink.handler.messages) - before >= reports, timeout, f"{reports} reports at the relay")
    pbm.settle()
    found = reports_of(pbm, subject)
    assert len(found) == reports
    return found


def observer(pbm, game: str) -> str:
    """An account that observes ``game`` (as a mail asks for it); its address."""
    watcher = "watcher@example.org"
    pbm.secrets.add("watcher-secret-1")
    pbm.cli("account", "add", "watcher", watcher, "--password", "watcher-secret-1")
    assert f"you now observe {game}" in pbm.flat(pbm.mail(watcher, "pbm", f"observe {game}\n$$watcher-secret-1$$"))
    return watcher


def test_giveaway_round_of_10000_players(pbm_stopped):
    pbm = pbm_stopped
    n = 10_000
    state, planted = make_state(n, seed=3)
    handles = [p["handle"] for p in state["players"]]
    holding = {p["handle"]: p["holding"] for p in state["players"]}
    store_game(pbm, "giveaway", "big", state, handles)
    pbm.start()

    # 30 players change their orders (each to give all to one of the first
    # 30), one order is refused; all over one connection
    changers = handles[-30:]
    to = dict(zip(changers, handles, strict=False))
    mails = [(f"{h}@example.org", "big", f"$${PASSWORD}$$\nGIVE {holding[h]} TO {to[h]}\n") for h in changers]
    mails.append((f"{handles[1]}@example.org", "big", f"$${PASSWORD}$$\nGIVE {holding[handles[1]]} TO nobody-here\n"))
    ids = send_many(pbm, mails)
    wait_until(lambda: all(pbm.replies_to(i) for i in ids), 120, "the replies to the order mails")
    for h, i in zip(changers, ids, strict=False):
        reply = pbm.text(pbm.replies_to(i)[0])
        assert f"accepted: {holding[h]} points to {to[h]}" in reply, reply
    refused = pbm.text(pbm.replies_to(ids[-1])[0])
    assert "there is no player 'nobody-here' in this game" in refused
    assert "and 9979 more" in refused  # 20 names listed, not 10,000
    # the orders went in as entries: the document was not rewritten per mail
    entries = pbm.sql("SELECT count(*) FROM state_entries")[0][0]
    assert entries == 30
    assert pbm.state("big")["orders"][changers[-1]] == [[holding[changers[-1]], to[changers[-1]]]]

    reports = turn_run(pbm, "big", n, "big: round 5 report")
    sizes = sorted(len(t) for t in reports.values())
    assert sizes[-1] < 6000, f"the largest report has {sizes[-1]} characters"
    # a changer's own part: what they gave, by the order their mail set
    mine = reports[f"{changers[-1]}@example.org"]
    last = changers[-1]
    assert f"You held {holding[last]} and gave {holding[last]} to {to[last]}." in mine
    assert "Standings: the top 10 and you" in mine
    place = re.search(r"You scored (\d+): place (\d+) of 10000\.", mine)
    assert place, mine
    # the standings' top is the same in every report, and holds the highest score
    top = [re.search(r"^\s*1  (\S+) .* (\d+)\s+(\S+)\s*$", t, re.M) for t in (mine, reports[f"{handles[7]}@example.org"])]
    assert top[0] and top[1] and top[0].group(1) == top[1].group(1)
    assert int(top[0].group(2)) >= int(place.group(1))
    # a planted ring's member reads the ring in their own report
    ring = planted[0].rstrip(":")
    member = ring.split(" > ")[0]
    assert ring in reports[f"{member}@example.org"].replace("\n    ", " ")
    assert "mail \"history big\" to pbm@" in mine

    # the rows: one per player, each small; the whole report once
    count, longest = pbm.sql("SELECT count(*), max(length(text)) FROM turn_reports")[0]
    assert count == n and longest < 6000
    whole = pbm.sql("SELECT report FROM snapshots WHERE phase = 'after'")[0][0]
    assert f"{last} held {holding[last]} and gave {holding[last]} to {to[last]}." in whole
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0  # the turn wrote the state whole
    after = pbm.state("big")
    assert after["orders"] == {} and (after["round"] == 6 or after["status"] == "over")

    # history gives the whole report: every player's line
    hist = pbm.mail(f"{handles[5]}@example.org", "pbm", f"$${PASSWORD}$$\nhistory big", timeout=120)
    text = pbm.text(hist)
    assert f"{handles[-1]} held {holding[handles[-1]]}" in text and f"{handles[1234]} held" in text


def test_rmpm_week_of_1000_players(pbm_stopped):
    from benchmarks.bench_turns import rmpm_state

    pbm = pbm_stopped
    n = 1000
    state, handles = rmpm_state(n)
    store_game(pbm, "rmpm", "rich", state, handles)
    pbm.start()

    # ten players send their orders again by mail, over one connection
    senders = handles[:10]
    ids = send_many(pbm, [(f"{h}@example.org", "rich", f"$${PASSWORD}$$\n" + "\n".join(state["orders"][h]) + "\n")
                          for h in senders])
    wait_until(lambda: all(pbm.replies_to(i) for i in ids), 120, "the replies to the order mails")
    for i in ids:
        assert "accepted" in pbm.text(pbm.replies_to(i)[0])

    # an observer of the large game gets the public whole, not a player's part
    watcher = observer(pbm, "rich")

    reports = turn_run(pbm, "rich", n + 1, "report of week")
    observed = reports.pop(watcher)
    assert "INVENTORY OF THE PLAYERS" in observed and " player 1000 " in observed
    assert "YOUR WEEK" not in observed and "WHAT HAPPENED TO YOU:" not in observed
    longest = max(len(t) for t in reports.values())
    assert longest < 12_000, f"the largest report has {longest} characters"
    for number in (1, 500, 1000):
        text = reports[f"p{number:04d}@example.org"]
        assert f"YOUR WEEK ({n} players on the board" in text
        assert re.search(rf"^{number:02d} \S\S player {number} ", text, re.M), text
        assert f"THE RICHEST 10 OF {n} (YOU ARE NUMBER " in text
        assert 'mail "history rich" to pbm@' in " ".join(text.split())
    # what happened to a player is in their own report, not in the others'
    own = reports["p0001@example.org"].split("WHAT HAPPENED TO YOU:")
    assert len(own) == 2

    count, stored = pbm.sql("SELECT count(*), max(length(text)) FROM turn_reports")[0]
    assert count == n and stored < 12_000
    whole = pbm.sql("SELECT report FROM snapshots WHERE phase = 'after'")[0][0]
    assert "INVENTORY OF THE PLAYERS" in whole and " player 1000 " in whole
    assert pbm.sql("SELECT turn FROM games WHERE name = 'rich'")[0][0] == 2


def test_sequence_deadline_of_250_players_after_2500_plays(pbm_stopped):
    from benchmarks.bench_sequence_orders import START, make_state

    pbm = pbm_stopped
    n = 250
    state, writers = make_state(n, 2_400)  # ten players have not played yet
    handles = list(state["players"])
    store_game(pbm, "sequence", "four", state, handles)
    pbm.set_clock(START + timedelta(minutes=50))  # the game's time: no digest is due
    pbm.start()
    document = pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'four'")[0][0]

    # the ten play all their pieces by mail, ten plays to a mail, over one connection
    pieces = {h: state["players"][h]["pieces"] for h in writers}
    ids = send_many(pbm, [(f"{h}@example.org", "four",
                           f"$${PASSWORD}$$\n" + "\n".join(f"Piece {k}: {v}, {m}" for k, (v, m) in enumerate(pieces[h], 1)))
                          for h in writers])
    wait_until(lambda: all(pbm.replies_to(i) for i in ids), 120, "the replies to the play mails")
    for h, i in zip(writers, ids, strict=True):
        reply = pbm.flat(pbm.replies_to(i)[0])
        assert reply.startswith(f"Hello {h},") and reply.count("accepted: play ") == 10, reply
        assert "0 pieces left" in reply
    # the plays went in as entries: the document was not rewritten per mail
    assert pbm.sql("SELECT d.state FROM game_documents d JOIN games g ON g.id = d.game_id WHERE g.name = 'four'")[0][0] == document
    assert pbm.sql("SELECT field, count(*) FROM state_entries GROUP BY field ORDER BY field") == [
        ("players", 10), ("plays", 100)]
    seen = pbm.state("four")
    assert len(seen["plays"]) == 2_500

    # an observer gets the public whole; each player their own part
    watcher = observer(pbm, "four")
    reports = turn_run(pbm, "four", n + 1, "four: final report")
    observed = reports.pop(watcher)
    last = seen["plays"]["2500"].split()
    assert re.search(rf"^\s*2500 {last[0]}\s", observed, re.M) and "Your plays" not in observed
    longest = max(len(t) for t in reports.values())
    assert longest < 4_000, f"the largest report has {longest} characters"
    winner = re.search(r"^The winner is (\S+) with (\d+) points\.$", observed, re.M)
    assert winner
    for h in (writers[-1], handles[0], handles[137]):
        text = reports[f"{h}@example.org"]
        assert f"The winner is {winner.group(1)} with {winner.group(2)} points." in text
        assert "250 players made 2500 plays; the final total is " in text
        # the player's own plays: all ten, each with its number and what it did
        played = sorted(n for n in pbm.state("four")["players"][h]["played"] if n)
        assert len(played) == 10
        for number in played:
            assert re.search(rf"^\s*{number} {h}\s", text, re.M), (number, text)
        place = re.search(rf"^You scored (\d+): place (\d+) of {n}\.$", text, re.M)
        assert place, text
        row = re.search(rf"^\s*{place.group(2)}\. {h}\s+{place.group(1)}$", text, re.M)
        assert row, text  # the player's own row of the standings
        assert re.search(rf"^\s*1\. {winner.group(1)}\s+{winner.group(2)}$", text, re.M)
        assert 'mail "history four" to pbm@' in " ".join(text.split())

    # the rows: one per player, each small; the whole report once
    count, stored = pbm.sql("SELECT count(*), max(length(text)) FROM turn_reports")[0]
    assert count == n and stored < 4_000
    whole = pbm.sql("SELECT report FROM snapshots WHERE phase = 'after'")[0][0]
    assert re.search(rf"^\s*2500 {last[0]}\s", whole, re.M) and re.search(r"^\s*1 \S+\s", whole, re.M)
    assert pbm.sql("SELECT count(*) FROM state_entries")[0][0] == 0  # the deadline wrote the state whole

    # history gives the whole report: every play
    text = pbm.text(pbm.mail(f"{handles[5]}@example.org", "pbm", f"$${PASSWORD}$$\nhistory four", timeout=120))
    assert re.search(rf"^\s*2500 {last[0]}\s", text, re.M) and re.search(r"^\s*1234 \S+\s", text, re.M)
