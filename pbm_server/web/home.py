"""A player's own side of the web (issue 42): their home (every game and
board of theirs, what is asked of them and when, in their time zone), their
calendars (RFC 5545), and orders sent from an own view's form.

Orders from the web are one more way in, never a second pipeline: the form's
text becomes an RFC 5322 message From the account's address To the game's
address, stored in the inbox table before the HTTP answer, and from there it
is a mail like any other (the worker parses, authenticates, runs and answers
it exactly once).  Its Message-ID is made from the form's own nonce and the
text, so the same form sent twice is the same mail twice: the worker's
duplicate rule (same Message-ID, content and recipient) handles it once.
The password is checked here first, through the same throttle as mail
(accounts/throttle.py): a wrong one stores nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, formataddr
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from games import get_rules
from games.curio import clock as move_clock
from games.curio.model import opponent
from games.curio.state import load as curio_state
from pbm_server.accounts import links
from pbm_server.accounts.service import plays_in, running_games
from pbm_server.base.localtime import zone
from pbm_server.mail.compose import DEFERRED
from pbm_server.play.streams import orders_mailto
from pbm_server.store.models import Account, Game, InboundBody, InboundMail, OutboundMail

#: the most a form's orders may hold (characters; a mail's orders are a few lines)
ORDERS_CHARS = 20000
#: the most an orders POST may carry (bytes, urlencoded: up to 3 bytes a character)
ORDERS_BODY_LIMIT = 3 * ORDERS_CHARS + 2000


# -- times, as a player reads them ------------------------------------------------------------
def left(delta: timedelta) -> str:
    """How long until a moment: "2 d 5 h", "5 h 10 min", "12 min", "less than a minute"."""
    minutes = int(delta.total_seconds() // 60)
    if minutes < 1:
        return "less than a minute"
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {mins} min" if mins else f"{hours} h"
    return f"{mins} min"


def local(moment: datetime, tz: str | None) -> str:
    """A moment in the player's zone (UTC without one): "Sat 12 Dec 04:00 Europe/Berlin"."""
    name = tz if tz and tz.upper() != "UTC" else "UTC"
    return moment.astimezone(zone(tz)).strftime(f"%a %d %b %H:%M {name}")


def when(moment: datetime, now: datetime, tz: str | None) -> str:
    if moment <= now:
        return f"now (it was {local(moment, tz)})"
    return f"in {left(moment - now)}, {local(moment, tz)}"


# -- what is asked of a player, game by game --------------------------------------------------
@dataclass(frozen=True)
class Due:
    """One thing of a player's: a game's deadline or a curio board's move."""

    game: str
    #: what is asked, in words ("your orders for week 4 are due in 2 d 5 h, ...")
    text: str
    #: when (None: no deadline)
    at: datetime | None
    #: the player must act (no orders held yet, their move)
    owes: bool
    #: an iCalendar UID part, stable for this deadline ("turn-4", "board-101-ply-7")
    uid: str
    #: a short title for a calendar ("g1: week 4 deadline")
    summary: str
    #: minutes before ``at`` a reminder goes (0: none)
    remind: int = 0


