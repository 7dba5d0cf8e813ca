"""The game pages in a real browser: Debian's Chromium driven by its
ChromeDriver (Selenium), against the real server's HTTP side.

Installed by .ci/chromium-install (packages chromium and chromium-driver);
skipped where they are absent.  Screenshots of each page at 1280 and 375 px
wide go to PBM_SCREENSHOTS (docs/web.md shows a set) or the test's own
directory."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pbm_server.accounts import links
from pbm_server.store.db import Database
from pbm_server.store.lookup import account_by_handle
from tests.harness import PbmServer
from tests.server.browser import WIDTHS

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

START = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def click_and_wait(driver, element, ready) -> None:
    """Click ``element``, then wait until ``ready(driver)`` holds on the page
    the click opens (the old page's elements go stale meanwhile)."""
    element.click()
    wait_until(driver, ready)


def wait_until(driver, ready, seconds: float = 20) -> None:
    """Wait until ``ready(driver)`` holds; an element that went stale while
    it was read (the page was replaced: a click, or a page that reloads
    itself) counts as not yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def holds(d) -> bool:
        try:
            return bool(ready(d))
        except StaleElementReferenceException:
            return False

    WebDriverWait(driver, seconds, poll_frequency=0.1).until(holds)


def main_text(driver) -> str:
    return driver.find_element("tag name", "main").text


def shots(driver, name: str, where: Path) -> None:
    """The page as it is, at each width: the whole page's height."""
    where.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        driver.set_window_size(width, 900)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(max(int(height), 400), 4000))
        driver.save_screenshot(str(where / f"{name}-{width}.png"))
    driver.set_window_size(1280, 900)


def signed_link(pbm: PbmServer, handle: str, game: str, now: datetime) -> str:
    db = Database(pbm.db_url)
    try:
        with db.write() as s:
            account = account_by_handle(s, handle)
            assert account is not None
            link = links.make(s, account, "view", game, now)
    finally:
        db.dispose()
    return links.url(f"http://127.0.0.1:{pbm.http_port}", link)


def test_a_player_finds_a_game_and_opens_their_own_view(pbm_stopped: PbmServer, browser, screenshots):
    pbm = pbm_stopped
    pbm.set_clock(START)
    pbm.start()
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.run_turn("ring1")  # two rounds: one round is a table row, not a chart (issue 42)
    reply = pbm.mail("ann@example.org", "ring1", "GIVE 3 TO bob\n$$ann-pass-1$$")
    assert "GIVE 3 TO bob" in pbm.text(reply)
    base = f"http://127.0.0.1:{pbm.http_port}"

    # the list of games, then a click into the game
    browser.get(base + "/")
    assert browser.title == "Games at pbm.test"
    shots(browser, "games", screenshots)
    click_and_wait(browser, browser.find_element("link text", "ring1"), lambda d: d.current_url == base + "/games/ring1")
    heading = browser.find_element("tag name", "h1").text
    assert heading.startswith("ring1") and "Giveaway" in heading
    chart = browser.find_element("css selector", "svg.chart")
    assert chart.is_displayed() and chart.size["width"] > 300
    assert browser.find_element("css selector", "svg.chart title").get_attribute("textContent") == \
        "ring1: scores by round"
    assert len(browser.find_elements("css selector", "svg.chart polyline")) == 3  # ann, bob, cat
    board = browser.find_element("css selector", "section.board").text
    assert "ann" in board and "bob" in board and "cat" in board
    assert "GIVE 3 TO bob" not in browser.page_source  # ann's held order is hers alone
    # the stylesheet applied (not the browser's defaults): the deadline band has its colour
    band = browser.find_element("css selector", "p.next")
    assert band.value_of_css_property("border-left-style") == "solid"
    shots(browser, "game", screenshots)
    click_and_wait(browser, browser.find_element("link text", "1"),
                   lambda d: "round 1" in d.find_element("tag name", "h1").text)
    shots(browser, "turn", screenshots)

    # ann's signed link shows her own view: her held order included
    link = signed_link(pbm, "ann", "ring1", START)
    browser.get(link)
    assert "as ann sees it" in browser.find_element("tag name", "h1").text
    assert "GIVE 3 TO bob" in browser.find_element("tag name", "main").text
    shots(browser, "own", screenshots)
    # tampered, for another player, or expired: refused alike
    token = link.rsplit("k=", 1)[1]
    for bad in (link[:-2] + ("AA" if not link.endswith("AA") else "BB"), link.replace("/me/ann/", "/me/bob/"),
                base + "/me/ann/ring1?k=" + token.split(".")[0] + ".x"):
        browser.get(bad)
        assert "does not open a game" in browser.find_element("tag name", "body").text, bad
        assert "GIVE 3 TO bob" not in browser.page_source
    pbm.set_clock(START + links.LIFETIME + timedelta(minutes=1))
    browser.get(link)
    assert "does not open a game" in browser.find_element("tag name", "body").text
    # a password change voids every link made before it
    pbm.set_clock(START + timedelta(hours=1))
    browser.get(link)
    assert "as ann sees it" in browser.find_element("tag name", "h1").text
    pbm.mail("ann@example.org", "pbm", "password ann ann-pass-1 ann-pass-2")
    pbm.secrets.add("ann-pass-2")
    browser.get(link)
    assert "does not open a game" in browser.find_element("tag name", "body").text


