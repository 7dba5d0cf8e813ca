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
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from email.headerregistry import HeaderRegistry, UnstructuredHeader
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
    text = str(value)
    # printable ASCII holds no control, separator, line break or format
    # character: the common case skips the look at every character
    if not (text.isascii() and text.isprintable()):
        text = "".join(" " if _unsafe(ch) else ch for ch in text)
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


@functools.lru_cache(maxsize=256)
def _kind(factory: Any, name: str) -> Any:
    # the header class of a name: the registry makes a new class on every look
    return factory[name]


# -- caps on a header's value, before the email package parses it -------------------------
# The email package's header parser grows with the square of some counts (a
# From of 10,000 folded ``=?utf-8?q?a?=`` words took 1.5 GB) and re-parses a
# long value on every read.  No value beyond these caps reaches it: the mail's
# own headers are checked first (:func:`oversized`: the mail is not read, the
# sender is told which header and what limit), and every value the policy
# parses (a MIME part's headers too) is cut to them (:func:`bounded`).

#: longest header value read, folding undone (RFC 5322 lines are 998
#: characters; References of 100 message ids are about 6,000)
MAX_HEADER_CHARS = 8_000
#: most RFC 2047 encoded words (``=?charset?q?...?=``) in one header
MAX_ENCODED_WORDS = 200
#: most addresses in one address header (From, To, Cc, ...)
MAX_ADDRESSES = 100
#: most message ids in References or In-Reply-To
MAX_MSGIDS = 100
#: most parameters of a Content-Type or Content-Disposition
MAX_PARAMS = 100
#: most header fields in a mail's (or a part's) header block
MAX_FIELDS = 500
#: most comments ``(...)`` in a structured header (the parser nests them by recursion)
MAX_COMMENTS = 50
#: header text the email package may parse for one mail (each value not in
#: the cache counts its length and 20 more); at its worst the parser takes
#: about 33 microseconds a character (a From of 4,000 words), so this bounds
#: what parsing one mail's headers costs to well under a second of CPU
MAX_PARSED_CHARS = 20_000

#: headers whose value is read as addresses (their caps; which values a mail we write keeps as written)
_ADDRESS_HEADERS = frozenset({"from", "sender", "reply-to", "to", "cc", "bcc", "resent-from", "resent-sender",
                              "resent-to", "resent-cc", "resent-bcc", "return-path", "disposition-notification-to"})
_ID_HEADERS = frozenset({"references", "in-reply-to", "message-id", "resent-message-id"})
_PARAM_HEADERS = frozenset({"content-type", "content-disposition"})
#: the headers the email package parses by a grammar (not as free text)
_STRUCTURED = frozenset(name for name, kind in HeaderRegistry().registry.items()
                        if not issubclass(kind, UnstructuredHeader))


def _counted(name: str) -> list[tuple[str, int, str]]:
    """(what is counted, its cap, how the limit is said) for a header name."""
    low = name.lower()
    caps = [("=?", MAX_ENCODED_WORDS, "encoded words (=?...?=)")]
    if low in _ADDRESS_HEADERS:
        caps += [("@", MAX_ADDRESSES, "addresses (@)"), (",", MAX_ADDRESSES, "addresses (commas)")]
    if low in _ID_HEADERS:
        caps.append(("<", MAX_MSGIDS, "message ids (<...>)"))
    if low in _PARAM_HEADERS:
        caps.append((";", MAX_PARAMS, "parameters (;)"))
    if low in _STRUCTURED or low in _ADDRESS_HEADERS:
        caps.append(("(", MAX_COMMENTS, "comments (...)"))
    return caps


def over_cap(name: str, value: str) -> str | None:
    """What makes a header value too large to read ("it has 10,000 encoded
    words (=?...?=); at most 200 are read"), or None."""
    for mark, cap, what in _counted(name):
        found = value.count(mark)
        if found > cap:
            return f"it has {found:,} {what}; at most {cap:,} are read"
    if len(value) > MAX_HEADER_CHARS:
        return f"it is {len(value):,} characters long; at most {MAX_HEADER_CHARS:,} are read"
    return None