def _curio_boards(game: Game, handle: str | None, now: datetime, tz: str | None) -> list[Due]:
    """The active boards of a curio game (``handle``'s only, or all of them for
    None) with whose move it is and the move clock."""
    out = []
    for number, board in sorted(curio_state(game.state).boards.items()):
        if not board.active:
            continue
        side = board.side_of(handle) if handle is not None else None
        if handle is not None and side is None:
            continue
        end = move_clock.due(board)
        remind = move_clock.remind_at(board)
        mover = board.handle(board.position.to_move)
        ply = board.position.ply + 1
        if side is not None:
            mine = board.position.to_move == side
            whose = f"your move on board {number}" if mine else \
                f"{board.handle(opponent(side))}'s move on board {number}"
        else:
            mine, whose = False, f"{mover}'s move on board {number}"
        clock = f", the clock ends {when(end, now, tz)}" if end is not None else ", no move clock"
        out.append(Due(game.name, whose + clock, end, mine, f"board-{number}-move-{ply}",
                       f"{game.name}: {mover} to move on board {number}",
                       int((end - remind).total_seconds() // 60) if end is not None and remind is not None else 0))
    return out


def _deadline(game: Game, handle: str | None, now: datetime, tz: str | None) -> Due | None:
    """A turn-based game's open deadline, as ``handle`` sees it (None: the public's)."""
    rules = get_rules(game.kind)
    if not rules.has_turns:
        return None
    turn = f"{rules.turn_name} {game.turn}"
    at = game.next_deadline
    summary = f"{game.name}: {turn} deadline"
    uid = f"turn-{game.turn}"
    if game.status == "paused":
        return Due(game.name, f"{turn}: paused by the game master, no orders are taken now", None, False, uid, summary)
    due = f"due {when(at, now, tz)}" if at is not None else "due when the game master runs the turn"
    if handle is None:
        return Due(game.name, f"orders for {turn} are {due}", at, False, uid, summary, game.remind_minutes)
    owes = handle.lower() in {h.lower() for h in rules.waiting_for(game.state)}
    text = f"your orders for {turn} are {due}" if owes else \
        f"orders received for {turn}; the deadline is {when(at, now, tz) if at is not None else 'not set'}"
    return Due(game.name, text, at, owes, uid, summary, game.remind_minutes)


def dues(game: Game, handle: str | None, now: datetime, tz: str | None) -> list[Due]:
    """What a game asks of ``handle`` (None: every deadline of the game, for its public calendar)."""
    if game.status == "finished":
        return []
    found = _deadline(game, handle, now, tz)
    boards = _curio_boards(game, handle, now, tz) if game.kind == "curio" else []
    return ([found] if found is not None else []) + boards


def _games_of(session: Session, account: Account) -> list[tuple[Game, str]]:
    """The running (or paused) games ``account`` plays, with the handle as each spells it;
    a curio game counts while the player has a board there."""
    out = []
    for game in running_games(session):
        handle = plays_in(game, account.handle_key)
        if handle is not None:
            out.append((game, handle))
    return out


def home_page(session: Session, handle: str, token: str, domain: str, now: datetime) -> dict[str, Any] | None:
    """A player's home through their signed home link; None when the link does not open it."""
    account = links.check(session, "home", handle, "", token, now)
    if account is None:
        return None
    key = links.link_key(session)
    games: list[dict[str, Any]] = []
    for game, shown in _games_of(session, account):
        rules = get_rules(game.kind)
        items = dues(game, shown, now, account.timezone)
        view = links.make_with(key, account, "view", game.name, now)
        what = f"orders for {rules.turn_name} {game.turn}" if rules.has_turns else "your move"
        games.append({"name": game.name, "title": rules.title, "kind": game.kind, "status": game.status,
                      "own": f"/me/{view.handle}/{view.game}?k={view.token}",
                      "public": not game.private, "mailto": orders_mailto(game.name, domain, what),
                      "address": f"{game.name}@{domain}",
                      "items": [{"text": d.text, "owes": d.owes, "at": d.at} for d in items]})
    far = datetime.max.replace(tzinfo=timezone.utc)
    # what the player must do first comes first: owed things by their time, then the rest
    games.sort(key=lambda g: (not any(i["owes"] for i in g["items"]),
                              min((i["at"] or far for i in g["items"]), default=far), g["name"]))
    calendar = links.make_with(key, account, "calendar", "", now)
    return {"handle": account.handle, "timezone": account.timezone or "UTC", "games": games,
            "owing": sum(1 for g in games for i in g["items"] if i["owes"]),
            "calendar": f"/me/{calendar.handle}/deadlines.ics?k={calendar.token}",
            "expires": datetime.fromtimestamp(int(token.partition(".")[0]), timezone.utc).isoformat(),
            "now": local(now, account.timezone)}


def home_link(session: Session, account: Account, now: datetime) -> str:
    """The path of ``account``'s home (a fresh home link), for an own view."""
    link = links.make(session, account, "home", "", now)
    return f"/me/{link.handle}?k={link.token}"


# -- calendars (RFC 5545) ---------------------------------------------------------------------
def _ics_text(text: str) -> str:
    """A TEXT value escaped (RFC 5545 3.3.11)."""
    return (text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,")
            .replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n"))


def _fold(line: str) -> str:
    """A content line folded at 75 octets (RFC 5545 3.1), never inside a UTF-8 character."""
    out, part, size = [], "", 0
    for ch in line:
        n = len(ch.encode("utf-8"))
        if size + n > 75:
            out.append(part)
            part, size = " ", 1
        part += ch
        size += n
    out.append(part)
    return "\r\n".join(out)


def _utc(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def calendar(name: str, items: list[Due], domain: str, base: str, now: datetime, whose: str) -> bytes:
    """An iCalendar file with one VEVENT per deadline of ``items`` that has a
    time: its UID is stable (the game, the turn or the board's move, the
    domain), its time in UTC, and a VALARM the game's reminder time before it."""
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//pbm-server//deadlines//EN", "CALSCALE:GREGORIAN",
             "METHOD:PUBLISH", f"X-WR-CALNAME:{_ics_text(name)}", "X-PUBLISHED-TTL:PT1H"]
    for d in items:
        if d.at is None:
            continue
        lines += ["BEGIN:VEVENT", f"UID:{d.uid}.{d.game.lower()}.{whose}@{domain}", f"DTSTAMP:{_utc(now)}",
                  f"DTSTART:{_utc(d.at)}", f"DTEND:{_utc(d.at)}", f"SUMMARY:{_ics_text(d.summary)}",
                  f"DESCRIPTION:{_ics_text(d.text.split(', ', 1)[0] + '. Mail it to ' + d.game + '@' + domain)}",
                  f"URL:{base}/games/{d.game}", "TRANSP:TRANSPARENT"]
        if d.remind > 0:
            lines += ["BEGIN:VALARM", "ACTION:DISPLAY", f"DESCRIPTION:{_ics_text(d.summary)}",
                      f"TRIGGER:-PT{d.remind}M", "END:VALARM"]
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    return ("\r\n".join(_fold(line) for line in lines) + "\r\n").encode("utf-8")


def game_calendar(session: Session, name: str, domain: str, base: str, now: datetime) -> bytes | None:
    """A public game's deadlines (its open turn; a curio game's move clocks); None: no such public game."""
    game = session.scalar(select(Game).where(func.lower(Game.name) == name.lower()))
    if game is None or game.private:
        return None
    return calendar(f"{game.name} deadlines ({domain})", dues(game, None, now, None), domain, base, now, "public")


def player_calendar(session: Session, handle: str, token: str, domain: str, base: str,
                    now: datetime) -> bytes | None:
    """Every deadline and curio move clock of a player (a calendar link); None: the link does not open it."""
    account = links.check(session, "calendar", handle, "", token, now)
    if account is None:
        return None
    items = [d for game, shown in _games_of(session, account) for d in dues(game, shown, now, account.timezone)]
    items.sort(key=lambda d: (d.at or now, d.game, d.uid))  # soonest first
    return calendar(f"{account.handle}'s deadlines ({domain})", items, domain, base, now, account.handle_key)


# -- orders from the web ------------------------------------------------------------------------
def form_mac(key: bytes, handle_key: str, game: str, nonce: str) -> str:
    """What binds a form to the one player and game it was made for: a form
    from one player's page sent to another's page is refused."""
    message = f"form|{handle_key}|{game.lower()}|{nonce}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


def new_form(session: Session, account: Account, game: str) -> dict[str, str]:
    """The hidden fields of a fresh orders form: its nonce and their MAC."""
    nonce = secrets.token_urlsafe(12)
    return {"nonce": nonce, "form": form_mac(links.link_key(session), account.handle_key, game, nonce)}


def form_holds(session: Session, account: Account, game: str, nonce: str, mac: str) -> bool:
    if not (0 < len(nonce) <= 40 and len(mac) == 32):
        return False
    return hmac.compare_digest(form_mac(links.link_key(session), account.handle_key, game, nonce), mac)


def web_mail(*, handle: str, email: str, game: str, domain: str, nonce: str, orders: str, password: str,
             now: datetime, authserv_id: str = "") -> bytes:
    """The mail a form sends: From the account's address To the game's, the
    orders as its body with the password as ``$$password$$``.  The Message-ID
    is made from the form's nonce and its text (never the password), so the
    same form sent again is the same mail again (the worker's duplicate rule)."""
    text = "\n".join(line.rstrip() for line in orders.replace("\r\n", "\n").replace("\r", "\n").split("\n")).strip()
    digest = hashlib.sha256(f"{handle.lower()}|{game.lower()}|{nonce}|{text}".encode()).hexdigest()[:40]
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = formataddr((handle, email))
    msg["To"] = f"{game}@{domain}"
    msg["Subject"] = "orders from the web"
    msg["Date"] = format_datetime(now.astimezone(timezone.utc))
    msg["Message-ID"] = f"<web.{digest}@{domain}>"
    msg["X-PBM-Via"] = "web form (signed own-view link and password)"
    if authserv_id:
        # the form proved the account (its signed link and its password, checked
        # here): the same vouching our MTA gives a mail whose From passed DMARC
        msg["Authentication-Results"] = f"{authserv_id}; dmarc=pass header.from={email.rsplit('@', 1)[-1]}"
    msg.set_content(f"{text}\n\n$${password}$$\n", charset="utf-8")
    return msg.as_bytes()


def _reply_text(raw: bytes) -> str:
    """The text part of a mail in the outbox (a reply kept as its parts, or bytes)."""
    if raw.startswith(DEFERRED):
        return str(json.loads(raw[len(DEFERRED):])["text"])
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(msg, EmailMessage)
    part = msg.get_body(preferencelist=("plain",))
    return part.get_content() if part is not None else ""


def sent_outcome(session: Session, account: Account, game: Game, inbox_id: int, domain: str) -> dict[str, Any] | None:
    """What became of the form's mail ``inbox_id``: None unless it is a mail
    from this account to this game (an id is no way into another's mail)."""
    def mine(row_id: int) -> InboundMail | None:
        row = session.get(InboundMail, row_id)
        if row is None or row.mail_from.lower() != account.email.lower():
            return None
        body = session.get(InboundBody, row.body_id)
        rcpts = [r.lower() for r in (row.rcpt_tos or (body.rcpt_tos if body is not None else None) or [])]
        return row if f"{game.name}@{domain}".lower() in rcpts else None

    row = mine(inbox_id)
    if row is None:
        return None
    again = False
    if row.status == "duplicate" and row.note:
        first = row.note.rsplit(" ", 1)[-1]
        original = mine(int(first)) if first.isdigit() else None
        if original is not None:
            row, again = original, True
    if row.status == "new":
        return {"id": inbox_id, "done": False, "again": again, "reply": None, "note": None}
    replies = session.scalars(select(OutboundMail).where(OutboundMail.inbound_id == row.id,
                                                         OutboundMail.to_addr == account.email)
                              .order_by(OutboundMail.id)).all()
    reply = _reply_text(replies[0].raw) if replies else None
    return {"id": inbox_id, "done": True, "again": again, "reply": reply,
            "note": None if reply else (row.note or f"handled ({row.status}); no reply was sent")}
