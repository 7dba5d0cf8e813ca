"""Hostile mail shapes at the size limit, handled by the real worker (issue 26).

Each shape is one mail of at most ``PBM_MAX_MESSAGE_BYTES`` (1 MB) built to
make the parsing or the reading of a mail expensive: header shapes (encoded
words, addresses, message ids, MIME parameters, comments, header fields) and
body shapes (a line of spaces, ``$$`` marks, parts, nesting, attribution-like
lines).  Every mail is stored in the inbox as the listener stores it
(pbm_server.mail.inbound.store_messages) and handled by
``pbm_server.pipeline.worker.Worker.process`` in this process, as a back end
does: classify, authenticate, route, execute, reply.  Per shape the script
prints the CPU seconds of handling it (``time.process_time``: the process's
CPU, nothing else runs), the peak of memory allocated while it was handled
(``tracemalloc``, in a second run of the same shape, as tracing slows Python
down), what became of the mail and the start of the reply's text.

    .venv/bin/python benchmarks/bench_hostile.py [--shape NAME ...] [--limit BYTES]

tests/reliability/test_hostile_shapes.py sends the same shapes over SMTP.
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOMAIN = "pbm.localhost"
LIMIT = 1_048_576
SENDER = "hostile@example.net"


def _mail(headers: bytes, body: bytes, limit: int, to: str = "pbm") -> bytes:
    head = b"From: " + SENDER.encode() + b"\r\nTo: " + f"{to}@{DOMAIN}".encode() + b"\r\nSubject: hostile\r\n"
    raw = head + headers + b"\r\n" + body
    assert len(raw) <= limit, (len(raw), limit)
    return raw


def _fill(unit: bytes, room: int) -> bytes:
    return unit * max(1, room // len(unit))


def _header(name: bytes, unit: bytes, limit: int, lead: bytes = b"", tail: bytes = b"") -> bytes:
    """One header of ``unit`` repeated (folded: each unit on a line of its own) up to the limit."""
    room = limit - 400 - len(lead) - len(tail)
    value = lead + _fill(unit + b"\r\n ", room).rstrip() + tail
    return name + b": " + value + b"\r\n"


def _only(name: bytes, unit: bytes, limit: int, lead: bytes = b"", tail: bytes = b"", body: bytes = b"help\r\n") -> bytes:
    """A mail whose ``name`` header is ``unit`` repeated to the limit (replacing the usual one of that name)."""
    header = _header(name, unit, limit - len(body), lead, tail)
    head = b"To: " + f"pbm@{DOMAIN}".encode() + b"\r\n"
    if name.lower() != b"from":
        head = b"From: " + SENDER.encode() + b"\r\n" + head
    if name.lower() != b"subject":
        head += b"Subject: hostile\r\n"
    raw = head + header + b"\r\n" + body
    assert len(raw) <= limit, (len(raw), limit)
    return raw


def _body_mail(body: bytes, limit: int, content_type: bytes = b"text/plain; charset=utf-8") -> bytes:
    return _mail(b"Content-Type: " + content_type + b"\r\n", body, limit)


def _long_lines(text: bytes, limit: int) -> bytes:
    """A body with lines longer than SMTP carries (1,000 characters), in base64: decoded, as long as fits."""
    room = (limit - 600) // 78 * 57
    encoded = base64.encodebytes(text[:room]).replace(b"\n", b"\r\n")
    return _mail(b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n", encoded, limit)


def _multipart(parts: list[bytes], limit: int) -> bytes:
    body = b"".join(b"--B\r\n" + p for p in parts) + b"--B--\r\n"
    return _mail(b'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="B"\r\n', body, limit)


def _many_parts(limit: int) -> bytes:
    part = b"Content-Type: text/plain\r\n\r\nx\r\n"
    return _multipart([b"Content-Type: text/plain\r\n\r\nhelp\r\n"] + [part] * ((limit - 600) // (len(part) + 5)), limit)


def _junk_parts(limit: int) -> bytes:
    """Fewer parts than the cap, each with a long Content-Type of a word the parser chokes on."""
    n = 900
    each = (limit - 1000) // n
    parts = [b"Content-Type: text/plain\r\n\r\nhelp\r\n"]
    for i in range(n):
        junk = b"text/plain; " + _fill(b"a%d a\r\n " % i, each - 60)
        parts.append(b"Content-Type: " + junk[: each - 40] + b"\r\n\r\nx\r\n")
    return _multipart(parts, limit)


def _nested(depth: int, limit: int) -> bytes:
    opening = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i) for i in range(1, depth))
    closing = b"".join(b"--b%d--\r\n" % i for i in reversed(range(1, depth)))
    body = opening + b"Content-Type: text/plain\r\n\r\nhelp\r\n" + closing
    return _mail(b'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b0"\r\n', b"--b0\r\n" + body + b"--b0--\r\n",
                 limit)


def _nested_deepest(limit: int) -> bytes:
    per_level = len(b'Content-Type: multipart/mixed; boundary="b10000"\r\n\r\n--b10000\r\n--b10000--\r\n')
    return _nested((limit - 1000) // per_level, limit)


def _attributions(limit: int) -> bytes:
    """Lines shaped like an attribution (each ends with ':' and names nobody)."""
    line = b"On " + b"a " * 70 + b"b wrote something:\r\n"
    return _body_mail(b"help\r\n" + _fill(line, limit - 1000), limit)


def _header_lines(limit: int) -> bytes:
    """Lines shaped like the header block of an unmarked quote, with an address in each."""
    line = b"From: * * * " + b"a " * 300 + b"x@example.org\r\n"
    return _body_mail(b"help\r\n" + _fill(line, limit - 1000), limit)


#: shape name -> (what it is, the mail at a size limit)
SHAPES: dict[str, tuple[str, Callable[[int], bytes]]] = {
    "from-encoded-words": ("From of folded =?utf-8?q?a?= words",
                           lambda n: _only(b"From", b"=?utf-8?q?a?=", n, tail=b" <" + SENDER.encode() + b">")),
    "subject-encoded-words": ("Subject of folded encoded words", lambda n: _only(b"Subject", b"=?utf-8?q?a?=", n)),
    "to-addresses": ("To of one address after another", lambda n: _only(b"To", b"a@example.org,", n)),
    "references-ids": ("References of one message id after another",
                       lambda n: _only(b"References", b"<a@example.org>", n)),
    "content-type-params": ("Content-Type with a parameter per line (issue: 20,000 stalled 39 s)",
                            lambda n: _only(b"Content-Type", b"p=v;", n, lead=b"text/plain; ")),
    "from-comments": ("From of nested comments", lambda n: _only(b"From", b"(", n, tail=b"a@example.org")),
    "header-fields": ("one short header field after another", lambda n: _mail(_fill(b"X-A: b\r\n", n - 400), b"help\r\n", n)),
    "line-of-spaces": ("a body line of spaces (issue: 64,000 stalled 48 s)",
                       lambda n: _long_lines(b"help\r\n" + b" " * n + b"x\r\n", n)),
    "lines-of-spaces": ("body lines of 990 spaces", lambda n: _body_mail(b"help\r\n" + _fill(b" " * 990 + b"x\r\n", n - 500), n)),
    "dollar-marks": ("one body line of $$ marks", lambda n: _long_lines(b"help\r\n" + b"$$" * n, n)),
    "dollar-lines": ("body lines of $$ marks", lambda n: _body_mail(b"help\r\n" + _fill(b"$$ " * 30 + b"\r\n", n - 500), n)),
    "dollar-passwords": ("body lines of $$...$$ pairs, each another password",
                         lambda n: _body_mail(b"help\r\n" + b"".join(b" ".join(b"$$p%05d%02d$$" % (i, k) for k in range(40)) + b"\r\n"
                                                                     for i in range((n - 1000) // 530)), n)),
    "pbmserv-passwords": ("300 pbmserv-style lines, each with another password (and 800 more lines)",
                          lambda n: _body_mail(b"".join(b"curio move 101 sol pw%05d a2-a3\r\n" % i for i in range(300))
                                               + _fill(b"x\r\n", n - 12_000), n)),
    "many-parts": ("as many MIME parts as fit", _many_parts),
    "junk-part-types": ("900 parts, each with a long junk Content-Type", _junk_parts),
    "nested-1000": ("1,000 multiparts nested (issue 26.10)", lambda n: _nested(1000, n)),
    "nested-deepest": ("multiparts nested as deep as fits", _nested_deepest),
    "attribution-lines": ("lines shaped like an attribution", _attributions),
    "quote-header-lines": ("lines shaped like a quoted header block", _header_lines),
}


def _handle(worker, db, raw: bytes) -> tuple[int, float]:
    from pbm_server.mail.inbound import store_messages

    (inbox_id,) = store_messages(db, [(SENDER, [f"pbm@{DOMAIN}"], raw)])
    started = time.process_time()
    worker.process(inbox_id)
    return inbox_id, time.process_time() - started


def _reply_of(db, inbox_id: int) -> str:
    from email import message_from_bytes, policy

    from sqlalchemy import text

    with db.read() as s:
        status, note = s.execute(text("SELECT status, note FROM inbox WHERE id = :i"), {"i": inbox_id}).one()
        raws = s.execute(text("SELECT raw FROM outbox WHERE inbound_id = :i"), {"i": inbox_id}).scalars().all()
    if not raws:
        return f"{status} ({(note or '')[:80]}); no reply"
    part = message_from_bytes(bytes(raws[0]), policy=policy.default).get_body(preferencelist=("plain",))
    text_ = " ".join((part.get_content() if part is not None else "").split())
    at = text_.find("not read")
    return f"{status}; reply: ...{text_[max(0, at - 60): at + 110]}..." if at >= 0 else f"{status}; reply: {text_[:150]}"


def run(shapes: list[str], limit: int) -> list[dict]:
    from pbm_server.base.settings import load_settings
    from pbm_server.mail.compose import Composer
    from pbm_server.pipeline.worker import Worker
    from pbm_server.store.db import Database

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'pbm.db'}"
        settings = load_settings({"PBM_DATABASE_URL": url, "PBM_DOMAIN": DOMAIN, "PBM_GM_ADDRESS": "gm@example.org",
                                  "PBM_MAX_MESSAGE_BYTES": str(limit), "PBM_REPLY_LIMIT_PER_HOUR": "1000000",
                                  "PBM_UNAUTHENTICATED_REPLIES_PER_HOUR": "1000000"})
        db = Database(url)
        db.upgrade()
        worker = Worker(db, settings, Composer(settings))
        _handle(worker, db, _body_mail(b"help\r\n", limit))  # warm: templates, caches
        for name in shapes:
            what, build = SHAPES[name]
            raw = build(limit)
            inbox_id, cpu = _handle(worker, db, raw)
            tracemalloc.start()
            _handle(worker, db, raw.replace(b"Subject: hostile", b"Subject: hostile again", 1))
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            out.append({"shape": name, "what": what, "bytes": len(raw), "cpu_s": round(cpu, 3),
                        "peak_mib": round(peak, 1), "result": _reply_of(db, inbox_id)})
        db.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only these shapes (default: all)")
    ap.add_argument("--limit", type=int, default=LIMIT, help="the size of each mail (PBM_MAX_MESSAGE_BYTES)")
    args = ap.parse_args()
    print(f"{'shape':24} {'bytes':>9} {'CPU s':>7} {'peak MiB':>9}  result")
    for row in run(args.shape or list(SHAPES), args.limit):
        print(f"{row['shape']:24} {row['bytes']:>9,} {row['cpu_s']:>7.3f} {row['peak_mib']:>9.1f}  {row['result']}")


if __name__ == "__main__":
    main()
