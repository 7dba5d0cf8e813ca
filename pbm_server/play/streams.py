"""The streams of mail a player or observer may stop: one click on a mail's
List-Unsubscribe link (RFC 8058), its settings page, or `unsubscribe` by mail.

A stream is the mail of one game (or of every game: ``game_id`` None) of one
kind: its turn reports and notices, its press, its deadline reminders, its
observer boards.  Mail that must still go never carries the link and is never
stopped: confirmation and recovery codes, security notices, replies to the
player's own mail.  A player who stops a game's reports still sees the game on
the web (their own view, pbm_server/web/; the link is in each report and in the
reply to ``status NAME``) and gets a turn's report by ``history NAME N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from textwrap import fill
from urllib.parse import quote

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pbm_server.accounts import links
from pbm_server.base.settings import Settings
from pbm_server.mail.compose import Rendered, text_html
from pbm_server.store.lookup import stops_of
from pbm_server.store.models import Account, MailStop

#: stream -> what it is, for people
STREAMS = {
    "reports": "turn reports and game notices",
    "press": "press from the other players",
    "reminders": "deadline reminders",
    "observe": "observer boards",
}


def stopped(session: Session, stream: str, game_id: int | None) -> set[str]:
    """The addresses (lower case) that stopped ``stream`` of this game, or of every game."""
    rows = session.scalars(select(MailStop.address).where(
        MailStop.stream == stream, or_(MailStop.game_id.is_(None), MailStop.game_id == game_id)))
    return set(rows)


def stop(session: Session, address: str, stream: str, game_id: int | None, now: datetime) -> bool:
    """Stop a stream for an address; False if it was stopped already."""
    address = address.lower()
    found = session.scalar(select(MailStop.id).where(MailStop.address == address, MailStop.stream == stream,
                                                     MailStop.game_id.is_(None) if game_id is None
                                                     else MailStop.game_id == game_id))
    if found is not None:
        return False
    try:
        with session.begin_nested():
            session.add(MailStop(address=address, stream=stream, game_id=game_id, since=now))
    except IntegrityError:  # a second click at the same moment
        return False
    return True


def resume(session: Session, address: str, stream: str | None, game_id: int | None) -> int:
    """Start a stream (every stream: None) again; how many stops were lifted."""
    rows = [r for r in stops_of(session, address) if r.game_id == game_id and stream in (None, r.stream)]
    for row in rows:
        session.delete(row)
    return len(rows)


@dataclass(frozen=True)
class Unsubscribe:
    """What goes into one mail's List-Unsubscribe header and its footer line.

    ``page`` is the stream's settings page on the HTTP side (PBM_PUBLIC_URL,
    or http://PBM_HTTP_LISTEN without it): a GET shows one button that stops
    the stream, a POST of ``List-Unsubscribe=One-Click`` stops it at once.
    The footer line links it whatever its scheme: a person opens it in a
    browser.  The header names it only when it is https: RFC 8058 asks for an
    https URL for one click, and a mailbox provider does not POST to plain
    http; without one the header holds only the mailto form (a mail to the
    server that stops the stream by its token, commands/mailsettings.py),
    and the mail has no List-Unsubscribe-Post."""

    page: str
    mailto: str

    @property
    def https(self) -> str | None:
        """The one-click URL of the header, or None (no https public URL)."""
        return self.page if self.page.startswith("https://") else None

    @property
    def urls(self) -> tuple[str, ...]:
        """List-Unsubscribe's URLs, in the order a provider should try them."""
        return (self.https, self.mailto) if self.https else (self.mailto,)


class LinkMaker:
    """Unsubscribe and own-view links for the mails of one sending (the key is
    read once)."""

    def __init__(self, session: Session, settings: Settings):
        self.session = session
        self.settings = settings
        self.base = links.base_url(settings.public_url, settings.http_listen)
        self._key: bytes | None = None

    @property
    def enabled(self) -> bool:
        """Links need the HTTP side (PBM_HTTP_LISTEN) or a public URL to point at."""
        return bool(self.settings.http_listen or self.settings.public_url)

    def key(self) -> bytes:
        if self._key is None:
            self._key = links.link_key(self.session)
        return self._key

    def unsubscribe(self, account: Account, stream: str, game: str, now: datetime) -> Unsubscribe | None:
        if not self.enabled:
            return None
        link = links.make_with(self.key(), account, f"stop-{stream}", game, now)
        page = f"{self.base}/unsubscribe/{link.handle}/{link.game}/{stream}?k={link.token}"
        command = quote(f"unsubscribe {link.game} {stream} {link.token}")
        return Unsubscribe(page, f"mailto:{self.settings.server_address}?subject={command}")

    def own_view(self, account: Account, game: str, now: datetime) -> str | None:
        if not self.enabled:
            return None
        return links.url(self.base, links.make_with(self.key(), account, "view", game, now))

    def home(self, account: Account, now: datetime) -> str | None:
        if not self.enabled:
            return None
        return links.home_url(self.base, links.make_with(self.key(), account, "home", "", now))

    def player_links(self, account: Account, game: str, private: bool, next_orders: str, now: datetime) -> PlayerLinks:
        """Every link a player's mail about ``game`` carries (none without the HTTP side
        but the mailto: of the next orders, which needs none)."""
        return PlayerLinks(own=self.own_view(account, game, now), home=self.home(account, now),
                           game_page=f"{self.base}/games/{game}" if self.enabled and not private else None,
                           mailto=orders_mailto(game, self.settings.domain, next_orders))


