"""`pbm mail inject` as an MTA's pipe runs it (issue 16.5, 16.6): sysexits
codes the MTA acts on, one line on standard error and never a traceback, the
envelope recipient and sender taken from the command line, the null sender
never answered.  The worker answers a mail for a game that went away."""

from __future__ import annotations

from tests.harness import PbmServer, wait_until


def inject(pbm: PbmServer, raw: bytes, *args: str, env: dict | None = None):
    saved = dict(pbm.env)
    pbm.env.update(env or {})
    try:
        return pbm.cli("mail", "inject", *args, input=raw, check=False)
    finally:
        pbm.env.clear()
        pbm.env.update(saved)


def one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_game_that_does_not_exist_is_refused_with_ex_nouser(pbm: PbmServer):
    raw = pbm.build("ann@players.example", "nosuch", "JOIN").as_bytes()
    proc = inject(pbm, raw, "--from", "ann@players.example", "--to", "nosuch@pbm.test")
    assert proc.returncode == 67  # EX_NOUSER: Postfix bounces with our line
    assert one_line(proc) == ("pbm: nosuch@pbm.test: no game named nosuch here; "
                              "mail pbm@pbm.test with 'games' for the list")
    other = inject(pbm, raw, "--from", "ann@players.example", "--to", "ann@elsewhere.example")
    assert other.returncode == 67 and "not an address of pbm.test" in one_line(other)
    forged = inject(pbm, raw, "--from", "", "--to", "bounces+1-0123456789ab@pbm.test")
    assert forged.returncode == 67 and "not a return path of this server" in one_line(forged)
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == 0


def test_what_is_not_a_mail_is_refused_with_ex_dataerr(pbm: PbmServer):
    for raw, words in ((b"", "empty message"), (b"\r\n\r\n", "empty message"),
                       (b"help\nme please\n", "does not start with header fields")):
        proc = inject(pbm, raw, "--from", "ann@players.example", "--to", "pbm@pbm.test")
        assert proc.returncode == 65, proc.stderr  # EX_DATAERR
        assert words in one_line(proc)
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == 0


def test_faults_of_ours_ask_the_mta_to_retry_in_one_line(pbm: PbmServer, tmp_path):
    raw = pbm.build("ann@players.example", "pbm", "help").as_bytes()
    missing = tmp_path / "no-such.toml"
    proc = inject(pbm, raw, "--to", "pbm@pbm.test", env={"PBM_CONFIG": str(missing)})
    assert proc.returncode == 75 and f"PBM_CONFIG: cannot read {missing}" in one_line(proc)
    proc = inject(pbm, raw, "--to", "pbm@pbm.test", env={"PBM_RETRY_BASE_SECONDS": "soon", "PBM_DOMAIN": "a b"})
    line = one_line(proc)
    assert proc.returncode == 75 and "PBM_DOMAIN" in line and "PBM_RETRY_BASE_SECONDS" in line
    proc = inject(pbm, raw, "--to", "pbm@pbm.test",
                  env={"PBM_DATABASE_URL": "postgresql://pbm@127.0.0.1:1/pbm"})
    assert proc.returncode == 75 and "PBM_DATABASE_URL: cannot open" in one_line(proc)
    proc = inject(pbm, raw, "--to", "pbm@pbm.test", "--bcc", "x")  # a mistake in the pipe's argv
    assert proc.returncode == 75 and "--bcc" in one_line(proc)

    # a fault inside the store: one line for the MTA, the traceback in PBM_INJECT_LOG
    log = tmp_path / "inject.log"
    pbm.execute("ALTER TABLE inbox RENAME TO inbox_away")
    try:
        proc = inject(pbm, raw, "--to", "pbm@pbm.test", env={"PBM_INJECT_LOG": str(log)})
    finally:
        pbm.execute("ALTER TABLE inbox_away RENAME TO inbox")
    line = one_line(proc)
    # the driver's error class: OperationalError on SQLite, ProgrammingError on PostgreSQL
    assert proc.returncode == 75 and line.startswith("pbm: could not store the message: ")
    assert "OperationalError" in line or "ProgrammingError" in line, line
    assert line.endswith("the MTA should try again later")
    logged = log.read_text()
    assert "Traceback (most recent call last)" in logged and "inbox" in logged


def test_the_envelope_recipient_wins_over_the_to_header(pbm: PbmServer):
    """Bcc'd or aliased mail: To: says pbm@, the MTA's ${recipient} says the game."""
    pbm.register("ann", "ann-secret-1", "ann@players.example")
    pbm.new_game("giveaway", "ring")
    msg = pbm.build("ann@players.example", "pbm", "JOIN\n$$ann-secret-1$$", subject="joining")
    proc = inject(pbm, msg.as_bytes(), "--from", "ann@players.example", "--to", "ring@pbm.test")
    assert proc.returncode == 0 and proc.stdout.startswith("stored as "), proc.stderr
    pbm.settle()
    reply = pbm.replies_to(msg["Message-ID"])[0]
    assert reply["From"].addresses[0].addr_spec == "ring@pbm.test"
    assert reply["Auto-Submitted"] == "auto-replied"  # RFC 3834
    assert "ann" in pbm.text(reply) and pbm.sql("SELECT count(*) FROM memberships")[0][0] == 1


def test_a_null_sender_is_never_answered(pbm: PbmServer):
    """Postfix's pipe writes the null sender as MAILER-DAEMON (its null_sender default)."""
    for sender in ("MAILER-DAEMON", ""):
        msg = pbm.build("someone@players.example", "pbm", "help", subject=f"auto {sender}")
        proc = inject(pbm, msg.as_bytes(), "--from", sender, "--to", "pbm@pbm.test")
        assert proc.returncode == 0, proc.stderr
    pbm.settle()
    rows = pbm.sql("SELECT mail_from, status, note FROM inbox ORDER BY id")
    assert [(f, s) for f, s, _ in rows] == [("", "dropped"), ("", "dropped")]
    assert all("null envelope sender" in n for _, _, n in rows)
    assert pbm.sql("SELECT count(*) FROM outbox")[0][0] == 0


def test_a_waiting_mail_for_a_game_that_went_away_gets_a_clear_reply(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.start("worker")  # mail is taken, not yet processed
    pbm.new_game("giveaway", "ring")
    mid = pbm.send("ann@players.example", "ring", "JOIN")
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox")[0][0] == 1, what="the mail stored")
    pbm.stop()
    pbm.execute("DELETE FROM games WHERE name = 'ring'")
    pbm.start()
    pbm.settle()
    wait_until(lambda: pbm.replies_to(mid), what="the reply")
    reply = pbm.replies_to(mid)[0]
    assert "There is no game named ring" in pbm.flat(reply)
    assert pbm.sql("SELECT status FROM inbox") == [("done",)]