def test_one_click_in_the_browser_stops_a_stream(pbm: PbmServer, browser, screenshots):
    """The settings page a mail's unsubscribe link opens: one button, and the
    stream stops at once (the outbox shows no more of it)."""
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.settle()
    report = next(m for m in pbm.inbox("ann@example.org") if str(m["Subject"]).endswith("round 1 report"))
    browser.get(pbm.stop_link(report))  # the footer's link (the header holds it only when it is https)
    assert "mail settings of ann" in browser.find_element("tag name", "h1").text
    shots(browser, "unsubscribe", screenshots)
    click_and_wait(browser, browser.find_element("css selector", "form button"),
                   lambda d: "Stopped: no more turn reports and game notices of ring1" in main_text(d))
    before = pbm.sql("SELECT count(*) FROM outbox WHERE to_addr = 'ann@example.org' AND kind = 'report'")[0][0]
    pbm.run_turn("ring1")
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM outbox WHERE to_addr = 'ann@example.org' AND kind = 'report'")[0][0] == before
    assert pbm.sql("SELECT count(*) FROM outbox WHERE to_addr = 'bob@example.org' AND kind = 'report'")[0][0] == 2


def test_a_player_page_from_a_game_page_shows_the_curio_rating_chart(pbm: PbmServer, browser, screenshots):
    """The curio game's page names its players; a click opens ann's page with
    her rating after each finished board as a chart (and its table)."""
    pw = {"ann": "ann-pass-1", "bob": "bob-pass-22", "cat": "cat-pass-333"}
    addr = {h: pbm.register(h, p) for h, p in pw.items()}
    for number, other in ((101, "bob"), (102, "cat"), (103, "bob")):
        pbm.mail(addr["ann"], "pbm", f"curio challenge ann {other} $${pw['ann']}$$")
        pbm.mail(addr["ann"], "pbm", f"curio move {number} ann {pw['ann']} a2-a3")
        if number < 103:  # 103 stays in play: ann is among the game's players
            pbm.mail(addr[other], "pbm", f"curio move {number} {other} {pw[other]} resign")
    base = f"http://127.0.0.1:{pbm.http_port}"
    browser.get(base + "/games/curio")
    click_and_wait(browser, browser.find_element("css selector", "section.players").find_element("link text", "ann"),
                   lambda d: d.current_url == base + "/players/ann")
    assert browser.find_element("tag name", "h1").text.startswith("ann")
    chart = browser.find_element("css selector", "svg.chart")
    assert chart.is_displayed() and chart.size["width"] > 300
    assert browser.find_element("css selector", "svg.chart title").get_attribute("textContent") == \
        "ann: curio rating in curio"
    assert len(browser.find_elements("css selector", "svg.chart polyline")) == 1
    ratings = [td.text for td in browser.find_elements("css selector", "table.ratings tbody td:last-child")]
    assert ratings == ["1516", "1531"]
    assert "@example.org" not in browser.page_source
    shots(browser, "player", screenshots)


