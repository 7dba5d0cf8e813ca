"""Alerts where players are: a game's or a player's events posted to a chat
webhook or a phone (issue 43; docs/operations.md "Alerts").

A *channel* is a URL kept on a game (``pbm game set NAME notify=URL``, the
GM's) or on an account (``notify URL`` at pbm@, the player's own).  Its
format follows the URL (:func:`parse_target`): Discord and Slack webhooks by
host, ntfy by host ``ntfy.sh`` or a ``ntfy+`` prefix, otherwise a generic JSON
object signed with the channel's key (``X-PBM-Signature: sha256=HEX``).

Durable like mail: an alert is an outbox row of kind ``alert`` written in the
transaction of its event (:func:`enqueue_alert`).  Its ``to_addr`` names the
channel (``alert:game:ID`` or ``alert:account:ID``), never the URL: the URL
and its key are read when the row is delivered, so ``notify off`` also stops
alerts still waiting, and no webhook token sits in the outbox or its logs.
:class:`AlertDelivery` claims due rows the way mail delivery does (one UPDATE
whose row count says whose a row is), posts each, and records the outcome:
2xx sent; 5xx, timeouts and connection faults retried with doubling delays;
429 retried after its Retry-After; a redirect or any other 4xx fails the row,
stops the channel (``notify_error``) and tells its owner -- the GM or the
player -- once by mail, in the same transaction.

Server-side request forgery: only ``https://`` targets whose host is, and
resolves to, public addresses (:func:`resolve_public`), checked when the URL
is set and again before each post; the post goes to the address just checked
(the URL's host stays in the Host header and in TLS's SNI and certificate
check), so a name that resolves elsewhere a moment later cannot redirect it.
``PBM_NOTIFY_ALLOW_PRIVATE=1`` lifts the address rule (and allows plain
``http://`` to non-public addresses only) for tests and private networks.
"""

from __future__ import annotations

import email.header
import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import Integer, bindparam, or_, select
from sqlalchemy.orm import Session

from pbm_server.base import clock, logs
from pbm_server.base.errors import ServerRefused
from pbm_server.base.polling import Poller
from pbm_server.base.settings import Settings
from pbm_server.mail.compose import Composer, Rendered
from pbm_server.mail.outbound import enqueue
from pbm_server.store.db import LOCK_OUTBOUND, Database, IdleMark
from pbm_server.store.models import Account, Game, OutboundMail, table

if TYPE_CHECKING:
    # imported where a post is made: every process of a server and every
    # `pbm` command imports this module, and only posting needs httpx (70 ms)
    import httpx

log = logging.getLogger(__name__)

#: the outbox kind of an alert row
ALERT = "alert"
#: what an alert tells (the generic JSON's "event")
EVENTS = ("start", "turn", "reminder", "move", "end")
FORMATS = ("discord", "slack", "ntfy", "json")
#: the longest URL a channel takes
MAX_URL = 400
#: a post that takes longer is retried
CONNECT_SECONDS = 5.0
POST_SECONDS = 10.0
#: the longest Retry-After honoured (a longer one waits this long)
MAX_RETRY_AFTER = 3600.0

_DISCORD_HOSTS = ("discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com")


@dataclass(frozen=True)
class Target:
    """A channel's URL, read: its format and where it goes."""

    format: str
    #: the URL posted to (without a format prefix)
    url: str
    scheme: str
    host: str
    port: int

    @property
    def where(self) -> str:
        """The channel as logs and mails name it: the format and the host, never the path (a token)."""
        return f"{self.format} at {self.host}"


class Unresolved(ServerRefused):
    """The host's name could not be resolved now: at send time a reason to try again, not to stop."""


