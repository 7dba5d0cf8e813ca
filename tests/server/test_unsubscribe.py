"""One-click unsubscribe (RFC 8058) and a player's mail settings (issue 29,
item 4): every mail of a stream carries List-Unsubscribe (https and mailto)
and List-Unsubscribe-Post; a POST of List-Unsubscribe=One-Click stops that
stream for that address at once, with no login; the mailto and the mail
commands do the same; mail that must still go never carries the link.

The one-click tests run with an https PBM_PUBLIC_URL (as behind a reverse
proxy): without one the header holds only the mailto link (issue 42;
tests/server/test_list_unsubscribe_bytes.py).  They POST the link's path
and query to the HTTP side's own port, as the proxy would."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.harness import PbmServer

ANN, BOB, CAT = "ann@example.org", "bob@example.org", "cat@example.org"


def reports_to(pbm: PbmServer, addr: str) -> list:
    return [m for m in pbm.inbox(addr) if m["From"].addresses[0].username == "ring1"
            and str(m["Subject"]).endswith(" report")]


PUBLIC = "https://pbm.example.org"


@pytest.fixture
def pbm_https(pbm_stopped: PbmServer) -> PbmServer:
    """The server behind https://pbm.example.org (PBM_PUBLIC_URL): its mails' links start with it."""
    pbm_stopped.env["PBM_PUBLIC_URL"] = PUBLIC
    pbm_stopped.start()
    return pbm_stopped


def local(pbm: PbmServer, url: str) -> str:
    """A link to the public address, sent to the HTTP side's own port instead."""
    assert url.startswith(PUBLIC + "/"), url
    return f"http://127.0.0.1:{pbm.http_port}" + url.removeprefix(PUBLIC)


def post(url: str, body: bytes) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_one_click_stops_a_players_reports_and_nothing_else(pbm_https: PbmServer):
    pbm = pbm_https
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.settle()
    (report,) = reports_to(pbm, ANN)
    assert report["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    public, mailto = pbm.unsubscribe_links(report)
    assert public is not None and public.startswith(f"{PUBLIC}/unsubscribe/ann/ring1/reports?k=")
    assert pbm.stop_link(report) == public  # the footer's link is the same page
    https = local(pbm, public)
    assert mailto.startswith("mailto:pbm@pbm.test?subject=unsubscribe%20ring1%20reports%20")
    # its HTML part shows the scores as bars a mail program draws (table cells, no SVG, no script)
    html_part = pbm.html(report)
    assert "Scores after this round" in html_part and 'aria-label="ann: 0"' in html_part
    assert "<svg" not in html_part and "<script" not in html_part
    # the report also carries ann's own view, which opens her page
    own = re.search(r"(https://\S+/me/ann/ring1\?k=\S+)", pbm.text(report)).group(1)
    with urllib.request.urlopen(local(pbm, own), timeout=20) as resp:
        assert "as ann sees it" in resp.read().decode()
    # mail that must still go carries no link: the reply to her own mail, a confirmation code
    reply = pbm.mail(ANN, "ring1", "GIVE 3 TO bob\n$$ann-pass-1$$")
    assert reply["List-Unsubscribe"] is None
    code_mail = pbm.mail("dan@example.org", "pbm", "register dan dan-pass-1")
    assert code_mail["List-Unsubscribe"] is None
    # a POST without the one-click body, or with a changed token, stops nothing
    assert post(https, b"foo=bar")[0] == 400
    assert post(https[:-3] + "xyz", b"List-Unsubscribe=One-Click")[0] == 403
    assert post(https.replace("/ann/", "/bob/"), b"List-Unsubscribe=One-Click")[0] == 403
    # the one click, as a mailbox provider sends it: no login, no confirmation page
    status, page = post(https, b"List-Unsubscribe=One-Click")
    assert status == 200 and "Stopped" in page and "own page" in page
    assert pbm.sql("SELECT address, stream FROM mail_stops") == [(ANN, "reports")]
    # the next turn: bob and cat get their reports, ann none; ann's replies still come
    for handle in ("bob", "cat"):
        pbm.mail(f"{handle}@example.org", "ring1", f"GIVE 3 TO ann\n$${handle}-pass-1$$")
    pbm.run_turn("ring1")
    pbm.settle()
    assert len(reports_to(pbm, BOB)) == 2 and len(reports_to(pbm, CAT)) == 2
    assert len(reports_to(pbm, ANN)) == 1
    assert "GIVE 3 TO bob" in pbm.text(pbm.mail(ANN, "ring1", "GIVE 3 TO bob\n$$ann-pass-1$$"))
    # twice is harmless
    assert "stopped already" in post(https, b"List-Unsubscribe=One-Click")[1]


def test_the_mailto_link_and_the_mail_commands(pbm: PbmServer):
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.settle()
    _, mailto = pbm.unsubscribe_links(reports_to(pbm, BOB)[0])
    subject = urllib.parse.unquote(mailto.split("subject=", 1)[1])
    # what a mail client sends for the mailto link: that subject, from bob's address, no password
    answer = pbm.mail(BOB, "pbm", "", subject=subject)
    assert "no more turn reports and game notices of ring1" in pbm.text(answer), pbm.text(answer)
    # the same token from another address does nothing
    refused = pbm.mail("mallory@example.org", "pbm", "", subject=subject)
    assert "does not work" in pbm.text(refused)
    assert pbm.sql("SELECT address FROM mail_stops") == [(BOB,)]
    # by mail with the password: settings lists it, subscribe starts it again
    assert "stopped: turn reports and game notices of ring1" in pbm.text(
        pbm.mail(BOB, "pbm", "settings\n$$bob-pass-1$$"))
    assert "mailed to you again" in pbm.text(pbm.mail(BOB, "pbm", "subscribe ring1\n$$bob-pass-1$$"))
    assert pbm.sql("SELECT count(*) FROM mail_stops")[0][0] == 0
    # without a password or a token: refused, nothing stopped
    assert "password" in pbm.text(pbm.mail(CAT, "pbm", "unsubscribe ring1 press"))
    assert pbm.sql("SELECT count(*) FROM mail_stops")[0][0] == 0


def test_press_stopped_by_one_player_still_reaches_the_others(pbm_https: PbmServer):
    pbm = pbm_https
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.mail(ANN, "ring1", "PRESS TO ALL\nhello all\nENDPRESS\n$$ann-pass-1$$")
    pbm.settle()
    press = [m for m in pbm.inbox(BOB) if "press from ann" in str(m["Subject"])]
    assert len(press) == 1 and press[0]["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    public, _ = pbm.unsubscribe_links(press[0])
    assert public is not None and "/unsubscribe/bob/ring1/press?k=" in public
    https = local(pbm, public)
    assert post(https, b"List-Unsubscribe=One-Click")[0] == 200
    answer = pbm.flat(pbm.mail(ANN, "ring1", "PRESS TO ALL\nagain\nENDPRESS\n$$ann-pass-1$$"))
    assert "bob stopped press mail of ring1" in answer, answer
    pbm.settle()
    assert len([m for m in pbm.inbox(BOB) if "press from ann" in str(m["Subject"])]) == 1
    assert len([m for m in pbm.inbox(CAT) if "press from ann" in str(m["Subject"])]) == 2
