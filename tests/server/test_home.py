"""A player's own side of the web (issue 42, items 1, 2, 3 and 6), through
the real server's HTTP side and real mail: the home a report mail links,
its tokens, the orders form misused across players and with a wrong
password, the calendars read back with ``icalendar``, the links in the HTML
parts of report, reminder and status mails.  (The browser plays a turn from
the web in tests/server/test_browser.py.)"""

from __future__ import annotations

import html as htmlmod
import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.harness import PbmServer

ANN, BOB = "ann@example.org", "bob@example.org"
PUBLIC = "https://pbm.example.org"
#: Monday 10:00 UTC; ring1's first deadline is the default Saturday 03:00 UTC
START = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def pbm_https(pbm_stopped: PbmServer) -> PbmServer:
    """Behind https://pbm.example.org (PBM_PUBLIC_URL), as in production."""
    pbm_stopped.env["PBM_PUBLIC_URL"] = PUBLIC
    pbm_stopped.set_clock(START)
    pbm_stopped.start()
    return pbm_stopped


def local(pbm: PbmServer, url: str) -> str:
    """A public link, sent to the HTTP side's own port (as the reverse proxy would)."""
    url = htmlmod.unescape(url)
    if url.startswith("/"):
        return f"http://127.0.0.1:{pbm.http_port}{url}"
    assert url.startswith(PUBLIC + "/"), url
    return f"http://127.0.0.1:{pbm.http_port}" + url.removeprefix(PUBLIC)


def get(url: str) -> tuple[int, str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            return resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the test looks at the 303 itself
        return None


def post(url: str, fields: dict[str, str]) -> tuple[int, str, Any]:
    req = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(), method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=20) as resp:
            return resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


def hrefs(html: str) -> list[str]:
    return [htmlmod.unescape(h) for h in re.findall(r'<a href="([^"]+)"', html)]


def form_of(page: str) -> dict[str, str]:
    """The hidden fields of an own view's orders form."""
    return {name: htmlmod.unescape(value)
            for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page)}


def inbox_rows(pbm: PbmServer) -> int:
    return pbm.sql("SELECT count(*) FROM inbox")[0][0]


def report_of(pbm: PbmServer, addr: str):
    return [m for m in pbm.inbox(addr) if str(m["Subject"]).endswith(" report")][-1]


