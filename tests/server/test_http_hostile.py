"""The HTTP side against hostile clients (issue 41, item 2 and the web part
of item 6), over real sockets against the real server:

- slow clients: 300 connections that send half a request line and stop
  used to make /healthz, the game pages and the own-view links answer 503
  for as long as they stayed open (uvicorn's ``limit_concurrency`` counted
  them), and none was ever closed.  Now a request must be all in within
  PBM_HTTP_HEADER_TIMEOUT_SECONDS, one client address holds at most
  PBM_HTTP_MAX_CONNECTIONS_PER_CLIENT connections, and only requests that
  are in count toward the bound on requests at once, which /healthz is
  outside of;
- ``X-Content-Type-Options: nosniff`` on every answer (the JSON twins and the
  feed had none);
- the feed's links never come from the Host header;
- a private game's pages answer exactly as a missing game's;
- a path with a line feed (``/games/g1/turns/1%0a``) is a 404, not the kept
  page of the path without it.

The slow clients come from several loopback addresses (127.0.0.11 and up:
Linux answers for the whole of 127/8), 30 from each, so that the bound per
address (32) leaves them all connected and the other guards are what is
tested; the bound itself is tested on its own address.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time

import pytest

from tests.harness import PbmServer, wait_until
from tests.server.test_web_hardening import app_of, game_of_three

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

ANN = "ann@example.org"
#: slow clients, over the old limit of 200 open connections
SLOW = 300
#: connections per source address (under the default bound of 32)
PER_ADDRESS = 30


def slow_clients(port: int, count: int, first_address: int = 11, per_address: int = PER_ADDRESS,
                 start: bytes = b"GET /games/ring1 HT") -> list[socket.socket]:
    """``count`` connections, each from 127.0.0.N (``per_address`` a
    address, from N = ``first_address``), each having sent ``start`` (part
    of a request) and nothing more."""
    socks = []
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((f"127.0.0.{first_address + i // per_address}", 0))
        sock.connect(("127.0.0.1", port))
        if start:
            sock.sendall(start)
        socks.append(sock)
    return socks


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed this connection (an end of file or a reset
    is waiting on it); a connection still open has nothing to read."""
    try:
        return sock.recv(4096, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


def get_from(pbm: PbmServer, path: str, source: str = "127.0.0.1",
             headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, dict[str, str], str]:
    """(status, headers with lower-case names, body) of one request from ``source``."""
    conn = http.client.HTTPConnection("127.0.0.1", pbm.http_port, timeout=30, source_address=(source, 0))
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode()
    finally:
        conn.close()


def played(pbm: PbmServer) -> str:
    """ring1 with one round played; ann's own-view path (from her `status`)."""
    game_of_three(pbm)
    pbm.run_turn("ring1")
    pbm.settle()
    text = pbm.text(pbm.mail(ANN, "pbm", "status ring1\n$$ann-pass-1$$"))
    return re.search(r"http://127\.0\.0\.1:\d+(/me/ann/ring1\?k=\S+)", text).group(1)


# -- slow clients ---------------------------------------------------------------------------------------------

def test_slow_clients_leave_healthz_pages_and_own_views_answering(pbm_stopped: PbmServer):
    """300 connections sending half a request line, kept open: /healthz, a
    game page, a turn page and an own-view link answer 200 meanwhile (they
    answered 503), and the slow ones are still connected then (the timeout
    is set long here: the answers are not owed to its having closed them)."""
    pbm = pbm_stopped
    pbm.env["PBM_HTTP_HEADER_TIMEOUT_SECONDS"] = "600"
    pbm.start()
    own = played(pbm)
    slow = slow_clients(pbm.http_port, SLOW)
    try:
        wait_until(lambda: app_of(pbm) is not None and _open_connections(pbm) >= SLOW,
                   what="the server holding the slow connections")
        status, _, body = get_from(pbm, "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok", body
        status, _, body = get_from(pbm, "/games/ring1")
        assert status == 200 and "ring1" in body
        assert get_from(pbm, "/games/ring1/turns/1")[0] == 200
        status, _, body = get_from(pbm, own)
        assert status == 200 and "as ann sees it" in body
        assert not [s for s in slow if closed_by_server(s)]
    finally:
        close_all(slow)


def _open_connections(pbm: PbmServer) -> int:
    """The connections the HTTP side holds now (uvicorn's server state)."""
    return len(pbm.server.http.server.server_state.connections)


def test_unfinished_requests_are_closed_after_the_header_timeout(pbm_stopped: PbmServer):
    """With a timeout of 1 s: 300 half request lines, connections that send
    nothing, a keep-alive connection that starts a second request and stops,
    and a POST whose body never comes are all closed by the server (none
    was before); the server answers after as before."""
    pbm = pbm_stopped
    pbm.env["PBM_HTTP_HEADER_TIMEOUT_SECONDS"] = "1"
    pbm.start()
    game_of_three(pbm)
    # one request answered on a kept-alive connection, then half of the next
    again = socket.create_connection(("127.0.0.1", pbm.http_port))
    again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while b'"status":"ok"' not in answer:
        chunk = again.recv(4096)
        assert chunk, answer
        answer += chunk
    again.sendall(b"GET /games/ri")
    slow = slow_clients(pbm.http_port, SLOW)
    silent = slow_clients(pbm.http_port, 5, first_address=30, start=b"")
    # headers in, the body promised and never sent
    body_owed = slow_clients(pbm.http_port, 1, first_address=31,
                             start=b"POST /unsubscribe/ann/ring1/reports?k=1.x HTTP/1.1\r\nHost: x\r\n"
                                   b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nList")
    everyone = slow + silent + body_owed + [again]
    try:
        wait_until(lambda: all(closed_by_server(s) for s in everyone), timeout=60,
                   what="the server closing every unfinished request")
        assert get_from(pbm, "/healthz")[0] == 200
        assert get_from(pbm, "/games/ring1", source="127.0.0.11")[0] == 200  # an address that was slow before
    finally:
        close_all(everyone)


def test_one_address_holds_at_most_32_connections(pbm_stopped: PbmServer):
    """40 connections from one address: 8 are closed at once (the timeout is
    long here), the other 32 stay; a request from another address is
    answered meanwhile, and one from that address once it closed its own."""
    pbm = pbm_stopped
    pbm.env["PBM_HTTP_HEADER_TIMEOUT_SECONDS"] = "600"
    pbm.start()
    assert get_from(pbm, "/healthz")[0] == 200
    greedy = slow_clients(pbm.http_port, 40, first_address=40, per_address=40)
    try:
        wait_until(lambda: sum(closed_by_server(s) for s in greedy) >= 8, timeout=20,
                   what="the connections over the bound closed")
        time.sleep(0.3)  # no more follow
        assert sum(closed_by_server(s) for s in greedy) == 8
        assert get_from(pbm, "/healthz")[0] == 200
    finally:
        close_all(greedy)
    wait_until(lambda: _open_connections(pbm) <= 1, what="the server seeing them closed")
    assert get_from(pbm, "/healthz", source="127.0.0.40")[0] == 200


def test_healthz_answers_while_more_pages_wait_than_are_served_at_once(pbm: PbmServer):
    """210 page requests waiting for their pace (all in): 200 wait, the 10
    over the bound get 503 at once, /healthz answers 200 (it is outside the
    bound), and all waiting pages are served once the pace allows.  Before,
    the bound counted open connections: with 200 accepted, every one of the
    210 requests got 503, none waited."""
    from pbm_server.web import app as web_app

    bound = getattr(web_app, "REQUESTS_AT_ONCE", 200)  # (uvicorn's limit_concurrency was 200 too)
    game_of_three(pbm)
    pacer = app_of(pbm).state.pacer
    pacer.next_at = time.monotonic() + 3600  # the next page may be made only in an hour
    waiting = [socket.socket() for _ in range(bound + 10)]
    try:
        for n, sock in enumerate(waiting):
            sock.bind((f"127.0.0.{11 + n // PER_ADDRESS}", 0))
            sock.connect(("127.0.0.1", pbm.http_port))
            sock.sendall(f"GET /games/ring1?n={n} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        # each request waits for its pace or has been answered (those over the bound)
        wait_until(lambda: pacer.waiting + sum(_answered(s) for s in waiting) >= len(waiting),
                   what="every page request waiting or answered")
        status, _, body = get_from(pbm, "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert pacer.waiting == bound
        status, headers, body = get_from(pbm, "/games/ring1")
        assert status == 503 and headers["retry-after"] == "5" and "busy" in body
        pacer.next_at = 0.0
        answers = [_read_all(sock) for sock in waiting]
    finally:
        pacer.next_at = 0.0
        close_all(waiting)
    firsts = [a.split(b"\r\n", 1)[0] for a in answers]
    assert firsts.count(b"HTTP/1.1 200 OK") == bound
    assert firsts.count(b"HTTP/1.1 503 Service Unavailable") == 10


def _answered(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK))
    except BlockingIOError:
        return False


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(60)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


# -- item 6: headers, links, private games, paths --------------------------------------------------------------

def test_every_answer_says_nosniff(pbm: PbmServer):
    """The JSON twins and the feed had no X-Content-Type-Options."""
    played(pbm)
    paths = ["/games.json", "/games/ring1.json", "/games/ring1/turns/1.json", "/games/ring1/feed.atom",
             "/players/ann.json", "/healthz", "/metrics", "/static/pbm.css", "/", "/games/ring1",
             "/games/nosuch.json", "/games/ring1/turns/99.json", "/me/ann/ring1?k=1.x", "/nothing"]
    for path in paths:
        status, headers, _ = get_from(pbm, path)
        assert status in (200, 403, 404), (path, status)
        assert headers.get("x-content-type-options") == "nosniff", (path, headers)
    # a request h11 cannot read: uvicorn's own 400
    with socket.create_connection(("127.0.0.1", pbm.http_port)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
        answer = _read_all(sock).decode("latin-1").lower()
    assert answer.startswith("http/1.1 400") and "x-content-type-options: nosniff" in answer, answer


def test_the_feed_names_the_settings_address_never_the_host_header(pbm: PbmServer):
    """Without PBM_PUBLIC_URL a `Host: evil.example` made a feed whose every
    link pointed there; now its links start with http://PBM_HTTP_LISTEN, as
    the mails' links do, whatever the Host."""
    played(pbm)
    ours = f"http://127.0.0.1:{pbm.http_port}"
    for host in ("evil.example", "evil.example:8080", f"127.0.0.1:{pbm.http_port}"):
        status, headers, feed = get_from(pbm, "/games/ring1/feed.atom", headers={"Host": host})
        assert status == 200 and headers["content-type"].startswith("application/atom+xml")
        assert "evil" not in feed, feed
        hrefs = re.findall(r'href="([^"]+)"', feed)
        assert hrefs and all(h.startswith(ours + "/games/ring1") for h in hrefs), hrefs
        assert f'<link rel="self" href="{ours}/games/ring1/feed.atom"/>' in feed


PAGES = ("/games/{}", "/games/{}.json", "/games/{}/turns/1", "/games/{}/turns/1.json", "/games/{}/feed.atom")


def test_a_private_game_answers_exactly_as_a_missing_one(pbm: PbmServer):
    """Every page of a private game: the status, type and body of a game that
    does not exist (its turn page said `sec1 has no processed turn 1`)."""
    played(pbm)
    pbm.cli("game", "private", "ring1")
    for pattern in PAGES:
        for method in ("GET", "HEAD") if not pattern.endswith((".json", ".atom")) else ("GET",):
            private = get_from(pbm, pattern.format("ring1"), method=method)
            missing = get_from(pbm, pattern.format("nope1"), method=method)  # as long a name
            assert private[0] == missing[0] == 404, (pattern, private, missing)
            assert private[2].replace("ring1", "NAME") == missing[2].replace("nope1", "NAME"), (pattern, private)
            same = ("content-type", "content-length", "x-content-type-options", "content-security-policy")
            assert [private[1].get(h) for h in same] == [missing[1].get(h) for h in same], pattern
    # and back in public, its pages are there again
    pbm.cli("game", "private", "ring1", "--public")
    wait_until(lambda: get_from(pbm, "/games/ring1/turns/1")[0] == 200, what="the turn page public again")


def test_a_path_with_a_control_character_is_a_404_not_the_page_without_it(pbm: PbmServer):
    """`/games/ring1/turns/1%0a` answered 200 with turn 1: the kept page was
    found by the path without the line feed.  Such paths are 404s, before
    and after the real page was kept."""
    played(pbm)
    for path in ("/games/ring1/turns/1", "/games/ring1", "/games/ring1.json", "/games/ring1/feed.atom"):
        assert get_from(pbm, path)[0] == 200, path
    odd = ["/games/ring1/turns/1%0a", "/games/ring1/turns/1%0A", "/games/ring1/turns/1%09", "/games/ring1/turns/%0d1",
           "/games/ring1%0a", "/games/ring1%09.json", "/games/ring1%0a/feed.atom", "/games/ring1/turns/1%00",
           "/games/ring1/turns/1%C2%85", "/games/ring1/turns/1%E2%80%A8", "/players/ann%0a", "/%0a"]
    for path in odd:
        status, headers, body = get_from(pbm, path)
        assert status == 404, (path, status, body[:200])
        assert headers.get("x-content-type-options") == "nosniff"
    assert get_from(pbm, "/games/ring1/turns/1")[0] == 200


@pytest.mark.parametrize("setting", ["PBM_HTTP_HEADER_TIMEOUT_SECONDS", "PBM_HTTP_MAX_CONNECTIONS_PER_CLIENT"])
def test_the_new_limits_are_settings_checked_at_start(setting: str):
    from pbm_server.base.settings import SettingsError, load_settings

    with pytest.raises(SettingsError, match=setting):
        load_settings({setting: "0"})
