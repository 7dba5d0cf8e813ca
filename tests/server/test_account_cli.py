"""The GM's `pbm account list/show/set-password/set-email/remove`: each does
what it says, writes an audit entry, and a bad argument gets one clear line
and a non-zero exit, never a traceback."""

from __future__ import annotations


def audit_actions(pbm) -> list[tuple[str, str]]:
    return [(a, d) for a, d in pbm.sql("SELECT action, detail FROM audit_log WHERE actor = 'cli' ORDER BY id")]


def refused(proc, words: str, usage: bool = False) -> None:
    """One line saying what was wrong (a usage error: click's usage line, then its one Error: line)."""
    assert proc.returncode != 0, proc
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("Error:")] if usage \
        else proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr


def test_list_and_show(pbm):
    pbm.register("gm", "gm-password-1", email=pbm.gm_address)
    alice = pbm.register("alice", "alice-pass-1")
    pbm.register("bob", "bob-pass-22")
    pbm.new_game("giveaway", "ring")
    pbm.mail(alice, "ring", "JOIN\n$$alice-pass-1$$")
    pbm.mail(alice, "pbm", "timezone Europe/Zurich\n$$alice-pass-1$$")
    pbm.mail(alice, "pbm", "forgot alice")
    out = pbm.cli("account", "list").stdout.splitlines()
    assert [line.split()[0] for line in out] == ["alice", "bob", "gm"]
    assert "alice@example.org" in out[0] and out[2].endswith("(game master)")
    shown = pbm.cli("account", "show", "ALICE").stdout
    assert "address:     alice@example.org" in shown
    assert "time zone:   Europe/Zurich" in shown
    assert "plays in:    ring" in shown
    assert "open code:   reset to alice@example.org" in shown
    assert ("account list", "3 account(s)") in audit_actions(pbm)
    assert ("account show", "alice") in audit_actions(pbm)
    refused(pbm.cli("account", "show", "nobody", check=False), "there is no account 'nobody'")


def test_set_password_reads_stdin_never_argv(pbm):
    alice = pbm.register("alice", "alice-pass-1")
    pbm.secrets.add("gm-chosen-pw9")
    done = pbm.cli("account", "set-password", "alice", input="gm-chosen-pw9\n")
    assert done.stdout.strip() == "the password of alice is set"
    assert "gm-chosen-pw9" not in done.stdout
    pbm.new_game("giveaway", "ring")
    assert "does not match" not in pbm.flat(pbm.mail(alice, "ring", "JOIN\n$$gm-chosen-pw9$$"))
    assert "does not match the account alice" in pbm.flat(pbm.mail(alice, "ring", "LEAVE\n$$alice-pass-1$$"))
    assert ("account set-password", "alice") in audit_actions(pbm)
    assert all("gm-chosen-pw9" not in d for _, d in audit_actions(pbm))
    # a password as an argument is not taken
    argv = pbm.cli("account", "set-password", "alice", "gm-chosen-pw9", check=False)
    refused(argv, "the password is never taken from the command line")
    assert "gm-chosen-pw9" not in argv.stderr
    refused(pbm.cli("account", "set-password", "alice", input="abc\n", check=False), "at least 6 characters")
    refused(pbm.cli("account", "set-password", "alice", input="", check=False), "no password on standard input")
    refused(pbm.cli("account", "set-password", "zed", input="whatever-1\n", check=False), "there is no account 'zed'")


def test_set_email(pbm):
    pbm.register("gm", "gm-password-1", email=pbm.gm_address)
    alice = pbm.register("alice", "alice-pass-1")
    pbm.register("bob", "bob-pass-22")
    done = pbm.cli("account", "set-email", "alice", "Alice@New.Example")
    assert done.stdout.strip() == "alice is now at alice@new.example (was alice@example.org)"
    assert "your time zone is UTC" in pbm.flat(pbm.mail("alice@new.example", "pbm", "timezone\n$$alice-pass-1$$"))
    assert "No account is registered" in pbm.flat(pbm.mail(alice, "pbm", "timezone\n$$alice-pass-1$$"))
    assert ("account set-email", "alice: alice@example.org -> alice@new.example") in audit_actions(pbm)
    refused(pbm.cli("account", "set-email", "alice", "bob@example.org", check=False), "registered already (as bob)")
    refused(pbm.cli("account", "set-email", "alice", "no-at-sign", check=False), "is not an e-mail address")
    refused(pbm.cli("account", "set-email", "alice", "x@pbm.test", check=False), "an address of this server")
    refused(pbm.cli("account", "set-email", "gm", "gm2@example.org", check=False), "lives at PBM_GM_ADDRESS")
    refused(pbm.cli("account", "set-email", "alice", check=False), "Missing argument 'ADDRESS'", usage=True)


def test_remove(pbm):
    alice = pbm.register("alice", "alice-pass-1")
    pbm.register("bob", "bob-pass-22")
    pbm.register("carol", "carol-pass-3")
    pbm.new_game("giveaway", "ring")
    pbm.mail(alice, "ring", "JOIN\n$$alice-pass-1$$")
    pbm.mail("bob@example.org", "ring", "JOIN\n$$bob-pass-22$$")
    pbm.mail("carol@example.org", "pbm", "observe ring\n$$carol-pass-3$$")
    refused(pbm.cli("account", "remove", "alice", check=False),
            "alice plays in ring: take them out first (pbm game remove-player NAME alice); nothing was changed")
    assert pbm.sql("SELECT email FROM accounts WHERE handle = 'alice'")[0][0] == alice

    # never played: gone, the handle free again
    assert pbm.cli("account", "remove", "carol").stdout.strip() == "carol removed"
    assert pbm.sql("SELECT count(*) FROM accounts WHERE handle = 'carol'")[0][0] == 0
    assert pbm.sql("SELECT count(*) FROM observers")[0][0] == 0

    # played before: address and password gone, handle reserved
    pbm.cli("game", "remove-player", "ring", "bob")
    said = pbm.cli("account", "remove", "bob").stdout
    assert "bob removed: its address and password are gone; the handle stays reserved" in said
    assert "bob@example.org" not in pbm.cli("account", "list").stdout
    assert "(removed)" in pbm.cli("account", "list").stdout
    text = pbm.flat(pbm.mail("bob@example.org", "pbm", "register bob another-pw1"))
    assert "the handle bob is taken" in text
    pbm.secrets.add("another-pw1")
    # the address is free for a new account
    assert "almost done" in pbm.flat(pbm.mail("bob@example.org", "pbm", "register bobby another-pw1"))
    refused(pbm.cli("account", "remove", "bob", check=False), "was removed")
    actions = [a for a, _ in audit_actions(pbm)]
    assert actions.count("account remove") == 2
