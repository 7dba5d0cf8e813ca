"""Postfix in front of `pbm serve`: one mail to two of our addresses (issue 27).

Postfix's smtp(8) hands every recipient of a mail for one destination to the
listener in ONE transaction (up to smtp_destination_recipient_limit, 50 by
default): both game addresses must be read and answered.  The Postfix
instance and the server are those of tests/mta/test_postfix.py (its fixtures
and helpers, used from there); skipped without the postfix binary."""

from __future__ import annotations

import smtplib

import pytest

from tests.harness import wait_until
from tests.mta import test_postfix as mta

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

# the fixtures of test_postfix.py, used here by name
base = mta.base
smtp_path = mta.smtp_path


def test_a_mail_to_two_games_through_postfix_joins_both(smtp_path):
    pbm, postfix = smtp_path
    ann = f"ann@{mta.PLAYERS}"
    pbm.secrets.add("ann-pass1")
    pbm.cli("account", "add", "ann", ann, "--password", "ann-pass1")
    pbm.cli("game", "new", "giveaway", "ring1")
    pbm.cli("game", "new", "sequence", "seq1")
    games = [f"seq1@{mta.DOMAIN}", f"ring1@{mta.DOMAIN}"]
    msg = mta.message(ann, ", ".join(games), "JOIN\n$$ann-pass1$$")
    with smtplib.SMTP("127.0.0.1", postfix.mx, timeout=60) as smtp:
        refused = smtp.sendmail(ann, games, msg.as_bytes())
    assert refused == {}
    replies = postfix.wait_mail("ann", 2, timeout=90)
    assert sorted(m["From"].addresses[0].username for m in replies) == ["ring1", "seq1"]
    assert all(m["In-Reply-To"] == msg["Message-ID"] for m in replies)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE status = 'new'")[0][0] == 0,
               what="the inbox handled")
    # Postfix gave both recipients to the listener in one transaction: one queue id, two rows
    delivered = [ln for ln in postfix.log().splitlines() if f"127.0.0.1[127.0.0.1]:{pbm.port}" in ln
                 and "status=sent" in ln and "@" + mta.DOMAIN in ln]
    assert len(delivered) == 2 and len({ln.split(": ")[1] for ln in delivered}) == 1, delivered
    members = pbm.sql("SELECT g.name FROM memberships m JOIN games g ON g.id = m.game_id "
                      "JOIN accounts a ON a.id = m.account_id WHERE a.handle = 'ann' ORDER BY g.name")
    assert members == [("ring1",), ("seq1",)]
