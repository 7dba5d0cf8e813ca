"""The pbm@ commands are one list: what a sender may use is what the
"unknown command" reply names, what ``help`` shows, and what the Subject may
hold.  Over real SMTP."""

import re

from pbm_server.commands.dispatch import REGISTRY
from pbm_server.commands.registry import Audience

GM_PW = "gm-secret9"
PW = "wonderland1"


def commands_named(text: str) -> list[str]:
    m = re.search(r"commands here: ([a-z, ]+) \(game commands", text)
    assert m, text
    return m.group(1).split(", ")


def test_unknown_command_lists_every_command_the_sender_may_use(pbm):
    anyone = ["confirm", "forgot", "games", "help", "info", "password", "register", "reset", "signup", "undo",
              "unsubscribe", "who"]
    player = sorted(anyone + ["absent", "email", "history", "notify", "observe", "settings", "status", "subscribe", "summary",
                              "timezone", "unobserve", "ready", "vote", "available", "unavailable", "resign",
                              "take"])
    gm = sorted(player + ["do", "game", "turn", "offer"])
    # the registry says the same (a new command shows up in the lists by itself)
    assert sorted(n for c in REGISTRY if c.audience is Audience.ANYONE for n in c.names) == anyone
    assert sorted(n for c in REGISTRY for n in c.names) == gm

    stranger = pbm.flat(pbm.mail("x@example.org", "pbm", "frobnicate now"))
    assert commands_named(stranger) == anyone
    alice = pbm.register("alice", PW)
    assert commands_named(pbm.flat(pbm.mail(alice, "pbm", f"stauts g1\n$${PW}$$"))) == player
    pbm.register("gm", GM_PW, email="gm@example.org")
    assert commands_named(pbm.flat(pbm.mail("gm@example.org", "pbm", f"trun run g1 1\n$${GM_PW}$$"))) == gm


def test_help_shows_what_the_sender_may_use(pbm):
    alice = pbm.register("alice", PW)
    text = pbm.text(pbm.mail(alice, "pbm", "help"))
    for cmd in REGISTRY:
        for syntax, _ in cmd.rows:
            assert (syntax in text) == (cmd.audience is not Audience.GM), syntax
    assert "help KIND                    a game's rules and commands (rmpm, curio," in text
    pbm.register("gm", GM_PW, email="gm@example.org")
    text = pbm.text(pbm.mail("gm@example.org", "pbm", f"help\n$${GM_PW}$$"))
    assert "Game master commands" in text and "turn rollback NAME N         back to just before turn N" in text


def test_a_subject_holding_a_command_runs_it(pbm):
    alice = pbm.register("alice", PW)
    pbm.new_game("giveaway", "g1")
    reply = pbm.mail(alice, "pbm", f"$${PW}$$", subject="status g1")
    text = pbm.flat(reply)
    assert "> status g1" in text and "the state of g1 as you see it follows" in text
    assert "Giveaway game g1: running" in text
    # in a reply or a forward, the Subject is the old mail's: never a command
    for prefix in ("Re: ", "AW: ", "Fwd: ", "SV: ", "WG: "):
        text = pbm.flat(pbm.mail(alice, "pbm", f"$${PW}$$", subject=prefix + "status g1"))
        assert "held no commands" in text and "the state of g1" not in text, prefix
    # a Subject that merely starts with a word like "game" is not the GM's command
    text = pbm.flat(pbm.mail(alice, "pbm", f"games\n$${PW}$$", subject="Game question"))
    assert "game(s) listed below" in text and "game master commands are accepted only" not in text
    assert not pbm.sql("SELECT * FROM audit_log WHERE action = 'gm refused'")
