"""A rolled-back turn and its public seed (issue 41, item 4).

A turn's report reveals its seed, and the game page, its JSON twin, the feed
and the turn page show it.  ``pbm turn rollback NAME N`` used to reopen turn
N with that same seed: the players could then change their orders knowing
every draw of the turn.  Now the reopened turn gets a new seed whose hash is
published (the JSON twin, ``status``, the mail about the rollback) and which
the rerun reveals; ``--same-seed`` keeps the old one for a GM who only
corrects a mistake, and the turn then takes no orders until it has run.  A
later turn whose seed was revealed before the rollback never gets it back
either; one whose hash was published but whose seed was not keeps it.

Through the real server: the rollback on the command line, orders and
``status`` by SMTP, the published hash read from the JSON twin over HTTP."""

from __future__ import annotations

import hashlib
import json
import re

from tests.harness import PbmServer
from tests.server.test_web_pages import settled

HEX = r"\s+([0-9a-f]{64})"


def sha(seed: str) -> str:
    return hashlib.sha256(bytes.fromhex(seed)).hexdigest()


def open_hash(pbm: PbmServer, unlike: str | None = None) -> str:
    """The open turn's seed hash the JSON twin publishes (once it is no longer ``unlike``)."""
    body = settled(pbm, "/games/ring1.json", lambda st, b: json.loads(b)["open_turn_seed_sha256"] != unlike)[2]
    return str(json.loads(body)["open_turn_seed_sha256"])


def order(pbm: PbmServer, who: str, line: str) -> str:
    return pbm.flat(pbm.mail(f"{who}@example.org", "ring1", f"{line}\n$${who}-pass-1$$"))


def status_hash(pbm: PbmServer, turn: int) -> str:
    text = pbm.text(pbm.mail("ann@example.org", "pbm", "status ring1\n$$ann-pass-1$$"))
    return re.search(rf"SHA-256 of the seed of round {turn}:{HEX}", text).group(1)


def reports(pbm: PbmServer, turn: int) -> list[str]:
    return [pbm.text(m) for m in pbm.inbox("ann@example.org") if str(m["Subject"]) == f"ring1: round {turn} report"]


def revealed(report: str, turn: int) -> str:
    return re.search(rf"Random seed of round {turn}:{HEX}", report).group(1)


def rollback_mail(pbm: PbmServer) -> str:
    pbm.settle()
    [told] = [m for m in pbm.inbox("bob@example.org") if str(m["Subject"]) == "ring1: round 1 rolled back"]
    return pbm.text(told)


def test_a_rolled_back_turn_gets_a_new_seed_whose_hash_is_published(pbm: PbmServer):
    pbm.game_of_three()
    published1 = open_hash(pbm)
    assert "accepted" in order(pbm, "ann", "GIVE 3 TO bob")
    pbm.run_turn("ring1")
    [first] = reports(pbm, 1)
    old = revealed(first, 1)  # public now: in the report, on the pages
    assert sha(old) == published1
    published2 = open_hash(pbm, unlike=published1)

    pbm.cli("turn", "rollback", "ring1", "1")
    # the reopened round's published hash is a new one, everywhere it is shown
    fresh = open_hash(pbm, unlike=published2)
    assert fresh not in (published1, published2)
    assert status_hash(pbm, 1) == fresh
    # the mail says so and gives the new hash on a line of its own
    told = rollback_mail(pbm)
    assert "the turn gets a new seed" in " ".join(told.split()), told
    assert f"  {fresh}" in told.splitlines() and published1 not in told
    # orders may change: the draws are not known to anybody
    assert "accepted" in order(pbm, "bob", "GIVE 3 TO cat")
    pbm.run_turn("ring1")
    rerun = reports(pbm, 1)[-1]
    seed = revealed(rerun, 1)
    assert seed != old and sha(seed) == fresh
    # round 2's hash was published but its seed never revealed: it stands
    assert re.search(rf"SHA-256 of the seed of round 2:{HEX}", rerun).group(1) == published2


def test_same_seed_keeps_the_dice_and_takes_no_orders_until_the_turn_has_run(pbm: PbmServer):
    pbm.game_of_three()
    for who, to in (("ann", "bob"), ("bob", "cat"), ("cat", "ann")):
        assert "accepted" in order(pbm, who, f"GIVE 3 TO {to}")
    pbm.run_turn("ring1")
    old1 = revealed(reports(pbm, 1)[0], 1)
    pbm.run_turn("ring1")
    old2 = revealed(reports(pbm, 2)[0], 2)  # round 2's seed is public too
    published3 = open_hash(pbm, unlike=sha(old2))

    proc = pbm.cli("turn", "rollback", "ring1", "1", "--same-seed")
    assert "with the same seed" in proc.stdout
    assert open_hash(pbm, unlike=published3) == sha(old1) == status_hash(pbm, 1)
    told = " ".join(rollback_mail(pbm).split())
    assert "with the same random numbers" in told and "no orders are taken until round 1 has run again" in told, told
    assert "new seed" not in told

    # new orders (and CHECKs of them) are refused with the reason, and change nothing
    state = pbm.state("ring1")
    for body in ("GIVE 1 TO cat", "CHECK\nGIVE 1 TO cat", "JOIN"):
        reply = order(pbm, "ann", body)
        assert "REFUSED" in reply and "no orders are taken until round 1 has run again" in reply, reply
        assert "accepted" not in reply
    assert pbm.state("ring1") == state

    # run again, round 1 draws the same: its seed is the revealed one
    pbm.run_turn("ring1")
    rerun = reports(pbm, 1)[-1]
    assert revealed(rerun, 1) == old1
    # round 2's old seed was revealed: the reopened round 2 gets a new one
    new2 = re.search(rf"SHA-256 of the seed of round 2:{HEX}", rerun).group(1)
    assert new2 != sha(old2)
    # and once round 1 has run, orders are taken again
    holding = next(p["holding"] for p in pbm.state("ring1")["players"] if p["handle"] == "ann")
    assert "accepted" in order(pbm, "ann", f"GIVE {holding} TO bob")


def test_the_gm_asks_for_the_same_seed_by_mail_too(pbm: PbmServer):
    pbm.register("gm", "gm-secret9", email="gm@example.org")
    pbm.game_of_three()
    pbm.run_turn("ring1")
    old1 = revealed(reports(pbm, 1)[0], 1)

    def desk(line: str) -> str:
        return pbm.flat(pbm.mail("gm@example.org", "pbm", f"{line}\n$$gm-secret9$$", subject="desk"))

    # a flag it does not know is refused with the usage, and changes nothing
    reply = desk("turn rollback ring1 1 --same")
    assert "REFUSED" in reply and "turn rollback NAME N [--same-seed]" in reply, reply
    assert pbm.sql("SELECT turn FROM games WHERE name = 'ring1'") == [(2,)]
    reply = desk("turn rollback ring1 1 --same-seed")
    assert "ring1 is back before round 1, with the same seed" in reply, reply
    assert status_hash(pbm, 1) == sha(old1)
    assert "no orders are taken until round 1 has run again" in order(pbm, "bob", "GIVE 3 TO cat")
    assert "same seed" in pbm.sql("SELECT detail FROM audit_log WHERE action = 'turn rollback'")[0][0]
