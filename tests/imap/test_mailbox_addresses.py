"""The addresses of a server run from a mailbox (issue 43), without a
server: the settings that are refused, the plus addresses both ways, which
mails in the mailbox are ours, and the addresses written in mails."""

from __future__ import annotations

import pytest

from pbm_server.base.settings import Settings, SettingsError, load
from pbm_server.mail.compose import Composer
from pbm_server.running.mailbox import recipients

pytestmark = pytest.mark.nodb

BOX = Settings(domain="pbm.test", mailbox_address="gm.games@example.org")


def problems(tmp_path, **env: str) -> list[str]:
    secret = tmp_path / "pw"
    secret.write_text("x\n")
    full = {"PBM_IMAP_URL": "imaps://gm.games%40example.org@imap.example.org/INBOX",
            "PBM_IMAP_PASSWORD_FILE": str(secret), "PBM_MAILBOX_ADDRESS": "gm.games@example.org", **env}
    try:
        load({k: v for k, v in full.items() if v != "-"})
    except SettingsError as exc:
        return exc.problems
    return []


def test_the_mailbox_settings_are_checked_together(tmp_path):
    assert problems(tmp_path) == []
    assert problems(tmp_path, PBM_IMAP_URL="imap://games@127.0.0.1:1143/INBOX") == []
    assert problems(tmp_path, PBM_IMAP_URL="imap://games@imap.example.org/INBOX") == []  # STARTTLS when connecting
    [one] = problems(tmp_path, PBM_IMAP_PASSWORD_FILE="-")
    assert "give all three" in one
    [one] = problems(tmp_path, PBM_IMAP_URL="https://imap.example.org/INBOX")
    assert one.startswith("PBM_IMAP_URL:") and "imaps://USER@HOST[:PORT]/MAILBOX" in one
    [one] = problems(tmp_path, PBM_MAILBOX_ADDRESS="gm.games+x@example.org")
    assert one.startswith("PBM_MAILBOX_ADDRESS:") and "without a +tag" in one
    [one] = problems(tmp_path, PBM_DOMAIN="example.org")
    assert one.startswith("PBM_DOMAIN:") and "mailbox's domain" in one


def test_plus_addresses_both_ways():
    assert BOX.server_address == "gm.games@example.org"
    assert BOX.address("ring1") == "gm.games+ring1@example.org"
    assert BOX.address("postmaster") == "gm.games+postmaster@example.org"
    assert BOX.address("bounces+12-0123456789ab") == "gm.games+b-12-0123456789ab@example.org"
    for local in ("pbm", "ring1", "postmaster", "bounces+12-0123456789ab"):
        assert BOX.internal_address(BOX.address(local)) == f"{local}@pbm.test"
    assert BOX.internal_address("GM.Games+Ring1@Example.ORG") == "ring1@pbm.test"
    for stranger in ("gm.games@example.net", "other@example.org", "gm.gamesx+ring1@example.org", "gm.games+@example.org"):
        assert BOX.internal_address(stranger) is None
    plain = Settings(domain="pbm.test")
    assert plain.address("ring1") == "ring1@pbm.test" and plain.internal_address("ring1@pbm.test") is None


def test_which_mails_in_the_mailbox_are_ours():
    delivered = (b"Return-Path: <ann@example.net>\r\nDelivered-To: gm.games+ring1@example.org\r\n"
                 b"From: Ann <ann@example.net>\r\nTo: friends@example.net\r\nSubject: x\r\n\r\nbody\r\n")
    assert recipients(BOX, delivered) == ("ann@example.net", ["ring1@pbm.test"])  # Bcc: the delivery's header counts
    both = (b"From: ann@example.net\r\nTo: gm.games@example.org, bob@example.net\r\n"
            b"Cc: GM.Games+Ring1@example.org\r\nSubject: x\r\n\r\nbody\r\n")
    assert recipients(BOX, both) == ("ann@example.net", ["pbm@pbm.test", "ring1@pbm.test"])
    bounce = (b"Return-Path: <>\r\nDelivered-To: gm.games+b-7-0123456789ab@example.org\r\n"
              b"From: MAILER-DAEMON@relay.example\r\nSubject: Undelivered\r\n\r\nbody\r\n")
    assert recipients(BOX, bounce) == ("", ["bounces+7-0123456789ab@pbm.test"])
    bare = (b"Delivered-To: gm.games@example.org\r\nFrom: ann@example.net\r\n"
            b"To: gm.games+ring1@example.org\r\nSubject: x\r\n\r\nbody\r\n")
    assert recipients(BOX, bare)[1] == ["ring1@pbm.test"]  # a delivery that drops the +tag in Delivered-To
    bcc = b"Delivered-To: gm.games@example.org\r\nFrom: ann@example.net\r\nTo: x@example.net\r\n\r\nbody\r\n"
    assert recipients(BOX, bcc)[1] == ["pbm@pbm.test"]
    foreign = b"From: ann@example.net\r\nTo: gm.games.other@example.org\r\nSubject: x\r\n\r\nbody\r\n"
    assert recipients(BOX, foreign)[1] == []


def test_addresses_in_mails_are_the_mailboxs():
    composer = Composer(BOX)
    text = ("Mail 'help' to pbm@pbm.test; your orders to ring1@pbm.test (or RING1@PBM.TEST).\n"
            "ann@example.org is untouched, so is x@pbm.test.example and pbm@pbm.tester.")
    assert composer.public(text) == (
        "Mail 'help' to gm.games@example.org; your orders to gm.games+ring1@example.org "
        "(or gm.games+RING1@example.org).\n"
        "ann@example.org is untouched, so is x@pbm.test.example and pbm@pbm.tester.")
    _, raw = composer.message(to_addr="ann@example.org", to_name=None, from_local="ring1", subject="s",
                              body=composer.render("server/help_press.txt", {"per_hour": 300}), auto="auto-replied",
                              now=__import__("datetime").datetime(2026, 11, 23, 10, 0))
    assert b"From: pbm-server <gm.games+ring1@example.org>" in raw
    assert b"@pbm.test" not in raw.split(b"Message-ID")[0]
    assert b"gm.games+NAME@example.org" in raw.replace(b"=\r\n", b"")  # the help's placeholder as written