def test_home_from_a_report_tokens_and_forms_that_do_nothing(pbm_https: PbmServer):
    pbm = pbm_https
    pbm.game_of_three()
    assert "Europe/Berlin" in pbm.text(pbm.mail(ANN, "pbm", "timezone Europe/Berlin\n$$ann-pass-1$$"))
    pbm.run_turn("ring1")
    report = report_of(pbm, ANN)

    # the report's HTML part links the home, the own view, the game's page and a mailto: for the next orders
    links = hrefs(pbm.html(report))
    home = next(h for h in links if re.fullmatch(rf"{PUBLIC}/me/ann\?k=[0-9]+\.[\w-]+", h))
    own = next(h for h in links if h.startswith(f"{PUBLIC}/me/ann/ring1?k="))
    assert f"{PUBLIC}/games/ring1" in links
    assert "mailto:ring1@pbm.test?subject=ring1%3A%20orders%20for%20round%202" in links
    assert home in pbm.text(report) and own in pbm.text(report)  # and the text part names them

    # the home: private, what is asked and when in ann's zone, her own view, a mailto:
    status, page, headers = get(local(pbm, home))
    assert status == 200 and '<meta name="robots" content="noindex">' in page
    assert headers["Cache-Control"] == "private, no-store"
    deadline = pbm.sql("SELECT next_deadline FROM games WHERE name = 'ring1'")[0][0]
    assert re.search(r"your orders for round 2 are due in \d+ d( \d+ h)?, \w{3} \d\d \w{3} \d\d:\d\d Europe/Berlin",
                     page), page
    assert 'href="mailto:ring1@pbm.test?subject=ring1%3A%20orders%20for%20round%202"' in page
    own_path = next(h for h in hrefs(page) if h.startswith("/me/ann/ring1?k="))
    status, own_page, _ = get(local(pbm, own_path))
    assert status == 200 and "as ann sees it" in own_page
    assert any(h.startswith("/me/ann?k=") for h in hrefs(own_page))  # the own view links home
    assert 'name="orders"' in own_page and 'type="password"' in own_page and 'method="post"' in own_page
    # a tampered token, another player's home with ann's token, no token: refused alike
    token = home.rsplit("k=", 1)[1]
    for bad in (f"/me/ann?k={token[:-2]}{'AA' if not token.endswith('AA') else 'BB'}", f"/me/bob?k={token}",
                "/me/ann", f"/me/ann/ring1?k={token}"):
        status, text, _ = get(local(pbm, bad))
        assert status == 403 and "ring1" not in text.split("Mail")[0], bad

    # ann's form (bound to ann and ring1) sent to bob's own view, with bob's own password: nothing
    bob_report = report_of(pbm, BOB)
    bob_own = next(h for h in hrefs(pbm.html(bob_report)) if h.startswith(f"{PUBLIC}/me/bob/ring1?k="))
    before = inbox_rows(pbm)
    status, text, _ = post(local(pbm, bob_own), {**form_of(own_page), "orders": "GIVE 3 TO ann",
                                                 "password": "bob-pass-1"})
    assert status == 403 and "not made for this page" in text
    # a body over the limit is refused unread; anything but a form is refused
    assert post(local(pbm, own_path), {**form_of(own_page), "orders": "x" * 70000, "password": "a"})[0] == 413
    req = urllib.request.Request(local(pbm, own_path), data=b'{"orders": "GIVE 3 TO bob"}', method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=20)
    assert refused.value.code == 415
    # a wrong password: refused on the page, nothing stored, counted as a mail's failed try is
    status, text, _ = post(local(pbm, own_path), {**form_of(own_page), "orders": "GIVE 3 TO bob",
                                                  "password": "not-ann"})
    assert status == 403 and "not your password" in text and "GIVE 3 TO bob" in text  # her text is kept
    assert inbox_rows(pbm) == before
    assert pbm.sql("SELECT failures FROM auth_throttle WHERE key = 'pair:ann:ann@example.org'")[0][0] == 1
    assert pbm.sql("SELECT count(*) FROM orders WHERE handle = 'ann' AND turn = 2")[0][0] == 0

    # the right one: stored before the answer (303 to the page that shows it), handled once, the reply mailed
    status, _, headers = post(local(pbm, own_path), {**form_of(own_page), "orders": "GIVE 3 TO bob",
                                                     "password": "ann-pass-1"})
    assert status == 303 and "&sent=" in headers["Location"]
    pbm.settle()
    status, page, _ = get(local(pbm, headers["Location"]))
    assert "handled" in page and "GIVE 3 TO bob" in page and "ann-pass-1" not in page
    (reply,) = [m for m in pbm.inbox(ANN) if "orders from the web" in str(m.get("Subject", "")) or
                (m["In-Reply-To"] or "").startswith("<web.")]
    assert "GIVE 3 TO bob" in pbm.text(reply) and "ann-pass-1" not in pbm.text(reply)

    # the home now: her orders are held; a curio board with a move clock shows whose move it is
    curio = pbm.mail(ANN, "pbm", "curio challenge -clock=1d ann bob $$ann-pass-1$$")
    assert "101" in pbm.text(curio)
    status, page, _ = get(local(pbm, home))
    assert "orders received for round 2; the deadline is in" in page
    assert re.search(r"your move on board 101, the clock ends in 1 d, \w{3} \d\d \w{3} \d\d:\d\d Europe/Berlin", page)

    # the calendars: the public one and ann's, both holding the next deadline, with a stable UID and an alarm
    icalendar = pytest.importorskip("icalendar")
    status, body, headers = get(local(pbm, "/games/ring1/deadlines.ics"))
    assert status == 200 and headers["Content-Type"].startswith("text/calendar")
    cal = icalendar.Calendar.from_ical(body)
    (event,) = cal.walk("VEVENT")
    assert event.decoded("DTSTART") == datetime.fromisoformat(str(deadline)).replace(tzinfo=timezone.utc)
    (alarm,) = event.walk("VALARM")
    assert alarm.decoded("TRIGGER") == -timedelta(minutes=1440)
    status, page, _ = get(local(pbm, home))
    calendar = next(h for h in hrefs(page) if h.startswith("/me/ann/deadlines.ics?k="))
    status, mine, _ = get(local(pbm, calendar))
    board, event2 = icalendar.Calendar.from_ical(mine).walk("VEVENT")  # soonest first
    assert event2.decoded("DTSTART") == event.decoded("DTSTART")
    assert board.decoded("DTSTART") == START + timedelta(days=1) and "board 101" in str(board["SUMMARY"])
    assert board.walk("VALARM")[0].decoded("TRIGGER") == -timedelta(hours=6)  # a quarter of the clock
    status, again, _ = get(local(pbm, calendar))
    assert [e["UID"] for e in icalendar.Calendar.from_ical(again).walk("VEVENT")] == [board["UID"], event2["UID"]]
    # the calendar link opens no home, and the home link no calendar
    assert get(local(pbm, calendar.replace("/deadlines.ics", "")))[0] == 403
    assert get(local(pbm, f"/me/ann/deadlines.ics?k={token}"))[0] == 403


def test_status_and_reminder_mails_link_home(pbm_https: PbmServer):
    pbm = pbm_https
    pbm.game_of_three()
    status = pbm.mail(ANN, "pbm", "status ring1\n$$ann-pass-1$$")
    links = hrefs(pbm.html(status))
    assert any(h.startswith(f"{PUBLIC}/me/ann?k=") for h in links)
    assert any(h.startswith(f"{PUBLIC}/me/ann/ring1?k=") for h in links)
    assert f"{PUBLIC}/games/ring1" in links and any(h.startswith("mailto:ring1@pbm.test?subject=") for h in links)
    listing = pbm.mail(ANN, "pbm", "status\n$$ann-pass-1$$")
    assert any(h.startswith(f"{PUBLIC}/me/ann?k=") for h in hrefs(pbm.html(listing)))
    # the reminder a day before the deadline: ann owes orders for round 1
    deadline = datetime.fromisoformat(str(pbm.sql("SELECT next_deadline FROM games WHERE name = 'ring1'")[0][0]))
    seen = len(pbm.inbox(ANN))
    pbm.set_clock(deadline.replace(tzinfo=timezone.utc) - timedelta(hours=12), tick=True)
    (reminder,) = [m for m in pbm.wait_for(ANN, seen + 1, timeout=90)[seen:] if "reminder" in str(m["Subject"])]
    links = hrefs(pbm.html(reminder))
    assert any(h.startswith(f"{PUBLIC}/me/ann?k=") for h in links), pbm.html(reminder)
    assert any(h.startswith(f"{PUBLIC}/me/ann/ring1?k=") for h in links)
    assert "mailto:ring1@pbm.test?subject=ring1%3A%20orders%20for%20round%201" in links