def parse_target(text: str) -> Target:
    """A channel's URL read (no lookup yet); ServerRefused says what is wrong.

    ``discord+``, ``slack+``, ``ntfy+`` or ``json+`` before the URL chooses
    the format (a self-hosted ntfy: ``ntfy+https://ntfy.example.org/topic``);
    without one, Discord is ``discord.com``/``discordapp.com`` with a path
    under ``/api/webhooks/``, Slack ``hooks.slack.com``, ntfy ``ntfy.sh``, and
    anything else the signed generic JSON."""
    raw = text.strip()
    if not raw:
        raise ServerRefused("no URL given: expected notify=https://... (or notify=off)")
    if len(raw) > MAX_URL:
        raise ServerRefused(f"the URL is {len(raw)} characters long; at most {MAX_URL} are taken")
    if any(c.isspace() or ord(c) < 32 for c in raw) or not raw.isascii():
        raise ServerRefused("the URL has spaces or characters outside ASCII; write it percent-encoded")
    chosen = None
    head, plus, rest = raw.partition("+")
    if plus and head.lower() in FORMATS and "://" in rest:
        chosen, raw = head.lower(), rest
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise ServerRefused(f"{raw!r} is not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise ServerRefused(f"alerts go only to https:// URLs, not {scheme or 'a URL without a scheme'}:")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise ServerRefused(f"{raw!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise ServerRefused("the URL carries a user name or password (USER@HOST); alerts take none")
    if parts.fragment:
        raise ServerRefused("the URL has a #fragment; alerts take none")
    fmt = chosen or _format_of(host, parts.path)
    return Target(fmt, raw, scheme, host, port or (443 if scheme == "https" else 80))


def _format_of(host: str, path: str) -> str:
    if host in _DISCORD_HOSTS and path.startswith("/api/webhooks/"):
        return "discord"
    if host == "hooks.slack.com":
        return "slack"
    if host == "ntfy.sh":
        return "ntfy"
    return "json"


def _why_not_public(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """What makes an address one alerts may not go to (None: public)."""
    if isinstance(addr, ipaddress.IPv6Address):
        inner = addr.ipv4_mapped or addr.sixtofour
        if inner is not None:
            return _why_not_public(inner)
        if addr.teredo is not None:
            return "a Teredo tunnel"
    for name, bad in (("loopback", addr.is_loopback), ("link-local", addr.is_link_local),
                      ("multicast", addr.is_multicast), ("unspecified", addr.is_unspecified),
                      ("reserved", addr.is_reserved), ("private", addr.is_private)):
        if bad:
            return f"a {name}"
    if not addr.is_global:
        return "a non-public (shared or special-purpose)"
    return None


def resolve_public(target: Target, allow_private: bool) -> list[str]:
    """The addresses of the target's host, each checked: every one must be
    public (a name with one private address among public ones is refused:
    which one a client takes is not ours to know).  With ``allow_private``
    anything goes, but plain http:// only to non-public addresses.
    ServerRefused says why not."""
    if target.scheme == "http" and not allow_private:
        raise ServerRefused("alerts go only to https:// URLs (plain http:// would show the alert and its token "
                            "to every network on the way)")
    try:
        literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        found = [literal]
    else:
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise Unresolved(f"the host {target.host} cannot be found ({exc})") from None
        found = []
        for info in infos:
            addr = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            if addr not in found:
                found.append(addr)
        if not found:
            raise ServerRefused(f"the host {target.host} has no address")
    for addr in found:
        why = _why_not_public(addr)
        through = "" if literal is not None else f"{target.host} resolves to {addr}, "
        if why is not None and not allow_private:
            raise ServerRefused(f"{through}{why} address: alerts go only to public hosts (the operator may allow "
                                f"private ones with PBM_NOTIFY_ALLOW_PRIVATE=1)")
        if target.scheme == "http" and (why is None or not allow_private):
            raise ServerRefused(f"alerts go only to https:// URLs: plain http:// is taken only to a private "
                                f"address, with PBM_NOTIFY_ALLOW_PRIVATE=1 ({through}{why or 'a public'} address)")
    return [str(a) for a in found]


def check_url(text: str, settings: Settings) -> Target:
    """A URL a GM or player sets, checked as it will be posted to."""
    target = parse_target(text)
    resolve_public(target, bool(settings.notify_allow_private))
    return target


def new_secret() -> str:
    return secrets.token_hex(32)


# -- writing alerts ----------------------------------------------------------------------------

def channel_of(owner: Game | Account) -> str:
    return f"alert:{'game' if isinstance(owner, Game) else 'account'}:{owner.id}"


def enqueue_alert(session: Session, owner: Game | Account, game: Game, event: str, text: str, now: datetime, *,
                  turn: int | None = None, path: str | None = None) -> bool:
    """One alert for ``owner``'s channel (a game's or an account's), in the
    caller's transaction; nothing when the channel is off or stopped.
    ``path``: the page it links, under the server's public URL."""
    assert event in EVENTS, event
    if not owner.notify_url or owner.notify_error:
        return False
    body = {"event": event, "game": game.name, "kind": game.kind, "turn": turn, "path": path, "text": text}
    enqueue(session, to_addr=channel_of(owner), message_id=f"<alert.{uuid.uuid4().hex}@pbm>",
            raw=json.dumps(body).encode(), kind=ALERT, now=now, game_id=game.id)
    return True


# -- what is posted ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Post:
    body: bytes
    headers: dict[str, str]


def _base_url(settings: Settings) -> str:
    return (settings.public_url or (f"http://{settings.http_listen}" if settings.http_listen else "")).rstrip("/")


def render(target: Target, alert: dict[str, Any], secret: str | None, settings: Settings, sent_at: datetime) -> Post:
    """The request body and headers of one alert in the target's format."""
    path = alert.get("path")
    base = _base_url(settings)
    url = base + path if path and base else None
    text = str(alert["text"])
    with_link = text + (f"\n{url}" if url else "")
    headers = {"User-Agent": "pbm-server alerts", "X-PBM-Event": str(alert["event"])}
    if target.format == "discord":
        # no @everyone or role pings, whatever a handle looks like
        doc: dict[str, Any] = {"content": with_link[:2000], "allowed_mentions": {"parse": []}}
        return Post(json.dumps(doc).encode(), {**headers, "Content-Type": "application/json"})
    if target.format == "slack":
        escaped = with_link.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return Post(json.dumps({"text": escaped}).encode(), {**headers, "Content-Type": "application/json"})
    if target.format == "ntfy":
        title = _title(alert)
        extra = {"Title": title if title.isascii() else email.header.Header(title, "utf-8").encode(),
                 "Content-Type": "text/plain; charset=utf-8"}
        if url:
            extra["Click"] = url
        if alert["event"] in ("move", "reminder"):
            extra["Priority"] = "high"
        return Post(text.encode(), {**headers, **extra})
    doc = {"event": alert["event"], "game": alert["game"], "kind": alert["kind"], "turn": alert["turn"], "url": url,
           "text": text, "sent_at": sent_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    body = json.dumps(doc, ensure_ascii=False).encode()
    headers["Content-Type"] = "application/json"
    if secret:
        headers["X-PBM-Signature"] = "sha256=" + sign(secret, body)
    return Post(body, headers)


def sign(secret: str, body: bytes) -> str:
    """HMAC-SHA256 of the exact body bytes, keyed with the channel's secret (its hex text as bytes)."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _title(alert: dict[str, Any]) -> str:
    game = alert["game"]
    return {"start": f"{game} has started", "turn": f"{game}: turn {alert['turn']} processed",
            "reminder": f"{game}: orders due", "move": f"{game}: your move",
            "end": f"{game} is over"}.get(alert["event"], str(game))


# -- delivering --------------------------------------------------------------------------------

SENT, RETRY, FAIL, DROP = "sent", "retry", "fail", "drop"

_OUT = table(OutboundMail)
_FREE = or_(_OUT.c.claimed_until.is_(None), _OUT.c.claimed_until < bindparam("now"),
            _OUT.c.claimed_by == bindparam("me"))
_DUE = (select(_OUT.c.id).where(_OUT.c.status == "pending", _OUT.c.kind == ALERT,
                                _OUT.c.next_attempt_at <= bindparam("now"), _FREE)
        .order_by(_OUT.c.id).limit(bindparam("n", type_=Integer)))
# any alert row at all still to post, due or not: while one waits for a later
# attempt, time alone makes it due, so an idle pass must keep looking
_ANY_PENDING = select(_OUT.c.id).where(_OUT.c.status == "pending", _OUT.c.kind == ALERT).limit(1)
_CLAIM = (_OUT.update().where(_OUT.c.id.in_(bindparam("ids", expanding=True)), _OUT.c.status == "pending", _FREE)
          .values(claimed_by=bindparam("me"), claimed_until=bindparam("until", type_=_OUT.c.claimed_until.type)))
_RENEW = (_OUT.update().where(_OUT.c.id == bindparam("row_id"), _OUT.c.status == "pending",
                             _OUT.c.claimed_by == bindparam("me"))
          .values(claimed_until=bindparam("until", type_=_OUT.c.claimed_until.type)))
_MINE = (select(_OUT.c.id).where(_OUT.c.id.in_(bindparam("ids", expanding=True)), _OUT.c.status == "pending",
                                 _OUT.c.claimed_by == bindparam("me")).order_by(_OUT.c.id))


@dataclass
class Attempt:
    """What became of one post."""

    outcome: str
    error: str | None = None
    #: RETRY: wait this long (a 429's Retry-After); None: the doubling delay
    wait: float | None = None


def retry_after(value: str | None, now: datetime) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - now).total_seconds())


class AlertDelivery(Poller):
    """Posts the due alert rows of the outbox until stopped."""

    def __init__(self, db: Database, settings: Settings, identity: str):
        # alerts are not replies someone waits for: a quarter of a second at the
        # most often (the tests poll every 50 ms), to keep the idle reads few
        super().__init__(max(settings.poll_seconds, 0.25))
        self.db = db
        self.settings = settings
        self.identity = identity
        self._client: httpx.Client | None = None
        self._composer: Composer | None = None
        self.idle = IdleMark(db)

    def client(self) -> httpx.Client:
        """One client for every post: certificates checked against the
        system's store (OpenSSL reads SSL_CERT_FILE when the context is made),
        redirects not followed, no proxy from the environment (it would
        connect for us, past the address check), short timeouts."""
        if self._client is None:
            import httpx

            self._client = httpx.Client(verify=ssl.create_default_context(), follow_redirects=False,
                                        trust_env=False,
                                        timeout=httpx.Timeout(POST_SECONDS, connect=CONNECT_SECONDS))
        return self._client

    def run(self, after_busy: Callable[[float], None] | None = None) -> None:
        try:
            super().run(after_busy)
        finally:
            if self._client is not None:
                self._client.close()

    def step(self) -> int:
        return self.run_once()

    def run_once(self, limit: int = 20) -> int:
        # nothing committed anywhere since a look found no alert pending at
        # all: none is due now either (SQLite; Database.change_mark)
        if self.idle.unchanged():
            return 0
        now = clock.now()
        with self.db.read() as s:
            conn = s.connection()
            due = list(conn.execute(_DUE, {"now": now, "me": self.identity, "n": limit}).scalars())
            if not due and conn.execute(_ANY_PENDING).first() is None:
                self.idle.found_nothing()
        if not due:
            return 0
        lease = timedelta(seconds=self.settings.outbound_claim_seconds)
        with self.db.write(lock=LOCK_OUTBOUND) as s:
            conn = s.connection()
            conn.execute(_CLAIM, {"ids": due, "now": now, "me": self.identity, "until": now + lease})
            mine = list(conn.execute(_MINE, {"ids": due, "me": self.identity}).scalars())
        for row_id in mine:
            if self._stop.is_set():
                break
            self.deliver(row_id)
        return len(mine)

    def deliver(self, row_id: int) -> None:
        """One claimed row posted.  The claim is renewed first, in a write of
        its own, and the row is posted only if it is still ours: a claim that
        expired meanwhile (a long pass, a clock that jumped) and was taken by
        another server is left to that server -- each alert is posted by the
        holder of a fresh claim only, which outlasts any one post."""
        lease = timedelta(seconds=self.settings.outbound_claim_seconds)
        with self.db.write(lock=LOCK_OUTBOUND) as s:
            now = clock.now()
            kept = s.connection().execute(_RENEW, {"row_id": row_id, "me": self.identity, "until": now + lease})
            if kept.rowcount != 1:
                return
            row = s.get(OutboundMail, row_id)
            if row is None:
                return
            channel, raw, delivery_id = row.to_addr, row.raw, row.message_id.strip("<>")
            owner = _owner(s, channel)
            url = owner.notify_url if owner is not None and not owner.notify_error else None
            secret = owner.notify_secret if owner is not None else None
        started = time.monotonic()
        if url is None:
            attempt, where = Attempt(DROP, "not sent: the channel was turned off or stopped"), channel
        else:
            alert = json.loads(raw)
            try:
                target = parse_target(url)
                where = target.where
                attempt = self.post(target, alert, secret, delivery_id)
            except Unresolved as exc:  # DNS fails for a while: as a host that does not answer
                attempt = Attempt(RETRY, str(exc))
            except ServerRefused as exc:
                where = "alerts"
                attempt = Attempt(FAIL, f"the URL is refused now: {exc}")
        self._record(row_id, attempt)
        ms = (time.monotonic() - started) * 1000
        log.info("alert out: outbox %s (%s) to %s: %s%s, %.1f ms", row_id, channel, where, attempt.outcome,
                 f": {attempt.error}" if attempt.error else "", ms,
                 extra=logs.facts(event="alert out", outbox=row_id, recipient=channel, result=attempt.outcome,
                                  error=attempt.error, ms=round(ms, 1)))

    def post(self, target: Target, alert: dict[str, Any], secret: str | None, delivery_id: str = "") -> Attempt:
        """One post, to an address checked just now (ServerRefused: none is public).
        ``delivery_id`` (header X-PBM-Delivery) is the same on every attempt of
        one alert: a receiver may drop a second copy (after a kill between the
        receiver's answer and the row marked sent, the alert is posted again)."""
        import httpx

        addresses = resolve_public(target, bool(self.settings.notify_allow_private))
        now = clock.now()
        post = render(target, alert, secret, self.settings, now)
        if delivery_id:
            post.headers["X-PBM-Delivery"] = delivery_id
        parts = urlsplit(target.url)
        default_port = 443 if target.scheme == "https" else 80
        host_header = target.host if target.port == default_port else f"{target.host}:{target.port}"
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        answer: httpx.Response | None = None
        for address in addresses[:3]:  # the next address only when this one cannot be connected to
            shown = f"[{address}]" if ":" in address else address
            pinned = parts._replace(netloc=f"{shown}:{target.port}").geturl()
            try:
                answer = self.client().post(pinned, content=post.body,
                                            headers={**post.headers, "Host": host_header}, extensions=extensions)
                break
            except httpx.ConnectError as exc:
                failed = Attempt(RETRY, f"{target.where} could not be reached ({exc})")
            except httpx.TimeoutException:
                return Attempt(RETRY, f"{target.where} did not answer in time")
            except httpx.TransportError as exc:
                return Attempt(RETRY, f"{target.where} failed ({type(exc).__name__}: {exc})")
        if answer is None:
            return failed
        code = answer.status_code
        if 200 <= code < 300:
            return Attempt(SENT)
        said = f"{target.where} answered {code} {answer.reason_phrase}"
        if code == 429:
            return Attempt(RETRY, said, retry_after(answer.headers.get("Retry-After"), now))
        if code >= 500:
            return Attempt(RETRY, said)
        if 300 <= code < 400:
            return Attempt(FAIL, f"{said} (a redirect to {answer.headers.get('Location', '?')}); alerts follow no "
                                 "redirects: set the URL it points to")
        return Attempt(FAIL, said)

    def _record(self, row_id: int, attempt: Attempt) -> None:
        with self.db.write(lock=LOCK_OUTBOUND) as s:
            row = s.get(OutboundMail, row_id)
            if row is None or row.status != "pending" or row.claimed_by != self.identity:
                return
            now = clock.now()
            row.attempts += 1
            row.claimed_by = row.claimed_until = None
            row.last_error = attempt.error
            if attempt.outcome == SENT:
                row.status, row.sent_at = "sent", now
                return
            expired = now - row.created_at >= timedelta(seconds=self.settings.retry_period_seconds)
            if attempt.outcome == RETRY and not expired:
                wait = attempt.wait
                if wait is None:
                    wait = min(self.settings.retry_base_seconds * (2 ** (row.attempts - 1)),
                               self.settings.retry_max_seconds)
                row.next_attempt_at = now + timedelta(seconds=min(wait, MAX_RETRY_AFTER))
                return
            row.status = "failed"
            if attempt.outcome == DROP:
                return
            why = attempt.error or "failed"
            if expired and attempt.outcome == RETRY:
                why = f"{why}; given up after {row.attempts} attempts"
            self._stop_channel(s, row, why, now)

    def _stop_channel(self, s: Session, row: OutboundMail, why: str, now: datetime) -> None:
        """The channel is stopped (no more alerts are written for it) and its
        owner told once, by mail, in the row's transaction."""
        owner = _owner(s, row.to_addr)
        if owner is None or owner.notify_error:
            return
        owner.notify_error = f"{now:%Y-%m-%d %H:%M} UTC: {why}"[:2000]
        if self._composer is None:
            self._composer = Composer(self.settings)
        composer = self._composer
        if isinstance(owner, Game):
            to = self.settings.gm_address
            if not to:
                return
            what = f"The alerts of {owner.name} stopped: {why}."
            body = composer.render("server/gm_notice.txt", {"what": what, "details": [
                ("game", owner.name),
                ("what happens", "no more alerts are sent for this game until you set the URL again "
                                 f"(pbm game set {owner.name} notify=URL, or notify=off)"),
            ]})
            mid, raw = composer.message(to_addr=to, to_name="game master", from_local="pbm",
                                        subject=f"pbm-server: the alerts of {owner.name} stopped", body=body,
                                        auto="auto-generated", now=now)
            enqueue(s, to_addr=to, message_id=mid, raw=raw, kind="gm", now=now, game_id=owner.id)
            return
        text = (f"Your alerts stopped: {why}.\n\nNo more alerts are sent to you until you set a URL again: "
                f"mail \"notify URL\" (or \"notify off\") to {self.settings.server_address}.")
        mid, raw = composer.message(to_addr=owner.email, to_name=owner.handle, from_local="pbm",
                                    subject="pbm-server: your alerts stopped", body=Rendered(text),
                                    auto="auto-generated", now=now)
        enqueue(s, to_addr=owner.email, message_id=mid, raw=raw, kind="notice", now=now)


def _owner(s: Session, channel: str) -> Game | Account | None:
    _, what, ident = (channel.split(":") + ["", "", ""])[:3]
    if not ident.isdigit():
        return None
    if what == "game":
        return s.get(Game, int(ident))
    return s.get(Account, int(ident))
