"""Is the From address of a mail the sender's own?  What the MTA in front found
out, read from its ``Authentication-Results`` header (RFC 8601).

Only a header stamped with the authserv-id of our own MTA (the setting
``trusted_authserv_id``) counts: anyone can write such headers into a mail, so
the MTA must be set to remove incoming ones with its id (OpenDMARC and rspamd
do), and we read the topmost one with that id, which is the one it added.

The From domain is accepted when DMARC passed, or, where the domain publishes
no DMARC policy, when SPF or DKIM passed for a domain aligned with it (the
same domain, or one a subdomain of the other).  A DMARC pass counts only for
the domain it names (``header.from``), which must be the domain of the From
address the server reads: an MTA that read another address in the same From
(``alice@ex.test <mallory@evil.test>``) vouched for that one.

:func:`read_from` reads that address the way MTAs and mail clients do: the
addr-spec between ``<`` and ``>``, whatever the display name says; and a From
whose display name is an address other than that one is no ground for a
password (the reader sees one address, the server uses another).
"""

from __future__ import annotations

import re
from email.header import decode_header, make_header
from email.message import Message

_COMMENT = re.compile(r"\([^()]*\)")


def _parse(value: str) -> tuple[str, list[tuple[str, str, dict[str, str]]]]:
    """-> (authserv-id, [(method, result, {property: value})])."""
    text = value
    for _ in range(3):  # comments may nest a little
        text = _COMMENT.sub(" ", text)
    parts = [p.strip() for p in text.split(";")]
    head = parts[0].split()
    authserv = head[0].lower() if head else ""
    results = []
    for part in parts[1:]:
        tokens = part.split()
        if not tokens or "=" not in tokens[0]:
            continue
        method, _, result = tokens[0].partition("=")
        props = {}
        for tok in tokens[1:]:
            key, eq, val = tok.partition("=")
            if eq:
                props[key.lower()] = val.strip('"').lower()
        results.append((method.lower().split("/")[0], result.lower(), props))
    return authserv, results


def _aligned(domain: str, from_domain: str) -> bool:
    domain = domain.rsplit("@", 1)[-1].strip(".").lower()
    if not domain:
        return False
    return domain == from_domain or domain.endswith("." + from_domain) or from_domain.endswith("." + domain)


def _dmarc_reason(result: str, props: dict[str, str], from_domain: str) -> str | None:
    """Why a DMARC result does not vouch for ``from_domain`` (None: it does)."""
    passed_for = props.get("header.from", "").strip(".")
    if result == "pass" and passed_for == from_domain:
        return None
    if result == "pass" and passed_for:
        return f"DMARC passed for {passed_for}, not for {from_domain}, the domain of the From address"
    if result == "pass":
        return f"DMARC passed without naming the domain it checked (header.from), so not for {from_domain}"
    return f"DMARC {result} for {from_domain}"


def unverified_reason(headers: list[str], authserv_id: str, from_addr: str) -> str | None:
    """Why the From address cannot be trusted (None: it can)."""
    want = authserv_id.lower()
    from_domain = from_addr.rsplit("@", 1)[-1].lower()
    for value in headers:
        authserv, results = _parse(value)
        if authserv != want:
            continue
        dmarc = [(r, props) for m, r, props in results if m == "dmarc"]
        if dmarc and dmarc[0][0] != "none":
            return _dmarc_reason(dmarc[0][0], dmarc[0][1], from_domain)
        for method, result, props in results:
            if result != "pass":
                continue
            if method == "dkim" and _aligned(props.get("header.d") or props.get("header.i", ""), from_domain):
                return None
            if method == "spf" and _aligned(props.get("smtp.mailfrom", ""), from_domain):
                return None
        return f"neither SPF nor DKIM passed for {from_domain}"
    return f"the mail carries no Authentication-Results from {authserv_id}"


# -- the From header read as MTAs and mail clients read it ------------------------------------
#: a From longer than this is read only this far
MAX_FROM_CHARS = 2000
#: an angle-addr: the address a mail is from when the From has one
_ANGLE = re.compile(r"<\s*([^<>\s]+@[^<>\s]+)\s*>")
#: something in a display name that reads as an address
_ADDRESS_LIKE = re.compile(r"[^\s<>\"'(),;:@]+@[^\s<>\"'(),;:@]+\.[^\s<>\"'(),;:@]+")


def raw_header(msg: Message, name: str) -> str:
    """The first ``name`` header of ``msg`` as written (not as parsed), cut
    after MAX_FROM_CHARS + 1 characters (so a longer one shows); "" if there is none."""
    want = name.lower()
    try:
        for key, value in msg.raw_items():
            if key.lower() == want:
                return str(value)[: MAX_FROM_CHARS + 1]
    except Exception:  # a header the parser kept in a form it cannot give back
        return ""
    return ""


def _decoded(text: str) -> str:
    try:
        return str(make_header(decode_header(text)))
    except Exception:  # a broken encoded word: read as written
        return text


def read_from(raw: str, parsed: str) -> tuple[str, str | None]:
    """The address a mail is from, given its From header as written (``raw``)
    and as the email package parsed it (``parsed``), and why that From cannot
    carry a password (None: it can).

    The addr-spec in ``<...>`` is the address (the package reads an unquoted
    ``alice@ex.test <mallory@evil.test>`` as alice; MTAs, DMARC and mail
    clients as mallory).  A display name that is (or holds) another address
    makes the From a lie to whoever reads it: the address is still the
    addr-spec, but no password is taken from such a mail; nor from one whose
    From is too long to read whole (the address may hide past the cut)."""
    if len(raw) > MAX_FROM_CHARS:
        return parsed, f"its From header is longer than {MAX_FROM_CHARS} characters"
    text = " ".join(raw.split())
    angles = list(_ANGLE.finditer(text))
    if not angles:
        return parsed, None
    last = angles[-1]
    addr = last.group(1).strip().lower()
    try:
        addr.encode()
    except UnicodeEncodeError:  # 8-bit bytes in a header (read with surrogates): the package's reading stands
        return parsed, "its From address holds bytes that are not text"
    shown = {a.lower().strip(".") for a in _ADDRESS_LIKE.findall(_decoded(text[: last.start()]))}
    shown.discard(addr)
    if parsed and parsed.lower() != addr:
        shown.add(parsed.lower())
    if shown:
        return addr, (f"its From shows the address {sorted(shown)[0]} as the sender's name, but the mail is from "
                      f"{addr}")
    return addr, None