def test_a_player_plays_a_turn_from_the_web(pbm_stopped: PbmServer, browser, screenshots):
    """Issue 42: from a report mail's link to the home, on to the own view,
    orders sent with its form (no script, no cookie): a wrong password does
    nothing; the right one is stored, handled once and answered by the same
    reply mail as a mail's, shown on the page; the same form sent twice is one
    order; and the turn run uses them."""
    import urllib.parse
    import urllib.request

    pbm = pbm_stopped
    pbm.set_clock(START)
    pbm.start()
    pbm.game_of_three()
    pbm.run_turn("ring1")
    report = next(m for m in pbm.inbox("ann@example.org") if str(m["Subject"]).endswith("round 1 report"))
    home = re.search(r"(http://\S+/me/ann\?k=\S+)", pbm.text(report)).group(1)

    browser.get(home)
    assert browser.find_element("tag name", "h1").text.startswith("Your games")
    assert "your orders for round 2 are due in" in main_text(browser)
    shots(browser, "home", screenshots)
    click_and_wait(browser, browser.find_element("css selector", "li.home-game h2 a"),
                   lambda d: "as ann sees it" in d.find_element("tag name", "h1").text)
    assert browser.find_elements("link text", "All your games")  # the own view links home
    own = browser.current_url
    rows = pbm.sql("SELECT count(*) FROM inbox")[0][0]

    def send(orders: str, password: str, ready) -> None:
        box = browser.find_element("name", "orders")
        box.clear()
        box.send_keys(orders)
        browser.find_element("name", "password").send_keys(password)
        click_and_wait(browser, browser.find_element("css selector", "form.orders-form button"), ready)

    # a wrong password: refused on the page, nothing stored
    send("GIVE 3 TO bob", "not-my-password", lambda d: "not your password" in main_text(d))
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == rows
    # the right one: the page says it is received, then (it reloads itself) what the server answered
    fields = {e.get_attribute("name"): e.get_attribute("value")
              for e in browser.find_elements("css selector", "form.orders-form input[type=hidden]")}
    send("GIVE 3 TO bob", "ann-pass-1", lambda d: "sent=" in d.current_url)
    wait_until(browser, lambda d: "Your orders from the web: handled" in main_text(d))
    answer = browser.find_element("css selector", "pre.reply").text
    assert "GIVE 3 TO bob" in answer and "ann-pass-1" not in browser.page_source
    shots(browser, "own-sent", screenshots)
    (reply,) = [m for m in pbm.inbox("ann@example.org") if (m["In-Reply-To"] or "").startswith("<web.")]
    assert "GIVE 3 TO bob" in pbm.text(reply) and "ann-pass-1" not in pbm.text(reply)

    # the same form sent again (a second click that got through): one order, no second reply
    body = urllib.parse.urlencode({**fields, "orders": "GIVE 3 TO bob", "password": "ann-pass-1"}).encode()
    request = urllib.request.Request(own, data=body, method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(request, timeout=20) as resp:  # follows the 303
        again = resp.url
    pbm.settle()
    browser.get(again)
    wait_until(browser, lambda d: "it counted once" in main_text(d))
    assert len([m for m in pbm.inbox("ann@example.org") if (m["In-Reply-To"] or "").startswith("<web.")]) == 1
    assert pbm.sql("SELECT status FROM inbox WHERE id > :n ORDER BY id", n=rows) == [("done",), ("duplicate",)]

    # the turn runs with them
    pbm.run_turn("ring1")
    round2 = next(m for m in pbm.inbox("bob@example.org") if str(m["Subject"]).endswith("round 2 report"))
    assert "ann held 3 and gave 3 to bob." in pbm.text(round2)
