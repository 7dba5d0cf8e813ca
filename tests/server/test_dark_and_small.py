"""Dark and small (issue 42, item 7): every kind of page and every kind of
HTML mail, in Debian's Chromium, is no wider than a 375 px phone screen
(``document.documentElement.scrollWidth <= 375`` under CDP's device metrics
of a phone) and follows ``prefers-color-scheme: dark`` (CDP's emulated
media): a dark background and every text on it readable (WCAG AA, 4.5:1).

One server plays a scripted week of each of the five kinds
(tests/server/weeks.py); the pages are loaded from its HTTP side, the mails'
HTML parts from the relay sink are written to files and opened.  Each page is
loaded once per look, to keep the run short."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pbm_server.accounts import links
from pbm_server.store.db import Database
from pbm_server.store.lookup import account_by_handle
from tests.harness import PbmServer
from tests.server.weeks import PW, WEEKS, addr, send

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

#: the phone's screen width, in CSS pixels
PHONE = 375

#: the worst contrast of any visible text against the background it is drawn on
#: (the first opaque background of it or its ancestors), and what it was
WORST_CONTRAST = """
function parse(c) {
  const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
  const p = m[1].split(',').map(s => parseFloat(s));
  return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
}
function lum(c) {
  const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
}
function background(el) {
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c && c.a > 0.5) return c;
  }
  return parse(getComputedStyle(document.documentElement).backgroundColor) || {r: 255, g: 255, b: 255, a: 1};
}
let worst = [99, ''];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  if (!n.textContent.trim()) continue;
  const el = n.parentElement;
  if (!el || !el.getClientRects().length) continue;
  const st = getComputedStyle(el);
  if (st.visibility === 'hidden' || st.display === 'none') continue;
  const fg = parse(el instanceof SVGElement ? st.fill : st.color), bg = background(el);
  const hi = Math.max(lum(fg), lum(bg)), lo = Math.min(lum(fg), lum(bg));
  const ratio = (hi + 0.05) / (lo + 0.05);
  if (ratio < worst[0]) worst = [ratio, el.tagName + '.' + el.getAttribute('class') + ': ' + n.textContent.trim().slice(0, 40)
                                 + ' ' + st.color + ' on ' + JSON.stringify(bg)];
}
return worst;
"""

#: the background the page shows where nothing else is drawn: the body's, else the root's
PAGE_BACKGROUND = """
const lum = c => { const p = c.match(/[\\d.]+/g).map(Number); if (p.length > 3 && p[3] === 0) return null;
  const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); };
const body = lum(getComputedStyle(document.body).backgroundColor);
return body !== null ? body : lum(getComputedStyle(document.documentElement).backgroundColor);
"""


def signed(pbm: PbmServer, kind: str, handle: str, game: str) -> str:
    db = Database(pbm.db_url)
    try:
        with db.write() as s:
            account = account_by_handle(s, handle)
            assert account is not None
            link = links.make(s, account, kind, game, pbm.now())
    finally:
        db.dispose()
    return (links.home_url if kind == "home" else links.url)(f"http://127.0.0.1:{pbm.http_port}", link)


def last(pbm: PbmServer, handle: str, words: str):
    found = [m for m in pbm.inbox(addr(handle)) if words in str(m["Subject"])]
    assert found, (words, [str(m["Subject"]) for m in pbm.inbox(addr(handle))])
    return found[-1]


#: tables that are not boards (a board may scroll in its own box) reaching past the screen's right edge:
#: a column there is cut off (the giveaway report's Score and Next were)
CUT_TABLES = """
const out = [];
for (const t of document.querySelectorAll('table:not(.rmpm):not(.curio):not(.board)')) {
  const right = Math.round(t.getBoundingClientRect().right);
  if (right > window.innerWidth) out.push(t.className + ' ' + right);
}
return out;
"""


def look(driver, url: str, dark: bool) -> tuple[int, float | None, list]:
    """(the page's width, its background's luminance, its worst contrast) in the given look;
    the page's width counts its cut tables (a table past the right edge in a scrolling box)."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "media": "screen", "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    driver.get(url)
    width = int(driver.execute_script("return document.documentElement.scrollWidth"))
    cut = driver.execute_script(CUT_TABLES)
    if cut:
        width = max(width, PHONE + 1)
    return width, driver.execute_script(PAGE_BACKGROUND), driver.execute_script(WORST_CONTRAST)


