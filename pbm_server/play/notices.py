"""Mail the server writes on its own: a game's Notices to its players (one
outbox row per recipient), a word to all players of a game, a notice to the GM.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from games import get_rules
from games.base import ALL_PLAYERS, Notice, Rules
from pbm_server.base.localtime import show_time
from pbm_server.mail.compose import Composer, Rendered, cut_words, text_html, thread_root
from pbm_server.mail.headers import reading_policy
from pbm_server.mail.outbound import enqueue
from pbm_server.play import alerting, streams
from pbm_server.store.lookup import accounts_by_handles
from pbm_server.store.models import Account, AuditEntry, Game, Observer, OutboundMail


class NoticeBudget:
    """How many mails to other players one mail may still cause
    (``PBM_MAX_NOTICES_PER_MAIL``).  A notice is started only while some budget
    is left, and then goes to all its recipients (an event of a big game is
    never told to only some of its players); the notices not started are
    counted in ``withheld`` (one per recipient) for the sender's reply."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.withheld = 0

    def note(self) -> str | None:
        if not self.withheld:
            return None
        n = self.withheld
        return (f"{n} more mail{'s' if n != 1 else ''} to other players {'were' if n != 1 else 'was'} not sent: "
                f"at most {self.limit} per mail.")


class Mailer:
    """Turns Notices into outbox rows (one per recipient)."""

    def __init__(self, composer: Composer):
        self.composer = composer
        #: how many mails this Mailer has put in the outbox (the CLI says so)
        self.queued = 0

    @staticmethod
    def recipients(players: list[str], to: list[str], accounts: dict[str, Account]) -> list[Account]:
        """The accounts of ``to`` (``players``: the game's players, for
        ALL_PLAYERS), each once, from ``accounts`` (by handle key: what
        :func:`accounts_by_handles` found for them; a handle not there has
        no account)."""
        handles: list[str] = []
        for h in to:
            handles.extend(players if h == ALL_PLAYERS else [h])
        return [a for k in dict.fromkeys(h.lower() for h in handles) if (a := accounts.get(k)) is not None]

    #: notices whose recipients are looked up together (a turn of a large
    #: game sends one per player)
    NOTICES_PER_LOOKUP = 500

    def send_notices(
        self,
        session: Session,
        game: Game,
        rules: Rules[Any],
        notices: list[Notice],
        now: datetime,
        *,
        inbound_id: int | None = None,
        footer: str | Callable[[Account], str] = "",
        secrets_: AbstractSet[str] = frozenset(),
        skip: AbstractSet[str] = frozenset(),
        budget: NoticeBudget | None = None,
        each: Callable[[Account, Rendered, str], None] | None = None,
        stream: str = "reports",
    ) -> list[tuple[Account, Rendered, str]]:
        """``footer``: text added to every mail, or a function of the
        recipient's account giving it (e.g. the deadline in their time zone).
        ``budget``: the mail's NoticeBudget, if its notices are limited.
        Returns (account, body without a per-recipient footer, kind); with
        ``each``, hands each of them to it instead and returns [] (a turn of
        a large game keeps no list of all its mails).  The outbox rows are
        written in batches and let go of, so memory does not grow with the
        number of mails.  ``stream``: which of the recipient's streams the
        mails are (play/streams.py): an address that stopped it gets none, and
        every mail carries the one-click link that stops it."""
        sent = []
        written: list[object] = []
        players: list[str] | None = None
        alerting.from_notices(session, game, notices, now)  # a board's start, move or end (curio)
        extras = _Extras(session, self.composer, game, rules, notices, stream, now)
        known: dict[str, Account] = {}
        for i, notice in enumerate(notices):
            if i % self.NOTICES_PER_LOOKUP == 0:
                # the accounts of the next notices, in one look-up (the game's
                # players once, however many of them go to all players)
                chunk = notices[i:i + self.NOTICES_PER_LOOKUP]
                wanted = {h for n in chunk for h in n.to if h != ALL_PLAYERS}
                if any(ALL_PLAYERS in n.to for n in chunk):
                    if players is None:
                        players = rules.players(game.state)
                    wanted.update(players)
                known = accounts_by_handles(session, wanted)
            recipients = [acc for acc in self.recipients(players or [], notice.to, known)
                          if acc.handle_key not in skip and acc.email.lower() not in extras.stops]
            found = rules.thread_of(notice)
            thread = thread_root(self.composer.settings.domain, game.name, game.id, found[0] if found else None)
            subject = game_subject(game.name, notice.subject)
            if not _spend(budget, len(recipients)):
                continue
            for acc in recipients:
                body, kept = self._body_for(notice, acc, game, footer)
                body, stop = extras.add(body, notice, acc)
                written.append(self._enqueue_notice(session, game, notice, acc, body, subject, thread, now,
                                                    inbound_id=inbound_id, secrets_=secrets_, unsubscribe=stop))
                if each is not None:
                    each(acc, kept, notice.kind)
                else:
                    sent.append((acc, kept, notice.kind))
                if len(written) >= self.BATCH:
                    self._let_go(session, written)
        if len(written) > 1:
            self._let_go(session, written)
        if notices:
            self.send_to_observers(session, game, rules, notices, now, inbound_id=inbound_id)
        return sent

    def _body_for(self, notice: Notice, acc: Account, game: Game,
                  footer: str | Callable[[Account], str]) -> tuple[Rendered, Rendered]:
        """The body of ``notice`` for ``acc`` with the footer, and the body to
        hand back (without a per-recipient footer, with a fixed one)."""
        data = dict(notice.data)
        if notice.template:
            data.setdefault("viewer", acc.handle)
            body = self.composer.render(notice.template, data, game.kind)
        else:
            body = Rendered(notice.text)
        kept = body
        extra = footer(acc) if callable(footer) else footer
        if extra:
            # both parts carry the footer (the deadline, the seed lines)
            body = Rendered(body.text + "\n\n" + extra,
                            None if body.html is None else body.html + "\n" + text_html(extra))
            if not callable(footer):
                kept = body
        return body, kept

    def _enqueue_notice(self, session: Session, game: Game, notice: Notice, acc: Account, body: Rendered,
                        subject: str, thread: str, now: datetime, *, inbound_id: int | None,
                        secrets_: AbstractSet[str], unsubscribe: streams.Unsubscribe | None) -> OutboundMail:
        """Compose one recipient's mail of ``notice`` and write its outbox row
        (returned, to be let go of later)."""
        mid, raw = self.composer.message(
            to_addr=acc.email,
            to_name=acc.handle,
            from_local=game.name,
            subject=subject,
            body=body,
            auto="auto-generated",  # a notice answers no mail of its recipient (RFC 3834)
            now=now,
            secrets=set(secrets_),
            thread=thread,
            unsubscribe=unsubscribe.urls if unsubscribe is not None else None,
        )
        self.queued += 1
        return enqueue(session, to_addr=acc.email, message_id=mid, raw=raw,
                       kind="report" if notice.kind == "report" else "notice", now=now,
                       inbound_id=inbound_id, game_id=game.id)

    #: outbox rows written (flushed) at a time, and let go of by the session
    BATCH = 200

    @staticmethod
    def _let_go(session: Session, rows: list[object]) -> None:
        session.flush()
        for row in rows:
            session.expunge(row)
        rows.clear()

    def send_to_observers(self, session: Session, game: Game, rules: Rules[Any], notices: list[Notice], now: datetime,
                          *, inbound_id: int | None = None) -> int:
        """The public view of ``notices`` (``Rules.public_reports``) to every
        observer of the game who does not play in it now.  A mail that would
        hold anything the rules hide from the public (``hidden_from(state,
        None)``) is not sent; the audit log says so.  Returns how many were sent."""
        observers = session.scalars(
            select(Account).join(Observer, Observer.account_id == Account.id).where(Observer.game_id == game.id)
            .order_by(Account.id)
        ).all()
        if not observers:
            return 0
        state = game.state
        public = rules.public_reports(state, notices)
        if not public:
            return 0
        playing = {h.lower() for h in rules.players(state)}
        stops = streams.stopped(session, "observe", game.id)
        maker = streams.LinkMaker(session, self.composer.settings)
        hidden = [h for h in rules.hidden_from(state, None) if h]
        server = self.composer.settings.server_address
        count = 0
        for notice in public:
            found = rules.thread_of(notice)
            thread = thread_root(self.composer.settings.domain, game.name, game.id, found[0] if found else None)
            if notice.template:
                body = self.composer.render(notice.template, {**notice.data, "viewer": None}, game.kind)
            else:
                body = Rendered(notice.text)
            if any(h in body.text or (body.html is not None and h in body.html) for h in hidden):
                session.add(AuditEntry(at=now, actor="system", game_id=game.id, action="observer mail withheld",
                                       detail=f"{notice.subject[:100]}: it held something the rules hide"))
                continue
            for acc in observers:
                if acc.handle_key in playing or acc.email.lower() in stops:
                    continue
                stop = maker.unsubscribe(acc, "observe", game.name, now)
                extra = (f"You observe {game.name}: this is what the public sees. Mail \"unobserve {game.name}\" "
                         f"to {server} to stop these mails.")
                if game.next_deadline is not None and game.status != "finished":
                    extra += f"\nNext deadline: {show_time(game.next_deadline, acc.timezone)}"
                mid, raw = self.composer.message(
                    to_addr=acc.email, to_name=acc.handle, from_local=game.name,
                    subject=f"[observer] {notice.subject}", body=Rendered(body.text + "\n\n" + extra, body.html),
                    auto="auto-generated", now=now, thread=thread,
                    unsubscribe=stop.urls if stop is not None else None,
                )
                enqueue(session, to_addr=acc.email, message_id=mid, raw=raw, kind="report", now=now,
                        inbound_id=inbound_id, game_id=game.id)
                count += 1
                self.queued += 1
        return count