def orders_mailto(game: str, domain: str, what: str) -> str:
    """A mailto: link that opens a mail to the game with its Subject filled in
    (``what``: "orders for round 4").  The Subject starts with the game's name and
    a colon, which is no command of any game, so it never runs as one."""
    return f"mailto:{game}@{domain}?subject={quote(f'{game}: {what}')}"


@dataclass(frozen=True)
class PlayerLinks:
    """The links of one player's mail about one game (issue 42): their own view,
    their home, the game's public page (None for a private game) and a mailto: for
    the next orders.  The text part names them as URLs, the HTML part as real links."""

    own: str | None
    home: str | None
    game_page: str | None
    mailto: str | None

    def text(self, game: str) -> str:
        lines = []
        if self.own:
            lines.append(fill(f"Your own view of {game} on the web (keep this link to yourself):", 72) + f"\n{self.own}")
        if self.home:
            lines.append(f"All your games:\n{self.home}")
        return "\n\n".join(lines)

    def html(self, game: str) -> str:
        found = [(self.own, f"Your own view of {game}"), (self.home, "All your games"),
                 (self.game_page, f"The page of {game}"), (self.mailto, "Mail your next orders")]
        anchors = [f'<a href="{escape(url)}">{escape(label)}</a>' for url, label in found if url]
        if not anchors:
            return ""
        return ('<p class="links" style="font-family:sans-serif;font-size:14px;margin:16px 0">'
                + " &middot; ".join(anchors)
                + "<br><small>The own view and home links are yours alone: keep them to yourself.</small></p>")


def with_links(body: Rendered, stop: Unsubscribe | None, own: str | PlayerLinks | None, what: str,
               game: str) -> Rendered:
    """A mail's body with, at its end, the player's links (``own``: their own
    view, or all of a report's and reminder's :class:`PlayerLinks`) and the one
    that stops this stream of mail.  The HTML part has them as real links."""
    lines = []
    anchors = ""
    if isinstance(own, PlayerLinks):
        if own.text(game):
            lines.append(own.text(game))
        anchors = own.html(game)
    elif own:
        lines.append(fill(f"Your own view of {game} on the web (keep this link to yourself):", 72) + f"\n{own}")
    shown = list(lines)
    if stop is not None:
        lines.append(fill(f"One click stops these mails ({what} of {game}):", 72) + f"\n{stop.page}")
    if not lines:
        return body
    extra = "\n\n".join(lines)
    if body.html is None:
        return Rendered(body.text + "\n\n" + extra, None)
    # the links as <a href> (the text part's URL lines would be plain text in HTML)
    rest = "\n\n".join(lines[len(shown):])
    html = body.html + "\n" + (anchors if anchors else text_html("\n\n".join(shown)) if shown else "")
    if rest:
        html += "\n" + text_html(rest)
    return Rendered(body.text + "\n\n" + extra, html)


#: the bars in a report mail: the leaders only
BARS = 10


def score_bars(scores: list[tuple[str, int]], turn_name: str) -> str:
    """The leading public scores as bars for a mail's HTML part: a table of
    coloured cells sized in percent, which Gmail, Outlook and Apple Mail all
    show (no SVG, no script, no style sheet); "" without scores."""
    top = scores[:BARS]
    if not top:
        return ""
    high = max(1, max(v for _, v in top))
    rows = []
    for handle, value in top:
        width = max(1, round(100 * max(0, value) / high))
        rows.append(
            f'<tr><td style="padding:2px 8px 2px 0;font-family:sans-serif;font-size:13px">'
            f'{escape(handle)}</td><td style="width:100%;padding:2px 0">'
            f'<table role="presentation" cellpadding="0" cellspacing="0" width="{width}%"><tr>'
            f'<td style="background:#0b5cad;height:12px;line-height:12px;font-size:1px" '
            f'aria-label="{escape(handle)}: {value}">&nbsp;</td></tr></table></td>'
            f'<td style="padding:2px 0 2px 8px;font-family:sans-serif;font-size:13px;text-align:right">{value}</td></tr>')
    return (f'<p style="font-family:sans-serif;font-size:14px;margin:16px 0 4px"><b>Scores after this {escape(turn_name)}'
            f'</b> (the leaders)</p><table role="presentation" cellpadding="0" cellspacing="0" width="100%" '
            f'style="max-width:480px">' + "".join(rows) + "</table>")


def with_bars(body: Rendered, bars: str) -> Rendered:
    if not bars or body.html is None:
        return body
    return Rendered(body.text, body.html + "\n" + bars)
