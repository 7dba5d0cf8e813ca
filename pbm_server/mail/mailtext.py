"""From stored bytes to what a command mail says: who sent it, whether it is an
automatic mail we must not answer, and its command lines.

Everything here is defensive: a malformed, wrongly encoded, HTML-only or hostile
mail yields text (perhaps empty) and never an exception.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses, parseaddr
from typing import cast

from inscriptis import get_text as html_to_text  # type: ignore[import-untyped]

from games.base import Line
from pbm_server.mail.headers import (
    ATEXT,
    DOT_ATOM_ADDRESS,
    MAX_FIELDS,
    HeaderBudgetSpent,
    bounded,
    clean_text,
    over_cap,
    oversized,
    reading_policy,
    unfolded,
)
from pbm_server.mail.replies import SentMail, normalise, own_lines
from pbm_server.mail.senderauth import MAX_FROM_CHARS, raw_header, read_from

#: at most this many command lines are read from one mail
MAX_LINES = 300
#: the most distinct passwords taken from the lines after MAX_LINES (enough
#: for classify.MAX_SECRETS to see that a mail carries too many)
_MAX_PASSWORDS_BEYOND = 100
#: longer lines are cut (nobody types a 500-character command)
MAX_LINE_CHARS = 500
#: a mail with more MIME parts than this is not read (each part costs a parse)
MAX_PARTS = 1000
#: nor one whose parts nest deeper than this (message/rfc822 counts as a level)
MAX_DEPTH = 20
#: a mail's headers kept when it has more than MAX_FIELDS (to answer it, and to tell whether to)
_ESSENTIAL = ("from", "to", "subject", "message-id", "date", "auto-submitted", "precedence", "return-path", "x-loop",
              "x-auto-response-suppress")

PASSWORD_RE = re.compile(r"\$\$(.+?)\$\$")
_SUBJECT_PREFIX = re.compile(r"^\s*((re|aw|sv|fw|fwd|wg|tr)\s*(\[\d+\])?\s*:\s*)+", re.I)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


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
    #: the top-level Content-Type, lower case ("multipart/report" may be an abuse report)
    content_type: str = "text/plain"
    #: what the reply should say about how the body was read (a PGP signature not checked ...)
    notes: list[str] = field(default_factory=list)
    #: why no line of the mail was read (a header beyond the caps, nested too
    #: deeply, too many parts: headers.py); None: it was read
    unread: str | None = None
    #: why the From cannot carry a password: its display name shows another address (senderauth.read_from)
    from_problem: str | None = None


#: headers whose value as the email package reads it is the value as
#: written (unfolded, cut to its caps) whenever that is plain printable ASCII
#: without an encoded word: read so, unparsed (a Message-ID's parse costs a
#: twentieth of a mail's handling, and every mail's is new)
_AS_WRITTEN = frozenset({"message-id", "references", "in-reply-to", "subject"})
_PLAIN_VALUE = re.compile(r"[ -~]*")
#: a Message-ID the email package parses without complaint: <dot-atom@dot-atom>
_PLAIN_ID = re.compile(rf"[ \t]*<{ATEXT}(?:\.{ATEXT})*@{ATEXT}(?:\.{ATEXT})*>[ \t]*")


def _written(msg: EmailMessage, name: str) -> str | None:
    """The first ``name`` header of ``msg`` as written, if it is plain (see
    _AS_WRITTEN); None if it is not, or not there."""
    want = name.lower()
    for key, value in msg.raw_items():
        if key.lower() == want:
            if not isinstance(value, str):
                return None
            value = bounded(key, unfolded(value))
            plain = _PLAIN_ID if want == "message-id" else _PLAIN_VALUE
            return value.strip() if plain.fullmatch(value) and "=?" not in value else None
    return None


def _header(msg: EmailMessage, name: str) -> str:
    if name.lower() in _AS_WRITTEN:
        try:
            written = _written(msg, name)
        except Exception:
            written = None
        if written is not None:
            return written
    return _parsed_header(msg, name)


def _parsed_header(msg: EmailMessage, name: str) -> str:
    """The first ``name`` header of ``msg`` as the email package parses it
    (as written if it cannot)."""
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


def _decode_part(part: Message) -> str:
    try:
        # a text part (the body's): bytes, never a Message (which typeshed allows for)
        payload = cast("bytes | None", part.get_payload(decode=True))
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
        except (LookupError, ValueError):  # ValueError: a charset name with a NUL in it
            continue
    return payload.decode("latin-1", errors="replace")


def _body_part(msg: EmailMessage) -> Message | None:
    """The part whose text is read: the plain part, else the HTML part."""
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except Exception:
        part = None
    if part is None and not msg.is_multipart() and msg.get_content_maintype() == "text":
        part = msg
    return part


#: at most this many unread attachments are named in the reply
_NAMED_ATTACHMENTS = 3


def attachments_note(msg: EmailMessage) -> str | None:
    """What the reply says of the mail's attachments, which are never read
    (orders in ``orders.txt``): None if it has none."""
    read = _body_part(msg)
    names: list[str] = []
    try:
        for part in msg.walk():
            if part is read or part.is_multipart():
                continue
            filename = part.get_filename()
            if part.get_content_disposition() == "attachment" or (filename and part.get_content_maintype() == "text"):
                names.append(clean_text(str(filename or part.get_content_type()), limit=60))
    except Exception:  # a part the parser cannot describe: it is not read either
        pass
    if not names:
        return None
    shown = ", ".join(names[:_NAMED_ATTACHMENTS]) + (f" and {len(names) - _NAMED_ATTACHMENTS} more"
                                                     if len(names) > _NAMED_ATTACHMENTS else "")
    which = f"attachment {shown} was" if len(names) == 1 else f"attachments {shown} were"
    return (f"The {which} not read: the server reads only the text of the mail itself. "
            "Write your commands or orders in the mail, not in an attachment.")


def _body(msg: EmailMessage) -> tuple[str, bool]:
    part = _body_part(msg)
    if part is None:
        return "", False
    text = _decode_part(part)
    try:
        flowed = str(part.get_param("format") or "").lower() == "flowed"
        delsp = str(part.get_param("delsp") or "").lower() == "yes"
    except Exception:
        flowed = delsp = False
    if flowed and part.get_content_subtype() == "plain":
        text = decode_flowed(text, delsp)
    if part.get_content_subtype() == "html":
        try:
            converted = html_to_text(text)
        except Exception:
            converted = re.sub(r"<[^>]*>", " ", text)
        # the converter indents the text of nested blocks (<div><div>): the
        # indent is no part of what was written, and a "-- " signature line
        # must read as one (replies.py) in HTML as in text
        return "\n".join(line.lstrip() for line in converted.split("\n")), True
    return text, False


def _parse(raw: bytes) -> tuple[EmailMessage, str | None]:
    """The mail parsed, and why its body is not read (None: it is).  Its
    own header block is checked against the caps (headers.py) before any of
    it is parsed; then its MIME parts are counted; then it is parsed, with
    its header text bounded by the policy's budget and its nesting checked."""
    # a mail with no multipart in it is parsed once, whole: the parser keeps
    # the body of a part that is not multipart as it is, headers-only or not
    # (a message/* or multipart one, which it would read on, is parsed again below)
    single = _MULTIPART.search(raw) is None
    blank = None if single else _BLANK_LINE.search(raw)  # else only the header block: the body is read once, below
    head = cast(EmailMessage, BytesParser(policy=reading_policy()).parsebytes(raw[:blank.end()] if blank else raw,
                                                                              headersonly=True))
    items = [(str(name), str(value)) for name, value in head.raw_items()]
    too_large = oversized(items)
    if too_large:
        return _kept(items, too_large), _too_large_note(too_large)
    if single:
        try:
            if head.get_content_maintype() not in ("message", "multipart"):
                return head, None
        except HeaderBudgetSpent as exc:
            return _kept(items, []), _budget_note(exc)
    nested = (f"this mail is nested too deeply: its MIME parts lie more than {MAX_DEPTH} levels within each other; "
              f"at most {MAX_DEPTH} levels are read.")
    if _nesting(raw) > MAX_DEPTH:
        return head, nested
    if _parts(raw) > MAX_PARTS:
        return head, f"it has more than {MAX_PARTS:,} MIME parts; at most {MAX_PARTS:,} are read."
    try:
        msg = cast(EmailMessage, BytesParser(policy=reading_policy()).parsebytes(raw))
        if _depth(msg) <= MAX_DEPTH:
            return msg, None
    except RecursionError:
        pass
    except HeaderBudgetSpent as exc:
        return _kept(items, []), _budget_note(exc)
    return _kept(items, []), nested


