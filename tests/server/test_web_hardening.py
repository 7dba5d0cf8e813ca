"""The HTTP side and the link checks under odd and hostile input (review of
issue 30): non-ASCII digits and over-long numbers in tokens, turn numbers and
command words give the usual refusal (403, 404, a line's refusal), never a 500
or a shunted mail; a bogus one-click POST never waits for the write lock; an
over-long POST is refused unread; a query string makes no new page; pages
waiting for their pace hold no thread /healthz needs; the database's errors
are named, not quoted; `status NAME` brings the player's own-view link."""

from __future__ import annotations

import html
import http.client
import json
import os
import re
import sqlite3
import threading
import time
import urllib.error
import urllib.request

import pytest

from pbm_server.base.durations import plain_number
from tests.harness import PbmServer, wait_until

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

ANN, DAN = "ann@example.org", "dan@example.org"
ON_SQLITE = not os.environ.get("PBM_TEST_DATABASE_URL")


def request(pbm: PbmServer, path: str, data: bytes | None = None, headers: dict | None = None,
            timeout: float = 30) -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{pbm.http_port}{path}", data=data, headers=headers or {},
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def game_of_three(pbm: PbmServer) -> None:
    pbm.cli("game", "new", "giveaway", "ring1")
    for handle in ("ann", "bob", "cat"):
        pbm.register(handle, f"{handle}-pass-1")
        pbm.mail(f"{handle}@example.org", "ring1", f"JOIN\n$${handle}-pass-1$$")


def stop_link(pbm: PbmServer) -> str:
    """ann's one-click link for the reports of ring1, from her report mail."""
    pbm.run_turn("ring1")
    pbm.settle()
    report = [m for m in pbm.inbox(ANN) if str(m["Subject"]).endswith(" report")][-1]
    # without an https PBM_PUBLIC_URL the header holds only the mailto link; the footer's link is the same page
    return pbm.stop_link(report).split(f":{pbm.http_port}", 1)[1]


def test_plain_number_takes_ascii_digits_only():
    assert plain_number("0") == 0 and plain_number("123456789") == 123456789
    for odd in ("²", "٣", "１", "-1", "+1", " 1", "1 ", "1e3", "", "1234567890", "1\n"):
        assert plain_number(odd) is None, odd
    assert plain_number("123456789012", 12) == 123456789012


def test_a_gm_s_seats_option_with_odd_digits_is_refused_not_crashed():
    """seats=² passed str.isdigit() and then broke int(): the GM's mail was set aside."""
    from pbm_server.base.errors import ServerRefused
    from pbm_server.play.gmdesk import parse_seats

    assert parse_seats("6") == 6 and parse_seats("none") is None
    for odd in ("²", "٣", "１２", "-1", "1000001"):
        with pytest.raises(ServerRefused, match="not a number of seats"):
            parse_seats(odd)


def test_odd_tokens_and_turn_numbers_are_refused_not_crashed(pbm: PbmServer):
    game_of_three(pbm)
    path = stop_link(pbm)
    good = path.split("?k=", 1)[1]
    stamp = good.split(".", 1)[0]
    for token in ("%C2%B2.x", f"{stamp}.%C3%A9%C3%A9", "%D9%A3.abc", f"{stamp}.{good.split('.')[1]}%0A",
                  "9" * 23 + ".x", "", "."):
        assert request(pbm, f"/me/ann/ring1?k={token}")[0] == 403, token
        assert request(pbm, f"/unsubscribe/ann/ring1/reports?k={token}")[0] == 403, token
        assert request(pbm, f"/unsubscribe/ann/ring1/reports?k={token}", b"List-Unsubscribe=One-Click")[0] == 403
    status, body = request(pbm, "/me/ann/ring1?k=%C2%B2.x")
    assert "status ring1" in body
    # a turn number that is not plain ASCII digits, or too long for any turn, is a missing turn
    for number in ("%C2%B2", "%C2%B2.json", "%D9%A3", "1" * 23, "1" * 23 + ".json", "-1"):
        status, body = request(pbm, f"/games/ring1/turns/{number}")
        assert status == 404 and "has no processed turn" in body, (number, status, body[:200])
    assert request(pbm, "/games/ring1/turns/1")[0] == 200
    assert not pbm.sql("SELECT * FROM mail_stops")


