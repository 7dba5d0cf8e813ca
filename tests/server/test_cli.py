"""The GM's command line works for every registered game kind."""

import json
import re

import pytest

from games import KINDS, get_rules


@pytest.mark.parametrize("kind", list(KINDS))
def test_new_list_show_export_import_turn(pbm, kind, tmp_path):
    rules = get_rules(kind)
    out = pbm.cli("game", "new", kind, f"g-{kind}").stdout
    assert f"g-{kind}@pbm.test" in out
    listing = pbm.cli("game", "list").stdout
    assert f"g-{kind}" in listing and kind in listing
    shown = pbm.cli("game", "show", f"g-{kind}").stdout
    assert shown.strip()
    exported = pbm.cli("game", "export", f"g-{kind}").stdout
    doc = json.loads(exported)
    assert doc["kind"] == kind and doc["name"] == f"g-{kind}"
    path = tmp_path / "export.json"
    path.write_text(exported)
    pbm.cli("game", "import", kind, f"copy-{kind}", str(path))
    again = json.loads(pbm.cli("game", "export", f"copy-{kind}").stdout)
    assert again["state"] == doc["state"] and again["options"] == doc["options"]
    run = pbm.cli("turn", "run", f"g-{kind}", check=False)
    if rules.has_turns:
        # the GM sees the turn run (or, e.g. with too few players, the game
        # keep it open, the CLI saying why and that the deadline stays) -- never a crash
        assert run.returncode == 0 and run.stderr == "", run
        said = re.fullmatch(
            rf"g-{kind}: {rules.turn_name} 1 (processed|not run: the game did not complete its turn \(.+\); "
            r"the deadline stays .+?); "
            r"(\d+) notices? queued(; the game is finished)?\n",
            run.stdout,
        )
        assert said, run.stdout
        after = pbm.sql("SELECT count(*) FROM snapshots s JOIN games g ON g.id = s.game_id "
                        "WHERE g.name = :n AND s.phase = 'after'", n=f"g-{kind}")[0][0]
        assert after == 1
        turn = pbm.sql("SELECT turn FROM games WHERE name = :n", n=f"g-{kind}")[0][0]
        assert turn == (2 if said.group(1) == "processed" else 1)
    else:
        assert run.returncode != 0 and "no turns" in run.stderr


def test_refusals_are_specific(pbm):
    chess = pbm.cli("game", "new", "chess", "x", check=False)
    assert chess.returncode != 0 and "chess" in chess.stderr
    bad = pbm.cli("game", "new", "giveaway", "pbm", check=False)
    assert bad.returncode != 0 and "cannot be a game name" in bad.stderr
    pbm.cli("game", "new", "giveaway", "ring")
    dup = pbm.cli("game", "new", "giveaway", "ring", check=False)
    assert dup.returncode != 0 and "exists already" in dup.stderr
    opt = pbm.cli("game", "new", "giveaway", "ring2", "--option", "nonsense=1", check=False)
    assert opt.returncode != 0 and "has no option 'nonsense'" in opt.stderr
    dl = pbm.cli("game", "new", "giveaway", "ring3", "--deadline", "every Funday 03:00", check=False)
    assert dl.returncode != 0 and "not a day of the week" in dl.stderr
    missing = pbm.cli("turn", "run", "nosuch", check=False)
    assert missing.returncode != 0 and "no game named nosuch" in missing.stderr
    broken = pbm.tmp / "broken.json"
    broken.write_text("{not json")
    imp = pbm.cli("game", "import", "giveaway", "ring4", str(broken), check=False)
    assert imp.returncode != 0 and "is not JSON" in imp.stderr
    names = [r[0] for r in pbm.sql("SELECT name FROM games")]
    assert names == ["ring"]


def test_deadline_is_time_zone_aware(pbm):
    out = pbm.cli("game", "new", "giveaway", "zurich", "--deadline", "at 2030-07-01 12:00 Europe/Zurich").stdout
    assert "2030-07-01 10:00 UTC" in out  # summer time: UTC+2


def test_a_bare_state_is_imported_at_the_games_own_turn(pbm):
    """A hand-written giveaway state in round 5 is imported as round 5, so
    its report and seed lines name round 5, not round 1 (issue 17.5)."""
    from games.giveaway.model import PLAYING, Game, Player

    for h in ("ann", "ben", "cat"):
        pbm.register(h, f"{h}-secret-1")
    state = Game(round=5, status=PLAYING, players=[Player(h, 3) for h in ("ann", "ben", "cat")]).to_state()
    path = pbm.tmp / "round5.json"
    path.write_text(json.dumps(state))
    out = pbm.cli("game", "import", "giveaway", "late", str(path)).stdout
    assert "imported at turn 5" in out
    shown = pbm.text(pbm.mail("ann@example.org", "pbm", "status late\n$$ann-secret-1$$"))
    assert "SHA-256 of the seed of round 5" in shown, shown
    run = pbm.cli("turn", "run", "late").stdout
    assert "round 5 processed" in run, run
    pbm.settle()
    report = next(m for m in pbm.inbox("ann@example.org") if "round 5" in str(m["Subject"]))
    assert "Random seed of round 5:" in pbm.text(report)
