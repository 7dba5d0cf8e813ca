"""A game's mails are handled in the order they arrived, whichever mail a
worker picked from its look at the inbox: under the game's route key, the
mail prepared is the game's oldest waiting one (processing.Worker.prepare,
first_of_route).  A mail committed late with a smaller id (PostgreSQL hands
out ids before commit) is taken before the one picked; a route with nothing
left waiting gives nothing to do.  Real database, the real migrations, the
listener's own store_messages."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import make_msgid

from sqlalchemy import text

from pbm_server.base.settings import load_settings
from pbm_server.mail.compose import Composer
from pbm_server.mail.inbound import store_messages
from pbm_server.pipeline.worker import Worker
from pbm_server.store.db import Database, game_key


def _mail(to: str, body: str, subject: str = "orders") -> tuple[str, list[str], bytes]:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = "ann@example.org", to, subject, make_msgid()
    m.set_content(body)
    return "ann@example.org", [to], bytes(m)


def test_the_oldest_waiting_mail_of_the_route_is_prepared(pbm_stopped):
    db = Database(pbm_stopped.db_url)
    db.upgrade()
    settings = load_settings({"PBM_DATABASE_URL": pbm_stopped.db_url, "PBM_DOMAIN": pbm_stopped.domain})
    to = lambda game: f"{game}@{pbm_stopped.domain}"  # noqa: E731
    first, other, later = store_messages(db, [_mail(to("g1"), "JOIN"), _mail(to("g2"), "JOIN"),
                                              _mail(to("g1"), "GIVE 1 TO bob")])
    worker = Worker(db, settings, Composer(settings))
    try:
        # picked from a look that did not see the first (committed late)
        prep = worker.prepare(later, held=game_key("g1"))
        assert prep is not None and prep.inbox_id == first
        assert prep.mail.body.strip() == "JOIN"
        prep = worker.prepare(other, held=game_key("g2"))  # another game's own oldest
        assert prep is not None and prep.inbox_id == other

        def done(inbox_id: int) -> None:
            with db.engine.begin() as c:
                c.execute(text("UPDATE inbox SET status = 'done' WHERE id = :i"), {"i": inbox_id})

        done(first)
        prep = worker.prepare(later, held=game_key("g1"))
        assert prep is not None and prep.inbox_id == later
        assert prep.mail.body.strip() == "GIVE 1 TO bob"
        done(later)  # another worker got there first: nothing left of g1
        assert worker.prepare(later, held=game_key("g1")) is None
        # without a held route (a tool's `process`) the mail named is the one read
        prep = worker.prepare(other)
        assert prep is not None and prep.inbox_id == other
    finally:
        worker.close()
        db.dispose()


def test_a_failing_older_mail_is_the_one_set_aside(pbm_stopped):
    """The worker picked the later mail but handled the route's older one:
    when that one fails, it is the one shunted, and the picked one stays
    waiting for its turn."""
    db = Database(pbm_stopped.db_url)
    db.upgrade()
    settings = load_settings({"PBM_DATABASE_URL": pbm_stopped.db_url, "PBM_DOMAIN": pbm_stopped.domain,
                              "PBM_FAILPOINT": "boom"})
    to = f"g1@{pbm_stopped.domain}"
    first, later = store_messages(db, [_mail(to, "JOIN", subject="boom"), _mail(to, "GIVE 1 TO bob")])
    worker = Worker(db, settings, Composer(settings))
    try:
        worker.process(later, held=game_key("g1"))
        with db.engine.connect() as c:
            status = dict(c.execute(text("SELECT id, status FROM inbox")).all())
        assert status == {first: "shunted", later: "new"}
    finally:
        worker.close()
        db.dispose()
