"""Look-alike names (issue 14.8), by mail through a real `pbm serve`: a handle
or an rmpm abbreviation that looks like an existing one is refused, and a
right-to-left override in an alias never reaches the other players."""

from __future__ import annotations

BIDI = "\u202e"


def test_a_handle_that_looks_like_an_existing_one_is_refused(pbm):
    pbm.register("alice", "alice-secret-1")

    for fake in ("aIice", "a1ice", "AL1CE"):
        reply = pbm.mail(f"{fake.lower()}-x@example.org", "pbm", f"register {fake} mallory-pw-1", subject="register")
        flat = pbm.flat(reply)
        assert f"'{fake}' looks like the existing handle 'alice'; choose another" in flat, flat
        assert "Confirm your address" not in pbm.text(reply)  # no code was mailed
    # a handle that merely shares letters is fine
    pbm.register("alicia", "alicia-secret-1")

    # two open requests for look-alike handles: the second to be confirmed loses
    first = pbm.mail("rnike@example.org", "pbm", "register rnike rnike-secret-1", subject="register")
    second = pbm.mail("mike@example.org", "pbm", "register mike mike-secret-1", subject="register")
    assert "registered as rnike" in pbm.text(pbm.confirm("rnike@example.org", first))
    late = pbm.flat(pbm.confirm("mike@example.org", second))
    assert "'mike' looks like the handle 'rnike', registered meanwhile" in late, late
    assert pbm.sql("SELECT handle FROM accounts WHERE email = 'mike@example.org'") == []

    # the command line refuses it too
    proc = pbm.cli("account", "add", "AIice", "other@example.org", "--password", "other-secret-1", check=False)
    assert proc.returncode != 0
    assert "'AIice' looks like the existing handle 'alice'" in proc.stdout + proc.stderr
    assert sorted(h for (h,) in pbm.sql("SELECT handle FROM accounts")) == ["alice", "alicia", "rnike"]


def test_an_rmpm_abbreviation_or_alias_that_looks_like_another_is_refused(pbm):
    alice = pbm.register("alice", "alice-secret-1")
    bob = pbm.register("bob", "bob-secret-22")
    pbm.new_game("rmpm", "world")
    text = pbm.text(pbm.mail(alice, "world", "$$alice-secret-1$$\nJOIN bd 01-05 25-10 blue dragon"))
    assert "accepted: you join as bd" in text, text

    # Cyrillic komi de (U+0501) beside a Latin b: 'bԁ' looks like 'bd'
    flat = pbm.flat(pbm.mail(bob, "world", "$$bob-secret-22$$\nJOIN b\u0501 01-06 25-11 Irata"))
    assert "REFUSED" in flat
    assert "'b\u0501' looks like the existing abbreviation 'bd' of blue dragon" in flat, flat
    # and a look-alike of the alias (Cyrillic o in 'blue dragon')
    flat = pbm.flat(pbm.mail(bob, "world", "$$bob-secret-22$$\nJOIN ir 01-06 25-11 blue drag\u043en"))
    assert "looks like the existing alias 'blue dragon'" in flat, flat
    assert len(pbm.state("world")["players"]) == 1

    text = pbm.text(pbm.mail(bob, "world", "$$bob-secret-22$$\nJOIN ir 01-06 25-11 Irata"))
    assert "accepted: you join as ir" in text, text


def test_a_right_to_left_override_in_an_alias_is_stripped(pbm):
    alice = pbm.register("alice", "alice-secret-1")
    mallory = pbm.register("mallory", "mallory-secret-1")
    pbm.new_game("rmpm", "world")
    assert "accepted" in pbm.text(pbm.mail(alice, "world", "$$alice-secret-1$$\nJOIN bd 01-05 25-10 blue dragon"))
    reply = pbm.text(pbm.mail(mallory, "world", f"$$mallory-secret-1$$\nJOIN mx 01-06 25-11 good {BIDI}reggub"))
    assert "accepted: you join as mx (good reggub)" in reply, reply
    assert BIDI not in reply

    pbm.run_turn("world")
    reports = [m for m in pbm.inbox(alice) if "report of week 1" in str(m["Subject"])]
    assert reports, [str(m["Subject"]) for m in pbm.inbox(alice)]
    text = pbm.text(reports[0])
    assert "mx good reggub" in text, text
    assert not any(BIDI in pbm.text(m) or BIDI in (pbm.html(m) or "") for m in pbm.all_sent())
