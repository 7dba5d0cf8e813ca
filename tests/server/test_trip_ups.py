"""What a new player still tripped over (issue 28, items 3, 4, 5, 9, 10, 11),
over SMTP against a real server: history after a rollback, a past curio
position, press and observer mail in the game's thread, the GM's actions
told and answered plainly, Subjects and footers that say what they mean,
and `pbm serve` starting quietly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pbm_server.mail.compose import is_link_line
from tests.harness import PbmServer
from tests.server.test_curio_records import PW as CURIO_PW
from tests.server.test_curio_records import setup as curio_setup
from tests.server.weeks import PW, addr, players, send

ROOT = Path(__file__).resolve().parents[2]
HEX64 = re.compile(r"[0-9a-f]{64}")


def root_of(pbm: PbmServer, game: str) -> str:
    (gid,) = pbm.sql("SELECT id FROM games WHERE name = :n", n=game)[0]
    return f"<game.{game}.{gid}@{pbm.domain}>"


def rmpm_week1(pbm: PbmServer, deadline: str | None = None) -> None:
    """rmpm game week1: ann (bd) and bob (ir) joined; cat has an account."""
    players(pbm, "ann", "bob", "cat")
    pbm.new_game("rmpm", "week1", deadline=deadline)
    send(pbm, "ann", "week1", "JOIN bd 01-05 25-10 blue dragon")
    send(pbm, "bob", "week1", "JOIN ir 01-06 25-11 Irata")
    pbm.settle()


def subjects(pbm: PbmServer, who: str) -> list[str]:
    pbm.settle()
    return [str(m["Subject"]) for m in pbm.inbox(addr(who))]


# -- 3: history and a rolled-back turn --------------------------------------------

def test_history_never_sends_a_rolled_back_turn_as_the_last_and_marks_it(pbm):
    rmpm_week1(pbm)
    for _ in range(3):
        pbm.run_turn("week1")
    pbm.cli("turn", "rollback", "week1", "3")
    pbm.settle()
    reply = pbm.text(pbm.mail(addr("ann"), "pbm", f"history week1\n$${PW['ann']}$$"))
    assert "the report of week 2 and the list of weeks follow" in reply, reply
    assert "week1: report of week 2" in reply and "report of week 3" not in reply, reply
    listed = reply.split("week1: weeks", 1)[1]
    week3 = [ln for ln in listed.splitlines() if ln.startswith("week 3:")]
    assert len(week3) == 2, listed
    assert "ROLLED BACK" in week3[0] and "processed" in week3[0], listed
    assert week3[1].startswith("week 3: open"), listed
    # asked for by number, the voided report says it no longer holds
    old = pbm.text(pbm.mail(addr("ann"), "pbm", f"history week1 3\n$${PW['ann']}$$"))
    assert "report of week 3 (rolled back)" in old, old
    assert "this report no longer holds" in " ".join(old.split()), old
    # the same on the GM's command line
    cli = pbm.cli("game", "history", "week1").stdout
    assert "week1: report of week 2" in cli and "ROLLED BACK" in cli, cli


def test_the_rollback_mail_puts_the_hash_on_a_line_of_its_own(pbm):
    rmpm_week1(pbm)
    pbm.run_turn("week1")
    pbm.cli("turn", "rollback", "week1", "1")
    pbm.settle()
    [told] = [m for m in pbm.inbox(addr("ann")) if str(m["Subject"]) == "week1: week 1 rolled back"]
    text = pbm.text(told)
    lines = [ln for ln in text.splitlines() if HEX64.search(ln)]
    assert lines and all(HEX64.fullmatch(ln.strip()) for ln in lines), text
    # prose is wrapped at a word, not cut by a hanging indent
    body = text.split("-- \n", 1)[0]
    assert all(len(ln) <= 72 or HEX64.search(ln) or is_link_line(ln) for ln in body.splitlines()), text
    assert "\n  processed" not in text, text


# -- 4: curio show BOARD#N --------------------------------------------------------

def marked_squares(board: str) -> set[str]:
    """The squares marked ``*`` (just left of the cell) on the first board
    drawn in ``board`` (games/curio/view.ascii_board)."""
    lines = board.splitlines()
    letters = lines[0].split()
    found = set()
    for line in lines[1:]:
        parts = line.split()
        if not parts or not parts[0].isdigit():
            break
        for i, letter in enumerate(letters):
            if line[4 + 5 * i] == "*":
                found.add(f"{letter}{parts[0]}")
    return found


def test_a_past_curio_position_names_the_move_that_led_to_it(pbm):
    who = curio_setup(pbm)  # moves: a1-a2, e5-e4, then c2xc3 (a capture)
    reply = pbm.mail(who["bob"], "pbm", f"curio show 101#2\n$${CURIO_PW['bob']}$$")
    text = pbm.text(reply)
    assert "Move 2: Dark e5-e4." in text, text
    assert "c2-c3" not in text and "capturing" not in text, text
    html = pbm.html(reply) or ""
    assert "Move 2: Dark e5-e4." in html and "c2-c3" not in html, html
    # its squares are the ones marked on the board drawn
    assert marked_squares(text.split("Position after move 2:\n", 1)[1]) == {"e5", "e4"}, text
    # the board now still names the latest move
    now = pbm.text(pbm.mail(who["carol"], "pbm", "curio show 101"))
    assert "Last move: Light c2-c3, capturing" in now, now


# -- 5: press and observer mail thread with the game -------------------------------

def test_press_and_observer_mails_name_the_game_thread_root(pbm):
    players(pbm, "ann", "bob", "cat", "dan")
    pbm.new_game("giveaway", "gift")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "JOIN")
    watch = pbm.flat(pbm.mail(addr("dan"), "pbm", f"observe gift\n$${PW['dan']}$$"))
    assert "you now observe gift" in watch, watch
    send(pbm, "ann", "gift", "PRESS TO bob", "Shall we ring?", "ENDPRESS")
    for h in ("ann", "bob", "cat"):
        send(pbm, h, "gift", "GIVE 1 TO " + {"ann": "bob", "bob": "cat", "cat": "ann"}[h])
    pbm.run_turn("gift")
    root = root_of(pbm, "gift")
    [press] = [m for m in pbm.inbox(addr("bob")) if "press from ann" in str(m["Subject"])]
    observed = [m for m in pbm.inbox(addr("dan")) if str(m["Subject"]).startswith("[observer]")]
    assert observed
    for m in [press, *observed]:
        assert m["In-Reply-To"] == root, (m["Subject"], m["In-Reply-To"])
        assert str(m["References"]).split()[0] == root, (m["Subject"], m["References"])


# -- 9: the GM's actions ----------------------------------------------------------

def test_gm_capital_and_card_are_mailed_to_the_player_they_touch(pbm):
    rmpm_week1(pbm)
    pbm.register("gm", "gm-secret-99", email=pbm.gm_address)
    pbm.run_turn("week1")
    out = pbm.cli("game", "do", "week1", "GM CAPITAL bd 500").stdout
    assert "bd now has" in out and "1 notice queued" in out, out
    reply = pbm.flat(pbm.mail(pbm.gm_address, "pbm", "do week1 GM CARD ir MT 2\n$$gm-secret-99$$"))
    assert "ir now holds 2 MT" in reply, reply
    pbm.settle()
    [capital] = [m for m in pbm.inbox(addr("ann")) if "changed your capital" in str(m["Subject"])]
    assert str(capital["Subject"]) == "week1: the game master changed your capital (week 2)"
    assert "added 500 WCU to your capital" in pbm.flat(capital), pbm.text(capital)
    [card] = [m for m in pbm.inbox(addr("bob")) if "changed your cards" in str(m["Subject"])]
    assert "given you 2 MT cards: you now hold 2 MT" in pbm.flat(card), pbm.text(card)
    assert not [m for m in pbm.inbox(addr("bob")) if "capital" in str(m["Subject"])]
    assert not [m for m in pbm.inbox(addr("ann")) if "cards" in str(m["Subject"])]


def test_game_do_and_game_show_answer_what_is_wrong(pbm):
    rmpm_week1(pbm)
    done = pbm.cli("game", "do", "week1", "KIOSK 500", check=False)
    assert done.returncode == 1, done
    assert "register first" not in done.stdout + done.stderr, done.stdout
    assert "not a GM command of rmpm" in done.stdout and "did you mean 'GM KIOSK 500'?" in done.stdout, done.stdout
    shown = pbm.cli("game", "show", "week1", "--as", "nobody", check=False)
    assert shown.returncode != 0 and shown.stdout == "", shown
    assert shown.stderr.strip() == ("pbm: there is no account named 'nobody': --as takes the handle of a player "
                                    "of week1 (pbm account list lists the accounts)"), shown.stderr
    cat = pbm.cli("game", "show", "week1", "--as", "cat").stdout
    assert cat.startswith("(cat does not play in week1: this is what an observer sees)"), cat


def test_turn_run_counts_the_mails_that_went_out(pbm):
    rmpm_week1(pbm)
    pbm.mail(addr("cat"), "pbm", f"observe week1\n$${PW['cat']}$$")
    pbm.settle()
    before = len(pbm.all_sent())
    out = pbm.run_turn("week1").stdout
    pbm.settle()
    sent = len(pbm.all_sent()) - before
    assert sent == 3  # ann's and bob's reports, cat's observer copy
    assert "week 1 processed; 3 notices queued" in out, out


def test_turns_run_by_hand_keep_the_schedule(pbm):
    pbm.set_clock("2026-11-23T10:00:00+00:00")  # a Monday
    rmpm_week1(pbm, deadline="every Saturday 12:00 UTC")

    def deadline() -> str:
        return str(pbm.sql("SELECT next_deadline FROM games WHERE name = 'week1'")[0][0])[:16]

    assert deadline() == "2026-11-28 12:00"
    for _ in range(3):
        pbm.run_turn("week1")
        assert deadline() == "2026-11-28 12:00"  # not a week further for each run
    assert pbm.sql("SELECT turn FROM games WHERE name = 'week1'")[0][0] == 4
    # a run by hand when the deadline is less than half a week away: the next one
    # (the server's own clock stays behind: its mails of this run wait, so no settle)
    pbm.set_clock("2026-11-28T09:00:00+00:00")
    pbm.cli("turn", "run", "week1")
    assert deadline() == "2026-12-05 12:00"


# -- 10: Subjects and footers ----------------------------------------------------------

def test_subjects_say_who_and_what(pbm):
    rmpm_week1(pbm)
    press = send(pbm, "ann", "week1", "PRESS TO bob", "hello bob", "ENDPRESS")
    assert str(press["Subject"]) == "week1: your press sent to bob"
    pbm.settle()
    assert [s for s in subjects(pbm, "bob") if "press" in s] == ["week1: press from ann"]
    status = pbm.mail(addr("ann"), "pbm", f"status\n$${PW['ann']}$$")
    assert str(status["Subject"]) == "pbm-server: status of ann"
    status = pbm.mail(addr("ann"), "pbm", f"status week1\n$${PW['ann']}$$")
    assert str(status["Subject"]) == "pbm-server: status of week1"
    watch = pbm.mail(addr("cat"), "pbm", f"observe nosuch\nobserve week1\n$${PW['cat']}$$")
    assert str(watch["Subject"]) == "pbm-server: 1 line REFUSED (observe), answered: observe week1"
    # a curio challenge is sent, not accepted: only the opponent could accept it
    challenge = pbm.mail(addr("ann"), "pbm", f"curio challenge ann bob\n$${PW['ann']}$$")
    assert str(challenge["Subject"]) == "curio board 101: challenge sent"
    pbm.settle()
    for who in ("ann", "bob"):
        assert not [s for s in subjects(pbm, who) if "challenge accepted" in s.lower()]


def test_the_footer_never_wraps_inside_a_phrase(tmp_path):
    pbm = PbmServer(tmp_path, domain="play.example-games.org", gm_address="gm@example.org")
    try:
        pbm.start()
        reply = pbm.mail("zed@example.org", "pbm", "games")
        text = pbm.text(reply)
        footer = text.split("\n-- \n", 1)[1].strip("\n").splitlines()
        assert footer == [
            "pbm-server at play.example-games.org:",
            'mail "help" to pbm@play.example-games.org for the commands,',
            "\"help KIND\" for a game's rules, \"games\" for the games you can join.",
        ], footer
        pbm.stop()
    finally:
        pbm.close()


# -- 11: README and a quiet start ---------------------------------------------------------

def test_readme_first_steps_set_up_the_game_master():
    readme = (ROOT / "README.md").read_text()
    first = readme.split("## Installing it as a package", 1)[0]
    assert "PBM_GM_ADDRESS=gm@example.org" in first and "pbm account add --gm" in first
    # pyproject adds -q; a second -q hides the closing "N passed" line
    assert "pytest -q" not in readme and ".venv/bin/python -m pytest -n 2\n" in first
    assert '"--import-mode=importlib -q ' in (ROOT / "pyproject.toml").read_text()


def test_db_upgrade_says_which_migration_it_upgraded_to(tmp_path):
    pbm = PbmServer(tmp_path, fresh=True)
    try:
        first = pbm.cli("db", "upgrade")
        assert re.fullmatch(r"database at \S+ upgraded from empty to migration \w+\n", first.stdout), first.stdout
        assert "Running upgrade" not in first.stdout + first.stderr, first.stderr
        again = pbm.cli("db", "upgrade")
        assert again.stdout.endswith("is up to date\n"), again.stdout
    finally:
        pbm.close()


@pytest.mark.process
def test_serve_starts_with_one_migration_line_not_alembics(tmp_path):
    pbm = PbmServer(tmp_path, fresh=True, process=True)
    try:
        pbm.start()
        pbm.mail("zed@example.org", "pbm", "games")
        pbm.stop()
        log = pbm.serve_log()
        assert log.count("database upgraded from empty to migration") == 1, log
        assert "alembic" not in log and "Running upgrade" not in log, log
    finally:
        pbm.close()