def _budget_note(exc: HeaderBudgetSpent) -> str:
    return f"its headers (its MIME parts' too) hold {exc}; send a simpler mail."


def _too_large_note(too_large: list[tuple[str, str]]) -> str:
    name, why = too_large[0]
    if name == "(all)":
        return f"its header is too large: {why}."
    more = ""
    if len(too_large) > 1:
        more = f" (and {len(too_large) - 1} more header{'s' if len(too_large) > 2 else ''} too large)"
    return f"its {clean_text(name, 100)} header is too large: {why}{more}."


def _kept(items: list[tuple[str, str]], drop: list[tuple[str, str]]) -> EmailMessage:
    """A header-only message of the mail's header fields within the caps (of
    the essential ones only, if it has more than MAX_FIELDS); at most 50."""
    dropped = {name.lower() for name, _ in drop}
    only_essential = "(all)" in dropped or len(items) > MAX_FIELDS
    kept = EmailMessage(policy=reading_policy())
    for name, value in items:
        low = name.lower()
        if (only_essential and low not in _ESSENTIAL) or low in dropped or over_cap(name, value) is not None:
            continue
        kept.set_raw(name, value)
        if len(kept) >= 50:
            break
    return kept


_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_DASH_LINE = re.compile(rb"^--[^\r\n]*", re.M)
_MULTIPART = re.compile(rb"^content-type:[ \t]*(\r?\n[ \t]+)?multipart/", re.I | re.M)


