"""Is the From address of a mail the sender's own?  What the MTA in front found
out, read from its ``Authentication-Results`` header (RFC 8601).

Only a header stamped with the authserv-id of our own MTA (the setting
``trusted_authserv_id``) counts: anyone can write such headers into a mail, so
the MTA must be set to remove incoming ones with its id (OpenDMARC and rspamd
do), and we read the topmost one with that id, which is the one it added.

The From domain is accepted when DMARC passed, or, where the domain publishes
no DMARC policy, when SPF or DKIM passed for a domain aligned with it (the
same domain, or one a subdomain of the other).  Anything else is a reason.
"""

from __future__ import annotations

import re

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


def unverified_reason(headers: list[str], authserv_id: str, from_addr: str) -> str | None:
    """Why the From address cannot be trusted (None: it can)."""
    want = authserv_id.lower()
    from_domain = from_addr.rsplit("@", 1)[-1].lower()
    for value in headers:
        authserv, results = _parse(value)
        if authserv != want:
            continue
        dmarc = [r for m, r, _ in results if m == "dmarc"]
        if dmarc and dmarc[0] == "pass":
            return None
        if dmarc and dmarc[0] not in ("none",):
            return f"DMARC {dmarc[0]} for {from_domain}"
        for method, result, props in results:
            if result != "pass":
                continue
            if method == "dkim" and _aligned(props.get("header.d") or props.get("header.i", ""), from_domain):
                return None
            if method == "spf" and _aligned(props.get("smtp.mailfrom", ""), from_domain):
                return None
        return f"neither SPF nor DKIM passed for {from_domain}"
    return f"the mail carries no Authentication-Results from {authserv_id}"
