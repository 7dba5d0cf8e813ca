"""The HTTP side as an ASGI application (Starlette): ``/healthz``,
``/metrics`` and the public game pages with their JSON twins and Atom feeds.

Every database read and every page is made in a worker thread (Starlette's
thread pool), so a slow read never stalls the event loop; the pacing of pages
(Pacer) waits on the event loop, so pages waiting their turn hold no thread
and /healthz, /metrics and the links stay prompt.  The HTTP side runs apart
from the listener and the back ends (running/server.py), so a flood of
requests never delays mail.  Pages are read-only; they show only what an
observer may see (web/pages.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import resources
from typing import Any, cast
from urllib.parse import parse_qs
from xml.sax.saxutils import escape as xml_escape

import anyio
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from games import get_rules
from pbm_server.accounts import links
from pbm_server.accounts.throttle import OK, THROTTLED, CredentialGate
from pbm_server.base import clock
from pbm_server.base.durations import plain_number
from pbm_server.base.printable import xml_chars
from pbm_server.base.settings import Settings
from pbm_server.commands.recovery import mail_unlock_code
from pbm_server.mail.compose import TEMPLATE_PACKAGE, Composer
from pbm_server.mail.inbound import store_messages
from pbm_server.mail.queues import mailbox_state, waiting
from pbm_server.play import streams
from pbm_server.play.streams import orders_mailto
from pbm_server.store.db import Database
from pbm_server.store.lookup import audit, credentials_by_email
from pbm_server.web import home, pages
from pbm_server.web.metrics import MailMetrics

#: no script anywhere, no inline style, nothing from elsewhere.  ``connect-src 'self'``: no script runs
#: here to use it, but a tool that reads the site from inside a page (Lighthouse reads /robots.txt
#: with fetch()) was refused by ``default-src 'none'``
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


log = logging.getLogger(__name__)

#: after each page the HTTP side rests this many times the CPU time it took,
#: and it makes at most PAGES_PER_SECOND pages (mail first: docs/web.md)
REST_FACTOR = 3.0
PAGES_PER_SECOND = 100
#: a turn number in a page's URL has at most this many digits (more: 404)
TURN_DIGITS = 9
#: the most an unsubscribe POST may carry: its form is ``List-Unsubscribe=One-Click``
BODY_LIMIT = 2000
#: requests worked on at once (their pages made, waiting for their pace, or read); more are answered 503
#: at once, except /healthz, which is always answered (Guard)
REQUESTS_AT_ONCE = 200
#: the only paths answered whatever the load: a monitor must never see the server as down because
#: pages are flooded
UNLIMITED_PATHS = frozenset({"/healthz"})


#: how long a browser or a proxy may keep what it got (docs/web.md): a public page, twin or feed
#: a minute (a turn or a move changes it; after that minute a repeated GET costs a 304);
#: the stylesheet (its link names its hash) a year, the icon and robots.txt a day
PAGE_LIFETIME = "public, max-age=60"
STATIC_LIFETIME = "public, max-age=31536000, immutable"
DAY_LIFETIME = "public, max-age=86400"
#: links for one player (their own view, a stream's settings) and every answer but 200/304
PRIVATE = "private, no-store"
NO_STORE = "no-store"
#: text answers at least this long are sent gzipped to a client that accepts it (below it the
#: header and the work cost more than the bytes saved)
GZIP_MINIMUM = 1024
#: paths only their addressee may see: kept by no cache, indexed by no search engine
PRIVATE_PREFIXES = ("/me/", "/unsubscribe/")

ROBOTS = """# the public games, their turns and players may be read and indexed;
# a player's own links and mail settings are theirs alone
User-agent: *
Allow: /
Disallow: /me/
Disallow: /unsubscribe/
Disallow: /healthz
Disallow: /metrics
"""

#: an envelope and a seal: a game by mail
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" '
           'fill="#0b5cad"/><path d="M6 10h20v13H6z" fill="#fff"/><path d="M6 10l10 8 10-8" fill="none" '
           'stroke="#0b5cad" stroke-width="2"/><circle cx="24" cy="23" r="5" fill="#f2b705" stroke="#fff" '
           'stroke-width="1.5"/></svg>\n')


def lifetime(path: str, status: int) -> str:
    """The Cache-Control of an answer on ``path`` (:data:`PAGE_LIFETIME` and the others)."""
    if path.startswith(PRIVATE_PREFIXES):
        return PRIVATE
    if status not in (200, 304) or path in ("/healthz", "/metrics"):
        return NO_STORE
    if path.startswith("/static/"):
        return STATIC_LIFETIME
    if path in ("/favicon.ico", "/favicon.svg", "/robots.txt"):
        return DAY_LIFETIME
    return PAGE_LIFETIME


def etag_matches(header: str, tag: str) -> bool:
    """Whether an If-None-Match header names ``tag`` (weak comparison, RFC 9110 13.1.2)."""
    if header.strip() == "*":
        return True
    return any(t.strip().removeprefix("W/") == tag.removeprefix("W/") for t in header.split(","))


class Freshness:
    """Cache-Control on every answer (:func:`lifetime`), ``X-Robots-Tag: noindex``
    on the private ones, and for a public 200 to a GET or HEAD a weak ETag of its
    body: a repeated GET with If-None-Match gets a 304 without the body.  Inside
    the gzip layer, so the tag is the page's, whatever its encoding (hence weak)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        private = path.startswith(PRIVATE_PREFIXES)
        tagged = scope.get("method") in ("GET", "HEAD") and not private
        asked = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"if-none-match"), None)
        start: Message | None = None
        chunks: list[bytes] = []

        async def answer(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                # a copy: the headers list is the response's own, and a kept page's response is sent again
                message = {**message, "headers": list(message.get("headers", []))}
                headers = MutableHeaders(scope=message)
                status = int(message["status"])
                if "cache-control" not in headers or private or status != 200:
                    headers["Cache-Control"] = lifetime(path, status)
                if private:
                    headers["X-Robots-Tag"] = "noindex, nofollow"
                if not tagged or status != 200:
                    await send(message)
                    return
                start = message  # held until the whole body is known
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            tag = 'W/"' + hashlib.sha256(body).hexdigest()[:20] + '"'
            headers = MutableHeaders(scope=start)
            headers["ETag"] = tag
            if asked is not None and etag_matches(asked, tag):
                start["status"] = 304
                for name in ("content-length", "content-type"):
                    if name in headers:
                        del headers[name]
                await send(start)
                await send({"type": "http.response.body", "body": b""})
                return
            await send(start)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, answer)


