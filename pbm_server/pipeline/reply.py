"""The last stage of a mail's path: the reply to its sender, put in the
outbox in the mail's write transaction.

A mail that proved its sender (a matching password, a line's own
credentials, or a code the server mailed: ``confirm``, ``reset``) is a player
at work: always answered, in full.  Any other mail is budgeted by where it
comes from, so that one source cannot silence the others: at most
``PBM_REPLY_LIMIT_PER_HOUR`` replies an hour per address,
``PBM_UNAUTHENTICATED_REPLIES_PER_DOMAIN_PER_HOUR`` per domain, and, above
them, ``PBM_UNAUTHENTICATED_REPLIES_PER_HOUR`` in all (robots answering
robots stop there; the GM hears of it once an hour).  The reply that carries
a confirmation code (``register``) to an address that had none this hour is
sent whatever the domain and global budgets say (the per-address limit
still holds), so a flood of forged registrations cannot keep a newcomer from
their code.  The inbox does not keep the connecting IP, so it is no source
here.  The reply to an unproven mail is cut to
``PBM_MAX_UNAUTHENTICATED_REPLY_BYTES``.

One transaction to several of our addresses is one inbox row per address,
each handled on its own; when the mail proved nothing, all of them together
get ONE answer (issue 41: a forged ``MAIL FROM`` with 100 ``RCPT TO`` made
60 replies to the victim).  The first row to be answered takes the answer
(``inbox_bodies.answered_by``, set in its write transaction by an UPDATE
that only one row can win, also across workers and hosts) and its reply
names every address the mail reached; the other rows are handled as usual
but not answered (their inbox note says which row's answer covered them).
Rows proven by a password are answered as before, each on its own; a
reply that carries a confirmation code is not held back by the rule (it
still takes the answer if it is first), so a ``register`` sent to pbm@
and a game at once still gets its code.  The Subject says what
became of the mail (subjects.py), the reply names the thread it belongs to
and the mail it answers, and no password the mail carried appears in it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, bindparam, select
from sqlalchemy.orm import Session

from pbm_server.base.settings import Settings
from pbm_server.mail.bounces import proves_code
from pbm_server.mail.compose import Composer
from pbm_server.mail.headers import clean_msgid, clean_msgids, clean_text
from pbm_server.mail.mailtext import IncomingMail
from pbm_server.mail.outbound import UNPROVEN_REPLY, enqueue_one, outbox_count
from pbm_server.mail.subjects import reply_subject
from pbm_server.pipeline.execute import Answer, CommandWork, InboxRow
from pbm_server.play.notices import tell_gm
from pbm_server.store.models import InboundBody, OutboundMail, table

#: outbox kind of the GM's notice that the server stopped answering unproven mail
GM_QUIET = "gm-quiet"
#: outbox kind of the reply to an unproven mail that carries a confirmation code
CODE_REPLY = "reply-code"
#: replies to mails that proved nothing (they count toward the domain and global budgets)
UNPROVEN_KINDS = (UNPROVEN_REPLY, CODE_REPLY)
#: every reply to a mail (the per-address limit)
REPLY_KINDS = ("reply", *UNPROVEN_KINDS)
#: commands whose success mails a confirmation code in the reply
CODE_GIVING = frozenset({"register", "signup"})

_BODY = table(InboundBody)
#: the one answer of a mail that proved nothing, taken by one of its rows
_TAKE_ANSWER = _BODY.update().where(_BODY.c.id == bindparam("body"), _BODY.c.answered_by.is_(None)).values(
    answered_by=bindparam("row"))
_ANSWERED_BY = select(_BODY.c.answered_by).where(_BODY.c.id == bindparam("body"))


def _first_word(text: str) -> str:
    words = text.split(None, 1)
    return words[0].lower() if words else ""


def carries_code(answer: Answer) -> bool:
    """Does the reply carry a confirmation code (a ``register`` that worked)?"""
    return any(r.ok and _first_word(r.line.text) in CODE_GIVING for r in answer.reply.results)


class Replier:
    """Puts the reply to a command mail in the outbox, within the limits."""

    def __init__(self, settings: Settings, composer: Composer):
        self.settings = settings
        self.composer = composer

    def send(self, s: Session, row: InboxRow, mail: IncomingMail, work: CommandWork, answer: Answer,
             now: datetime) -> None:
        """The reply to ``mail`` (unless a limit says otherwise: then the inbox row says why)."""
        proven = work.proven or proves_code(answer.reply.results)
        code = not proven and carries_code(answer)
        if not proven and not self._may_answer(s, row, mail, answer, now, code):
            return
        reply = answer.reply
        # the Subject says what became of the mail (subjects.py); only
        # cleaned values go into the reply's headers (headers.py)
        subject = clean_text(reply_subject(answer.facts, reply.results, reply.orders, who=work.actor.handle))
        # kept as its parts: delivery writes it out, outside this transaction (compose.py)
        mid, raw = self.composer.deferred(
            to_addr=mail.from_addr,
            to_name=work.actor.handle,
            from_local=answer.reply_from,
            subject=subject,
            body=self.composer.reply(reply, max_bytes=None if proven else self.settings.max_unauthenticated_reply_bytes),
            auto="auto-replied",
            now=now,
            in_reply_to=clean_msgid(mail.message_id),
            references=clean_msgids(mail.references),
            secrets=work.secrets,
            thread=answer.thread,
        )
        kind = "reply" if proven else CODE_REPLY if code else UNPROVEN_REPLY
        enqueue_one(s, to_addr=mail.from_addr, message_id=mid, raw=raw, kind=kind,
                    now=now, inbound_id=row.id, game_id=row.game_id)

    def _may_answer(self, s: Session, row: InboxRow, mail: IncomingMail, answer: Answer, now: datetime,
                    code: bool) -> bool:
        """The limits of mails that did not prove their sender: per address
        (the reply before the last says so), per domain, and for all such
        mails together (robots answering from a new address each time); a
        first code to an address this hour passes the last two."""
        since = now - timedelta(hours=1)
        limit = self.settings.reply_limit_per_hour
        addr = mail.from_addr
        count = outbox_count(s, REPLY_KINDS, since, to_addr=addr)
        if count >= limit:
            row.note = f"not answered: {count} replies to {addr} in the last hour (limit {limit})"
            return False
        if not self._the_one_answer(s, row, answer, code):
            return False
        first_code = code and not outbox_count(s, CODE_REPLY, since, to_addr=addr)
        if not first_code and not self._within_budgets(s, row, addr, since, now):
            return False
        if count == limit - 1:
            answer.reply.notes.append(
                f"You have had {limit} replies within an hour; the server will not answer this address again until the hour is over."
            )
        return True

    @staticmethod
    def _the_one_answer(s: Session, row: InboxRow, answer: Answer, code: bool) -> bool:
        """Whether this row gives the one answer of its mail (always, for a
        mail to one address of ours); the answer then names every address
        the mail reached, and else the row's note says which row gave it.
        A reply carrying a confirmation code (``code``) goes in any case."""
        if len(row.reached) < 2 or row.body_id is None:
            return True
        taken = s.connection().execute(_TAKE_ANSWER, {"body": row.body_id, "row": row.id})
        if cast(CursorResult[Any], taken).rowcount == 1:
            answer.reply.notes.insert(0, (
                f"This mail was sent to {len(row.reached)} of our addresses ({', '.join(row.reached)}); each of "
                f"them read it, and since it carried no valid password this is its only answer."))
            return True
        if code:
            return True
        by = s.connection().execute(_ANSWERED_BY, {"body": row.body_id}).scalar()
        row.note = (f"not answered: the same mail went to {len(row.reached)} of our addresses and proved no sender; "
                    f"its one answer is the reply to mail {by}")
        return False

    def _within_budgets(self, s: Session, row: InboxRow, addr: str, since: datetime, now: datetime) -> bool:
        """The budgets of the sender's domain and of everyone, for a mail that
        proved nothing; the inbox row says which one it went beyond."""
        domain = addr.rsplit("@", 1)[-1] if "@" in addr else ""
        per_domain = self.settings.unauthenticated_replies_per_domain_per_hour
        used = outbox_count(s, UNPROVEN_KINDS, since, domain=domain) if domain else 0
        if used >= per_domain:
            row.note = ((row.note + "; ") if row.note else "") + (
                f"not answered: {used} replies to addresses at {domain} for mails that proved nothing in the last "
                f"hour (PBM_UNAUTHENTICATED_REPLIES_PER_DOMAIN_PER_HOUR {per_domain})")
            return False
        everyone = outbox_count(s, UNPROVEN_KINDS, since)
        budget = self.settings.unauthenticated_replies_per_hour
        if everyone >= budget:
            row.note = ((row.note + "; ") if row.note else "") + (
                f"not answered: {everyone} replies to mails without a password in the last hour "
                f"(PBM_UNAUTHENTICATED_REPLIES_PER_HOUR {budget})")
            self._tell_gm_quiet(s, now, budget)
            return False
        return True

    def _tell_gm_quiet(self, s: Session, now: datetime, budget: int) -> None:
        """The GM hears once an hour that mails without a password go unanswered."""
        if s.scalar(select(OutboundMail.id).where(OutboundMail.kind == GM_QUIET,
                                                  OutboundMail.created_at >= now - timedelta(hours=1)).limit(1)):
            return
        tell_gm(s, self.composer, self.settings.gm_address,
                f"The server has stopped answering mails without a password: {budget} replies to such "
                "mails within an hour (PBM_UNAUTHENTICATED_REPLIES_PER_HOUR).",
                [("what", "such mails are still processed; they get no reply until the hour is over"),
                 ("see", "pbm mail status; the inbox note of each mail says it was not answered"),
                 ("next notice", "at most one such mail per hour")],
                now, kind=GM_QUIET)