class _Extras:
    """What one sending adds to each mail of a stream (play/streams.py): the
    addresses that stopped it are left out, each mail gets the link that stops
    it (and, a report, the player's own-view link and the score bars)."""

    def __init__(self, session: Session, composer: Composer, game: Game, rules: Rules[Any], notices: list[Notice],
                 stream: str, now: datetime):
        self.game, self.stream, self.now = game, stream, now
        self.stops = streams.stopped(session, stream, game.id) if notices else set()
        self.maker = streams.LinkMaker(session, composer.settings)
        # a turn's report shows the leading public scores as bars in its HTML part
        self.bars = streams.score_bars(rules.scores(game.state), rules.turn_name) \
            if stream == "reports" and any(n.kind == "report" for n in notices) else ""
        # what the mailto: link of a report or reminder opens a mail for
        self.next_orders = f"orders for {rules.turn_name} {game.turn}" if rules.has_turns else "your move"

    def add(self, body: Rendered, notice: Notice, acc: Account) -> tuple[Rendered, streams.Unsubscribe | None]:
        name = self.game.name
        stop = self.maker.unsubscribe(acc, self.stream, name, self.now)
        if notice.kind == "report":
            body = streams.with_bars(body, self.bars)
        # a report or a reminder links the player's own view, home, the game's page and the next orders
        own = self.maker.player_links(acc, name, self.game.private, self.next_orders, self.now) \
            if self.stream in ("reports", "reminders") else None
        return streams.with_links(body, stop, own, streams.STREAMS[self.stream], name), stop


