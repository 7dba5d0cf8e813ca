"""The HTTP side behind a real nginx with TLS, as docs/operations.md sets it
up ("The game pages behind a reverse proxy"): pages, feeds and the one-click
POST through the proxy, with the links the server makes naming the https
address the players use.  Debian's nginx (.ci/nginx-install); skipped
without it."""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request

import pytest
import trustme

from tests.harness import ROOT, PbmServer, free_port

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)

#: the site part, as docs/operations.md shows it (the test fills in its own paths and ports)
SITE = """\
server {{
    listen {listen} ssl;
    server_name {name};
    ssl_certificate     {cert};
    ssl_certificate_key {key};
    location / {{
        proxy_pass http://{upstream};
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_read_timeout 30s;
        client_max_body_size 16k;
    }}
}}
"""

DOCS_VALUES = {"listen": "443", "name": "pbm.example.org", "cert": "/etc/ssl/pbm/fullchain.pem",
               "key": "/etc/ssl/pbm/privkey.pem", "upstream": "127.0.0.1:8080"}

#: what makes the test's nginx one of its own: no daemon, its own files
INSTANCE = """\
daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{site}
}}
"""


@pytest.fixture
def proxy(pbm: PbmServer, tmp_path):
    if NGINX is None:
        pytest.skip("nginx is absent (install it with .ci/nginx-install)")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    chain, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    cert.cert_chain_pems[0].write_to_path(str(chain))
    for extra in cert.cert_chain_pems[1:]:
        extra.write_to_path(str(chain), append=True)
    cert.private_key_pem.write_to_path(str(key))
    port = free_port()
    site = SITE.format(listen=f"127.0.0.1:{port}", name="127.0.0.1", cert=chain, key=key,
                       upstream=f"127.0.0.1:{pbm.http_port}")
    conf = tmp_path / "nginx.conf"
    conf.write_text(INSTANCE.format(dir=tmp_path, site=site))
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(tmp_path)], stderr=subprocess.PIPE)
    context = ssl.create_default_context()
    ca.configure_trust(context)
    base = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", context=context, timeout=5):
                break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, (tmp_path / "error.log").read_text()
            time.sleep(0.1)
    try:
        yield base, context
    finally:
        proc.send_signal(signal.SIGQUIT)
        proc.wait(10)


def fetch(url: str, context: ssl.SSLContext, data: bytes | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(req, context=context, timeout=20) as resp:
        return resp.status, resp.read().decode()


def test_pages_feeds_and_one_click_through_nginx_with_tls(pbm: PbmServer, proxy):
    base, context = proxy
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.settle()
    status, page = fetch(base + "/games/ring1", context)
    assert status == 200 and "ring1" in page and "Board" in page
    # the feed's links come from the settings (here without PBM_PUBLIC_URL: http://PBM_HTTP_LISTEN, as
    # the mails' links), never from the Host the proxy passes on (issue 41)
    status, feed = fetch(base + "/games/ring1/feed.atom", context)
    ours = f"http://127.0.0.1:{pbm.http_port}"
    assert status == 200 and f'<link rel="self" href="{ours}/games/ring1/feed.atom"/>' in feed, feed
    # the one-click POST of a report's link, sent through the proxy
    report = next(m for m in pbm.inbox("ann@example.org") if str(m["Subject"]).endswith("round 1 report"))
    # (without an https PBM_PUBLIC_URL the header holds only the mailto link; the footer's link is the page)
    path = pbm.stop_link(report).split(str(pbm.http_port), 1)[1]
    status, done = fetch(base + path, context, b"List-Unsubscribe=One-Click")
    assert status == 200 and "Stopped" in done
    assert pbm.sql("SELECT address, stream FROM mail_stops") == [("ann@example.org", "reports")]


def test_the_docs_show_the_proxy_configuration_this_test_uses():
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert "### The game pages behind a reverse proxy" in docs
    missing = [ln.strip() for ln in SITE.format(**DOCS_VALUES).splitlines() if ln.strip() not in docs]
    assert not missing, f"docs/operations.md lacks: {missing}"
    assert "PBM_PUBLIC_URL=https://pbm.example.org" in docs


def test_links_in_mail_start_with_the_public_url(pbm_stopped: PbmServer):
    """Behind a proxy the mails' links name the address players reach (PBM_PUBLIC_URL)."""
    pbm = pbm_stopped
    pbm.env["PBM_PUBLIC_URL"] = "https://pbm.example.org"
    pbm.start()
    pbm.game_of_three()
    pbm.run_turn("ring1")
    pbm.settle()
    report = next(m for m in pbm.inbox("ann@example.org") if str(m["Subject"]).endswith("round 1 report"))
    assert str(report["List-Unsubscribe"]).startswith("<https://pbm.example.org/unsubscribe/ann/ring1/reports?k=")
    assert "https://pbm.example.org/me/ann/ring1?k=" in pbm.text(report)
