"""Many random weeks: the rules' invariants hold whatever the players order."""

from __future__ import annotations

import random

import pytest

from games.rmpm import RULES
from games.rmpm.board import PARKING, parse_field

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

DIRS = {"u": (-1, 0), "r": (0, 1), "d": (1, 0), "l": (0, -1)}


def random_orders(rng: random.Random, chips: list[str], mt: bool) -> list[str]:
    a, b = [parse_field(c) for c in chips]
    if rng.random() < 0.5:
        a, b = b, a
    lines = []
    if rng.random() < 0.2:
        lines.append(f"F {a[0]:02d}-{a[1]:02d} {rng.choice('urdl')} -> {rng.choice('urdl')}")
    d = rng.choice("urdl")
    t = (a[0] + DIRS[d][0], a[1] + DIRS[d][1])
    d2 = rng.choice("urdl")
    t2 = (b[0] + DIRS[d2][0], b[1] + DIRS[d2][1])
    lines += [f"{a[0]:02d}-{a[1]:02d} -> {t[0]:02d}-{t[1]:02d}", f"{b[0]:02d}-{b[1]:02d} -> {t2[0]:02d}-{t2[1]:02d}"]
    if rng.random() < 0.4:
        lines.append("BUY")
    if mt:
        lines.append("USE MT")
    return lines


def test_random_weeks_keep_the_invariants(t):
    rng = random.Random(2024)
    players = {}
    taken: dict[str, int] = {}
    for i in range(40):
        chips = []
        while len(chips) < 2:
            f = f"{rng.randint(1, 25):02d}-{rng.randint(1, 25):02d}"
            if f not in chips and taken.get(f, 0) < 2:
                chips.append(f)
                taken[f] = taken.get(f, 0) + 1
        players[f"p{i}"] = {"abbr": f"{chr(97 + i // 10)}{i % 10}", "chips": chips, "an": rng.randint(1, 100),
                            "pn": rng.randint(1, 100), "capital": rng.randint(0, 3000)}
    st = t.position(players, bank=1000, kiosk=700)
    money = sum(p["capital"] for p in st["players"].values()) + st["bank"] + st["kiosk"]
    refused = accepted = 0
    for _week in range(25):
        for h, p in st["players"].items():
            if rng.random() < 0.8:
                out = t.mail(st, h, *random_orders(rng, p["chips"], p["cards"].get("MT", 0) > 0 and rng.random() < 0.5))
                st = out.state
                refused += sum(not r.ok for r in out.results)
                accepted += sum(r.ok for r in out.results)
        out = t.week(st)
        st = out.state
        # money only moves between players, the Bank and the kiosk
        assert sum(p["capital"] for p in st["players"].values()) + st["bank"] + st["kiosk"] == money
        on: dict[str, set] = {}
        for h, p in st["players"].items():
            assert p["capital"] >= 0 and 1 <= p["an"] <= 100 and 1 <= p["pn"] <= 100
            assert p["chips"][0] != p["chips"][1] or parse_field(p["chips"][0]) == PARKING
            for c in p["chips"]:
                on.setdefault(c, set()).add(h)
        assert all(len(hs) <= 2 for f, hs in on.items() if parse_field(f) != PARKING)
        assert "13-13" not in st["owners"] and set(st["owners"].values()) <= set(st["players"])
        assert len(st["fences"]) == 25
        assert "FIELD OWNERSHIP" in t.server_text(RULES.view(st, None)[0].data)
    assert accepted > 1000 and st["owners"]

