"""Settings: environment variables, optionally completed by a TOML file.

Environment wins over the file (``PBM_CONFIG=/etc/pbm.toml``; keys are the
variable names without the ``PBM_`` prefix, in lower case).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

#: the project root (templates/ and migrations/ live here)
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///var/pbm.db"
    listen: str = "127.0.0.1:2525"
    domain: str = "pbm.localhost"
    relay: str = ""  # host:port; empty -> Maildir
    maildir: str = "var/outbox"
    gm_address: str = ""
    #: largest accepted message (bytes); larger ones get 552 at DATA
    max_message_bytes: int = 1_048_576
    #: replies to one address within an hour before the server goes quiet
    reply_limit_per_hour: int = 60
    #: first retry delay of an undelivered mail; doubles each attempt
    retry_base_seconds: float = 30.0
    #: the longest delay between two attempts
    retry_max_seconds: float = 1800.0
    #: how long the server keeps trying before it marks a mail failed
    retry_period_seconds: float = 3 * 24 * 3600.0
    #: how often the worker, outbound and scheduler look for work
    poll_seconds: float = 0.5
    #: how often the scheduler calls each game's tick()
    tick_seconds: float = 60.0
    #: rehearsal aid: a mail whose Subject is exactly this makes the worker fail
    #: inside its transaction (to see the shunt and the GM notice work); empty: off
    failpoint: str = ""
    #: failed password checks for one account (or from one sender address)
    #: within auth_window_seconds before checks for it are refused unrun
    auth_max_failures: int = 5
    #: the window in which failed password checks are counted
    auth_window_seconds: float = 900.0
    #: the first refusal period after too many failures; doubles each time
    auth_block_seconds: float = 60.0
    #: the longest refusal period
    auth_block_max_seconds: float = 86400.0
    #: at this many refusal periods in a row the account is locked out and
    #: its owner gets one mail about it
    auth_lockout_level: int = 4
    #: SMTP sessions one client IP address may hold open at once
    smtp_max_sessions_per_client: int = 20
    #: SMTP sessions open at once in total
    smtp_max_sessions: int = 400
    #: an SMTP session silent this long is closed
    smtp_idle_timeout_seconds: float = 60.0
    #: at most one GM summary of shunted mail per this many seconds
    gm_shunt_notice_seconds: float = 3600.0
    #: how long an outbound process's claim on an outbox row holds (a server
    #: that died while delivering frees the row after this)
    outbound_claim_seconds: float = 300.0

    @property
    def listen_host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def listen_port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def relay_host_port(self) -> tuple[str, int] | None:
        if not self.relay:
            return None
        host, _, port = self.relay.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def server_address(self) -> str:
        return f"pbm@{self.domain}"


def load_settings(env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if env is None else env)
    values: dict[str, object] = {}
    config = env.get("PBM_CONFIG")
    if config:
        with open(config, "rb") as fh:
            values.update({k.lower(): v for k, v in tomllib.load(fh).items()})
    for f in fields(Settings):
        key = "PBM_" + f.name.upper()
        if key in env:
            values[f.name] = env[key]
    typed: dict[str, object] = {}
    for f in fields(Settings):
        if f.name in values:
            kind = type(f.default)
            typed[f.name] = kind(values[f.name])
    return Settings(**typed)
