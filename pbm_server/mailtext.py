"""From stored bytes to what a command mail says: who sent it, whether it is an
automatic mail we must not answer, and its command lines.

Everything here is defensive: a malformed, wrongly encoded, HTML-only or hostile
mail yields text (perhaps empty) and never an exception.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses, parseaddr

from inscriptis import get_text as html_to_text
from mailparser_reply import EmailReplyParser

from games.base import Line

#: at most this many command lines are read from one mail
MAX_LINES = 300
#: longer lines are cut (nobody types a 500-character command)
MAX_LINE_CHARS = 500

PASSWORD_RE = re.compile(r"\$\$(.+?)\$\$")
_SUBJECT_PREFIX = re.compile(r"^\s*((re|aw|sv|fw|fwd|wg|tr)\s*(\[\d+\])?\s*:\s*)+", re.I)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_REPLY_PARSER = EmailReplyParser(languages=["en", "de", "fr", "es", "it", "nl", "sv", "pl"])


@dataclass
class IncomingMail:
    from_addr: str  # lower-case bare address from the From header (or the envelope)
    subject: str
    message_id: str | None
    references: list[str]
    body: str  # the text a person wrote: plain part, or the HTML part as text
    html_only: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    #: every Authentication-Results header, topmost first (see senderauth.py)
    auth_results: list[str] = field(default_factory=list)


def _header(msg: EmailMessage, name: str) -> str:
    try:
        value = msg.get(name)
    except Exception:  # a header the policy cannot parse
        value = None
    if value is None:
        try:
            raw = msg.get_all(name, failobj=[]) if hasattr(msg, "get_all") else []
            value = raw[0] if raw else ""
        except Exception:
            value = ""
    return _CONTROL.sub(" ", str(value)).strip()


def _decode_part(part) -> str:
    try:
        payload = part.get_payload(decode=True)
    except Exception:
        payload = None
    if payload is None:
        try:
            content = part.get_payload()
            return content if isinstance(content, str) else ""
        except Exception:
            return ""
    charset = None
    try:
        charset = part.get_content_charset()
    except Exception:
        pass
    for candidate in (charset, "utf-8", "cp1252"):
        if not candidate:
            continue
        try:
            return payload.decode(candidate)
        except (LookupError, UnicodeDecodeError):
            continue
    return payload.decode("latin-1", errors="replace")


def _body(msg: EmailMessage) -> tuple[str, bool]:
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except Exception:
        part = None
    if part is None:
        if not msg.is_multipart() and msg.get_content_maintype() == "text":
            part = msg
        else:
            return "", False
    text = _decode_part(part)
    if part.get_content_subtype() == "html":
        try:
            return html_to_text(text), True
        except Exception:
            return re.sub(r"<[^>]*>", " ", text), True
    return text, False


def read_mail(raw: bytes, envelope_from: str = "") -> IncomingMail:
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    from_header = _header(msg, "From")
    addr = ""
    try:
        pairs = getaddresses([from_header])
        addr = pairs[0][1] if pairs else ""
    except Exception:
        addr = parseaddr(from_header)[1]
    addr = (addr or envelope_from or "").strip().lower()
    body, html_only = _body(msg)
    headers = {}
    for name in ("Auto-Submitted", "Precedence", "X-Auto-Response-Suppress", "Return-Path", "X-Loop"):
        value = _header(msg, name)
        if value:
            headers[name.lower()] = value
    try:
        list_headers = [k for k in msg.keys() if k.lower().startswith("list-")]
    except Exception:
        list_headers = []
    if list_headers:
        headers["list-*"] = ", ".join(list_headers)
    try:
        auth_results = [_CONTROL.sub(" ", str(v)) for v in msg.get_all("Authentication-Results", failobj=[])]
    except Exception:
        auth_results = []
    refs = (_header(msg, "References") + " " + _header(msg, "In-Reply-To")).split()
    message_id = _header(msg, "Message-ID") or None
    return IncomingMail(
        from_addr=addr,
        subject=_header(msg, "Subject"),
        message_id=message_id,
        references=[r for r in refs if r.startswith("<")],
        body=body,
        html_only=html_only,
        headers=headers,
        auth_results=auth_results,
    )


def dedup_key(raw: bytes, message_id: str | None) -> str:
    """Same Message-ID and same content -> same key, whatever trace headers
    (Received:, Delivered-To:) a redelivery added."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = raw.partition(b"\n\n")
    h = hashlib.sha256()
    h.update((message_id or "").encode("utf-8", "replace"))
    h.update(b"\0")
    h.update(body.replace(b"\r\n", b"\n"))
    if not message_id:
        # without a Message-ID a resend is not recognisable: key on all of it
        h.update(head)
    return h.hexdigest()


