"""Settings: environment variables, optionally completed by a TOML file.

Environment wins over the file (``PBM_CONFIG=/etc/pbm.toml``; keys are the
variable names without the ``PBM_`` prefix, in lower case).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable

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
    typed: dict[str, Any] = {}
    for f in fields(Settings):
        if f.name in values:
            kind: Callable[[Any], Any] = type(f.default)
            typed[f.name] = kind(values[f.name])
    return Settings(**typed)
