"""One look for mail and web (issue 29, item 7): the HTML part of a report
takes its look from the web's stylesheet, starts with the reader's next
action and deadline, ends with the seed lines in small type, draws curio
pieces as pieces (each face named in an aria-label) and rmpm chips in player
colours with a legend, and reads at 375 px.

A scripted week of rmpm and a curio board over SMTP (tests/server/weeks.py);
the HTML parts come from the relay sink, and Debian's Chromium renders them
at 1280 and 375 px (screenshots to PBM_SCREENSHOTS, docs/web.md shows a set;
skipped without Chromium)."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from tests.harness import PbmServer
from tests.server.browser import WIDTHS
from tests.server.weeks import WEEKS, addr

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral


def report(pbm: PbmServer, handle: str, ending: str):
    mails = [m for m in pbm.inbox(addr(handle)) if str(m["Subject"]).endswith(ending)]
    assert mails, [str(m["Subject"]) for m in pbm.inbox(addr(handle))]
    return mails[-1]


def luminance(colour: str) -> float:
    colour = colour.lstrip("#")
    if len(colour) == 3:
        colour = "".join(c * 2 for c in colour)
    channels = [int(colour[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def style_of(tag: str) -> dict[str, str]:
    found = re.search(r'style="([^"]*)"', tag)
    pairs = [p.split(":", 1) for p in (found.group(1) if found else "").split(";") if ":" in p]
    return {k.strip(): v.strip() for k, v in pairs}


def attributes(tag: str) -> dict[str, str]:
    """A tag's attributes, in whatever order the inliner wrote them."""
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


def styled_from_the_web_stylesheet(html: str) -> None:
    """The web's stylesheet is in the mail: its @media rule kept in the
    <style>, its body font and colours written inline (var() resolved)."""
    head = html.split("</head>", 1)[0]
    assert "<style>" in head and "@media (max-width: 40rem)" in head, head
    body = re.search(r"<body[^>]*>", html).group(0)
    assert "system-ui" in body and "#1b1f24" in body, body
    assert "var(--" not in html
    assert '<meta name="viewport"' in head


def test_an_rmpm_report_starts_with_the_deadline_and_draws_chips_in_colour(pbm: PbmServer):
    # a Monday: the game's first deadline is that week's Saturday 03:00 UTC, and
    # both turns run by hand more than half a week before it keep it
    pbm.set_clock("2026-11-30T10:00:00+00:00")
    WEEKS["rmpm"](pbm)
    pbm.settle()
    msg = report(pbm, "ann", "report of week 2")
    html = PbmServer.html(msg)
    assert html is not None
    styled_from_the_web_stylesheet(html)
    # the next action and the deadline first: before the greeting and the board
    lead = re.search(r'<p class="next"[^>]*>(.*?)</p>', html, re.S)
    assert lead is not None
    assert unescape(lead.group(1)) == "Your orders for week 3 are due Sat 2026-12-05 03:00 UTC.", lead.group(1)
    assert html.index('class="next"') < html.index("Hello ann,") < html.index('class="rmpm"')
    # the seeds and hashes at the end, in small type, after the links
    proof = re.search(r'<p class="proof"([^>]*)>(.*?)</p>', html, re.S)
    assert proof is not None and "font-size: 0.75rem" in proof.group(1)
    assert len(re.findall(r"[0-9a-f]{64}", proof.group(2))) == 3
    assert html.index('class="proof"') > html.index("/unsubscribe/") > html.index('class="rmpm"')
    assert not re.findall(r"[0-9a-f]{64}", html[:html.index('class="proof"')])
    # chips in player colours: ann's bd (player 1) and bob's ir (player 2), white on a colour, AA contrast
    chips = re.findall(r'<span class="chip (c\d+)"([^>]*)>(\w+)</span>', html)
    by_abbr = {(abbr, cls) for cls, _, abbr in chips}
    assert by_abbr == {("bd", "c0"), ("ir", "c1")}, by_abbr
    for _, tag, abbr in chips:
        style = style_of(tag)
        assert contrast(style["color"], style["background"]) >= 4.5, (abbr, style)
    legend = re.search(r'<ul class="legend"[^>]*>(.*?)</ul>', html, re.S)
    assert legend is not None
    assert "bd</span> 01 blue dragon" in legend.group(1) and "ir</span> 02 Irata" in legend.group(1)
    assert html.count('<th scope="col"') > 25 and html.count('<th scope="row"') == 25
    # every colour of the palette reads (the game may have twelve players)
    css = Path("templates/boards.css").read_text()
    palette = re.findall(r"\.c\d+ \{ background: (#[0-9a-f]{6}); \}", css)
    assert len(palette) == 12 and all(contrast("#ffffff", c) >= 4.5 for c in palette), palette
    # the text part: the same next action on its first lines, and still the whole ASCII board
    text = PbmServer.text(msg)
    assert text.startswith("Hello ann,\n\nYour orders for week 3 are due Sat 2026-12-05 03:00 UTC.\n\n")
    assert "Next deadline: Sat 2026-12-05 03:00 UTC" in text and "RICH MAN - POOR MAN" in text