def _parts(raw: bytes) -> int:
    """At least as many as the mail's MIME parts (every line that begins with
    ``--`` and does not end with it may open one); 0 if no part of it is
    multipart."""
    if not _MULTIPART.search(raw):
        return 0
    return sum(1 for line in _DASH_LINE.findall(raw) if not line.rstrip().endswith(b"--"))


_BOUNDARY = re.compile(rb'boundary\s*=\s*(?:"([^"\r\n]*)"|([^\s;"]+))', re.I)


def _nesting(raw: bytes) -> int:
    """How deep the mail's multiparts nest, read from its boundary lines
    without parsing it: a declared boundary's first ``--B`` line opens its
    level (inside the levels open), a later one closes the levels opened
    inside it, ``--B--`` closes its own."""
    if not _MULTIPART.search(raw):
        return 1
    declared = {a or b for a, b in _BOUNDARY.findall(raw)}
    stack: list[bytes] = []
    open_: set[bytes] = set()
    deepest = 0
    for line in _DASH_LINE.findall(raw):
        line = line.rstrip()
        closing = line.endswith(b"--") and line[2:-2] in declared
        mark = line[2:-2] if closing else line[2:]
        if mark not in declared:
            continue
        if mark in open_:
            while stack[-1] != mark:
                open_.discard(stack.pop())
            if closing:
                open_.discard(stack.pop())
        elif not closing:
            stack.append(mark)
            open_.add(mark)
            deepest = max(deepest, len(stack))
    return deepest + 1


def _depth(msg: Message) -> int:
    """How deep the mail's parts nest (1: not multipart), without recursion."""
    deepest = 0
    todo: list[tuple[Message, int]] = [(msg, 1)]
    while todo:
        part, level = todo.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        payload = part.get_payload() if part.is_multipart() else None
        if isinstance(payload, list):
            todo.extend((sub, level + 1) for sub in payload if isinstance(sub, Message))
    return deepest


