"""Header values from hostile or broken mail, made safe to read and to put
into the headers of a reply.

A decoded header can hold line breaks the email package refuses to write
back: LF or CR from an RFC 2047 word (``=?utf-8?q?a=0Ab?=``), NEL (U+0085,
what a cp1252 "..." becomes when the mail says ISO-8859-1), LINE and
PARAGRAPH SEPARATOR (U+2028/9), and the other characters ``str.splitlines``
breaks on.  :func:`clean_text` turns every control and separator into a space;
:func:`clean_msgid` keeps a Message-ID only if what is left is one.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from email.policy import EmailPolicy
from typing import Any

#: longest Subject kept (RFC 5322 allows 998 characters per line)
MAX_SUBJECT = 200
#: longest Message-ID kept
MAX_MSGID = 250

_MSGID = re.compile(r"<[\x21-\x3b\x3d\x3f-\x7e]+@?[\x21-\x3b\x3d\x3f-\x7e]*>")


def _unsafe(ch: str) -> bool:
    # Cc: C0/C1 controls (NEL is one); Zl/Zp: U+2028/U+2029; Cf: invisible
    # format characters (bidi overrides) that make a subject lie about itself
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp", "Cf") or len(("a" + ch + "a").splitlines()) > 1


def clean_text(value: str | None, limit: int = MAX_SUBJECT) -> str:
    """One line of text: every control, separator or line break a space,
    runs of white space one space, at most ``limit`` characters."""
    if not value:
        return ""
    text = "".join(" " if _unsafe(ch) else ch for ch in str(value))
    return " ".join(text.split())[:limit]


def clean_msgid(value: str | None) -> str | None:
    """A Message-ID fit to quote in In-Reply-To/References, or None."""
    text = clean_text(value, limit=MAX_MSGID * 2).replace(" ", "")
    m = _MSGID.search(text)
    if m is None or len(m.group(0)) > MAX_MSGID:
        return None
    return m.group(0)


def clean_msgids(values: list[str] | None, keep: int = 10) -> list[str]:
    out = [c for c in (clean_msgid(v) for v in (values or [])) if c]
    return out[-keep:]


# -- the email package's modern policy, with each header value parsed once ------------------
_LINESEP = re.compile(r"\n|\r")


#: longer header values are parsed every time, not kept (the cache stays small)
_CACHED_CHARS = 1000


@functools.lru_cache(maxsize=2048)
def _cached(kind: Any, name: str, value: str) -> Any:
    return kind(name, value)


@functools.lru_cache(maxsize=256)
def _kind(factory: Any, name: str) -> Any:
    # the header class of a name: the registry makes a new class on every look
    return factory[name]


def _parsed(factory: Any, name: str, value: str) -> Any:
    if len(name) > 100:
        return factory(name, value)
    kind = _kind(factory, name.lower())
    if len(value) > _CACHED_CHARS:
        return kind(name, value)
    return _cached(kind, name, value)


class OncePolicy(EmailPolicy):
    """``email.policy.default``, except that a header value is parsed into its
    header object once: the email package parses it again on every read (a
    mail's Content-Type about ten times while its body is found) and on every
    write.  Header objects are immutable strings, so the same object serves
    every mail with the same name and value (Content-Type, MIME-Version,
    Auto-Submitted ...).  The cache holds at most 2,048 values of at most
    1,000 characters each (about 2 MB at worst), kept in this process only."""

    def header_fetch_parse(self, name: str, value: Any) -> Any:
        if hasattr(value, "name"):
            return value
        return _parsed(self.header_factory, name, "".join(_LINESEP.split(value)))

    def header_max_count(self, name: str) -> Any:
        return _kind(self.header_factory, name.lower()).max_count if len(name) <= 100 else super().header_max_count(name)

    def header_store_parse(self, name: str, value: Any) -> Any:
        if hasattr(value, "name") and value.name.lower() == name.lower():
            return (name, value)
        if isinstance(value, str) and len(value.splitlines()) > 1:
            raise ValueError("Header values may not contain linefeed or carriage return characters")
        return (name, _parsed(self.header_factory, name, value))


#: reading and writing mail: policy.default with each header parsed once
POLICY = OncePolicy()
#: writing for SMTP (CRLF line ends), the same otherwise
SMTP_POLICY = POLICY.clone(linesep="\r\n")