def _spend(budget: NoticeBudget | None, recipients: int) -> bool:
    """Whether a notice to ``recipients`` accounts may start under ``budget``
    (no budget: always); counts them as used, or as withheld if not."""
    if budget is None:
        return True
    if budget.used >= budget.limit:
        budget.withheld += recipients
        return False
    budget.used += recipients
    return True


def game_subject(name: str, subject: str) -> str:
    """A game's mail always names the game: ``NAME: `` goes before a Subject
    that does not name it already."""
    words = {w.strip(":,;()").lower() for w in subject.split()}
    return subject if name.lower() in words else f"{name}: {subject}"


#: the longest GM notice subject after "pbm-server: " (cut after a whole word; two folded lines)
GM_SUBJECT_CHARS = 100


def gm_subject(what: str) -> str:
    """The Subject of a notice to the GM: what happened, cut at a word."""
    return "pbm-server: " + cut_words(what, GM_SUBJECT_CHARS)


def tell_players(session: Session, mailer: Mailer, game: Game, subject: str, text: str, now: datetime) -> None:
    rules = get_rules(game.kind)

    def footer(acc: Account) -> str:
        return f"Next deadline: {show_time(game.next_deadline, acc.timezone)}" if game.next_deadline else ""

    mailer.send_notices(session, game, rules, [Notice(to=[ALL_PLAYERS], subject=subject, text=text)], now, footer=footer)