#: a From that the email package, MTAs and mail clients all read as the same
#: address, which is then the dot-atom address in it: that address alone, or
#: in <...> after a display name of plain words (no "@"); no encoded word
#: anywhere (the package decodes one even inside an address)
_PLAIN_FROM = re.compile(rf"(?!.*=\?)[ \t]*(?:(?:{ATEXT}[ \t]+)+<({DOT_ATOM_ADDRESS})>|({DOT_ATOM_ADDRESS}))[ \t]*")


def _from_address(msg: EmailMessage) -> tuple[str, str | None]:
    """The address the mail is from, and why its From cannot carry a password
    (None: it can).  A plain From (:data:`_PLAIN_FROM`) is read as written;
    any other is parsed by the email package and read again as MTAs read it
    (:func:`senderauth.read_from`)."""
    written = raw_header(msg, "From")
    plain = _PLAIN_FROM.fullmatch(written) if len(written) <= MAX_FROM_CHARS else None
    if plain is not None:
        return plain.group(1) or plain.group(2), None
    from_header = _header(msg, "From")
    addr = ""
    try:
        pairs = getaddresses([from_header])
        addr = pairs[0][1] if pairs else ""
    except Exception:
        addr = parseaddr(from_header)[1]
    # the addr-spec in <...>, as MTAs and clients read it (senderauth.read_from)
    return read_from(written, addr)


def read_mail(raw: bytes, envelope_from: str = "") -> IncomingMail:
    msg, unread = _parse(raw)
    addr, from_problem = _from_address(msg)
    addr = (addr or envelope_from or "").strip().lower()
    body, html_only, notes = "", False, list[str]()
    if unread is None:
        body, html_only = _body(msg)
        body, notes = unwrap(body)
        attached = attachments_note(msg)
        if attached:
            notes.append(attached)
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
    try:
        content_type = msg.get_content_type()
    except Exception:
        content_type = "text/plain"
    return IncomingMail(
        from_addr=addr,
        subject=clean_text(_header(msg, "Subject"), limit=998),
        message_id=message_id,
        references=[r for r in refs if r.startswith("<")],
        body=body,
        html_only=html_only,
        headers=headers,
        auth_results=auth_results,
        content_type=content_type,
        notes=notes,
        from_problem=from_problem,
        unread=unread,
    )


_PGP_BEGIN = "-----BEGIN PGP SIGNED MESSAGE-----"
_PGP_SIGNATURE = "-----BEGIN PGP SIGNATURE-----"
_PGP_END = "-----END PGP SIGNATURE-----"
#: an armour header line ("Hash: SHA256") between the BEGIN line and the signed text
_ARMOUR_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")
#: the line a mail client puts above a forwarded mail (mutt, Gmail, Thunderbird, Apple Mail)
_FORWARD_START = re.compile(
    r"^\s*(-{3,}\s*(forwarded\s+message(\s+from\s.*)?|weitergeleitete\s+nachricht|message\s+transf[ée]r[ée]"
    r"|mensaje\s+reenviado)\s*-{3,}|begin\s+forwarded\s+message\s*:)\s*$", re.I)
#: the line mutt puts below one
_FORWARD_END = re.compile(r"^\s*-{3,}\s*end\s+(of\s+)?forwarded\s+message\s*-{3,}\s*$", re.I)
#: the forwarded mail's header lines that clients repeat below the start line
_FORWARD_HEADER = re.compile(
    r"^\s*\**\s*(from|date|sent|subject|to|cc|reply-to|von|datum|gesendet|betreff|an|de|objet|envoy[ée]|[àa]|fecha"
    r"|asunto|para)\s*\**\s*:", re.I)
#: what makes a body worth a second look (most are not)
_WRAPPED = re.compile(r"^(-----BEGIN PGP SIGNED MESSAGE-----|.*forward|.*weitergeleitet|.*transf[ée]r|.*reenviado)",
                      re.I | re.M)


