"""Helpers for the GM desk tests: a giveaway game with three players who can
all send orders, on a controllable clock."""

from __future__ import annotations

import time

import pytest

PW = "secret-pw1"
GM_PW = "gm-secret9"
PLAYERS = ("alice", "bob", "carol")
#: a ring: everybody gives all three points to the next player
RING = {"alice": "bob", "bob": "carol", "carol": "alice"}
#: Thursday before the first Saturday deadline (before the reminder window)
T0 = "2026-11-19T10:00:00+00:00"
DEADLINE = "every Saturday 03:00 UTC"


class Table:
    """The people at one server: the GM and three players."""

    def __init__(self, pbm):
        self.pbm = pbm

    def setup(self, game: str = "g1", deadline: str = DEADLINE, join: bool = True):
        pbm = self.pbm
        pbm.register("gm", GM_PW, email="gm@example.org")
        for p in PLAYERS:
            pbm.register(p, PW)
        pbm.new_game("giveaway", game, deadline=deadline)
        if join:
            for p in PLAYERS:
                self.player(p, game, "JOIN")
        return self

    def player(self, who: str, game: str, body: str):
        reply = self.pbm.mail(f"{who}@example.org", game, f"{body}\n$${PW}$$")
        text = self.pbm.text(reply)
        assert PW not in text
        return text

    def order(self, who: str, game: str = "g1"):
        text = self.player(who, game, f"GIVE 3 TO {RING[who]}")
        assert "accepted" in text, text
        return text

    def gm(self, body: str, password: str = GM_PW, frm: str = "gm@example.org") -> str:
        reply = self.pbm.mail(frm, "pbm", f"{body}\n$${password}$$", subject="desk")
        text = self.pbm.text(reply)
        assert password not in text and GM_PW not in text
        return " ".join(text.split())  # replies are wrapped: compare words

    def mails(self, who: str, containing: str) -> list:
        addr = who if "@" in who else f"{who}@example.org"
        return [m for m in self.pbm.inbox(addr) if containing in str(m["Subject"])]

    def wait_mails(self, who: str, containing: str, count: int = 1, timeout: float = 30) -> list:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            seen = self.pbm.sink.count()
            got = self.mails(who, containing)
            if len(got) >= count:
                return got
            self.pbm.sink.wait(seen, min(0.5, max(0.0, end - time.monotonic())))
        raise AssertionError(f"{who} got {len(self.mails(who, containing))} mails with {containing!r}, expected {count}:\n"
                             + "\n".join(str(m["Subject"]) for m in self.pbm.inbox(f'{who}@example.org'))
                             + "\n" + self.pbm.serve_log()[-3000:])

    def turn(self, game: str = "g1") -> int:
        return self.pbm.sql("SELECT turn FROM games WHERE name = :n", n=game)[0][0]

    def runs(self, game: str = "g1") -> int:
        return self.pbm.sql(
            "SELECT count(*) FROM snapshots s JOIN games g ON g.id = s.game_id WHERE g.name = :n AND s.phase = 'after'", n=game
        )[0][0]

    def export(self, game: str = "g1") -> str:
        return self.pbm.cli("game", "export", game).stdout


@pytest.fixture
def table_stopped(pbm_stopped):
    """Clock set to T0, server started; the test may stop and restart it."""
    pbm_stopped.set_clock(T0)
    pbm_stopped.start()
    return Table(pbm_stopped)