def test_odd_words_in_a_mail_are_refused_per_line_and_the_rest_runs(pbm: PbmServer):
    game_of_three(pbm)
    pbm.run_turn("ring1")
    pbm.settle()
    # the mailto form of the link, with a token no link ever had: refused, the next line still runs
    reply = " ".join(pbm.text(pbm.mail(ANN, "pbm", "unsubscribe ring1 reports ².x\ngames")).split())
    assert "REFUSED (line 1): that unsubscribe link does not work" in reply
    assert "1 game(s) listed below" in reply
    assert "ring1" in reply and not pbm.sql("SELECT * FROM mail_stops")
    reply = " ".join(pbm.text(pbm.mail(ANN, "pbm", "history ring1 ²\nhistory ring1 " + "1" * 23
                                       + "\nhistory ring1 1\n$$ann-pass-1$$")).split())
    assert "REFUSED (line 1): '²' is not a turn number: N is written in the digits 0-9 (at most 9 of them)" in reply
    assert f"REFUSED (line 2): '{'1' * 20}' is not a turn number" in reply
    assert "ok (line 3): the report of round 1" in reply and "Round 1 of ring1 has been played." in reply
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status = 'shunted'") == [(0,)]


def test_status_of_a_game_brings_the_players_own_view_link(pbm: PbmServer):
    game_of_three(pbm)
    text = pbm.text(pbm.mail(ANN, "pbm", "status ring1\n$$ann-pass-1$$"))
    own = re.search(r"http://127\.0\.0\.1:\d+(/me/ann/ring1\?k=\S+)", text).group(1)
    status, page = request(pbm, own)
    assert status == 200 and "as ann sees it" in page
    # someone who does not play ring1 gets its status without a link
    pbm.register("dan", "dan-pass-1")
    text = pbm.text(pbm.mail(DAN, "pbm", "status ring1\n$$dan-pass-1$$"))
    assert "are not playing in this game" in text and "/me/" not in text
    # after a password change the old link is refused, and the 403 page's advice works
    pbm.mail(ANN, "pbm", "password ann ann-pass-1 ann-pass-2")
    status, body = request(pbm, own)
    assert status == 403 and "Mail 'status ring1' to pbm@pbm.test for a new one" in html.unescape(body)
    assert '<a href="/">' in body  # an HTML page with a way home
    text = pbm.text(pbm.mail(ANN, "pbm", "status ring1\n$$ann-pass-2$$"))
    fresh = re.search(r"http://127\.0\.0\.1:\d+(/me/ann/ring1\?k=\S+)", text).group(1)
    assert request(pbm, fresh)[0] == 200
    pbm.secrets.add("ann-pass-2")


@pytest.mark.skipif(not ON_SQLITE, reason="holds SQLite's write lock from outside (BEGIN IMMEDIATE)")
def test_a_bogus_one_click_post_is_refused_while_another_holds_the_write_lock(pbm: PbmServer):
    game_of_three(pbm)
    path = stop_link(pbm)
    held = sqlite3.connect(pbm.db_url.removeprefix("sqlite:///"), timeout=60, isolation_level=None)
    try:
        held.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
        # the server's own writers wait 60 s for this lock: a 403 within the client's 30 s did not wait
        assert request(pbm, path[:-3] + "xyz", b"List-Unsubscribe=One-Click", timeout=30)[0] == 403
        assert request(pbm, path.replace("/ann/", "/bob/"), b"List-Unsubscribe=One-Click", timeout=30)[0] == 403
        assert held.in_transaction  # still held while both were answered
    finally:
        held.execute("ROLLBACK")
        held.close()
    status, page = request(pbm, path, b"List-Unsubscribe=One-Click")
    assert status == 200 and "Stopped" in page
    assert pbm.sql("SELECT address, stream FROM mail_stops") == [(ANN, "reports")]