def unwrap(body: str) -> tuple[str, list[str]]:
    """The body with what wraps the player's text made blank lines (so that
    every line keeps its number): a PGP clear-signed message's armour (the
    BEGIN line, its ``Hash:`` lines, the signature block; the ``- `` of
    dash-escaped lines is undone, RFC 4880 7.1), and the start line, header
    lines and end line of a forwarded mail, whose text is then read like the
    player's own.  Returns the body and what the reply should say about it."""
    if not _WRAPPED.search(body):
        return body, []
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    signed = forwarded = False
    i = 0
    while i < len(lines):
        if lines[i].strip() == _PGP_BEGIN:
            i = _unsign(lines, i)
            signed = True
        elif _FORWARD_START.match(lines[i]):
            i = _unforward(lines, i)
            forwarded = True
        else:
            if _FORWARD_END.match(lines[i]):
                lines[i] = ""
            i += 1
    notes = []
    if signed:
        notes.append("Your mail was signed with PGP: the server read the signed text and did not check the signature.")
    if forwarded:
        notes.append("Your mail forwards a mail: its header lines (From:, Date:, Subject: ...) were skipped and its "
                     "text was read as your commands.")
    return "\n".join(lines), notes


def _unsign(lines: list[str], i: int) -> int:
    """Blank the clear-signed message's armour that starts at ``lines[i]``;
    returns the index after its signature block."""
    lines[i] = ""
    j = i + 1
    while j < len(lines) and _ARMOUR_HEADER.match(lines[j]):
        lines[j] = ""
        j += 1
    while j < len(lines) and lines[j].strip() != _PGP_SIGNATURE:
        if lines[j].startswith("- "):
            lines[j] = lines[j][2:]
        j += 1
    while j < len(lines):
        done = lines[j].strip() == _PGP_END
        lines[j] = ""
        j += 1
        if done:
            break
    return j


def _unforward(lines: list[str], i: int) -> int:
    """Blank the start line of a forwarded mail at ``lines[i]`` and the
    header lines below it (with their continuation lines); returns the index
    of its first line of text."""
    lines[i] = ""
    j = i + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    first = j
    while j < len(lines) and (_FORWARD_HEADER.match(lines[j])
                              or (j > first and lines[j][:1] in (" ", "\t") and lines[j].strip())):
        lines[j] = ""  # a header line, or the continuation of a long one
        j += 1
    return j


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


def is_null_sender(envelope_from: str) -> bool:
    """A null envelope sender; Postfix's pipe(8) gives it as MAILER-DAEMON (its null_sender default)."""
    sender = envelope_from.strip()
    return sender in ("", "<>") or sender.lower() == "mailer-daemon"


def automatic_reason(mail: IncomingMail, envelope_from: str, own_domain: str) -> str | None:
    """Why this mail must not be answered (RFC 3834 and common practice), or None."""
    if is_null_sender(envelope_from):
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
    return _cut(_tidy(line))


def _tidy(line: str) -> str:
    return _CONTROL.sub(" ", line).strip()


def _cut(text: str) -> str:
    """``text`` cut to MAX_LINE_CHARS, or before a ``$$password$$`` that
    the cut would go through (the password is read whole: command_lines)."""
    if len(text) <= MAX_LINE_CHARS:
        return text
    for pair in PASSWORD_RE.finditer(text):
        if pair.start() >= MAX_LINE_CHARS:
            break
        if pair.end() > MAX_LINE_CHARS:
            return text[:pair.start()].rstrip()
    return text[:MAX_LINE_CHARS]


