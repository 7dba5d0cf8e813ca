"""The game master's desk by mail and on the CLI: turn numbers, rollback,
refusals, the audit log, history and status."""

from __future__ import annotations

import json

from tests.desk.conftest import GM_PW, PLAYERS, PW


def test_wrong_turn_number_is_refused_on_cli_and_by_mail(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    for p in PLAYERS:
        t.order(p)
    before = t.export()
    proc = pbm.cli("turn", "run", "g1", "--turn", "2", check=False)
    assert proc.returncode != 0 and "g1 is at round 1, not 2: nothing was run" in proc.stderr
    reply = t.gm("turn run g1 2")
    assert "REFUSED" in reply and "g1 is at round 1, not 2: nothing was run" in reply
    reply = t.gm("turn run g1")
    assert "REFUSED" in reply and "turn run NAME N" in reply
    pbm.settle()
    assert t.export() == before and t.runs() == 0
    assert t.mails("alice", "round 1 report") == []
    reply = t.gm("turn run g1 1")
    assert "g1: round 1 processed" in reply and "now open: round 2" in reply
    t.wait_mails("alice", "round 1 report")
    # the same mail again (stale) cannot run round 2
    reply = t.gm("turn run g1 1")
    assert "REFUSED" in reply and "g1 is at round 2, not 1" in reply
    assert t.runs() == 1
    rows = pbm.sql("SELECT actor, detail FROM audit_log WHERE action = 'turn run'")
    assert rows == [("gm", "g1 round 1")]


def test_rollback_restores_the_exact_earlier_state(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    for p in PLAYERS:
        t.order(p)
    before = t.export()
    row = "SELECT turn, turn_seed, rng_state, status, deadline FROM games WHERE name = 'g1'"
    before_row, before_state = pbm.sql(row), pbm.state("g1")
    pbm.run_turn("g1", "--turn", "1")
    report1 = pbm.text(t.wait_mails("bob", "round 1 report")[0])
    assert t.export() != before
    # --same-seed: the GM corrects an error and runs the round again with its dice
    # (without the flag the round gets a new seed: tests/reliability/test_hostile_rollback.py)
    proc = pbm.cli("turn", "rollback", "g1", "1", "--same-seed")
    assert "g1 is back before round 1, with the same seed" in proc.stdout
    assert t.export() == before  # state, turn, options, deadline: exactly as before
    assert pbm.sql(row) == before_row  # and the seed and random stream of round 1
    assert pbm.state("g1") == before_state
    notice = pbm.flat(t.wait_mails("alice", "round 1 rolled back")[0])
    assert "orders held for round 1 are kept" in notice
    status = t.player("alice", "pbm", "status g1")
    assert "GIVE 3 TO bob" in status
    # the same orders and the same seed: running it again gives the same report
    pbm.run_turn("g1", "--turn", "1")
    again = pbm.text(t.wait_mails("bob", "round 1 report", count=2)[1])
    def strip(text: str) -> str:
        return text.split("SHA-256 of the seed of round 2")[0]  # the next round's seed is new

    assert strip(again) == strip(report1)
    # nothing left to roll back past the open turn; the refusal changes nothing
    after = t.export()
    reply = t.gm("turn rollback g1 2")
    assert "REFUSED" in reply and "no processed round 2" in reply
    assert t.export() == after
    # by mail from the GM
    reply = t.gm("turn rollback g1 1")
    assert "g1 is back before round 1" in reply
    assert t.export() == before
    actions = [a for (a,) in pbm.sql("SELECT action FROM audit_log WHERE action = 'turn rollback'")]
    assert actions == ["turn rollback", "turn rollback"]


def test_gm_commands_from_others_or_with_a_wrong_password_change_nothing(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    before = t.export()
    games = pbm.cli("game", "list").stdout
    attempts = [
        ("alice@example.org", PW),  # a player, with her own good password
        ("gm@example.org", "not-the-password"),  # the GM address, wrong password
    ]
    for frm, pw in attempts:
        for line in ("game new giveaway stolen", "game pause g1", "turn run g1 1", "game set g1 early=on", "do g1 JOIN", "game remove g1 bob"):
            reply = t.gm(line, password=pw, frm=frm)
            # (the sixth wrong GM password in a row is not even checked: throttle.py)
            assert "REFUSED" in reply or "does not match" in reply or "Too many failed password attempts" in reply, reply
            assert "nothing was done" in reply
    pbm.settle()
    assert t.export() == before
    assert pbm.cli("game", "list").stdout == games
    assert pbm.sql("SELECT count(*) FROM games WHERE name = 'stolen'")[0][0] == 0
    refused = pbm.sql("SELECT actor FROM audit_log WHERE action = 'gm refused'")
    assert len(refused) == 6 and {a for (a,) in refused} == {"alice"}
    assert pbm.sql("SELECT count(*) FROM audit_log WHERE action = 'bad password'")[0][0] == 6


def test_gm_desk_by_mail(table_stopped):
    t = table_stopped.setup(join=False)
    pbm = t.pbm
    reply = t.gm("game new giveaway g2 no_order=split remind=12h deadline every 3 days 12:00 Europe/Zurich")
    assert "giveaway game g2 created" in reply and "remind=12h" in reply
    reply = t.gm("game new giveaway g3 colour=blue")
    assert "REFUSED" in reply and "giveaway has no option 'colour'" in reply and "nothing was changed" in reply
    assert pbm.sql("SELECT count(*) FROM games WHERE name = 'g3'")[0][0] == 0
    reply = t.gm("game add g2 alice\ngame add g2 bob\ngame add g2 carol\ngame add g2 nobody")
    assert reply.count("added to g2") == 3 and "no account named nobody" in reply
    assert "REFUSED" in reply.split("game add g2 nobody")[1]
    reply = t.gm("game remove g2 carol")
    assert "carol removed from g2" in reply
    reply = t.gm("game pause g2")
    assert "g2 is paused" in reply
    t.wait_mails("alice", "g2 is paused")
    refused = t.player("bob", "g2", "GIVE 3 TO alice")
    assert "g2 is paused; nothing was done" in refused
    reply = t.gm("game resume g2\ngame deadline g2 every Sunday 18:00 UTC\ngame set g2 early=maybe")
    assert "g2 is running again" in reply and "deadline every Sunday 18:00 UTC" in reply
    assert "'maybe' is not on or off" in reply
    t.wait_mails("bob", "g2: the deadline has changed")
    reply = t.gm("game deadline g2 every Funday 18:00")
    assert "REFUSED" in reply and "'Funday' is not a day of the week" in reply
    reply = t.gm("game new giveaway g2")
    assert "REFUSED" in reply and "exists already" in reply
    reply = t.gm("game set g2 no_order=forfeit")
    assert "REFUSED" in reply and "fixed when the game was created" in reply
    audit = pbm.cli("audit", "--game", "g2").stdout
    for action in ("game new", "game set", "game add", "game remove", "game pause", "game resume"):
        assert f" gm               {action}" in audit, audit
    assert GM_PW not in audit
    # the game's own GM operations: an agora game, the GM creates an NPC
    t.gm("game new agora_rpg town")
    reply = t.gm("do town GM NPC Bartender")
    assert "REFUSED" not in reply, reply
    state = json.loads(pbm.cli("game", "export", "town").stdout)["state"]
    assert "Bartender" in json.dumps(state)
    version = pbm.sql("SELECT version FROM games WHERE name = 'town'")
    reply = t.gm("do town GM NPC Bartender\ndo town GM FROB\ndo nowhere GM NPC X")
    assert reply.count("REFUSED") == 3 and "already taken" in reply and "unknown GM command" in reply
    assert "there is no game named nowhere" in reply and "nothing was changed" in reply
    assert pbm.sql("SELECT version FROM games WHERE name = 'town'") == version
    # the GM may also mail the game's own address with the GM password
    reply = pbm.text(pbm.mail("gm@example.org", "town", f"GM NPC Smith\n$${GM_PW}$$"))
    assert "REFUSED" not in reply and GM_PW not in reply
    # a player may not
    reply = pbm.text(pbm.mail("alice@example.org", "town", f"GM NPC Thief\n$${PW}$$"))
    assert "only the Game Master" in reply
    rows = pbm.sql("SELECT actor, detail FROM audit_log WHERE action = 'game do' ORDER BY id")
    assert [a for a, _ in rows] == ["gm", "gm"]
    assert rows[0][1] == "town: GM NPC Bartender" and rows[1][1].startswith("town: GM NPC Smith (mail ")
    state = json.loads(pbm.cli("game", "export", "town").stdout)["state"]
    assert "Smith" in json.dumps(state) and "Thief" not in json.dumps(state)


def test_history_and_status_by_mail(table_stopped):
    t = table_stopped.setup()
    pbm = t.pbm
    reply = t.player("alice", "pbm", "history g1")
    assert "REFUSED" in reply and "no round of g1 has been processed yet" in reply
    t.order("alice")
    status = t.player("alice", "pbm", "status g1")
    assert "Open round: 1" in status and "GIVE 3 TO bob" in status and "Next deadline: Sat 2026-11-21 03:00 UTC" in status
    published = status.split("SHA-256 of the seed of round 1:")[1].split()[0]
    t.order("bob")
    t.order("carol")
    pbm.run_turn("g1", "--turn", "1")
    report = pbm.text(t.wait_mails("carol", "round 1 report")[0])
    reply = t.player("carol", "pbm", "history g1")
    assert "the report of round 1" in reply
    body = report.split("Hello carol,", 1)[-1].strip()
    # the mail starts with the reader's next action (issue 29); the report itself follows it
    assert body.startswith("Your orders for round 2 are due")
    body = body.split("\n\n", 1)[1]
    assert body.split("Next deadline")[0].strip()[:200] in reply
    assert "round 1: processed" in reply and "round 2: open" in reply
    import hashlib
    revealed = reply.split("round 1: processed")[1].split("seed:")[1].split()[0]
    assert hashlib.sha256(bytes.fromhex(revealed)).hexdigest() == published
    reply = t.player("carol", "pbm", "history g1 7")
    assert "REFUSED" in reply and "no processed round 7; processed: 1" in reply
    # without the password: nothing is shown
    plain = pbm.text(pbm.mail("carol@example.org", "pbm", "status g1"))
    assert "REFUSED" in plain and "needs your password" in plain


def test_the_same_desk_on_the_command_line(table_stopped):
    t = table_stopped.setup(join=False)
    pbm = t.pbm
    out = pbm.cli("game", "set", "g1", "early=on", "grace=90m", "remind=0").stdout
    assert "early=on grace=90m remind=0" in out
    bad = pbm.cli("game", "set", "g1", "grace=soon", check=False)
    assert bad.returncode != 0 and "'soon' is not a duration" in bad.stderr and "nothing was changed" in bad.stderr
    for p in PLAYERS:
        assert "added to g1" in pbm.cli("game", "add-player", "g1", p).stdout
    assert "bob removed from g1" in pbm.cli("game", "remove-player", "g1", "bob").stdout
    assert "g1 is paused" in pbm.cli("game", "pause", "g1").stdout
    again = pbm.cli("game", "pause", "g1", check=False)
    assert again.returncode != 0 and "g1 is paused, not running" in again.stderr
    assert "running again" in pbm.cli("game", "resume", "g1").stdout
    out = pbm.cli("game", "deadline", "g1", "every", "Sunday", "18:00", "Europe/Zurich").stdout
    assert "deadline every Sunday 18:00 Europe/Zurich; next Sun 2026-11-22 17:00 UTC" in out
    nothing = pbm.cli("game", "history", "g1", check=False)
    assert nothing.returncode != 0 and "no round of g1 has been processed yet" in nothing.stderr
    audit = pbm.cli("audit", "--game", "g1").stdout
    for action in ("game set", "game add", "game remove", "game pause", "game resume"):
        assert f" cli              {action}" in audit, audit
    assert "alice" in pbm.cli("game", "show", "g1").stdout
