"""The operator's database commands that docs/operations.md promises:
`pbm db current`, `pbm db downgrade REV --yes`, `pbm db backup FILE`, and
`pbm mail show` for the Maildir (real CLI, real database, real migrations)."""

from __future__ import annotations

import sqlite3

from tests.harness import PbmServer


def test_current_downgrade_and_upgrade_again(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.cli("db", "upgrade")
    head = pbm.cli("db", "current").stdout.strip()
    assert head.isdigit() and int(head) >= 6
    refused = pbm.cli("db", "downgrade", "0001", check=False)
    assert refused.returncode == 2 and "back up first" in refused.stderr
    assert pbm.cli("db", "current").stdout.strip() == head  # nothing happened
    assert "is at revision 0001" in pbm.cli("db", "downgrade", "0001", "--yes").stdout
    assert pbm.cli("db", "current").stdout.strip() == "0001"
    pbm.cli("db", "upgrade")
    assert pbm.cli("db", "current").stdout.strip() == head


def test_backup_copies_a_live_sqlite_database(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.cli("db", "upgrade")
    pbm.new_game("giveaway", "g1")
    target = pbm.tmp / "backup.db"
    out = pbm.cli("db", "backup", str(target), check=False)
    if not pbm.db_url.startswith("sqlite"):
        assert out.returncode == 2 and "pg_dump" in out.stderr
        return
    assert out.returncode == 0 and "integrity ok" in out.stdout
    with sqlite3.connect(target) as copy:
        assert copy.execute("SELECT name FROM games").fetchall() == [("g1",)]
    again = pbm.cli("db", "backup", str(target), check=False)
    assert again.returncode == 2 and "exists already" in again.stderr


def test_mail_show_decodes_the_maildir(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.env.pop("PBM_RELAY", None)  # no relay: replies go to the Maildir
    pbm.env["PBM_MAILDIR"] = str(pbm.tmp / "outbox")
    pbm.start()
    pbm.send("ann@example.org", "pbm", "help", subject="hällo")
    pbm.settle()
    shown = pbm.cli("mail", "show", "--last", "1").stdout
    assert "To: ann@example.org" in shown and "Subject: pbm-server: help" in shown
    assert "register HANDLE PASSWORD" in shown  # the body, decoded from quoted-printable
    soft_breaks = [ln for ln in shown.splitlines() if ln.endswith("=") and set(ln) != {"="}]
    assert not soft_breaks and "=3D" not in shown


def test_a_command_on_a_current_database_leaves_alembic_unimported(pbm_stopped: PbmServer):
    """Every command opens the database and brings its schema to the newest
    migration; on one already there that is one SELECT, and Alembic is
    never imported (a fifth of a second of CPU, paid for each mail an MTA
    pipes to `pbm mail inject`).  The newest migration, read from the
    scripts without Alembic, is Alembic's head."""
    import subprocess
    import sys

    from pbm_server.store.db import head_revision, newest_revision

    assert newest_revision() == head_revision()
    pbm = pbm_stopped
    pbm.cli("db", "upgrade")
    probe = ("import sys\nfrom pbm_server.running.cli import main\n"
             "try:\n    main(['mail', 'inject'])\nexcept SystemExit as end:\n    assert not end.code, end.code\n"
             "print('alembic imported:', any(m.split('.')[0] == 'alembic' for m in sys.modules))")
    mail = bytes(pbm.build("ann@example.org", "pbm", "help"))
    done = subprocess.run([sys.executable, "-c", probe], env=pbm.env, cwd=pbm.tmp, input=mail, capture_output=True, check=True)
    assert done.stdout.decode().strip().endswith("alembic imported: False"), done
    assert pbm.sql("SELECT count(*) FROM inbox")[0][0] == 1
