"""A whole game through the mailbox path (issue 43): every mail of the
players is put into a real Dovecot mailbox with IMAP APPEND, `pbm serve`
reads it (running/mailbox.py), and every reply comes From the mailbox's
plus addresses through the relay."""

from __future__ import annotations

import json
import re
import urllib.request

from tests.harness import PbmServer, wait_until
from tests.imap.conftest import MAILBOX, Players
from tests.imap.dovecot import Dovecot
from tests.server.test_bounces import dsn


def test_a_whole_game_through_the_mailbox(pbm_mailbox: PbmServer, dovecot: Dovecot, players: Players):
    pbm = pbm_mailbox
    # mail that is not ours is left where it is, unread and never moved
    dovecot.append(pbm.build("spam@else.example", "someone@else.example", "buy now", "not ours").as_bytes())

    ann = players.register("ann", "ann-pass-1")
    bob = players.register("bob", "bob-pass-1")
    first = pbm.inbox(ann)[0]
    assert MAILBOX in str(first["From"])  # account mail comes From the bare address
    assert "@pbm.test" not in pbm.flat(first)  # the inner domain never shows

    pbm.cli("game", "new", "giveaway", "ring1")
    joined = players.mail(ann, "ring1", "JOIN\n$$ann-pass-1$$")
    assert "games+ring1@mail.test" in str(joined["From"]), joined["From"]
    players.mail(bob, "ring1", "JOIN\n$$bob-pass-1$$")
    cat = players.register("cat", "cat-pass-1")
    players.mail(cat, "ring1", "JOIN\n$$cat-pass-1$$")
    orders = players.mail(ann, "ring1", "GIVE 2 TO bob\n$$ann-pass-1$$")
    assert "GIVE 2 TO bob" in pbm.flat(orders)

    pbm.run_turn("ring1")
    reports = pbm.wait_for(bob, 4)
    report = [m for m in reports if "games+ring1@mail.test" in str(m["From"]) and "report" in str(m["Subject"]).lower()]
    assert report, [str(m["Subject"]) for m in reports]
    assert "games+ring1@mail.test" in pbm.flat(report[-1]) or "games@mail.test" in pbm.flat(report[-1])

    # every reply's return path is a plus address of the mailbox; a bounce to it comes back the same way
    path = pbm.sink.return_path(orders["Message-ID"])
    assert re.fullmatch(r"games\+b-\d+-[0-9a-f]{12}@mail\.test", path), path
    bounce = dsn(orders, ann, path).replace(b"To: " + path.encode(), b"Delivered-To: " + path.encode()
                                             + b"\r\nReturn-Path: <>\r\nTo: " + path.encode())
    dovecot.append(bounce)
    wait_until(lambda: pbm.sql("SELECT status FROM outbox WHERE message_id = :m",
                               m=orders["Message-ID"])[0][0] == "bounced", what="the reply marked bounced")

    # a mail From one of the mailbox's own addresses is a loop: dropped, never answered
    loop_id = players.send("games+ring1@mail.test", "pbm", "help", subject="looped")
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE status = 'dropped' AND note LIKE '%loop%'")[0][0]
               == 1, what="the looped mail dropped")
    # the game's page gives the addresses players write to
    with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}/games/ring1", timeout=10) as r:
        page = r.read().decode()
    assert "games@mail.test" in page and "@pbm.test" not in page

    pbm.settle()
    assert not pbm.replies_to(loop_id)
    # ours went to pbm-done, each once; the stranger's mail is still in INBOX
    assert dovecot.subjects("INBOX") == ["not ours"]
    stored = pbm.sql("SELECT count(*), count(DISTINCT imap_uid) FROM inbox WHERE imap_uid IS NOT NULL")[0]
    assert stored[0] == stored[1] == dovecot.count("pbm-done") == 12
    status = pbm.cli("mail", "status").stdout
    assert re.search(r"mailbox imap://127\.0\.0\.1:\d+/INBOX: last read 20", status), status
    with urllib.request.urlopen(f"http://127.0.0.1:{pbm.http_port}/healthz", timeout=10) as r:
        health = json.load(r)
    assert health["mailbox_last_read_at"] and health["mailbox_failing"] is False
