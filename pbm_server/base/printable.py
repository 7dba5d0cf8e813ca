"""Text from strangers made safe to show: in a log line, in an SMTP reply and
in XML (issue 41.3 and 41.5).

A sender chooses the bytes of its envelope address, its From header and its
orders; the server writes some of them back -- into the log an operator reads
in a terminal or ships to an indexer, into the SMTP reply the client's log
keeps, into the Atom feed every reader's parser reads.  A carriage return
there starts what looks like a new log line of its own (``a\\rFAKE ... INFO
pbm_server: ...``), ``\\x1b[2J`` clears the operator's terminal, U+2028 and
U+0085 end a line for some viewers and not for others, U+202E turns the rest
of a line around; and one U+FFFE makes a whole feed not XML.

:func:`printable` writes each such character as an escape a person can read
(``\\r``, ``\\x1b``, ``\\u2028``); :func:`json_printable` does the same for a
JSON text, with JSON's own escapes, so the line stays one line and a shipper
still decodes the original value; :func:`xml_chars` replaces every character
XML 1.0 does not allow with U+FFFD.  They are used in one place each: the log
formatters (:mod:`pbm_server.base.logs`), the listener's ``push`` of every
SMTP reply line (:mod:`pbm_server.mail.inbound`), and the writers of the feed
and the charts' SVG (:mod:`pbm_server.web`) -- not at the call sites, so a
new log line or reply is covered without anybody remembering it.
"""

from __future__ import annotations

import re
import unicodedata

#: the Unicode categories a log line or a reply shows as an escape: controls
#: (C0, DEL, C1 -- NEL among them), format characters (bidi overrides,
#: zero-width ones, U+FEFF), the line and paragraph separators, surrogates (a
#: mail's undecodable bytes), private use and unassigned code points.  Spaces
#: other than U+0020 (category Zs: U+00A0, U+3000, ...) stay: they move no
#: line and hide nothing a reader would miss.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})

#: the short escapes a reader knows; every other character is \xHH, \uHHHH or \UHHHHHHHH
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}

#: every character but printable ASCII (the ones :func:`printable` has to look at)
_NOT_PRINTABLE_ASCII = re.compile("[^\x20-\x7e]")

#: characters XML 1.0 (section 2.2, Char) does not allow anywhere in a document
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def hidden(ch: str) -> bool:
    """Whether ``ch`` is a character a log line or a reply must not carry raw."""
    return unicodedata.category(ch) in HIDDEN_CATEGORIES


def escape_char(ch: str) -> str:
    """``ch`` as a readable escape: ``\\r``, ``\\x1b``, ``\\u2028``, ``\\U000e0001``."""
    if ch in _SHORT:
        return _SHORT[ch]
    n = ord(ch)
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def printable(text: str, *, ascii_only: bool = False) -> str:
    """``text`` with every hidden character (:data:`HIDDEN_CATEGORIES`) as
    its escape; with ``ascii_only`` also every character beyond ASCII (for an
    SMTP reply to a client that did not ask for SMTPUTF8).

    A backslash stays as it is: an escape in the output may have been typed
    by the sender, but nothing the sender types can end the line or move the
    cursor.  Text that has nothing to escape is returned as it is (one
    ``str.isprintable`` in C: a log line pays nothing more)."""
    if text.isprintable() and (text.isascii() or not ascii_only):
        return text
    # only what is not printable ASCII is looked at, each on its own
    return _NOT_PRINTABLE_ASCII.sub(_escape_ascii if ascii_only else _escape_hidden, text)


def _escape_hidden(found: re.Match[str]) -> str:
    ch = found.group()
    return escape_char(ch) if hidden(ch) else ch


def _escape_ascii(found: re.Match[str]) -> str:
    return escape_char(found.group())


def _json_escape(ch: str) -> str:
    n = ord(ch)
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000  # a UTF-16 surrogate pair, as JSON writes a character beyond the BMP
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def json_printable(json_text: str) -> str:
    """A JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with
    every hidden character left raw there written as a JSON ``\\uHHHH``
    escape: json.dumps escapes C0 controls itself but leaves DEL, C1
    controls (NEL), U+2028/U+2029 and the rest as they are.  Such a character
    can only be inside a string (the structure is ASCII), where the escape
    means the same character: a parser reads the same value."""
    if json_text.isprintable():
        return json_text
    return "".join(_json_escape(ch) if hidden(ch) else ch for ch in json_text)


def xml_chars(text: str) -> str:
    """``text`` with every character XML 1.0 does not allow (C0 controls
    but tab, LF and CR; surrogates; U+FFFE, U+FFFF) replaced by U+FFFD, so
    that a document made of it stays well-formed.  Markup is escaped before
    (the templates' autoescape, html.escape): this is for what escaping
    cannot express, since XML 1.0 has no way to write these characters."""
    return _NOT_XML.sub("\ufffd", text)
