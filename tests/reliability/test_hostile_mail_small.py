"""Smaller mail-side findings of the third hostile-input run (issue 41, item 6).

- an rmpm abbreviation in compatibility characters (superscript ``²³``,
  fullwidth ``ｂｄ``) was accepted when no player had its plain twin: it is
  refused, saying how to write it;
- for a sender that proved nothing, ordinary words of six letters or more
  were masked in the echo as possible passwords (``please mail me the rules
  of ****``): only a word that can be a password is masked, never a game's
  kind or name nor a word of letters;
- the reply to a mail of press only, sent to a game, named only that mail in
  References, not the game's thread root that every mail of a game names.

All through the real server: mail by SMTP on loopback, replies from the sink."""

from __future__ import annotations

from tests.harness import PbmServer
from tests.reliability.test_hostile_misc import PW, accounts, addr


def test_an_abbreviation_in_compatibility_characters_is_refused(pbm: PbmServer):
    accounts(pbm, "alice", "bob")
    pbm.new_game("rmpm", "world")
    for abbr, plain in (("\u00b2\u00b3", "23"), ("\uff42\uff44", "bd")):  # superscript 2 3; fullwidth b d
        flat = pbm.flat(pbm.mail(addr("alice"), "world", f"$${PW['alice']}$$\nJOIN {abbr} 01-05 25-10 blue dragon"))
        assert "REFUSED" in flat and "accepted" not in flat, flat
        assert f"the abbreviation '{abbr}' is written with compatibility characters" in flat, flat
        assert f"write it as '{plain}'" in flat, flat
    assert not pbm.state("world")["players"]
    # written plainly, it is taken; and the superscript form still meets it
    assert "accepted: you join as 23" in pbm.text(
        pbm.mail(addr("alice"), "world", f"$${PW['alice']}$$\nJOIN 23 01-05 25-10 blue dragon"))
    flat = pbm.flat(pbm.mail(addr("bob"), "world", f"$${PW['bob']}$$\nJOIN \u00b2\u00b3 01-06 25-11 Irata"))
    assert "REFUSED" in flat and "looks like the existing abbreviation '23'" in flat, flat
    assert len(pbm.state("world")["players"]) == 1


def test_ordinary_words_of_an_unproven_mail_are_echoed_as_written(pbm: PbmServer):
    accounts(pbm, "alice")
    pbm.new_game("giveaway", "winter26")

    def echo(line: str) -> str:
        # no password: the mail proves nothing, its lines are refused and echoed
        return pbm.flat(pbm.mail(addr("alice"), "pbm", line))

    # a game's kind, a game's name, words of letters (with a sentence's punctuation)
    for line in ("please mail me the rules of giveaway", "tell me about winter26 today",
                 "what wonderful weather, thanks!", "(giveaway) rules please."):
        text = echo(line)
        assert f"> {line}" in text and "****" not in text, text
    # what can be a password is still masked, checked or not
    text = echo("pass maybe-42x")
    assert "> pass ****" in text and "maybe-42x" not in text, text
    text = echo(f"my password is {PW['alice']} sorry")
    assert "> my password is **** sorry" in text and PW["alice"] not in text, text


def test_the_reply_to_press_names_the_games_thread_root(pbm: PbmServer):
    accounts(pbm, "alice", "bob")
    pbm.new_game("giveaway", "ring")
    for who in ("alice", "bob"):
        pbm.cli("game", "add-player", "ring", who)
    (gid,) = pbm.sql("SELECT id FROM games WHERE name = 'ring'")[0]
    root = f"<game.ring.{gid}@pbm.test>"
    # a mail of press only, and one of a pbm@ command sent to the game by mistake
    for body in ("PRESS TO bob\nShall we ring?\nENDPRESS", "games"):
        sent = pbm.send(addr("alice"), "ring", f"{body}\n$${PW['alice']}$$", subject="a word")
        reply = pbm.reply_to(sent)
        refs = str(reply["References"]).split()
        assert refs[0] == root and refs[-1] == sent == str(reply["In-Reply-To"]), (body, refs)
    # the relayed press itself names it too (as before)
    pbm.settle()
    [press] = [m for m in pbm.inbox(addr("bob")) if ": press from " in str(m["Subject"])]
    assert str(press["References"]).split()[0] == root