def decode_flowed(text: str, delsp: bool = False) -> str:
    """Undo ``format=flowed`` (RFC 3676): a line ending in a space goes on in
    the next line of the same quote depth (with DelSp=yes that space goes too);
    one leading space of a line is stuffing.  Quoted lines come back as
    ``> `` per level; the signature line ``-- `` is never joined."""
    out: list[str] = []
    open_depth: int | None = None  # depth of the paragraph still going on
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        depth = len(raw) - len(raw.lstrip(">"))
        line = raw[depth:]
        if line.startswith(" "):
            line = line[1:]  # space-stuffing (or the space after the quote marks)
        soft = line.endswith(" ") and line != "-- "
        if soft and delsp:
            line = line[:-1]
        if open_depth == depth and out:
            out[-1] += line
        else:
            out.append(("> " * depth if depth else "") + line)
        open_depth = depth if soft else None
    return "\n".join(out)


class Lines(list[Line]):
    """Command lines; ``cut_after`` is the number of the last line read when
    the mail had more than MAX_LINES command lines (None: all were read)."""

    cut_after: int | None = None


def command_lines(body: str, sent: Sequence[SentMail] = (), domain: str | None = None) -> list[Line]:
    """The non-blank lines the sender wrote now (see replies.py), numbered by
    their place in the body.  ``sent``: the mails of ours this one answers."""
    lines = Lines()
    beyond: list[Line] = []
    seen: set[str] = set()
    for number, line in own_lines(body, sent, domain):
        if lines.cut_after is not None:
            # the lines after the cap are not read, but a $$password$$ in them
            # counts: the password may stand anywhere in the mail
            _passwords_beyond(number, line, seen, beyond)
            continue
        whole = _tidy(line)
        text = _cut(whole)
        if not text:
            continue
        if len(lines) >= MAX_LINES:
            lines.cut_after = lines[-1].number
            _passwords_beyond(number, line, seen, beyond)
            continue
        lines.append(Line(number, text))
        if len(whole) > len(text):
            # a line is cut at MAX_LINE_CHARS, but a password at its end counts
            _passwords_beyond(number, whole[len(text):], seen, beyond)
    lines.extend(beyond)
    return lines


def _passwords_beyond(number: int, line: str, seen: set[str], out: list[Line]) -> None:
    """The ``$$passwords$$`` of a line after the cap, each new one as a line
    of its own (a line of passwords only: take_passwords leaves no command);
    at most one more than a mail may carry (classify.MAX_SECRETS refuses it)."""
    if "$$" not in line or len(seen) > _MAX_PASSWORDS_BEYOND:
        return
    for found in PASSWORD_RE.findall(line):
        pw = found.strip()
        if pw and pw not in seen and len(seen) <= _MAX_PASSWORDS_BEYOND:
            seen.add(pw)
            out.append(Line(number, f"$${pw}$$"))


def _starts_with(line: str, head: str) -> bool:
    """``head`` is ``line`` or its first words."""
    return line == head or line.startswith(head + " ")


def subject_command(subject: str, body_lines: Sequence[Line] = ()) -> Line | None:
    """The Subject as a candidate command line (number 0), or None.  A Subject
    that begins with a reply or forward prefix ("Re:", "AW:", "Fwd:" ...)
    answers or passes on a mail and is never a command; one that repeats a
    line of the body, or names the start of one ("confirm" above
    "confirm 7KQ2M-XH4PD"; passwords aside, normalised), runs once, as the body
    line."""
    if _SUBJECT_PREFIX.match(subject or ""):
        return None
    text = _clean(subject or "")
    if not text:
        return None
    bare = normalise(PASSWORD_RE.sub(" ", text))
    if bare and any(_starts_with(normalise(PASSWORD_RE.sub(" ", line.text)), bare) for line in body_lines):
        # only its $$password$$ (if any) still counts
        kept = " ".join(f"$${pw}$$" for pw in PASSWORD_RE.findall(text))
        return Line(0, kept) if kept else None
    return Line(0, text)


