"""Names that look alike: the confusable skeleton of Unicode's UTS #39, and
bidirectional controls taken out of free text.

``skeleton(s)`` is UTS #39's skeleton: NFD, every character replaced by its
prototype from Unicode's confusables data, NFD again.  Two names with the same
skeleton look alike (``bԁ`` with a Cyrillic komi de and ``bd``).  ``name_key``
also folds case, so that the ASCII look-alikes a case-insensitive name can hold
meet too: ``aIice`` (capital I), ``a1ice`` and ``ALICE`` share ``alice``'s key
(case-insensitively ``i`` is ``I``, which looks like ``l``), ``0`` meets ``O``,
``rn`` meets ``m``.

The data is the ``confusables.json`` of the ``confusable-homoglyphs`` package,
generated from Unicode's confusables.txt.  It lists each ``source -> prototype``
line in both directions; a source has exactly one prototype and a prototype is
never a source, so every group of characters linked there is one prototype and
its sources.  We join the links into groups and map every member to the
group's prototype.  Pure: no I/O beyond reading the package's data file once.
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from importlib import resources

#: LRM, RLM, LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI, ALM
BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c")
_STRIP_BIDI = {ord(c): None for c in BIDI_CONTROLS}


def strip_bidi(text: str) -> str:
    """``text`` without bidirectional control characters (a right-to-left
    override in an alias would turn what follows it around for every reader)."""
    return text.translate(_STRIP_BIDI)


def _clean(s: str) -> str:
    # the generator keeps the LRM marks confusables.txt puts around RTL characters
    return strip_bidi(s) or s


@lru_cache(maxsize=1)
def _prototypes() -> dict[str, str]:
    raw = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text(encoding="utf-8")
    data: dict[str, list[dict[str, str]]] = json.loads(raw)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    links: dict[str, int] = {}
    for key, entries in data.items():
        k = _clean(key)
        links[k] = links.get(k, 0) + len(entries)
        for entry in entries:
            c = _clean(entry["c"])
            links.setdefault(c, 0)
            a, b = find(k), find(c)
            if a != b:
                parent[a] = b
    groups: dict[str, list[str]] = {}
    for member in list(parent):
        groups.setdefault(find(member), []).append(member)
    mapping: dict[str, str] = {}
    for members in groups.values():
        # the prototype: a sequence (sources are single characters), else the
        # member linked to all others; a pair is joined on either (same result)
        proto = max(members, key=lambda m: (len(m) > 1, links.get(m, 0), m.isascii(), -ord(m[0])))
        proto = unicodedata.normalize("NFD", proto)
        for m in members:
            if len(m) == 1 and m != proto:
                mapping[m] = proto
    return mapping


def skeleton(name: str) -> str:
    """UTS #39 skeleton: NFD, each character to its prototype, NFD; compatibility
    forms folded first (NFKC: fullwidth ``ｂｄ`` is ``bd``, ``ﬁ`` is ``fi``), which
    the confusables data leaves out for many of them."""
    table = _prototypes()
    nfd = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))
    return unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in nfd))


def name_key(name: str) -> str:
    """The key under which names that look alike meet: the skeleton, case
    folded, and the skeleton of that (``aIice``, ``a1ice``, ``ALICE`` -> ``alice``'s)."""
    # upper case first: a case-insensitive 'i' is an 'I', and 'I' looks like 'l'
    key = skeleton(skeleton(strip_bidi(name)).upper())
    for _ in range(3):
        folded = skeleton(key.casefold())
        if folded == key:
            break
        key = folded
    return key


def looks_alike(a: str, b: str) -> bool:
    return name_key(a) == name_key(b)


# -- names that speak with the server's voice ----------------------------------------------
#: a player's name may not be one of these (in any look-alike spelling): it would
#: sign press or lines as the server, its game master or its postmaster
SERVER_NAMES = (
    "gm", "gamemaster", "thegamemaster", "postmaster", "hostmaster", "webmaster", "pbm", "pbmserver", "server",
    "theserver", "admin", "administrator", "root", "system", "sysop", "operator", "abuse", "mailerdaemon", "daemon",
    "noreply", "donotreply", "moderator", "referee", "staff", "support", "all", "everyone", "nobody", "anonymous",
    "press",
)
#: these are refused inside a longer name too (``TheRealGameMaster``); and a name may not start with ``pbm``
_SERVER_PARTS = ("gamemaster", "postmaster", "hostmaster", "webmaster", "mailerdaemon", "administrator", "pbmserver")
_SERVER_PREFIX = "pbm"
#: digits written for letters (``G4meMaster``); 0 and 1 are folded by the skeleton already
_LEET = str.maketrans({"4": "a", "3": "e", "5": "s", "7": "t", "8": "b", "9": "g", "$": "s", "@": "a"})
_SEPARATORS = str.maketrans({c: None for c in " ._-+'"})


def _server_key(name: str) -> str:
    """``name`` as compared with SERVER_NAMES: compatibility forms folded,
    separators out, trailing digits off (``server2``), digits read as the letters
    they stand for, then the look-alike key."""
    text = unicodedata.normalize("NFKC", strip_bidi(name)).translate(_SEPARATORS)
    text = text.rstrip("0123456789") or text
    return name_key(text.translate(_LEET))


@lru_cache(maxsize=1)
def _server_keys() -> tuple[dict[str, str], list[tuple[str, str]], str]:
    exact = {_server_key(n): n for n in SERVER_NAMES}
    parts = [(_server_key(n), n) for n in _SERVER_PARTS]
    return exact, parts, _server_key(_SERVER_PREFIX)


def imitates_server(name: str) -> str | None:
    """The server name ``name`` looks like (``G4meMaster``: ``gamemaster``), or None."""
    key = _server_key(name)
    exact, parts, prefix = _server_keys()
    if key in exact:
        return exact[key]
    for part_key, part in parts:
        if part_key in key:
            return part
    if key.startswith(prefix):
        return _SERVER_PREFIX
    return None


# -- handles in ASCII ----------------------------------------------------------------------
#: letters that no accent mark makes: what each is written as in ASCII
_ASCII_LETTERS = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE",
                                "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D",
                                "ı": "i"})


def ascii_spelling(name: str) -> str:
    """``name`` written in ASCII letters, digits, ``.``, ``_`` and ``-``: accents
    dropped (``zoë``: ``zoe``, ``Jürgen``: ``Jurgen``), ``ß`` as ``ss``, every
    other character left out ("" if none is left)."""
    decomposed = unicodedata.normalize("NFKD", strip_bidi(name).translate(_ASCII_LETTERS))
    return "".join(ch for ch in decomposed if ch.isascii() and (ch.isalnum() or ch in "._-"))