def error_page(status: int, text: str, domain: str = "") -> Response:
    """A 403 or 404 as a small page of the site's look, with a way home; the
    same words as a client that asks for no HTML reads them."""
    heading = {403: "This link does not open the page", 404: "No such page"}.get(status, "Not here")
    place = f" at {xml_escape(domain)}" if domain else ""
    body = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="color-scheme" content="light dark">\n<meta name="robots" content="noindex">\n'
            f'<title>{heading}</title>\n<link rel="icon" href="/favicon.svg" type="image/svg+xml">\n'
            f'<link rel="stylesheet" href="/static/pbm.css"></head>\n<body>\n<main>\n<h1>{heading}</h1>\n'
            f'<p>{xml_escape(text)}</p>\n<p><a href="/">Back to the games{place}</a></p>\n</main>\n</body></html>\n')
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, "Cache-Control": NO_STORE})


def odd_path(path: str) -> bool:
    """Whether a request's path (percent-decoded, as routes see it) has a
    character no page's path has: a control character (C0, DEL, C1), a line
    or paragraph separator.  Starlette's ``request.url`` drops tabs and line
    feeds (urllib.parse.urlsplit does), so ``/games/g1/turns/1%0a`` was both
    the kept page of ``/games/g1/turns/1`` and a route with turn 1 and a line feed."""
    return any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in path)


