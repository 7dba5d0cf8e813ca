"""Settings come from the environment, completed by a TOML file (PBM_CONFIG)."""

from pbm_server.settings import load_settings


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
