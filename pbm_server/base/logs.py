"""The server's log lines: one per mail in, per mail handled, per mail out, per
bounce and hold, as text or, with ``PBM_LOG_FORMAT=json``, one JSON object a line.

A line's facts (inbox or outbox id, game, sender or recipient, result, time
taken) travel with the record as ``extra={"pbm": {...}}`` (:func:`facts`);
the text format shows the message, the JSON format the message and the facts
as fields, for log shippers to index.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def facts(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the line's facts (None values left out)."""
    return {"pbm": {k: v for k, v in fields.items() if v is not None}}


class JsonLines(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message,
    the line's facts, and the exception's traceback if there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "pbm", None)
        if isinstance(extra, dict):
            out.update({k: v for k, v in extra.items() if k not in out})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def use_format(kind: str) -> None:
    """Every handler of the root logger writes ``kind`` ("text" or "json")."""
    formatter = JsonLines() if kind == "json" else logging.Formatter(TEXT_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