def test_every_page_and_mail_fits_a_phone_and_follows_dark_mode(pbm_stopped: PbmServer, browser, tmp_path):
    pbm = pbm_stopped
    pbm.set_clock("2026-11-30T10:00:00+00:00")  # a Monday: the weekly deadlines are days away
    pbm.start()
    for play in WEEKS.values():
        play(pbm)
    status = pbm.mail(addr("ann"), "pbm", f"status gift\n$${PW['ann']}$$")
    reply = last(pbm, "ann", "gift")  # the newest mail of the giveaway game to ann (a reply or report)
    ordered = send(pbm, "bob", "gift", "GIVE 1 TO ann")  # bob's orders for round 2: ann and cat are reminded
    # into the reminder window of the giveaway game's next deadline
    deadline, remind = pbm.sql("SELECT next_deadline, remind_minutes FROM games WHERE name = 'gift'")[0]
    due = deadline if not isinstance(deadline, str) else __import__("datetime").datetime.fromisoformat(deadline)
    if due.tzinfo is None:
        due = due.replace(tzinfo=__import__("datetime").timezone.utc)
    pbm.set_clock(due - timedelta(minutes=remind) + timedelta(minutes=5))
    pbm.wait_for(addr("cat"), len(pbm.inbox(addr("cat"))) + 1)
    pbm.settle()
    mails = {
        "giveaway report": last(pbm, "ann", "round 1 report"),
        "rmpm report": last(pbm, "ann", "report of week 2"),
        "agora report": last(pbm, "ann", "town"),
        "sequence report": last(pbm, "ann", "four"),
        "curio move": last(pbm, "bob", "your move"),
        "status": status,
        "reply": ordered,
        "refused reply": reply,
        "reminder": last(pbm, "cat", "reminder"),
    }
    base = f"http://127.0.0.1:{pbm.http_port}"
    pages = {"games list": base + "/", "player": base + "/players/ann", "no such page": base + "/games/nowhere",
             "bad own link": base + "/me/ann/gift?k=1.x",
             "unsubscribe": pbm.stop_link(mails["giveaway report"]), "home": signed(pbm, "home", "ann", "")}
    for game in ("gift", "world", "town", "four", "curio"):
        pages[f"game {game}"] = f"{base}/games/{game}"
        pages[f"own view {game}"] = signed(pbm, "view", "ann", game)
    for game in ("gift", "world", "town", "four"):
        pages[f"turn page {game}"] = f"{base}/games/{game}/turns/1"
    plain: list[str] = []
    for name, msg in mails.items():
        html = PbmServer.html(msg)
        if html is None:  # a plain-text mail: a phone wraps it itself
            plain.append(name)
            continue
        page = tmp_path / f"mail-{name.replace(' ', '-')}.html"
        page.write_text(html, encoding="utf-8")
        pages[f"mail: {name}"] = page.as_uri()

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": PHONE, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    try:
        wide, dull, light_bg = {}, {}, {}
        for name, url in pages.items():
            width, background, _ = look(browser, url, dark=False)
            light_bg[name] = background
            if width > PHONE:
                wide[name] = width
            _, background, (ratio, where) = look(browser, url, dark=True)
            if background is None or background > 0.05 or ratio < 4.5:
                dull[name] = (background, round(ratio, 2), where)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "", "features": []})
    assert not {"giveaway report", "rmpm report", "curio move", "reminder"} & set(plain), plain
    assert not wide and not dull, f"wider than {PHONE} px (or a table cut off): {wide}; " \
                                  f"not dark, or a text hard to read in dark mode: {dull}"
    assert all(v is not None and v > 0.9 for v in light_bg.values()), light_bg  # light stays light
