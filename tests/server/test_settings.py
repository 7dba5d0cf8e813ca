"""Settings come from the environment, completed by a TOML file (PBM_CONFIG);
a bad one ends any `pbm` command with one line naming it and what is accepted."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pbm_server.base.settings import Settings, SettingsError, describe, load, load_settings

#: uses no test database: .ci/run runs it in the SQLite pass only (docs/testing.md)
pytestmark = pytest.mark.nodb

ROOT = Path(__file__).resolve().parents[2]
PBM = [sys.executable, "-m", "pbm_server.running.cli"]


def test_config_file_fills_in_and_the_environment_wins(tmp_path):
    cfg = tmp_path / "pbm.toml"
    cfg.write_text('domain = "games.example.org"\nlisten = "0.0.0.0:2600"\nreply_limit_per_hour = 10\n')
    s = load_settings({"PBM_CONFIG": str(cfg), "PBM_LISTEN": "127.0.0.1:2700"})
    assert s.domain == "games.example.org"
    assert s.listen_port == 2700 and s.listen_host == "127.0.0.1"
    assert s.reply_limit_per_hour == 10
    assert s.server_address == "pbm@games.example.org"
    assert s.relay_host_port is None  # no relay: the Maildir
    assert load_settings({}).database_url == "sqlite:///var/pbm.db"


def test_every_problem_is_named_at_once(tmp_path):
    cfg = tmp_path / "pbm.toml"
    cfg.write_text('gm_adress = "gm@example.org"\nretry_base_seconds = "soon"\n')
    with pytest.raises(SettingsError) as err:
        load({"PBM_CONFIG": str(cfg), "PBM_MAX_MESSAGE_BYTES": "1MB", "PBM_LISTEN": "2525",
              "PBM_RELAY": "mail.example.org", "PBM_DATABASE_URL": "mysql://db/pbm"})
    problems = err.value.problems
    assert len(problems) == 6
    text = "\n".join(problems)
    assert "unknown setting 'gm_adress' (did you mean 'gm_address'?)" in text
    assert "retry_base_seconds: 'soon' is not accepted: expected a number (e.g. 30.0)" in text
    assert "PBM_MAX_MESSAGE_BYTES: '1MB' is not accepted: expected a whole number (e.g. 1048576)" in text
    assert "PBM_LISTEN: '2525' is not accepted: expected HOST:PORT" in text
    assert "PBM_RELAY: 'mail.example.org' is not accepted: expected HOST:PORT" in text
    assert "PBM_DATABASE_URL: 'mysql://db/pbm' is not accepted: expected sqlite:///PATH or postgresql://" in text


def test_a_mistyped_variable_is_a_warning_with_the_right_name():
    loaded = load({"PBM_GM_ADRESS": "gm@example.org", "PBM_TEST_DATABASE_URL": "x", "PBM_CONFIG": ""})
    assert loaded.warnings == ["PBM_GM_ADRESS is not a setting and is ignored (did you mean PBM_GM_ADDRESS?)"]
    assert loaded.settings.gm_address == ""


def _pbm(args, tmp_path, env=None, stdin=b""):
    base = {k: v for k, v in os.environ.items() if not k.startswith("PBM_")}
    base["PBM_DATABASE_URL"] = f"sqlite:///{tmp_path}/pbm.db"
    base.update(env or {})
    return subprocess.run(PBM + args, cwd=tmp_path, env=base, input=stdin, capture_output=True, timeout=120)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"PBM_MAX_MESSAGE_BYTES": "1MB"}, "pbm: PBM_MAX_MESSAGE_BYTES: '1MB' is not accepted: expected a whole number"),
        ({"PBM_LISTEN": "2525"}, "pbm: PBM_LISTEN: '2525' is not accepted: expected HOST:PORT"),
        ({"PBM_RELAY": "localhost"}, "pbm: PBM_RELAY: 'localhost' is not accepted: expected HOST:PORT"),
        ({"PBM_DATABASE_URL": "postgresql://pbm@127.0.0.1:1/pbm"},
         "pbm: PBM_DATABASE_URL: cannot open postgresql://pbm@127.0.0.1:1/pbm: "),
        ({"PBM_CONFIG": "/nonexistent/pbm.toml"}, "pbm: PBM_CONFIG: cannot read /nonexistent/pbm.toml: "),
    ],
)
def test_serve_with_a_bad_setting_says_so_in_one_line_and_exits_2(tmp_path, env, expected):
    proc = _pbm(["serve"], tmp_path, env)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), err


def test_unknown_key_in_the_config_file(tmp_path):
    cfg = tmp_path / "pbm.toml"
    cfg.write_text('gm_adress = "gm@example.org"\n')
    proc = _pbm(["db", "upgrade"], tmp_path, {"PBM_CONFIG": str(cfg)})
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (
        f"pbm: {cfg}: unknown setting 'gm_adress' (did you mean 'gm_address'?); known settings: "
        + ", ".join(sorted(f for f in Settings.__dataclass_fields__))
    )


def test_inject_with_a_bad_setting_asks_the_mta_to_retry(tmp_path):
    proc = _pbm(["mail", "inject"], tmp_path, {"PBM_DOMAIN": "not a domain"}, stdin=b"Subject: x\n\nhelp\n")
    assert proc.returncode == 75  # EX_TEMPFAIL: the MTA keeps the mail, no bounce with our words
    assert proc.stderr.decode().startswith("pbm: PBM_DOMAIN: 'not a domain' is not accepted")


def test_config_show_gives_values_sources_and_hides_secrets(tmp_path):
    cfg = tmp_path / "pbm.toml"
    cfg.write_text('domain = "games.example.org"\n')
    proc = _pbm(["config", "show"], tmp_path,
                {"PBM_CONFIG": str(cfg), "PBM_DATABASE_URL": "postgresql://pbm:hunter22@db.example.org/pbm"})
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert "hunter22" not in out
    assert 'database_url = "postgresql://pbm:***@db.example.org/pbm"  # environment PBM_DATABASE_URL' in out
    assert f'domain = "games.example.org"  # file {cfg}' in out
    assert 'listen = "127.0.0.1:2525"  # default' in out
    assert "max_message_bytes = 1048576  # default" in out
    assert len(re.findall(r"^\w+ = ", out, re.M)) == len(Settings.__dataclass_fields__)


def test_version_and_serve_help_list_every_setting(tmp_path):
    version = _pbm(["--version"], tmp_path)
    assert re.fullmatch(r"pbm-server \d+\.\d+\.\d+\S*", version.stdout.decode().strip())
    helptext = _pbm(["serve", "--help"], tmp_path).stdout.decode()
    for variable, default, meaning in describe():
        assert f"{variable} = {default}" in helptext
        assert meaning in helptext


@pytest.mark.parametrize("doc", ["README.md", "docs/operations.md"])
def test_the_docs_list_every_setting(doc):
    text = (ROOT / doc).read_text()
    missing = [variable for variable, _, _ in describe() if f"`{variable}`" not in text]
    assert not missing, f"{doc} does not document {missing}"


def test_relay_settings_are_checked_and_the_password_file_is_secret(tmp_path):
    with pytest.raises(SettingsError) as err:
        load({"PBM_RELAY_TLS": "ssl", "PBM_RELAY_EHLO_NAME": "not a name",
              "PBM_RELAY_PASSWORD_FILE": str(tmp_path / "missing")})
    text = "\n".join(err.value.problems)
    assert "PBM_RELAY_TLS: 'ssl' is not accepted: expected none, starttls (port 587) or tls (port 465)" in text
    assert "PBM_RELAY_EHLO_NAME: 'not a name' is not accepted: expected a domain name" in text
    assert "PBM_RELAY_PASSWORD_FILE: " in text and "expected a readable file" in text
    with pytest.raises(SettingsError) as err:
        load({"PBM_RELAY_USER": "pbm"})
    assert err.value.problems == ["PBM_RELAY_USER and PBM_RELAY_PASSWORD_FILE: give both (SMTP AUTH) or neither"]
    pw = tmp_path / "pw"
    pw.write_text("hunter22\n")
    s = load_settings({"PBM_RELAY_USER": "pbm", "PBM_RELAY_PASSWORD_FILE": str(pw), "PBM_DOMAIN": "games.example.org"})
    assert s.relay_password() == "hunter22" and s.ehlo_name == "games.example.org" and s.relay_tls == "none"
    from pbm_server.base.settings import shown

    assert shown(s, "relay_password_file") == "(hidden)"
    assert load_settings({"PBM_RELAY_EHLO_NAME": "mx.example.org"}).ehlo_name == "mx.example.org"


def test_back_ends_by_default_one_per_core_at_most_two_on_sqlite_four_on_postgresql():
    """`pbm serve` with PBM_BACKENDS=0: one back end per core, at most two on
    SQLite (one writer at a time), four on PostgreSQL; a number is kept."""
    import os

    from pbm_server.running.server import backend_count

    cores = len(os.sched_getaffinity(0))
    assert backend_count(load_settings({"PBM_DATABASE_URL": "sqlite:///x.db"})) == max(1, min(cores, 2))
    assert backend_count(load_settings({"PBM_DATABASE_URL": "postgresql://u@h/db"})) == max(1, min(cores, 4))
    assert backend_count(load_settings({"PBM_DATABASE_URL": "sqlite:///x.db", "PBM_BACKENDS": "2"})) == 2


@pytest.mark.parametrize("backends, workers", [("1", "1"), ("2", "1"), ("1", "2"), ("3", "1")])
def test_password_checks_run_on_as_many_threads_as_there_are_cores(tmp_path, backends, workers):
    """A deadline rush is Argon2 checks side by side: all back ends and their
    workers together check on one thread per core (more would only share a
    core's caches and make each check dearer), and always on at least one."""
    from pbm_server.running.server import Server, usable_cores

    settings = load_settings({"PBM_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "PBM_BACKENDS": backends,
                              "PBM_WORKERS": workers})
    server = Server(settings, parts=("worker",), processes=1)
    sharers = int(backends) * int(workers)
    threads = [w.prepare_threads for w in server.workers]
    assert len(threads) == int(workers) and min(threads) >= 1
    total = sum(threads) * int(backends)
    assert total <= max(usable_cores(), sharers)  # no core shared by two checks while another idles
    assert total > usable_cores() - sharers  # and no more than sharers - 1 cores left without one