class Guard:
    """What every request and every response of the HTTP side goes through
    (the outermost ASGI layer, around the Starlette app and its handler of
    500s: running/httpside.py serves ``Guard(make_app(...))``; issue 41):

    - ``X-Content-Type-Options: nosniff`` on every response (pages, twins,
      feeds, errors, /healthz, /metrics), so no browser reads a JSON twin
      or a feed as HTML;
    - a path with a control character is a 404 before any route or kept
      page sees it (:func:`odd_path`);
    - at most REQUESTS_AT_ONCE requests in the app at once: more get a 503
      with Retry-After at once, except /healthz.  Only requests that are
      all in are counted: a client still sending its request line holds
      none of them (running/httpside.py times it out).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.busy = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if "x-content-type-options" not in headers:
                    headers["X-Content-Type-Options"] = "nosniff"
            await send(message)

        path = scope.get("path", "")
        if odd_path(path):
            await error_page(404, "There is no page here.")(scope, receive, nosniff)
            return
        if path in UNLIMITED_PATHS:
            await self.app(scope, receive, nosniff)
            return
        if self.busy >= REQUESTS_AT_ONCE:
            await PlainTextResponse("the server is busy: try again in a moment\n", status_code=503,
                                    headers={**SECURITY_HEADERS, "Retry-After": "5"})(scope, receive, send)
            return
        self.busy += 1
        try:
            await self.app(scope, receive, nosniff)
        finally:
            self.busy -= 1


class Pacer:
    """Pages one at a time, each after the rest the one before earned: REST_FACTOR
    times its CPU time, and at least 1/PAGES_PER_SECOND.  The waiting is done
    on the event loop (an asyncio lock and sleep), and the page is made in a
    thread of its own limiter, so a flood of page requests holds none of the
    thread pool that /healthz, /metrics and the links need."""

    def __init__(self) -> None:
        self.next_at = 0.0  # when the next page may be made (monotonic seconds)
        self._lock: asyncio.Lock | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: pages made (not served kept), and requests now waiting for their turn: what tests look at
        self.made = 0
        self.waiting = 0

    async def run(self, serve: Callable[[Request], Response], request: Request) -> Response:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._limiter is None or self._loop is not loop:  # made on the loop that serves
            self._lock, self._limiter, self._loop = asyncio.Lock(), anyio.CapacityLimiter(1), loop
        lock, limiter = self._lock, self._limiter
        self.waiting += 1  # from here until its page is begun
        try:
            await lock.acquire()
        except BaseException:
            self.waiting -= 1
            raise
        try:
            try:  # re-read after each sleep: whoever set next_at later (a test, a longer rest) is obeyed
                while (rest := self.next_at - time.monotonic()) > 0:
                    await asyncio.sleep(min(rest, 1.0))
            finally:
                self.waiting -= 1
            began = time.monotonic()
            response, took = await anyio.to_thread.run_sync(self._timed, serve, request, limiter=limiter)
            self.next_at = began + max(took * (1 + REST_FACTOR), 1 / PAGES_PER_SECOND)
        finally:
            lock.release()
        return response

    @staticmethod
    def _timed(serve: Callable[[Request], Response], request: Request) -> tuple[Response, float]:
        cpu = time.thread_time()
        response = serve(request)
        return response, time.thread_time() - cpu


class PageCache:
    """Pages as made for a stamp of what they show (web/pages.py: the game's
    version, status, turn, deadline), kept by their path (a query string
    changes nothing on a page, so it makes no new one): a page is made once
    per change of its game, however often it is asked for.  Bounded: the
    oldest go first."""

    SIZE = 512
    #: a page checked against its game this recently is served without asking the database again
    FRESH_SECONDS = 1.0

    def __init__(self) -> None:
        self._pages: dict[str, tuple[tuple[Any, ...], Response, float]] = {}
        self._lock = threading.Lock()

    def fresh(self, key: str) -> Response | None:
        with self._lock:
            found = self._pages.get(key)
        return found[1] if found is not None and time.monotonic() - found[2] < self.FRESH_SECONDS else None

    def get(self, key: str, stamp: tuple[Any, ...]) -> Response | None:
        with self._lock:
            found = self._pages.get(key)
            if found is None or found[0] != stamp:
                return None
            self._pages[key] = (stamp, found[1], time.monotonic())
        return found[1]

    def put(self, key: str, stamp: tuple[Any, ...], response: Response) -> Response:
        if response.status_code == 200:
            with self._lock:
                self._pages.pop(key, None)
                while len(self._pages) >= self.SIZE:
                    self._pages.pop(next(iter(self._pages)))
                self._pages[key] = (stamp, response, time.monotonic())
        return response


async def _small_body(request: Request, limit: int = BODY_LIMIT) -> bytes | None:
    """The request's body, or None when it is over ``limit``: a Content-Length
    over it is refused unread, and a body without one is read only that far."""
    declared = request.headers.get("content-length", "")
    if declared and (plain_number(declared, 12) is None or int(declared) > limit):
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


def _environment() -> Environment:
    return Environment(loader=PackageLoader(TEMPLATE_PACKAGE, "."),
                       autoescape=select_autoescape(enabled_extensions=("html", "xml"), default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined, auto_reload=False)


def make_app(db: Database, settings: Settings | None = None,
             on_stored: Callable[[], None] | None = None) -> Starlette:
    """``on_stored``: called after an own view's form stored a mail in the inbox
    (wakes the workers of this process; the others find it at their next poll)."""
    metrics = MailMetrics(db)
    domain = settings.domain if settings is not None else "pbm.localhost"
    composer = Composer(settings) if settings is not None else None
    env = _environment()
    # one stylesheet for the pages: their own rules, then the boards' (the mails use the same two: compose.py)
    sheets = resources.files(TEMPLATE_PACKAGE)
    stylesheet = (sheets.joinpath("web", "pbm.css").read_text(encoding="utf-8") + "\n"
                  + sheets.joinpath("boards.css").read_text(encoding="utf-8"))
    #: the stylesheet's link names its content: a new stylesheet is a new URL, so it may be kept a year
    css_version = hashlib.sha256(stylesheet.encode()).hexdigest()[:12]

    def public(value: Any) -> Any:
        """With PBM_MAILBOX_ADDRESS, our addresses in a page or its data as
        players write to them (Composer.public); otherwise ``value`` as it is."""
        if composer is None or not composer.settings.mailbox_address:
            return value
        if isinstance(value, str):
            return composer.public(value)
        if isinstance(value, dict):
            return {k: public(v) for k, v in value.items()}
        if isinstance(value, list):
            return [public(v) for v in value]
        return value

    def html(template: str, data: dict[str, Any], json_url: str, description: str = "") -> Response:
        body = env.get_template(template).render(
            domain=domain, json_url=json_url, css_version=css_version,
            description=description or f"Play-by-mail games at {domain}: games to join, their boards, turns and players.",
            **data)
        return HTMLResponse(public(body), headers=SECURITY_HEADERS)

    def error(status: int, text: str) -> Response:
        heading = {403: "This link does not open the page", 404: "No such page"}.get(status, "Not here")
        body = env.get_template("web/error.html").render(
            domain=domain, json_url="/games.json", css_version=css_version, heading=heading, text=text,
            description=text)
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    def read(build: Callable[..., dict[str, Any] | None], *args: Any) -> dict[str, Any] | None:
        with db.read() as s:
            return cast("dict[str, Any] | None", public(build(s, *args)))

    def healthz(request: Request) -> Response:
        """200 while the database answers, with what waits; 503 when it does not."""
        try:
            with db.read() as s:
                w = waiting(s)
                box = mailbox_state(s)
        except Exception as exc:  # the database is down, locked or gone: say so (its kind only), do not crash
            log.warning("/healthz: the database does not answer: %s", " ".join(str(exc).split())[:500])
            return JSONResponse({"status": "unavailable", "database": type(exc).__name__}, status_code=503)
        now = clock.now()
        # the IMAP mailbox (PBM_IMAP_URL): when it was last read, whether it fails now (never its address)
        mailbox = {} if box is None else {
            "mailbox_last_read_at": box.last_read_at.isoformat() if box.last_read_at else None,
            "mailbox_last_read_seconds": round((now - box.last_read_at).total_seconds(), 3)
            if box.last_read_at else None,
            "mailbox_failing": box.fault_since is not None,
        }
        return JSONResponse({
            "status": "ok",
            "inbox_waiting": w.inbox_new,
            "inbox_oldest_waiting_seconds": round((now - w.oldest_new_at).total_seconds(), 3)
            if w.oldest_new_at else 0,
            "outbox_pending": w.outbox_pending,
            "outbox_oldest_pending_seconds": round((now - w.oldest_pending_at).total_seconds(), 3)
            if w.oldest_pending_at else 0,
            "outbox_failed": w.outbox_failed,
            "inbox_shunted": w.inbox_shunted,
            **mailbox,
        })

    def metrics_page(request: Request) -> Response:
        try:
            body = metrics.exposition()
        except Exception as exc:  # its kind only: the text may name hosts, paths or rows
            log.warning("/metrics: the database does not answer: %s", " ".join(str(exc).split())[:500])
            return PlainTextResponse(f"database unavailable: {type(exc).__name__}\n", status_code=503)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    def not_found(what: str) -> Response:
        return error(404, what[:1].upper() + what[1:] + ".")

    cache = PageCache()
    #: pages are made one at a time: a flood of requests waits here, not for the CPU the mail needs
    pacer = Pacer()
    #: the feed's links start where the mails' links do: PBM_PUBLIC_URL, else http://PBM_HTTP_LISTEN;
    #: never from the request's Host header (anyone may send any; issue 41)
    base = links.base_url(settings.public_url, settings.http_listen) if settings is not None \
        else f"http://{domain}"

    def page_key(request: Request) -> str:
        """What a kept page is found by: its path as the route saw it (percent-decoded;
        no query string, no host).  Not ``request.url.path``: that is parsed again
        and loses tabs and line feeds, so two routes would share one page."""
        path: str = request.scope["path"]
        return path

    def cached(make: Callable[[Request], Response]) -> Callable[[Request], Any]:
        """``make`` runs only when the page's game changed since it last ran."""

        async def handler(request: Request) -> Response:
            return await pacer.run(serve, request)

        def serve(request: Request) -> Response:
            key = page_key(request)
            fresh = cache.fresh(key)
            if fresh is not None:
                return fresh
            name = request.path_params.get("name", "").removesuffix(".json")
            with db.read() as s:
                stamp = pages.game_stamp(s, name) if name else pages.index_stamp(s)
            if stamp is None:  # no such game, or a private one: the same answer on every page of it
                return not_found(f"no game named {name} here")
            kept = cache.get(key, stamp)
            if kept is not None:
                return kept
            pacer.made += 1
            return cache.put(key, stamp, make(request))

        return handler

    def index(request: Request) -> Response:
        data = read(pages.games_index, domain) or {}
        return html("web/index.html", data, "/games.json",
                    f"The play-by-mail games at {domain}: what each plays, its next deadline and how to join.")

    def index_json(request: Request) -> Response:
        return JSONResponse(read(pages.games_index, domain))

    def game(request: Request) -> Response:
        name = request.path_params["name"]
        as_json = name.endswith(".json")
        name = name.removesuffix(".json")
        data = read(pages.game_page, composer, name, domain) if composer is not None else None
        if data is None:
            return not_found(f"no game named {name} here")
        if as_json:
            chart = data["chart"]
            return JSONResponse({k: v for k, v in data.items() if k not in ("board", "chart", "colours",
                                                                             "move_turns_shown")}
                                | {"board": [{"title": p["title"], "text": p["text"]} for p in data["board"]],
                                   "scores": [{"handle": r["handle"], "by_turn": {str(t): v for t, v in r["scores"].items()}}
                                              for r in chart["rows"]] if chart else [],
                                   "scores_after": chart.get("after", "turn") if chart else None,
                                   "trends": {name: [{"handle": r["handle"],
                                                      "by_turn": {str(t): v for t, v in r["scores"].items()}}
                                                     for r in more["rows"]]
                                              for name, more in (chart.get("more") or {}).items() if more}
                                   if chart else {}})
        return html("web/game.html", data, f"/games/{data['name']}.json",
                    f"{data['name']}, a game of {data['title']} played by e-mail at {domain} ({data['status']}, "
                    f"{data['players']} player{'' if data['players'] == 1 else 's'}): its board, turns and press.")

    def turn(request: Request) -> Response:
        name, number = request.path_params["name"], request.path_params["turn"]
        as_json = number.endswith(".json")
        number = number.removesuffix(".json")
        turn_number = plain_number(number, TURN_DIGITS)
        data = read(pages.turn_page, composer, name, turn_number) \
            if turn_number is not None and composer is not None else None
        if data is None:
            return not_found(f"{name} has no processed turn {number[:20]}")
        if as_json:
            return JSONResponse({k: v for k, v in data.items() if k != "sections"})
        return html("web/turn.html", data, f"/games/{data['name']}/turns/{data['turn']}.json",
                    f"What happened in turn {data['turn']} of {data['name']}, a play-by-mail game at {domain}.")

    def feed(request: Request) -> Response:
        name = request.path_params["name"]
        data = read(pages.game_page, composer, name, domain) if composer is not None else None
        if data is None:
            return not_found(f"no game named {name} here")
        times = [t["processed_at"] for t in data["turns"][-1:]] + [p["sent_at"] for p in data["press"][:1]]
        updated = max(times) if times else datetime(2000, 1, 1, tzinfo=timezone.utc).isoformat()
        # the newest turns' scores and the newest turns of moves (curio moves, sequence plays)
        with db.read() as s:
            entries = pages.feed_entries(s, composer, name, data) if composer is not None else []
        if entries:
            updated = max([updated, *(e["updated"] for e in entries if e["updated"])])
        body = public(env.get_template("web/feed.xml").render(domain=domain, base=base, updated=updated,
                                                              entries=entries or [], **data))
        # a press or a name may hold a character XML 1.0 allows nowhere (U+FFFE, C0 controls):
        # one would make the feed no XML for every reader (issue 41.5)
        return Response(xml_chars(body), media_type="application/atom+xml")

    def player(request: Request) -> Response:
        handle = request.path_params["handle"]
        as_json = handle.endswith(".json")
        handle = handle.removesuffix(".json")
        data = read(pages.player_page, handle)
        if data is None:
            return not_found(f"no player called {handle} plays a public game here")
        if as_json:
            return JSONResponse({"handle": data["handle"], "games": data["games"], "reliability": data["reliability"],
                                 "curio_ratings": [{"game": r["game"], "start": r["start"],
                                                    "history": [{k: v for k, v in row.items() if k not in ("n", "handle")}
                                                                for row in r["history"]]}
                                                   for r in data["ratings"]]})
        return html("web/player.html", data, f"/players/{data['handle']}.json",
                    f"{data['handle']} at {domain}: the public play-by-mail games they play, and their ratings.")

    def own(request: Request) -> Response:
        handle, name = request.path_params["handle"], request.path_params["name"]
        token = request.query_params.get("k", "")
        sent = plain_number(request.query_params.get("sent", ""), 12)
        return own_response(handle, name, token, sent)

    def own_data(s: Any, handle: str, name: str, token: str, sent: int | None) -> dict[str, Any] | None:
        """The own view (pages.own_page) with its links home, its orders form and,
        after a form was sent (``sent``: its inbox id), what became of it."""
        data = pages.own_page(s, composer, handle, name, token) if composer is not None else None
        game = pages.any_game(s, name)
        now = clock.now()
        account = links.check(s, "view", handle, game.name, token, now) if data is not None and game else None
        if data is None or game is None or account is None:
            return None
        rules = get_rules(game.kind)
        what = f"orders for {rules.turn_name} {game.turn}" if rules.has_turns else "your move"
        return data | {
            "home": home.home_link(s, account, now), "form": home.new_form(s, account, game.name),
            "action": f"/me/{account.handle}/{game.name}?k={token}", "address": f"{game.name}@{domain}",
            "mailto": orders_mailto(game.name, domain, what), "public": not game.private,
            "sent": home.sent_outcome(s, account, game, sent, domain) if sent is not None else None,
            "notice": None, "orders_text": "", "orders_chars": home.ORDERS_CHARS,
            # the form carries a password: the page says so when it is not reached over https
            "https": base.startswith("https://"),
        }

    def own_response(handle: str, name: str, token: str, sent: int | None, notice: str | None = None,
                     orders_text: str = "", status: int = 200) -> Response:
        data = read(own_data, handle, name, token, sent)
        if data is None:
            return error(403, "This link does not open a game any more: it has expired, or the password changed "
                              f"since it was sent. Mail 'status {name}' to pbm@{domain} for a new one.")
        data.update(notice=notice, orders_text=orders_text)
        response = html("web/own.html", data, f"/games/{data['name']}.json")
        response.status_code = status
        response.headers["Cache-Control"] = "private, no-store"
        return response

    async def own_orders(request: Request) -> Response:
        """An own view's form sent: its orders stored in the inbox as a mail from
        the account's address (web/home.py), then 303 to the page that shows it."""
        handle, name = request.path_params["handle"], request.path_params["name"]
        token = request.query_params.get("k", "")
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
            return PlainTextResponse("expected a form (application/x-www-form-urlencoded)\n", status_code=415,
                                     headers=SECURITY_HEADERS)
        body = await _small_body(request, home.ORDERS_BODY_LIMIT)
        if body is None:
            return PlainTextResponse(f"the form is too large: orders of at most {home.ORDERS_CHARS} characters\n",
                                     status_code=413, headers=SECURITY_HEADERS)
        try:
            form = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=10, strict_parsing=False)
        except (UnicodeDecodeError, ValueError):
            return PlainTextResponse("the form could not be read\n", status_code=400, headers=SECURITY_HEADERS)
        field = {k: (form.get(k) or [""])[0] for k in ("orders", "password", "nonce", "form")}
        return await run_in_threadpool(send_orders, handle, name, token, field)

    def send_orders(handle: str, name: str, token: str, field: dict[str, str]) -> Response:
        assert settings is not None
        now = clock.now()
        with db.read() as s:
            game = pages.any_game(s, name)
            account = links.check(s, "view", handle, game.name, token, now) if game is not None else None
            ours = game is not None and account is not None and \
                home.form_holds(s, account, game.name, field["nonce"], field["form"])
            creds = credentials_by_email(s, account.email) if ours and account is not None else None
            game_name, shown, email = (game.name, account.handle, account.email) \
                if game is not None and account is not None else ("", "", "")
        if not email:
            return own_response(handle, name, token, None)  # the link's own refusal
        if not ours:
            return error(403, "This form was not made for this page (another player's or another "
                              "game's): nothing was sent. Open your own view again and use its form.")
        orders = field["orders"]
        if not orders.strip() or len(orders) > home.ORDERS_CHARS:
            return own_response(handle, name, token, None, "Nothing was sent: write your orders in the box (at most "
                                f"{home.ORDERS_CHARS} characters).", orders[:home.ORDERS_CHARS], 400)
        if not field["password"]:
            return own_response(handle, name, token, None, "Nothing was sent: your password is needed, as in a "
                                "mail.", orders, 400)
        # the same gate as a mail's $$password$$: counted, throttled, audited
        def unlock_code(s: Any, acc: Any, until: datetime) -> None:  # as a mail's gate does (pipeline/worker.py)
            mail_unlock_code(s, Composer(settings), settings, acc, until, clock.now())

        gate = CredentialGate(db, settings, email, now, on_lockout=unlock_code)
        verdict = gate.check(creds, field["password"])
        if verdict != OK:
            why = " ".join(gate.notes) if verdict == THROTTLED else \
                "That is not your password: nothing was sent, and the failed try is counted as a mail's would be."
            return own_response(handle, name, token, None, why, orders, 429 if verdict == THROTTLED else 403)
        raw = home.web_mail(handle=shown, email=email, game=game_name, domain=domain, nonce=field["nonce"],
                            orders=orders, password=field["password"], now=now,
                            authserv_id=settings.trusted_authserv_id)
        inbox_id = store_messages(db, [(email, [f"{game_name}@{domain}"], raw)])[0]
        if on_stored is not None:
            on_stored()
        return RedirectResponse(f"/me/{shown}/{game_name}?k={token}&sent={inbox_id}", status_code=303,
                                headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})

    def me(request: Request) -> Response:
        """A player's home (web/home.py): private, never cached, never indexed."""
        handle, token = request.path_params["handle"], request.query_params.get("k", "")
        data = read(home.home_page, handle, token, domain, clock.now())
        if data is None:
            return error(403, "This link does not open a home any more: it has expired, or the password changed "
                              f"since it was sent. Mail 'status' to pbm@{domain} for a new one.")
        response = html("web/home.html", data, "")
        response.headers["Cache-Control"] = "private, no-store"
        return response

    def my_calendar(request: Request) -> Response:
        handle, token = request.path_params["handle"], request.query_params.get("k", "")
        with db.read() as s:
            body = home.player_calendar(s, handle, token, domain, base, clock.now())
        if body is None:
            return error(403, "This calendar link does not work any more: it has expired, or the password "
                              "changed since it was made. Your home page has a new one.")
        return Response(body, media_type="text/calendar; charset=utf-8",
                        headers={"Cache-Control": "private, no-store"})

    def game_calendar(request: Request) -> Response:
        name = request.path_params["name"]
        with db.read() as s:
            body = home.game_calendar(s, name, domain, base, clock.now())
        if body is None:
            return not_found(f"no game named {name} here")
        return Response(body, media_type="text/calendar; charset=utf-8")

    def stop_target(request: Request) -> tuple[dict[str, Any], Response | None]:
        handle, name, stream = (request.path_params[k] for k in ("handle", "name", "stream"))
        what = streams.STREAMS.get(stream)
        token = request.query_params.get("k", "")
        info = {"handle": handle, "game": name.lower(), "stream": stream, "what": what or "",
                "action": f"{request.url.path}?k={token}"}
        if what is None:
            return info, not_found(f"no stream of mail called {stream}")
        return info, None

    def _checked(s: Any, info: dict[str, Any], token: str) -> tuple[Any, Any] | None:
        """(game, account) when the link stops this stream of this game, else None."""
        game = pages.any_game(s, info["game"])
        account = links.check(s, f"stop-{info['stream']}", info["handle"], info["game"], token, clock.now()) \
            if game is not None else None
        return None if game is None or account is None else (game, account)

    def _stop(info: dict[str, Any], token: str) -> dict[str, Any] | None:
        # the link is checked in a read first: a bogus POST never waits for, nor holds, the write lock
        with db.read() as s:
            if _checked(s, info, token) is None:
                return None
        with db.write() as s:
            found = _checked(s, info, token)  # again, in the write (the game could have gone meanwhile)
            if found is None:
                return None
            game, account = found
            fresh = streams.stop(s, account.email, info["stream"], game.id, clock.now())
            audit(s, clock.now(), account.handle, "mail stopped", f"{info['stream']} of {game.name} (one click)", game)
        return info | {"done": True, "already": not fresh, "handle": account.handle}

    async def unsubscribe(request: Request) -> Response:
        """GET: the settings with a button; POST (RFC 8058 one click, or the
        button): the stream stops at once, no login, no confirmation."""
        info, refused = stop_target(request)
        if refused is not None:
            return refused
        token = request.query_params.get("k", "")
        if request.method == "POST":
            body = await _small_body(request)
            if body is None:
                return PlainTextResponse(f"the body is too large: a one-click POST is List-Unsubscribe=One-Click "
                                         f"(at most {BODY_LIMIT} bytes here)\n", status_code=413)
            if parse_qs(body.decode("latin-1")).get("List-Unsubscribe") != ["One-Click"]:
                return PlainTextResponse("expected List-Unsubscribe=One-Click (RFC 8058)\n", status_code=400)
            done = await run_in_threadpool(_stop, info, token)
            if done is None:
                return bad_link(info["game"])
            return html("web/unsubscribe.html", done, f"/games/{info['game']}.json")
        return await run_in_threadpool(_settings_page, info, token)

    def _settings_page(info: dict[str, Any], token: str) -> Response:
        with db.read() as s:
            ok = links.check(s, f"stop-{info['stream']}", info["handle"], info["game"], token, clock.now())
        if ok is None:
            return bad_link(info["game"])
        return html("web/unsubscribe.html", info | {"done": False, "already": False, "handle": ok.handle},
                    f"/games/{info['game']}.json")

    def bad_link(name: str) -> Response:
        return error(403, "This link does not work any more: it has expired, or it was changed. Mail 'help' to "
                          f"pbm@{domain} for the commands (unsubscribe {name} STREAM stops mail by mail).")

    def style(request: Request) -> Response:
        # kept a year when asked for by the hash the pages link (an old hash still gets today's sheet: briefly)
        long = request.query_params.get("v") == css_version
        return Response(stylesheet, media_type="text/css",
                        headers={"Cache-Control": STATIC_LIFETIME if long else PAGE_LIFETIME})

    def favicon(request: Request) -> Response:
        return Response(FAVICON, media_type="image/svg+xml")

    def robots(request: Request) -> Response:
        return PlainTextResponse(ROBOTS)

    async def no_route(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 404:
            return error(404, "There is no page here.")
        return PlainTextResponse(f"{exc.detail if isinstance(exc, HTTPException) else 'error'}\n", status_code=status,
                                 headers=SECURITY_HEADERS)

    app = Starlette(routes=[
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/metrics", metrics_page, methods=["GET"]),
        Route("/", cached(index), methods=["GET", "HEAD"]),
        Route("/games.json", cached(index_json), methods=["GET"]),
        Route("/games/{name}", cached(game), methods=["GET", "HEAD"]),
        Route("/games/{name}/turns/{turn}", cached(turn), methods=["GET", "HEAD"]),
        Route("/games/{name}/feed.atom", cached(feed), methods=["GET"]),
        Route("/players/{handle}", cached(player), methods=["GET", "HEAD"]),
        Route("/games/{name}/deadlines.ics", cached(game_calendar), methods=["GET"]),
        Route("/me/{handle}", me, methods=["GET", "HEAD"]),
        Route("/me/{handle}/deadlines.ics", my_calendar, methods=["GET"]),
        Route("/me/{handle}/{name}", own, methods=["GET", "HEAD"]),
        Route("/me/{handle}/{name}", own_orders, methods=["POST"]),
        Route("/unsubscribe/{handle}/{name}/{stream}", unsubscribe, methods=["GET", "POST"]),
        Route("/static/pbm.css", style, methods=["GET", "HEAD"]),
        Route("/favicon.svg", favicon, methods=["GET", "HEAD"]),
        Route("/favicon.ico", favicon, methods=["GET", "HEAD"]),
        Route("/robots.txt", robots, methods=["GET", "HEAD"]),
    ], middleware=[Middleware(GZipMiddleware, minimum_size=GZIP_MINIMUM), Middleware(Freshness)],
        exception_handlers={404: no_route})
    #: the counters count from the HTTP side's start (HttpSide.start reads the rows once)
    app.state.metrics = metrics
    app.state.pacer = pacer
    return app