def test_a_curio_board_draws_pieces_with_their_faces_named(pbm: PbmServer):
    WEEKS["curio"](pbm)
    msg = report(pbm, "bob", "your move (ann played " + first_move(pbm) + ")")
    html = PbmServer.html(msg)
    assert html is not None
    styled_from_the_web_stylesheet(html)
    lead = re.search(r'<p class="next"[^>]*>(.*?)</p>', html, re.S)
    assert lead is not None and unescape(lead.group(1)) == "Your move on board 101 (move 2, you play Dark)."
    assert html.index('class="next"') < html.index('class="curio"')
    # each piece is drawn as a piece and named with the faces bob sees, as his ASCII board shows them
    cells = [(attributes(tag), inner) for tag, inner in re.findall(r"<td ([^>]*)>(.*?)</td>", html)]
    cells = [(a["class"], a["title"], a["data-token"], inner) for a, inner in cells if "data-token" in a]
    assert len(cells) == 15
    pieces = 0
    for classes, square, token, inner in cells:
        if token == ".":
            assert "piece" not in inner
            continue
        pieces += 1
        span = attributes(re.search(r"<span ([^>]*)>", inner).group(1))
        assert span["role"] == "img" and span["class"].startswith("piece ")
        side, words = span["class"].split()[1], unescape(span["aria-label"])
        assert classes.split()[0] == side
        faces = token.strip("[]()")
        mine = token.startswith("[")
        assert side == ("dark" if mine else "light"), (square, token, side)  # bob plays Dark
        who = "your piece" if mine else "Light's piece"
        named = f"face {faces}" if len(faces) == 1 else "faces " + " and ".join(faces)
        assert words.startswith(f"{square}: {who}") and words.endswith(named), (token, words)
    assert pieces == 12
    # the text part stays the ASCII board
    assert "[3]" in PbmServer.text(msg) and "(2)" in PbmServer.text(msg)


def first_move(pbm: PbmServer) -> str:
    told = [str(m["Subject"]) for m in pbm.inbox(addr("bob")) if "your move (ann played" in str(m["Subject"])]
    assert told
    return told[-1].rsplit(" ", 1)[1].rstrip(")")


def test_the_mails_read_at_375_px_in_chromium(pbm: PbmServer, browser, screenshots, tmp_path):
    """Both HTML parts rendered by Chromium: the page is no wider than the
    window at 375 px (the rmpm board scrolls inside its box), and the
    stylesheet applied (the next action's band has its border)."""
    screenshots.mkdir(parents=True, exist_ok=True)
    WEEKS["rmpm"](pbm)
    WEEKS["curio"](pbm)
    pbm.settle()
    mails = {"rmpm": report(pbm, "ann", "report of week 2"),
             "curio": report(pbm, "bob", "your move (ann played " + first_move(pbm) + ")")}
    for name, msg in mails.items():
        page = tmp_path / f"mail-{name}.html"
        page.write_text(PbmServer.html(msg) or "", encoding="utf-8")
        browser.get(page.as_uri())
        band = browser.find_element("css selector", "p.next")
        assert band.value_of_css_property("border-left-style") == "solid"
        assert browser.execute_script("return getComputedStyle(document.body).fontFamily").startswith("system-ui")
        for width in WIDTHS:
            browser.set_window_size(width, 900)
            inner = browser.execute_script("return window.innerWidth")
            wide = browser.execute_script("return document.documentElement.scrollWidth")
            assert wide <= inner + 2, (name, width, inner, wide)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            browser.set_window_size(width, min(max(int(height), 400), 4000))
            browser.save_screenshot(str(screenshots / f"mail-{name}-{width}.png"))
        browser.set_window_size(375, 900)
        assert browser.execute_script("return window.innerWidth") <= 375 + 2