def unpaired_secrets(text: str) -> list[str]:
    """What a ``$$`` without its partner may hide (a password wrapped onto two
    lines, a missing closing ``$$``, a stray ``pw$$``): the text after such a
    ``$$`` to the end of the line and its first word, or, for a ``$$`` that
    ends the line, the word before it.  The other words of the line are
    ordinary words: they are never masked elsewhere."""
    rest = PASSWORD_RE.sub(" ", text)
    if "$$" not in rest:
        return []
    found: list[str] = []
    parts = rest.split("$$")
    for before, after in zip(parts, parts[1:], strict=False):
        if after.strip():  # an opening $$: the rest of the line, and its first word (a password holds no space)
            found.append(after.strip())
            found.append(after.split()[0])
        elif before.split():  # a closing $$ at the end: the word before it
            found.append(before.split()[-1])
    return [f for f in found if f]


def mask_unpaired(text: str, mask: str = "****") -> str:
    """``text`` with everything after a stray ``$$`` (and the word glued to it)
    masked; well-formed ``$$...$$`` pairs are left for compose.redact."""
    pieces = PASSWORD_RE.split(text)  # even: outside pairs; odd: pair contents
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append("$$" + piece + "$$")
        elif "$$" in piece:
            head = piece.split("$$", 1)[0]
            head = re.sub(r"\S+$", "", head)
            out.append(head + mask)
        else:
            out.append(piece)
    return "".join(out)


def take_passwords(lines: list[Line]) -> tuple[list[str], list[Line]]:
    """Remove every ``$$password$$`` from the lines; return the passwords found
    (white space around them dropped: a password holds none) and the lines
    that still have text.  A line with a ``$$`` left over is not a command:
    it is left out, and what it may hide is returned with the passwords'
    fragments (see :func:`split_passwords`)."""
    found, kept, _ = split_passwords(lines)
    return found, kept


def split_passwords(lines: list[Line]) -> tuple[list[str], list[Line], list[tuple[int, list[str]]]]:
    """As :func:`take_passwords`, and also (line number, hidden fragments) of
    every line left out because of a stray ``$$``."""
    found: list[str] = []
    kept: list[Line] = []
    stray: list[tuple[int, list[str]]] = []
    for line in lines:
        found.extend(p.strip() for p in PASSWORD_RE.findall(line.text) if p.strip())
        if "$$" in PASSWORD_RE.sub(" ", line.text):
            stray.append((line.number, unpaired_secrets(line.text)))
            continue
        rest = PASSWORD_RE.sub(" ", line.text).strip()
        if rest:
            kept.append(Line(line.number, " ".join(rest.split())))
    return found, kept, stray


#: the fields of an abuse report's machine-readable part worth keeping (RFC 5965 3.1, 3.2)
_ARF_FIELDS = ("feedback-type", "user-agent", "source-ip", "original-mail-from", "original-rcpt-to",
               "reported-domain", "arrival-date")


def abuse_report(raw: bytes) -> str | None:
    """An abuse report (ARF, RFC 5965: multipart/report; report-type=feedback-report)
    summed up on one line of cleaned fields; None for any other mail."""
    try:
        return _abuse_report(raw)
    except Exception:  # beyond the caps (headers.py), nested too deeply: not a report we read
        return None


def _abuse_report(raw: bytes) -> str | None:
    msg = BytesParser(policy=reading_policy()).parsebytes(raw)
    if msg.get_content_type() != "multipart/report":
        return None
    if str(msg.get_param("report-type", "")).lower() != "feedback-report":
        return None
    found: list[str] = []
    for part in msg.walk():
        if part.get_content_type() != "message/feedback-report":
            continue
        payload = part.get_payload()
        if isinstance(payload, list) and payload and not isinstance(payload[0], str):
            items = list(payload[0].items())  # the parser reads the fields as a header block
        else:
            text = part.get_payload(decode=True) or b""
            items = list(BytesParser(policy=reading_policy()).parsebytes(bytes(text), headersonly=True).items())
        for name, value in items:
            if name.lower() in _ARF_FIELDS:
                found.append(f"{name.lower()}={clean_text(str(value))[:200]}")
        break
    origin = clean_text(parseaddr(str(msg.get("from", "")))[1])[:200]
    return "; ".join([f"from={origin or '(none)'}", *found])[:1000]
