"""The HTTP side as an ASGI application (Starlette): ``/healthz``,
``/metrics`` and the public game pages with their JSON twins and Atom feeds.

Every handler is a plain function: Starlette runs it in its thread pool, so a
slow database read never stalls the event loop, and the HTTP side runs apart
from the listener and the back ends (running/server.py), so a flood of
requests never delays mail.  Pages are read-only; they show only what an
observer may see (web/pages.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from pbm_server.base import clock
from pbm_server.base.settings import Settings
from pbm_server.mail.compose import TEMPLATE_PACKAGE, Composer
from pbm_server.mail.queues import waiting
from pbm_server.store.db import Database
from pbm_server.web import pages
from pbm_server.web.metrics import MailMetrics

#: no script anywhere, no inline style, nothing from elsewhere
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _environment() -> Environment:
    return Environment(loader=PackageLoader(TEMPLATE_PACKAGE, "."),
                       autoescape=select_autoescape(enabled_extensions=("html", "xml"), default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)


def make_app(db: Database, settings: Settings | None = None) -> Starlette:
    metrics = MailMetrics(db)
    domain = settings.domain if settings is not None else "pbm.localhost"
    composer = Composer(settings) if settings is not None else None
    env = _environment()
    stylesheet = resources.files(TEMPLATE_PACKAGE).joinpath("web", "pbm.css").read_text(encoding="utf-8")

    def html(template: str, data: dict[str, Any], json_url: str) -> Response:
        body = env.get_template(template).render(domain=domain, json_url=json_url, **data)
        return HTMLResponse(body, headers=SECURITY_HEADERS)

    def read(build: Callable[..., dict[str, Any] | None], *args: Any) -> dict[str, Any] | None:
        with db.read() as s:
            return build(s, *args)

    def healthz(request: Request) -> Response:
        """200 while the database answers, with what waits; 503 when it does not."""
        try:
            with db.read() as s:
                w = waiting(s)
        except Exception as exc:  # the database is down, locked or gone: say so, do not crash
            reason = " ".join(str(exc).split())[:300]
            return JSONResponse({"status": "unavailable", "database": reason}, status_code=503)
        now = clock.now()
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
        })

    def metrics_page(request: Request) -> Response:
        try:
            body = metrics.exposition()
        except Exception as exc:
            return PlainTextResponse(f"database unavailable: {' '.join(str(exc).split())[:300]}\n", status_code=503)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    def not_found(what: str) -> Response:
        return PlainTextResponse(f"{what}\n", status_code=404, headers=SECURITY_HEADERS)

    def index(request: Request) -> Response:
        data = read(pages.games_index, domain) or {}
        return html("web/index.html", data, "/games.json")

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
            return JSONResponse({k: v for k, v in data.items() if k != "board"}
                                | {"board": [{"title": p["title"], "text": p["text"]} for p in data["board"]]})
        return html("web/game.html", data, f"/games/{data['name']}.json")

    def turn(request: Request) -> Response:
        name, number = request.path_params["name"], request.path_params["turn"]
        as_json = number.endswith(".json")
        number = number.removesuffix(".json")
        data = read(pages.turn_page, name, int(number)) if number.isdigit() else None
        if data is None:
            return not_found(f"{name} has no processed turn {number}")
        if as_json:
            return JSONResponse(data)
        return html("web/turn.html", data, f"/games/{data['name']}/turns/{data['turn']}.json")

    def feed(request: Request) -> Response:
        name = request.path_params["name"]
        data = read(pages.game_page, composer, name, domain) if composer is not None else None
        if data is None:
            return not_found(f"no game named {name} here")
        base = str(request.base_url).rstrip("/")
        updated = data["turns"][-1]["processed_at"] if data["turns"] else datetime(2000, 1, 1, tzinfo=timezone.utc).isoformat()
        body = env.get_template("web/feed.xml").render(domain=domain, base=base, updated=updated, **data)
        return Response(body, media_type="application/atom+xml")

    def own(request: Request) -> Response:
        handle, name = request.path_params["handle"], request.path_params["name"]
        token = request.query_params.get("k", "")
        data = read(pages.own_page, composer, handle, name, token) if composer is not None else None
        if data is None:
            return PlainTextResponse(
                "This link does not open a game any more: it has expired, or the password changed since it was "
                f"sent. Mail 'status {name}' to pbm@{domain} for a new one.\n", status_code=403,
                headers=SECURITY_HEADERS)
        response = html("web/own.html", data, f"/games/{data['name']}.json")
        response.headers["Cache-Control"] = "private, no-store"
        return response

    def style(request: Request) -> Response:
        return Response(stylesheet, media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    app = Starlette(routes=[
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/metrics", metrics_page, methods=["GET"]),
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/games.json", index_json, methods=["GET"]),
        Route("/games/{name}", game, methods=["GET", "HEAD"]),
        Route("/games/{name}/turns/{turn}", turn, methods=["GET", "HEAD"]),
        Route("/games/{name}/feed.atom", feed, methods=["GET"]),
        Route("/me/{handle}/{name}", own, methods=["GET", "HEAD"]),
        Route("/static/pbm.css", style, methods=["GET"]),
    ])
    #: the counters count from the HTTP side's start (HttpSide.start reads the rows once)
    app.state.metrics = metrics
    return app
