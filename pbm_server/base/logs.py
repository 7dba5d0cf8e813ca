"""The server's log lines: one per mail in, per mail handled, per mail out, per
bounce and hold, as text or, with ``PBM_LOG_FORMAT=json``, one JSON object a line.

A line's facts (inbox or outbox id, game, sender or recipient, result, time
taken) travel with the record as ``extra={"pbm": {...}}`` (:func:`facts`);
the text format shows the message, the JSON format the message and the facts
as fields, for log shippers to index.

Neither format writes a control or format character raw (issue 41.3): a
sender's address, From or orders can carry CR, ESC, U+2028, U+0085 and
the like, which would forge lines or work the operator's terminal.  The
text format writes each as a readable escape (``\\r``, ``\\x1b``,
``\\u2028``: :func:`pbm_server.base.printable.printable`), the JSON format
as a JSON ``\\uHHHH`` escape, so the decoded value is still the original.
This is done here, for every line, not by the code that logs.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

from pbm_server.base.printable import json_printable, printable

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def facts(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the line's facts (None values left out)."""
    return {"pbm": {k: v for k, v in fields.items() if v is not None}}


class TextLines(logging.Formatter):
    """The text format (:data:`TEXT_FORMAT`), every hidden character of the
    line written as its escape.  A traceback keeps its line breaks (it is
    ours) and has every other hidden character escaped, line by line."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        return printable(super().formatMessage(record))

    def formatException(self, ei: tuple[type[BaseException], BaseException, TracebackType | None]  # noqa: N802
                        | tuple[None, None, None]) -> str:
        return _by_line(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return _by_line(super().formatStack(stack_info))


def _by_line(text: str) -> str:
    return "\n".join(printable(line) for line in text.split("\n"))


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
        return json_printable(json.dumps(out, default=str, ensure_ascii=False))


def use_format(kind: str) -> None:
    """Every handler of the root logger writes ``kind`` ("text" or "json")."""
    formatter = JsonLines() if kind == "json" else TextLines()
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
