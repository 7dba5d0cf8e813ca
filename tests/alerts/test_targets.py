"""Alert targets without a database: which format a URL gets, which hosts
are refused and why, the signature, Retry-After, and https verified against
the trust store SSL_CERT_FILE names (in a process of its own: OpenSSL reads
it once)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import ssl
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import trustme

from pbm_server.base.errors import ServerRefused
from pbm_server.base.settings import load_settings
from pbm_server.mail.alerts import AlertDelivery, parse_target, render, resolve_public, retry_after
from tests.alerts.receiver import Receiver

pytestmark = pytest.mark.nodb
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("url, fmt", [
    ("https://discord.com/api/webhooks/123/abc", "discord"),
    ("https://discordapp.com/api/webhooks/123/abc", "discord"),
    ("https://discord.com/other/path", "json"),
    ("https://hooks.slack.com/services/T0/B0/x", "slack"),
    ("https://ntfy.sh/my-topic", "ntfy"),
    ("ntfy+https://ntfy.example.org/my-topic", "ntfy"),
    ("DISCORD+https://example.org/hook", "discord"),
    ("https://example.org/hook", "json"),
])
def test_the_format_follows_the_host_or_the_prefix(url, fmt):
    target = parse_target(url)
    assert target.format == fmt and not target.url.lower().startswith(fmt + "+")


@pytest.mark.parametrize("url, why", [
    ("ftp://example.org/x", "only to https:// URLs"),
    ("https://user:pw@example.org/x", "user name or password"),
    ("https:///x", "names no host"),
    ("https://example.org/" + "x" * 400, "at most 400"),
    ("https://exa mple.org/", "spaces"),
])
def test_malformed_urls_are_refused_with_the_reason(url, why):
    with pytest.raises(ServerRefused, match=why):
        parse_target(url)


@pytest.mark.parametrize("host, why", [
    ("127.0.0.1", "a loopback"), ("[::1]", "a loopback"), ("10.1.2.3", "a private"), ("192.168.0.1", "a private"),
    ("172.16.5.5", "a private"), ("169.254.169.254", "a link-local"), ("[fe80::1]", "a link-local"),
    ("[::ffff:127.0.0.1]", "a loopback"), ("[::ffff:10.0.0.1]", "a private"), ("0.0.0.0", "a unspecified"),
    ("224.0.0.1", "a multicast"), ("240.0.0.1", "a reserved"), ("100.64.0.1", "non-public"),
    ("[fc00::1]", "a private"), ("[2002:7f00:1::]", "a loopback"), ("localhost", "localhost resolves to"),
])
def test_non_public_hosts_are_refused_literal_or_by_name(host, why):
    target = parse_target(f"https://{host}/hook")
    with pytest.raises(ServerRefused, match=why):
        resolve_public(target, allow_private=False)
    assert resolve_public(target, allow_private=True)  # the operator's PBM_NOTIFY_ALLOW_PRIVATE=1


def test_plain_http_only_to_private_addresses_and_only_when_allowed():
    assert resolve_public(parse_target("http://127.0.0.1:8000/x"), allow_private=True) == ["127.0.0.1"]
    with pytest.raises(ServerRefused, match="only to https://"):
        resolve_public(parse_target("http://127.0.0.1:8000/x"), allow_private=False)
    with pytest.raises(ServerRefused, match="plain http:// is taken only to a private address"):
        resolve_public(parse_target("http://93.184.215.14/x"), allow_private=True)
    assert resolve_public(parse_target("https://93.184.215.14/x"), allow_private=False) == ["93.184.215.14"]


def test_the_generic_json_is_signed_over_its_exact_bytes():
    settings = load_settings({"PBM_PUBLIC_URL": "https://pbm.example.org"})
    alert = {"event": "turn", "game": "g1", "kind": "giveaway", "turn": 3, "path": "/games/g1/turns/3",
             "text": "g1: round 3 has been processed."}
    post = render(parse_target("https://example.org/hook"), alert, "k" * 64, settings,
                  datetime(2026, 11, 21, 3, 1, tzinfo=timezone.utc))
    assert json.loads(post.body) == {"event": "turn", "game": "g1", "kind": "giveaway", "turn": 3,
                                     "url": "https://pbm.example.org/games/g1/turns/3",
                                     "text": "g1: round 3 has been processed.", "sent_at": "2026-11-21T03:01:00Z"}
    expected = hmac.new(b"k" * 64, post.body, hashlib.sha256).hexdigest()
    assert post.headers["X-PBM-Signature"] == f"sha256={expected}"
    ntfy = render(parse_target("https://ntfy.sh/t"), alert, None, settings, datetime.now(timezone.utc))
    assert ntfy.headers["Title"] == "g1: turn 3 processed" and ntfy.headers["Click"].endswith("/turns/3")
    assert ntfy.body == b"g1: round 3 has been processed."


def test_retry_after_in_seconds_or_as_a_date():
    now = datetime(2026, 11, 21, 3, 0, tzinfo=timezone.utc)
    assert retry_after("120", now) == 120.0
    assert retry_after("Sat, 21 Nov 2026 03:00:30 GMT", now) == 30.0
    assert retry_after("soon", now) is None and retry_after(None, now) is None


_POST = """
import json, sys
from pbm_server.base.settings import load_settings
from pbm_server.mail.alerts import AlertDelivery, parse_target
delivery = AlertDelivery(None, load_settings({"PBM_NOTIFY_ALLOW_PRIVATE": "1"}), "test")
alert = {"event": "move", "game": "curio", "kind": "curio", "turn": None, "path": None, "text": "your move"}
attempt = delivery.post(parse_target(sys.argv[1]), alert, None)
print(json.dumps([attempt.outcome, attempt.error]))
"""


def test_https_is_verified_through_ssl_cert_file_and_goes_to_the_checked_address(tmp_path):
    """The certificate of a test CA for "localhost": refused without the CA,
    taken with SSL_CERT_FILE naming it; the request went to the address
    checked, with the name in Host (and in SNI, which the certificate check
    needs)."""
    ca = trustme.CA()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(ctx)
    receiver = Receiver()
    receiver.tls(ctx)
    receiver.start()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    url = f"ntfy+https://localhost:{receiver.port}/topic"
    try:
        # in this process: the default trust store does not know the test CA
        here = AlertDelivery(None, load_settings({"PBM_NOTIFY_ALLOW_PRIVATE": "1"}), "test")
        refused = here.post(parse_target(url), {"event": "move", "game": "curio", "kind": "curio", "turn": None,
                                                "path": None, "text": "your move"}, None)
        here.client().close()
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        run = subprocess.run([sys.executable, "-c", _POST, url], env={**env, "SSL_CERT_FILE": str(ca_file)}, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        taken_there = json.loads(run.stdout.strip().splitlines()[-1])
    finally:
        receiver.stop()
    assert refused.outcome == "retry" and "CERTIFICATE_VERIFY_FAILED" in str(refused.error), refused
    assert taken_there == ["sent", None]
    [taken] = receiver.requests
    assert taken.headers["host"] == f"localhost:{receiver.port}" and taken.body == b"your move"
    assert taken.headers["title"] == "curio: your move"