def oversized(items: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """(header name, why) of each header of a mail's header block (its raw,
    unparsed (name, value) pairs) beyond the caps; the block itself if it
    has more than MAX_FIELDS fields."""
    if len(items) > MAX_FIELDS:
        return [("(all)", f"the mail has {len(items):,} header fields; at most {MAX_FIELDS} are read")]
    found = []
    for name, value in items:
        why = over_cap(name, str(value))
        if why is not None:
            found.append((str(name)[:100], why))
    return found


def _cut_at(value: str, mark: str, keep: int) -> str:
    """``value`` up to the ``keep``+1-th ``mark`` in it."""
    at = -1
    for _ in range(keep + 1):
        at = value.find(mark, at + 1)
        if at < 0:
            return value
    return value[:at]


def bounded(name: str, value: str) -> str:
    """``value`` cut to the caps of its header (see :func:`over_cap`)."""
    value = value[:MAX_HEADER_CHARS]
    for mark, cap, _ in _counted(name):
        if value.count(mark) > cap:
            value = _cut_at(value, mark, cap)
    return value


#: longer header values are parsed every time, not kept (the cache stays small)
_CACHED_CHARS = 1000
_CACHE_SIZE = 2048


class HeaderBudgetSpent(Exception):
    """A mail's headers would cost more to parse than MAX_PARSED_CHARS allows."""


class HeaderBudget:
    """What is left of one mail's MAX_PARSED_CHARS (see :func:`reading_policy`)."""

    def __init__(self, chars: int = MAX_PARSED_CHARS):
        self.left = chars
        self.spent = False
        #: this mail's values too long for the shared cache, parsed once
        self.memo: dict[tuple[str, str], Any] = {}

    def charge(self, value: str) -> None:
        self.left -= len(value) + 20
        if self.left < 0:
            self.spent = True
        if self.spent:
            raise HeaderBudgetSpent(f"more than {MAX_PARSED_CHARS:,} characters of header text to parse")


class _Parsed:
    """The header objects of the values parsed lately (a small LRU shared by
    the threads of a process; a lookup never parses)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[tuple[Any, str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, str, str]) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[Any, str, str], parsed: Any) -> None:
        with self._lock:
            self._items[key] = parsed
            if len(self._items) > self.size:
                self._items.popitem(last=False)


_CACHE = _Parsed(_CACHE_SIZE)


def _parsed(factory: Any, name: str, value: str, budget: HeaderBudget | None = None) -> Any:
    """The header object of ``value`` cut to its caps; a value not in the
    cache is charged to ``budget`` (if any) before it is parsed."""
    value = bounded(name, value)
    kind = _kind(factory, name.lower()) if len(name) <= 100 else None
    key = (kind, name, value)
    shared = kind is not None and len(value) <= _CACHED_CHARS
    found = _CACHE.get(key) if shared else budget.memo.get((name, value)) if budget is not None else None
    if found is not None:
        return found
    if budget is not None:
        budget.charge(value)
    parsed = factory(name, value) if kind is None else kind(name, value)
    if shared:
        _CACHE.put(key, parsed)
    elif budget is not None:
        budget.memo[(name, value)] = parsed
    return parsed


def unfolded(value: str) -> str:
    """A header value as written, its folds (line ends) taken out, as the
    email package reads it."""
    return "".join(_LINESEP.split(value))


class OncePolicy(EmailPolicy):
    """``email.policy.default``, except that a header value is parsed into its
    header object once: the email package parses it again on every read (a
    mail's Content-Type about ten times while its body is found) and on every
    write.  Header objects are immutable strings, so the same object serves
    every mail with the same name and value (Content-Type, MIME-Version,
    Auto-Submitted ...).  The cache holds at most 2,048 values of at most
    1,000 characters each (about 2 MB at worst), kept in this process only.
    Likewise a header object written out (folded: a third of the CPU of
    writing a reply) keeps its folded lines, one per policy, so a value
    shared by many mails is folded once.

    Every value is cut to its caps (:func:`bounded`) before it is parsed;
    a policy made by :func:`reading_policy` also charges what it parses to
    the mail's :class:`HeaderBudget` and raises HeaderBudgetSpent past it."""

    #: the budget of the mail being read (None: no limit, for our own mails)
    budget: HeaderBudget | None = None

    def header_fetch_parse(self, name: str, value: Any) -> Any:
        if hasattr(value, "name"):
            return value
        return _parsed(self.header_factory, name, unfolded(value), self.budget)

    def header_max_count(self, name: str) -> Any:
        return _kind(self.header_factory, name.lower()).max_count if len(name) <= 100 else super().header_max_count(name)

    def fold(self, name: str, value: Any) -> Any:
        return self._fold_once(name, value, False)

    def fold_binary(self, name: str, value: Any) -> Any:
        return self._fold_once(name, value, True)

    def _fold_once(self, name: str, value: Any, binary: bool) -> Any:
        folds = getattr(value, "__dict__", None) if hasattr(value, "name") else None
        if folds is None:
            return super().fold_binary(name, value) if binary else super().fold(name, value)
        key = (binary, self.linesep, self.utf8, self.max_line_length, self.cte_type, name)
        found = folds.setdefault("_pbm_folds", {}).get(key)
        if found is None:
            found = super().fold_binary(name, value) if binary else super().fold(name, value)
            folds["_pbm_folds"][key] = found
        return found

    def header_store_parse(self, name: str, value: Any) -> Any:
        if hasattr(value, "name") and value.name.lower() == name.lower():
            return (name, value)
        if isinstance(value, str) and len(value.splitlines()) > 1:
            raise ValueError("Header values may not contain linefeed or carriage return characters")
        return (name, _parsed(self.header_factory, name, value))


#: an atom's characters in ASCII (RFC 5322 3.2.3 atext)
ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#: a value the email package writes back as it is: printable ASCII words
#: with one space between them, and no encoded word (``=?``) to decode
_PLAIN = re.compile(r"(?!.*=\?)[\x21-\x7e]+(?: [\x21-\x7e]+)*\Z")
#: a dot-atom address at a domain of letters, digits and hyphens (a pattern)
DOT_ATOM_ADDRESS = rf"{ATEXT}(?:\.{ATEXT})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
#: an address the email package writes back as it is: such an address with
#: no encoded word in it
_PLAIN_ADDRESS = re.compile(rf"(?!.*=\?){DOT_ATOM_ADDRESS}\Z")


def is_plain_address(addr: str) -> bool:
    """A dot-atom address at a domain of letters, digits and hyphens (no
    encoded word): one that every reader takes as it is written."""
    return _PLAIN_ADDRESS.match(addr) is not None


class PlainHeader(str):
    """A header of a mail we write whose value the email package would write
    back unchanged: kept as it is, never parsed.  Parsing a new value into
    its header object is most of the CPU of writing a reply's headers, and
    the values a reply has of its own (To, Date, Message-ID, In-Reply-To,
    References) are plain.  Made by :func:`plain_or_parsed`, which parses
    every other value; a line longer than the policy allows is folded as
    the email package folds it (:func:`fold_plain_words`, or the package
    itself; ``tests/server/test_deferred_replies.py`` and
    ``tests/server/test_plain_fold.py`` show both write the same bytes)."""

    name: str
    defects: tuple[Any, ...] = ()

    def __new__(cls, name: str, value: str) -> PlainHeader:
        self = super().__new__(cls, value)
        self.name = name
        return self

    def fold(self, *, policy: EmailPolicy) -> str:
        line = f"{self.name}: {self}"
        if policy.max_line_length and len(line) > policy.max_line_length:
            folded = fold_plain_words(self.name, str(self), policy.max_line_length, str(policy.linesep))
            if folded is None:
                return str(_parsed(policy.header_factory, self.name, str(self)).fold(policy=policy))
            return folded
        return line + str(policy.linesep)


def fold_plain_words(name: str, value: str, maxlen: int, linesep: str) -> str | None:
    """A header of plain words (:data:`_PLAIN`) too long for one line, folded
    as the email package folds an unstructured header of such words, without
    parsing it: the label and a space, then the whole value on the next line
    if it fits on a line of its own; else word after word, each word that
    does not fit beginning a new line with the space before it.  None where
    that model may not hold (a word of a line's length, a header the package
    parses as structured): the package folds it.  A reply's References of two
    message ids is the common case.  ``tests/server/test_plain_fold.py``
    holds it to the package's bytes.  (A Subject we write follows a rule of
    our own instead: compose.fold_subject.)"""
    low = name.lower()
    if low in _STRUCTURED or low in _ADDRESS_HEADERS or _PLAIN.match(value) is None:
        return None
    words = value.split(" ")
    if max(map(len, words)) + 1 >= maxlen or len(name) + 2 >= maxlen:
        return None
    label = name + ":"
    if len(value) + 1 <= maxlen:
        return f"{label}{linesep} {value}{linesep}"
    lines = [label + " "]
    for n, word in enumerate(words):
        if n:
            if len(lines[-1]) + 1 <= maxlen:
                lines[-1] += " "
            else:
                lines.append(" ")
        if len(lines[-1]) + len(word) <= maxlen:
            lines[-1] += word
        elif lines[-1].endswith(" "):
            lines[-1] = lines[-1][:-1]
            lines.append(" " + word)
        else:
            return None
    return linesep.join(lines) + linesep



#: a URL written in List-Unsubscribe as it is: printable ASCII with none of
#: the characters that end it (``>``) or the list (``,``), no space, no encoded word
_PLAIN_URL = re.compile(r"(?!.*=\?)[\x21-\x2b\x2d-\x3b\x3d\x3f-\x7e]+\Z")


class UrlListHeader(PlainHeader):
    """A header whose value is a list of ``<URL>`` (RFC 2369: List-Unsubscribe)
    written as plain bytes.  The email package folds a line longer than 78
    characters into RFC 2047 encoded words (``=?utf-8?q?=3Chttps=3A//...``), and
    a mailbox provider that reads the header's bytes then finds no URL: no
    one-click unsubscribe.  Here a list that does not fit on one line is
    folded only after its commas, each ``<URL>`` whole on its own line (a
    URL longer than 78 characters stays one line: RFC 5322 allows 998).
    A URL that is not plain printable ASCII (none we make) is left to the
    email package, as before."""

    urls: tuple[str, ...]

    def __new__(cls, name: str, urls: Sequence[str]) -> UrlListHeader:
        self = str.__new__(cls, ", ".join(f"<{u}>" for u in urls))
        self.name = name
        self.urls = tuple(urls)
        return self

    def fold(self, *, policy: EmailPolicy) -> str:
        if not all(_PLAIN_URL.match(u) for u in self.urls):
            return str(_parsed(policy.header_factory, self.name, str(self)).fold(policy=policy))
        line = f"{self.name}: {self}"
        if not policy.max_line_length or len(line) <= policy.max_line_length:
            return line + str(policy.linesep)
        return f"{self.name}: " + f",{policy.linesep} ".join(f"<{u}>" for u in self.urls) + str(policy.linesep)


def is_plain(name: str, value: str) -> bool:
    """Whether the email package would write ``value`` back as it is as the
    header ``name`` of a mail we write (in an address header a plain
    address, alone or after a name of atoms in angle brackets; plain
    printable words in any other)."""
    plain = _PLAIN_MAILBOX if name.lower() in _ADDRESS_HEADERS else _PLAIN
    return plain.match(value) is not None


#: a plain address alone, or after a display name of atoms (words of atext
#: with one space between them: nothing the package quotes) in angle brackets
_PLAIN_MAILBOX = re.compile(rf"(?!.*=\?)(?:{DOT_ATOM_ADDRESS}|{ATEXT}(?: {ATEXT})* <{DOT_ATOM_ADDRESS}>)\Z")


def plain_or_parsed(name: str, value: str) -> Any:
    """``value`` as the header ``name`` of a mail we write: a
    :class:`PlainHeader` when it :func:`is_plain`, else the value itself,
    which the policy parses."""
    return PlainHeader(name, value) if is_plain(name, value) else value


#: reading and writing mail: policy.default with each header parsed once
POLICY = OncePolicy()
#: writing for SMTP (CRLF line ends), the same otherwise
SMTP_POLICY = POLICY.clone(linesep="\r\n")


def reading_policy() -> OncePolicy:
    """POLICY with a fresh :class:`HeaderBudget`: for reading one mail from outside."""
    policy = POLICY.clone()
    object.__setattr__(policy, "budget", HeaderBudget())  # policies are read-only, but for their own code
    return policy