def automatic_reason(mail: IncomingMail, envelope_from: str, own_domain: str) -> str | None:
    """Why this mail must not be answered (RFC 3834 and common practice), or None."""
    if envelope_from.strip() in ("", "<>"):
        return "null envelope sender (a bounce or auto-reply)"
    local = mail.from_addr.split("@", 1)[0]
    if local in ("mailer-daemon", "postmaster") or envelope_from.lower().startswith("mailer-daemon@"):
        return "from a mailer daemon"
    if not mail.from_addr or "@" not in mail.from_addr:
        return "no usable From address"
    if mail.from_addr.endswith("@" + own_domain.lower()):
        return "from one of our own addresses (a loop)"
    auto = mail.headers.get("auto-submitted", "").lower()
    if auto and not auto.startswith("no"):
        return f"Auto-Submitted: {auto}"
    prec = mail.headers.get("precedence", "").lower()
    if prec in ("bulk", "junk", "list"):
        return f"Precedence: {prec}"
    if "list-*" in mail.headers:
        return f"mailing-list headers ({mail.headers['list-*']})"
    if mail.headers.get("x-loop", "").lower().endswith(own_domain.lower()):
        return "X-Loop names us"
    return None


def _clean(line: str) -> str:
    return _CONTROL.sub(" ", line).strip()[:MAX_LINE_CHARS]


def _fresh_text(body: str) -> str:
    """The part of the body the sender wrote now: no quoted reply tail, no signature."""
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    try:
        replies = _REPLY_PARSER.read(text=body).replies
    except Exception:
        replies = []
    for reply in replies:
        own = [ln for ln in (reply.body or "").split("\n") if not ln.lstrip().startswith(">")]
        if any(ln.strip() for ln in own):
            return "\n".join(own)
    if replies:
        return ""
    # the parser failed: fall back to our own simple rules
    out = []
    for ln in body.split("\n"):
        if ln.rstrip() in ("--", "-- "):
            break
        if not ln.lstrip().startswith(">"):
            out.append(ln)
    return "\n".join(out)


def command_lines(body: str) -> list[Line]:
    """Non-blank, non-quoted lines before the signature, numbered 1.."""
    lines = []
    for number, line in enumerate(_fresh_text(body).split("\n"), start=1):
        text = _clean(line)
        if text:
            lines.append(Line(number, text))
        if len(lines) >= MAX_LINES:
            break
    return lines


def subject_command(subject: str) -> Line | None:
    text = _clean(_SUBJECT_PREFIX.sub("", subject or ""))
    return Line(0, text) if text else None


def take_passwords(lines: list[Line]) -> tuple[list[str], list[Line]]:
    """Remove every ``$$password$$`` from the lines; return the passwords found
    and the lines that still have text."""
    found: list[str] = []
    kept: list[Line] = []
    for line in lines:
        found.extend(PASSWORD_RE.findall(line.text))
        rest = PASSWORD_RE.sub(" ", line.text).strip()
        if rest:
            kept.append(Line(line.number, " ".join(rest.split())))
    return found, kept
