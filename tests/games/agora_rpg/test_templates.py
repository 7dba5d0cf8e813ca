"""The weekly report renders with the contract text, as text and as HTML,
with the server's own Jinja environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.games.driver import render

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

ROOT = Path(__file__).resolve().parents[3]


def week_report(table):
    table.ok("alice", "JOIN")
    table.ok("bob", "JOIN")
    table.gm("GM NPC Merchant")
    table.set("alice", location="Gold Exchanger", gold=3, weapon_2=1)
    table.ok("alice", "EXCHANGE 2 GOLD")
    table.set("bob", location="Dungeon Level 1")
    table.ok("bob", "EXPLORE", rolls=[95])
    table.ok("carol", "JOIN")
    table.later(hours=5)
    table.ok("carol", "LEAVE")
    return table.week().notices[0].data


def test_text_report(table):
    text = render("agora_rpg", "report.txt", week_report(table))
    assert 'report\nfor week 1, made 2026-11-16 14:00 UTC.' in text
    assert "  alice: 2 gold exchanged, 2 points awarded\n" in text
    assert "  alice: +5 movement tokens (now 10)\n  bob: +5 movement tokens (now 9)\n" in text
    assert "  Movement tokens 10, gold 1, points 2\n" in text
    assert "  Fighting a level 2 monster (health 10 of 10)" in text
    assert "  2026-11-16 09:00  bob: 1d100 = 95 (encounter on Dungeon Level 1)\n" in text
    assert "The RPG mailing list is specified as: public messages" in text
    assert "brings no movement tokens):\n  carol left on 2026-11-16 14:00 UTC\n" in text
    assert "this report comes from (dungeon@pbm.test)" in text
    assert "combat: the house rule (ATTACK / FLEE)" in text
    contract = (ROOT / "templates" / "agora_rpg" / "contract.txt").read_text()
    assert contract.strip() in text
    assert text.count("\n") > 400
    too_long = [line for line in text.splitlines() if len(line) > 78]
    assert too_long == []


def test_html_report_escapes_the_contract(table):
    html = render("agora_rpg", "report.txt", week_report(table), html=True)
    assert "from &lt;starting location&gt; to &lt;destination" in html
    assert "<h3>Characters</h3>" in html
    assert "bob: 1d100 = 95 (encounter on Dungeon Level 1)" in html
