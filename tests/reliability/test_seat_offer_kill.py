"""A seat offer decided while a back end is killed (issue 44.2): two
substitutes send `take` for the one seat offered; the back end handling the
first take is SIGKILLed after it handled it, before its commit (each time:
the mail is set aside after its second kill, docs/reliability.md).  The
seat is decided once: nothing of the killed take is left, the second take
gets the seat, one player holds it, one "is yours" reply and one hand-over
are recorded, and the other players hear of it once."""

from __future__ import annotations

import pytest

from pbm_server.mail.inbound import store_messages
from pbm_server.store.db import Database
from tests.server.weeks import PW, addr, players, send

pytestmark = pytest.mark.process

PW.setdefault("eve", "eve-secret-77")


@pytest.mark.heavy  # about a minute: two kills and restarts of the back end before the mail is set aside
def test_a_take_killed_before_its_commit_is_decided_once(pbm_stopped):
    pbm = pbm_stopped
    pbm.start()
    players(pbm, "ann", "bob", "cat", "dan", "eve")
    pbm.new_game("giveaway", "gift")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "JOIN")
    for h in ("dan", "eve"):
        pbm.mail(addr(h), "pbm", f"available giveaway\n$${PW[h]}$$")
    assert "the seat of cat is offered" in pbm.cli("game", "offer", "gift", "cat").stdout
    pbm.settle()
    pbm.stop()
    mails = []
    for h, subject in (("dan", "take-kill"), ("eve", "take")):
        msg = pbm.build(addr(h), "gift", f"take\n$${PW[h]}$$", subject=subject)
        mails.append((msg["From"], [msg["To"]], bytes(msg)))
    db = Database(pbm.db_url)
    try:
        dan_id, eve_id = store_messages(db, mails)
    finally:
        db.dispose()
    pbm.env["PBM_FAILPOINT"] = "sigkill-before-commit:take-kill"
    pbm.start()
    pbm.wait_for(pbm.gm_address, 1, timeout=60)  # the GM hears of the mail set aside after its second kill
    pbm.settle(timeout=60)
    assert pbm.sql("SELECT status, seat FROM seat_offers") == [("taken", "cat")]
    assert pbm.sql("SELECT a.handle FROM seat_offers s JOIN accounts a ON a.id = s.taken_by") == [("eve",)]
    assert pbm.sql("SELECT count(*) FROM audit_log WHERE action = 'game replace'")[0][0] == 1
    assert dict(pbm.sql("SELECT id, status FROM inbox WHERE id IN (:a, :b)", a=dan_id, b=eve_id)) == \
        {dan_id: "shunted", eve_id: "done"}
    who = pbm.flat(pbm.mail(addr("ann"), "pbm", "who gift"))
    assert " eve " in who and " cat " not in who and " dan " not in who, who
    eve = [pbm.flat(m) for m in pbm.inbox(addr("eve"))]
    assert len([t for t in eve if "the seat of cat in gift is yours" in t]) == 1, eve
    assert not [m for m in pbm.inbox(addr("dan")) if "take" in str(m["Subject"])]
    assert len([m for m in pbm.inbox(addr("ann")) if "eve replaces cat" in str(m["Subject"])]) == 1
