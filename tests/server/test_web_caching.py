"""What a browser, a proxy and a search engine read from the HTTP side besides
the pages (issue 42, item 7): gzip for text over 1 KB when asked for,
Cache-Control by kind, an ETag and a 304 on a repeated GET, robots.txt, a
favicon, a meta description, and 403/404 as small pages with a way home."""

from __future__ import annotations

import gzip
import http.client
import re

import pytest

from pbm_server.web.app import GZIP_MINIMUM, PageCache
from tests.harness import PbmServer

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def get(pbm: PbmServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", pbm.http_port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_pages_are_compressed_kept_and_revalidated_and_robots_and_errors_read_well(pbm: PbmServer, monkeypatch):
    monkeypatch.setattr(PageCache, "FRESH_SECONDS", 0.0)  # a page asked for again is checked against its game
    pbm.cli("game", "new", "giveaway", "ring1")
    pbm.register("ann", "ann-pass-1")
    pbm.mail("ann@example.org", "ring1", "JOIN\n$$ann-pass-1$$")

    # gzip when the client accepts it and the page is over 1 KB; the same page unasked is plain
    status, head, body = get(pbm, "/games/ring1", {"Accept-Encoding": "gzip"})
    assert status == 200 and head.get("content-encoding") == "gzip", head
    page = gzip.decompress(body).decode()
    assert len(page.encode()) > GZIP_MINIMUM and len(body) < len(page.encode()) * 0.7
    status, plain_head, plain = get(pbm, "/games/ring1")
    assert "content-encoding" not in plain_head and plain.decode() == page
    # a description for search results, the icon and the stylesheet by its hash
    description = re.search(r'<meta name="description" content="([^"]+)">', page)
    assert description and "ring1" in description.group(1) and "Giveaway" in description.group(1)
    assert '<link rel="icon" href="/favicon.svg"' in page
    sheet = re.search(r'href="(/static/pbm\.css\?v=\w+)"', page).group(1)

    # a public page: kept a minute, then asked again with its tag: 304, no body
    assert head["cache-control"] == "public, max-age=60"
    tag = head["etag"]
    assert tag == plain_head["etag"]  # one tag for the page, whatever its encoding
    status, again, body = get(pbm, "/games/ring1", {"If-None-Match": tag})
    assert status == 304 and body == b"" and again["etag"] == tag
    # the kept page is whole again for the next browser without the tag
    status, whole, body = get(pbm, "/games/ring1")
    assert status == 200 and whole["content-type"].startswith("text/html") and body.decode() == page
    assert int(whole["content-length"]) == len(body)
    # once the page changes its tag does too, and the old one gets the page
    pbm.register("bob", "bob-pass-1")
    pbm.mail("bob@example.org", "ring1", "JOIN\n$$bob-pass-1$$")
    status, changed, body = get(pbm, "/games/ring1", {"If-None-Match": tag})
    assert status == 200 and changed["etag"] != tag and b"bob" in body

    # the stylesheet by its hash is kept a year; robots.txt and the icon a day
    status, head, _ = get(pbm, sheet)
    assert status == 200 and "max-age=31536000" in head["cache-control"]
    status, head, robots = get(pbm, "/robots.txt", {"Accept-Encoding": "gzip"})
    text = robots.decode()
    assert status == 200 and head["content-type"].startswith("text/plain")
    assert "content-encoding" not in head  # under 1 KB: not worth it
    assert "User-agent: *" in text and "Allow: /\n" in text and "Disallow: /me/" in text \
        and "Disallow: /unsubscribe/" in text
    assert head["cache-control"] == "public, max-age=86400"
    # the CSP lets a page's own tools read the site (Lighthouse fetches robots.txt from the page)
    assert "connect-src 'self'" in plain_head["content-security-policy"]
    for icon in ("/favicon.ico", "/favicon.svg"):
        status, head, svg = get(pbm, icon)
        assert status == 200 and head["content-type"] == "image/svg+xml" and svg.startswith(b"<svg")

    # a player's own link: kept by nobody, indexed by nobody, no tag
    text = pbm.text(pbm.mail("ann@example.org", "pbm", "status ring1\n$$ann-pass-1$$"))
    own = re.search(r"http://127\.0\.0\.1:\d+(/me/ann/ring1\?k=\S+)", text).group(1)
    status, head, _ = get(pbm, own)
    assert status == 200 and head["cache-control"] == "private, no-store" and "etag" not in head
    assert "noindex" in head["x-robots-tag"]

    # 404 and 403: small HTML pages of the site's look with a way home, kept by nobody
    for path, status_wanted, words in (("/games/nowhere", 404, "No game named nowhere here."),
                                       ("/no/such/thing", 404, "There is no page here."),
                                       ("/games/ring1%01", 404, "There is no page here."),
                                       ("/me/ann/ring1?k=1.x", 403, "This link does not open a game any more")):
        status, head, body = get(pbm, path)
        html = body.decode()
        assert status == status_wanted and head["content-type"].startswith("text/html"), (path, status, head)
        assert words in html and '<a href="/">' in html and 'name="viewport"' in html, html
        assert "pbm.css" in html and head["cache-control"] in ("no-store", "private, no-store")
