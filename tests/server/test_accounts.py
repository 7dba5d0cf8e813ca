"""Account commands to pbm@DOMAIN, over real SMTP."""


def test_register_help_and_games(pbm):
    email = pbm.register("alice", "wonderland1")
    reply = pbm.mail(email, "pbm", "help\ngames\nhelp giveaway")
    text = pbm.flat(reply)
    assert "register HANDLE PASSWORD" in text
    assert "No games are running yet." in text
    assert "Giveaway (giveaway)" in text
    # threaded to the mail it answers, marked as an automatic reply
    assert reply["Auto-Submitted"] == "auto-replied"
    assert reply["In-Reply-To"] and reply["In-Reply-To"] in reply["References"]
    assert reply["From"].endswith("<pbm@pbm.test>")


def test_register_refusals_name_the_problem(pbm):
    pbm.register("alice", "wonderland1")
    text = pbm.flat(pbm.mail("other@example.org", "pbm", "register alice another-pass"))
    assert "REFUSED" in text and "the handle alice is taken" in text
    text = pbm.flat(pbm.mail("alice@example.org", "pbm", "signup alice2 another-pass"))
    assert "already registered as alice" in text
    text = pbm.flat(pbm.mail("carol@example.org", "pbm", "register carol abc"))
    assert "at least 6 characters" in text
    text = pbm.flat(pbm.mail("carol@example.org", "pbm", "register 9carol password1"))
    assert "cannot be a handle" in text
    text = pbm.flat(pbm.mail("carol@example.org", "pbm", "register carol"))
    assert "expected: register HANDLE PASSWORD" in text
    rows = pbm.sql("SELECT handle FROM accounts ORDER BY id")
    assert [r[0] for r in rows] == ["alice"]


def test_password_change(pbm):
    email = pbm.register("bob", "first-pass1")
    pbm.secrets.update({"second-pass2", "wrong-old-pass"})
    text = pbm.flat(pbm.mail(email, "pbm", "password bob wrong-old-pass second-pass2"))
    assert "do not match; nothing was changed" in text
    text = pbm.flat(pbm.mail("mallory@example.org", "pbm", "password bob first-pass1 second-pass2"))
    assert "do not match; nothing was changed" in text
    text = pbm.flat(pbm.mail(email, "pbm", "password bob first-pass1 second-pass2"))
    assert "your password is changed" in text
    pbm.new_game("giveaway", "ring")
    ok = pbm.flat(pbm.mail(email, "ring", "JOIN\n$$second-pass2$$"))
    assert "does not match" not in ok
    old = pbm.flat(pbm.mail(email, "ring", "JOIN\n$$first-pass1$$"))
    assert "does not match the account bob" in old


def test_a_changed_password_is_not_remembered_by_the_worker(pbm):
    """The worker remembers passwords it verified (docs/security.md): after a
    change the old one, verified a moment ago, is refused all the same."""
    email = pbm.register("cara", "first-pass1")
    pbm.secrets.add("second-pass2")
    pbm.new_game("giveaway", "ring")
    assert "does not match" not in pbm.flat(pbm.mail(email, "ring", "JOIN\n$$first-pass1$$"))
    assert "does not match" not in pbm.flat(pbm.mail(email, "pbm", "games\n$$first-pass1$$"))
    assert "your password is changed" in pbm.flat(pbm.mail(email, "pbm", "password cara first-pass1 second-pass2"))
    old = pbm.flat(pbm.mail(email, "ring", "LEAVE\n$$first-pass1$$"))
    assert "does not match the account cara" in old
    assert pbm.sql("SELECT count(*) FROM memberships m JOIN accounts a ON a.id = m.account_id WHERE a.handle = 'cara'")[0][0] == 1


def test_subject_line_carries_a_command(pbm):
    reply = pbm.mail("dora@example.org", "pbm", "", subject="register dora explorer99")
    assert "almost done" in pbm.flat(reply)
    assert "registered as dora" in pbm.flat(pbm.mail("dora@example.org", "pbm", "", subject=f"confirm {pbm.code_in(reply)}"))
    # the password in the Subject is not echoed in the reply's Subject either
    assert "explorer99" not in reply["Subject"]


def test_unknown_command_and_empty_mail(pbm):
    text = pbm.flat(pbm.mail("x@example.org", "pbm", "frobnicate now"))
    assert "unknown command 'frobnicate'" in text and "register" in text
    text = pbm.flat(pbm.mail("x@example.org", "pbm", "\n\n", subject=""))
    assert "held no commands" in text


def test_wrong_password_to_a_game_changes_nothing(pbm):
    alice = pbm.register("alice", "wonderland1")
    pbm.new_game("giveaway", "ring")
    before = pbm.sql("SELECT g.version, d.state FROM games g JOIN game_documents d ON d.game_id = g.id WHERE g.name='ring'")
    pbm.secrets.add("not-my-password")
    text = pbm.flat(pbm.mail(alice, "ring", "JOIN\n$$not-my-password$$"))
    assert "does not match the account alice" in text and "nothing was done" in text
    assert pbm.sql("SELECT g.version, d.state FROM games g JOIN game_documents d ON d.game_id = g.id WHERE g.name='ring'") == before
    # the right password from another address is refused too
    text = pbm.flat(pbm.mail("mallory@example.org", "ring", "JOIN\n$$wonderland1$$"))
    assert "No account is registered for mallory@example.org" in text
    assert pbm.sql("SELECT g.version, d.state FROM games g JOIN game_documents d ON d.game_id = g.id WHERE g.name='ring'") == before
    audit = pbm.sql("SELECT action FROM audit_log WHERE action='bad password'")
    assert len(audit) == 2


def test_passwords_are_stored_hashed(pbm):
    pbm.register("alice", "wonderland1")
    (stored,) = pbm.sql("SELECT password_hash FROM accounts WHERE handle='alice'")[0]
    assert stored.startswith("$argon2id$") and "wonderland1" not in stored


def test_a_mistyped_register_line_does_not_echo_the_password(pbm):
    pbm.secrets.add("typo-secret7")
    reply = pbm.mail("zed@example.org", "pbm", "rgister zed typo-secret7")
    text = pbm.flat(reply)
    assert "> rgister zed ****" in text and "unknown command 'rgister'" in text


def test_the_readme_first_mail_with_pbm_mail_send(pbm):
    pbm.secrets.add("readme-pass1")
    out = pbm.cli("mail", "send", "--from", "newbie@example.org", "--to", "pbm@pbm.test",
                  "register newbie readme-pass1", "help")
    assert "sent <" in out.stdout
    reply = pbm.wait_for("newbie@example.org", 1)[0]
    text = pbm.flat(reply)
    assert "almost done" in text and "register HANDLE PASSWORD" in text
    assert "registered as newbie" in pbm.flat(pbm.confirm("newbie@example.org", reply))