def tell_gm(session: Session, composer: Composer, gm_address: str | None, what: str, details: list[tuple[str, str]],
            now: datetime, kind: str = "gm", inbound_id: int | None = None) -> None:
    """A notice to the game master (PBM_GM_ADDRESS; none set: nobody is told).
    ``kind`` marks it in the outbox (``gm...``: never reported back to the GM)."""
    if not gm_address:
        return
    body = composer.render("server/gm_notice.txt", {"what": what, "details": details})
    mid, raw = composer.message(to_addr=gm_address, to_name="game master", from_local="pbm",
                                subject=gm_subject(what), body=body, auto="auto-generated", now=now)
    enqueue(session, to_addr=gm_address, message_id=mid, raw=raw, kind=kind, now=now, inbound_id=inbound_id)


def forward_to_gm(session: Session, composer: Composer, gm_address: str, raw: bytes, what: str,
                  details: list[tuple[str, str]], now: datetime, kind: str, inbound_id: int | None = None,
                  whole: bool = True) -> None:
    """A notice to the GM with a received mail attached (message/rfc822):
    mail to postmaster@DOMAIN.  Never sent to the mail's sender.  A mail not
    ``whole`` (cut, or beyond the caps of mail/headers.py), 8-bit or one the
    capped parser refuses is attached as bytes (application/octet-stream)."""
    body = composer.render("server/gm_notice.txt", {"what": what, "details": details})
    mid, text = composer.message(to_addr=gm_address, to_name="game master", from_local="pbm",
                                 subject=gm_subject(what), body=body, auto="auto-generated", now=now)
    notice = BytesParser(policy=policy.default).parsebytes(text)
    assert isinstance(notice, EmailMessage)
    notice.make_mixed()
    # the attached mail's headers are written as received, never parsed again to be refolded
    writing = policy.SMTP.clone(refold_source="none")
    out = None
    if whole and raw.isascii():
        try:
            original = BytesParser(policy=reading_policy()).parsebytes(raw)
            attached = copy.deepcopy(notice)
            attached.add_attachment(original, disposition="attachment", filename="forwarded.eml")
            out = attached.as_bytes(policy=writing)
        except Exception:  # beyond the caps, nested too deeply: as bytes
            out = None
    if out is None:  # base64, so that no relay has to carry 8-bit data (message/rfc822 may not be encoded)
        notice.add_attachment(raw, maintype="application", subtype="octet-stream", filename="forwarded.eml")
        out = notice.as_bytes(policy=writing)
    enqueue(session, to_addr=gm_address, message_id=mid, raw=out, kind=kind, now=now, inbound_id=inbound_id)
