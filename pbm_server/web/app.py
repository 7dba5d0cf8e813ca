"""The HTTP side as an ASGI application (Starlette): ``/healthz`` and
``/metrics``.

Every handler is a plain function: Starlette runs it in its thread pool, so a
slow database read never stalls the event loop, and the HTTP side runs apart
from the listener and the back ends (running/server.py), so a flood of
requests never delays mail.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from pbm_server.base import clock
from pbm_server.mail.queues import waiting
from pbm_server.store.db import Database
from pbm_server.web.metrics import MailMetrics


def make_app(db: Database) -> Starlette:
    metrics = MailMetrics(db)

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

    app = Starlette(routes=[
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/metrics", metrics_page, methods=["GET"]),
    ])
    #: the counters count from the HTTP side's start (HttpSide.start reads the rows once)
    app.state.metrics = metrics
    return app