def test_an_oversized_one_click_post_is_refused_unread(pbm: PbmServer):
    game_of_three(pbm)
    path = stop_link(pbm)
    status, body = request(pbm, path, b"List-Unsubscribe=One-Click&" + b"x" * 100_000)
    assert status == 413 and "too large" in body
    # no Content-Length (chunked): read only up to the limit, then refused
    conn = http.client.HTTPConnection("127.0.0.1", pbm.http_port, timeout=30)
    conn.putrequest("POST", path)
    conn.putheader("Content-Type", "application/x-www-form-urlencoded")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    chunk = b"List-Unsubscribe=One-Click&" + b"y" * 3000
    conn.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk))
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()
    assert not pbm.sql("SELECT * FROM mail_stops")
    # the real one click still stops it
    assert request(pbm, path, b"List-Unsubscribe=One-Click")[0] == 200
    assert pbm.sql("SELECT address, stream FROM mail_stops") == [(ANN, "reports")]


def test_the_database_error_is_named_not_quoted(pbm: PbmServer):
    pbm.stop()
    pbm.start("worker", "outbound", "scheduler")  # nothing else reads the queues meanwhile
    pbm.execute("ALTER TABLE inbox RENAME TO inbox_away")
    try:
        status, body = request(pbm, "/healthz")
        assert status == 503
        health = json.loads(body)
        assert health["status"] == "unavailable" and re.fullmatch(r"[A-Za-z]+", health["database"]), health
        status, body = request(pbm, "/metrics")
        assert status == 503 and re.fullmatch(r"database unavailable: [A-Za-z]+\n", body), body
    finally:
        pbm.execute("ALTER TABLE inbox_away RENAME TO inbox")
    assert request(pbm, "/healthz")[0] == 200


def app_of(pbm: PbmServer):
    if pbm.server is None or pbm.server.http is None:
        pytest.skip("needs the HTTP side in this process")
    return pbm.server.http.app


def test_a_query_string_or_a_host_makes_no_new_page(pbm: PbmServer):
    game_of_three(pbm)
    pbm.settle()
    pacer = app_of(pbm).state.pacer
    first = request(pbm, "/")
    game_page = request(pbm, "/games/ring1")
    made = pacer.made
    for n in range(5):
        assert request(pbm, f"/?x={n}") == first
        assert request(pbm, "/", headers={"Host": f"h{n}.example"}) == first
        assert request(pbm, f"/games/ring1?v={n}") == game_page
    assert pacer.made == made  # all kept pages
    # a change of the game does make the page again
    pbm.mail("bob@example.org", "ring1", "GIVE 3 TO ann\n$$bob-pass-1$$")
    pbm.run_turn("ring1")
    wait_until(lambda: request(pbm, "/games/ring1")[1] != game_page[1], what="the page after the turn")
    assert pacer.made > made


def test_healthz_and_links_answer_while_pages_wait_for_their_pace(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    # the 50 loaders all come from 127.0.0.1: over the bound of one address's connections (32)
    pbm.env["PBM_HTTP_MAX_CONNECTIONS_PER_CLIENT"] = "100"
    pbm.start()
    game_of_three(pbm)
    app = app_of(pbm)
    pacer = app.state.pacer
    pacer.next_at = time.monotonic() + 3600  # the next page may be made only in an hour
    results: list[int] = []

    def load(n: int) -> None:
        results.append(request(pbm, f"/games/ring1?n={n}", timeout=120)[0])

    loaders = [threading.Thread(target=load, args=(n,), daemon=True) for n in range(50)]  # more than the pool's 40
    try:
        for t in loaders:
            t.start()
        wait_until(lambda: pacer.waiting >= 50, what="50 page requests waiting for their pace")
        status, body = request(pbm, "/healthz", timeout=30)
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert request(pbm, "/metrics", timeout=30)[0] == 200
        assert request(pbm, "/me/ann/ring1?k=1.x", timeout=30)[0] == 403
        assert results == []  # every page is still waiting
    finally:
        pacer.next_at = 0.0
    for t in loaders:
        t.join(timeout=120)
    assert results == [200] * 50
