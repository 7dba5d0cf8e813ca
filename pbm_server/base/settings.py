"""Settings: environment variables, optionally completed by a TOML file.

Environment wins over the file (``PBM_CONFIG=/etc/pbm.toml``; keys are the
variable names without the ``PBM_`` prefix, in lower case).  Every knob the
server reads is a field of :class:`Settings`; each field carries its meaning
(shown by ``pbm serve --help``, ``pbm config show`` and docs/operations.md) and
a check.  :func:`load_settings` collects every problem at once and raises
:class:`SettingsError`, one line per problem, naming the setting and what would
be accepted; the CLI prints those lines and exits with 2.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from typing import Any, Callable, cast

#: where a setting's value came from
DEFAULT, FILE, ENVIRONMENT = "default", "file", "environment"

#: variables with the PBM_ prefix that are not settings (and are not typos)
NOT_SETTINGS = ("PBM_CONFIG", "PBM_TEST_", "PBM_INTERNAL_")

Check = Callable[[Any], "str | None"]


def _setting(default: Any, meaning: str, check: Check | None = None, secret: bool = False) -> Any:
    return field(default=default, metadata={"meaning": meaning, "check": check, "secret": secret})


# -- checks: each returns None, or what would be accepted --------------------------------------

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def _host_port(value: str) -> str | None:
    m = _HOST_PORT.match(value)
    if not m or not 1 <= int(m.group(2)) <= 65535:
        return "expected HOST:PORT with a port from 1 to 65535, e.g. 127.0.0.1:2525"
    return None


def _url(value: str) -> str | None:
    if value == "" or re.match(r"^https?://[A-Za-z0-9.\-\[\]:]+(/[^\s?#]*)?$", value):
        return None
    return "expected an http(s) URL such as https://pbm.example.org (no query), or empty"


def _zero_one(value: int) -> str | None:
    return None if value in (0, 1) else "expected 0 or 1"


def _optional_host_port(value: str) -> str | None:
    return None if value == "" else _host_port(value)


def _database_url(value: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    wanted = "expected sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"
    try:
        url = make_url(value)
    except (ArgumentError, ValueError):
        return wanted
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        return wanted
    if url.get_backend_name() == "sqlite" and not url.database:
        return "expected sqlite:///PATH (a file; three slashes for a relative path, four for an absolute one)"
    return None


_DOMAIN = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def _domain(value: str) -> str | None:
    return None if _DOMAIN.match(value) else "expected a domain name such as pbm.example.org (no @, no spaces)"


def _address(value: str) -> str | None:
    if value == "":
        return None
    local, at, domain = value.rpartition("@")
    if not at or not local or " " in value or _domain(domain):
        return "expected an address such as gm@example.org"
    return None


def _non_empty(value: str) -> str | None:
    return None if value.strip() else "expected a path, e.g. var/outbox"


def _positive(value: float) -> str | None:
    return None if value > 0 else "expected a number above 0"


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else "expected 0 or more"


def _processes(value: int) -> str | None:
    return None if value in (1, 2) else "expected 1 (one process) or 2 (the listener in its own process)"


def _backends(value: int) -> str | None:
    return None if 0 <= value <= 16 else "expected 0 (one per CPU core, at most 4) or a number of back-end processes from 1 to 16"


def _workers(value: int) -> str | None:
    return None if 1 <= value <= 64 else "expected a number of worker threads from 1 to 64"


def _batch(value: int) -> str | None:
    return None if 1 <= value <= 256 else "expected a number of mails from 1 to 256"


def _ehlo_name(value: str) -> str | None:
    """A fully qualified name (RFC 5321 4.1.4): relays that check it (Postfix's
    reject_non_fqdn_helo_hostname) answer 504 to a bare host name."""
    if value == "":
        return None
    if _domain(value):
        return _domain(value)
    if "." not in value or value.rsplit(".", 1)[1].isdigit():
        return ("expected a fully qualified host name with a dot, such as mail.example.org: a relay that checks "
                "answers 504 to a bare host name or IP address in EHLO, and no mail goes out")
    return None


RELAY_TLS = ("none", "starttls", "tls")


def _relay_tls(value: str) -> str | None:
    return None if value in RELAY_TLS else "expected none, starttls (port 587) or tls (port 465)"


def _readable_file(value: str) -> str | None:
    if value == "":
        return None
    try:
        with open(value, "rb"):
            return None
    except OSError as exc:
        return f"expected a readable file holding the password ({exc.strerror or exc})"


def _log_format(value: str) -> str | None:
    return None if value in ("text", "json") else "expected text or json"


# -- the mailbox instead of an MX (issue 43): PBM_IMAP_URL and its company -----------------------

_IMAP_URL = re.compile(
    r"^(imaps?)://([^@/\s]+)@(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::(\d{1,5}))?/([^\s]+)$")


def parse_imap_url(value: str) -> tuple[str, str, str, int, str] | None:
    """(scheme, user, host, port, mailbox) of PBM_IMAP_URL, or None when it
    is not of the form ``imaps://USER@HOST[:PORT]/MAILBOX``; the user and
    the mailbox are percent-decoded (an address as user: ``gm%40example.org``)."""
    from urllib.parse import unquote

    m = _IMAP_URL.match(value)
    if m is None:
        return None
    scheme, user, host, port, mailbox = m.groups()
    number = int(port) if port else (993 if scheme == "imaps" else 143)
    if not 1 <= number <= 65535:
        return None
    return scheme, unquote(user), host.strip("[]"), number, unquote(mailbox)


def is_loopback_host(host: str) -> bool:
    """A host that names this machine only: localhost, 127.0.0.0/8, ::1."""
    import ipaddress

    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _imap_url(value: str) -> str | None:
    if value == "":
        return None
    parsed = parse_imap_url(value)
    if parsed is None:
        return ("expected imaps://USER@HOST[:PORT]/MAILBOX (TLS from the start, port 993), or imap://... "
                "(STARTTLS required, port 143), e.g. imaps://gm.games%40example.org@imap.example.org/INBOX")
    return None  # imap:// to a host not on loopback: STARTTLS is required when connecting


def _mailbox_name(value: str) -> str | None:
    return None if value.strip() and not any(c in value for c in "\r\n\"%*") else \
        "expected a mailbox name such as pbm-done (no quotes, %, * or line breaks)"


def _bare_address(value: str) -> str | None:
    if value == "":
        return None
    if _address(value) or "+" in value.rpartition("@")[0]:
        return "expected the mailbox's own address without a +tag, such as gm.games@example.org"
    return None


#: the local part of a return path (mail/bounces.py PREFIX), and its plus tag in the mailbox
BOUNCE_PREFIX = "bounces+"
MAILBOX_BOUNCE_PREFIX = "b-"

CPU_POLICIES = ("batch", "normal")


def _cpu_policy(value: str) -> str | None:
    return None if value in CPU_POLICIES else "expected batch (mail's processes SCHED_BATCH) or normal"


def _nice(value: int) -> str | None:
    return None if 0 <= value <= 19 else "expected a nice increment from 0 to 19"


@dataclass(frozen=True)
class Settings:
    database_url: str = _setting(
        "sqlite:///var/pbm.db", "SQLite (WAL, full durability) or postgresql://...", _database_url, secret=True
    )
    listen: str = _setting("127.0.0.1:2525", "HOST:PORT of the SMTP listener", _host_port)
    domain: str = _setting(
        "pbm.localhost", "game NAME listens at NAME@DOMAIN; account commands at pbm@DOMAIN", _domain
    )
    relay: str = _setting("", "HOST:PORT of the outbound SMTP relay; empty: write to the Maildir", _optional_host_port)
    http_listen: str = _setting(
        "127.0.0.1:8080", "HOST:PORT of the HTTP side (/healthz, /metrics, the game pages); empty: no HTTP side",
        _optional_host_port,
    )
    public_url: str = _setting(
        "", "the HTTP side as players reach it (e.g. https://pbm.example.org, behind a reverse proxy): links in "
        "mails start with it; empty: http://PBM_HTTP_LISTEN", _url,
    )
    relay_ehlo_name: str = _setting(
        "", "the name the server gives in EHLO to the relay (fully qualified); empty: PBM_DOMAIN", _ehlo_name
    )
    relay_tls: str = _setting(
        "none", "none: plain SMTP; starttls: STARTTLS before anything else (port 587); tls: TLS from the start "
        "(port 465); the relay's certificate is verified", _relay_tls
    )
    relay_user: str = _setting("", "user name for SMTP AUTH at the relay; empty: no AUTH")
    relay_password_file: str = _setting(
        "", "file holding the SMTP AUTH password for PBM_RELAY_USER (read at each connection, never shown)",
        _readable_file, secret=True
    )
    maildir: str = _setting("var/outbox", "where outgoing mail goes without a relay", _non_empty)
    gm_address: str = _setting("", "the address whose mails (with the GM password) run GM commands", _address)
    trusted_authserv_id: str = _setting(
        "", "authserv-id of the MTA whose Authentication-Results (RFC 8601) are trusted; a From failing "
        "DMARC/SPF/DKIM alignment there is never authenticated; empty: off"
    )
    max_message_bytes: int = _setting(1_048_576, "larger mails are refused with 552 (bytes)", _positive)
    reply_limit_per_hour: int = _setting(60, "replies to one address per hour before the server goes quiet", _positive)
    unauthenticated_replies_per_hour: int = _setting(
        6000, "replies per hour, to all senders together, to mails that proved neither a password nor a code "
        "(the ceiling above the per-domain budget); beyond: processed, not answered, the GM told once an hour; "
        "the first confirmation code to an address in an hour is always sent", _positive
    )
    unauthenticated_replies_per_domain_per_hour: int = _setting(
        300, "replies per hour to the addresses of one domain, to mails that proved neither a password nor a "
        "code; beyond: processed, not answered", _positive
    )
    max_unauthenticated_reply_bytes: int = _setting(
        65_536, "text of a reply to a mail that proved no password, at most (bytes); later sections are cut", _positive
    )
    max_notices_per_mail: int = _setting(
        20, "mails to other players one mail may cause (a notice to many players is never split); "
        "the rest are not sent; the GM's mail is exempt", _positive
    )
    press_per_hour: int = _setting(
        300, "press mails one player may have relayed per hour (a message to N players counts N; "
        "a message that would go beyond is refused whole); the GM's press is exempt", _positive
    )
    retry_base_seconds: float = _setting(30.0, "first delay before delivering a mail again; doubles each attempt", _positive)
    retry_max_seconds: float = _setting(1800.0, "the longest delay between two delivery attempts", _positive)
    retry_period_seconds: float = _setting(
        3 * 24 * 3600.0, "after this long a mail the relay keeps deferring (a 4xx to its recipient) is marked "
        "failed and the GM told; a relay that fails itself never fails a mail", _positive
    )
    notify_allow_private: int = _setting(
        0, "1: alerts (notify=URL) may go to loopback, private and link-local hosts, and over plain http:// to "
        "such hosts (tests, a receiver on the operator's own network); 0: only public https:// hosts", _zero_one,
    )
    poll_seconds: float = _setting(0.5, "how often the worker, outbound and scheduler look for work", _positive)
    tick_seconds: float = _setting(60.0, "how often the scheduler calls each game's tick", _positive)
    serve_processes: int = _setting(
        2, "1: pbm serve runs in one process; 2: the listener apart from worker, outbound and scheduler", _processes
    )
    backends: int = _setting(
        0, "back-end processes pbm serve starts beside the listener (with PBM_SERVE_PROCESSES=2); each also "
        "delivers the outbox, the first runs the scheduler; 0: one per CPU core, at most 2 on SQLite (one writer "
        "at a time), at most 4 on PostgreSQL", _backends,
    )
    workers: int = _setting(
        1, "worker threads processing mail in each back end; mails of different games run side by side, "
        "those of one game in order (pbm serve --workers N)", _workers,
    )
    batch: int = _setting(
        16, "mails of different games a worker handles in one commit while mail waits (each game still one mail "
        "at a time, in order); 1: a commit per mail", _batch,
    )
    intake_first: float = _setting(
        3.0, "while mail streams in, the back end rests this many times the CPU time each mail took; 0: off",
        _not_negative,
    )
    backend_nice: int = _setting(0, "nice increment of the back-end process (0-19)", _nice)
    cpu_policy: str = _setting(
        "batch", "batch: the listener and back ends run as SCHED_BATCH (Linux), so a wake-up never preempts a "
        "password check, and short steps run together (docs/scaling.md); normal: the default policy", _cpu_policy,
    )
    log_format: str = _setting(
        "text", "log lines as text, or json: one JSON object a line with the mail's facts as fields", _log_format,
    )
    clock_file: str = _setting(
        "", "rehearsals and tests: the current time is the ISO 8601 time in this file (MOMENT: it stands; MOMENT @UNIXTIME: it runs on from MOMENT, shown at that Unix time); empty: the real clock"
    )
    failpoint: str = _setting(
        "", "rehearsal aid: a mail whose Subject is exactly this fails inside its transaction; 'sigkill:SUBJECT': "
        "a mail whose Subject is SUBJECT kills its back end (SIGKILL) when its handling starts; "
        "'sigkill-before-commit:SUBJECT': when it has been handled, before its commit; 'sigkill-after-relay:N': "
        "delivery kills its back end once N replies were accepted by the relay and not yet marked sent; "
        "'sigkill-after-mailbox-commit:N': the mailbox reader kills `pbm serve` once N mails of the mailbox are "
        "committed and not yet moved; empty: off"
    )
    auth_max_failures: int = _setting(
        5, "failed password checks for one account, or from one sender address, within the window before "
        "checks are refused unrun", _positive)
    auth_window_seconds: float = _setting(900.0, "the window in which failed password checks are counted", _positive)
    auth_block_seconds: float = _setting(
        60.0, "the first period in which no password is checked after too many failures; doubles each time", _positive)
    auth_block_max_seconds: float = _setting(86400.0, "the longest such period", _positive)
    auth_lockout_level: int = _setting(
        4, "at this many blocked periods in a row at the owner's own address the owner is mailed an unlock code "
        "(also whenever their own mail is refused by a block; one open code at a time)", _positive)
    auth_account_max_failures: int = _setting(
        100, "failed password checks for one account from all addresses within the window; beyond, checks of "
        "it from addresses other than its own are refused unrun until the window ends (its own never are)",
        _positive)
    account_mails_per_hour: int = _setting(
        3, "recovery codes (forgot) and address-change codes (email) mailed to one address per hour; beyond, "
        "none is mailed (those mailed still work)", _positive)
    smtp_max_sessions_per_client: int = _setting(
        20, "SMTP sessions one client IP address may hold open at once; more get 421", _positive)
    smtp_max_sessions: int = _setting(400, "SMTP sessions open at once in total; more get 421", _positive)
    smtp_idle_timeout_seconds: float = _setting(60.0, "an SMTP session silent this long is closed", _positive)
    http_header_timeout_seconds: float = _setting(
        5.0, "an HTTP request whose request line, headers and body are not all in this long after its connection "
        "opened (or its last answer was sent) is closed unanswered; so is a connection that sends nothing",
        _positive)
    http_max_connections_per_client: int = _setting(
        32, "HTTP connections one client address (an IPv6 /64) may hold open at once; more are closed at once "
        "(behind a reverse proxy the proxy is that client)", _positive)
    gm_shunt_notice_seconds: float = _setting(
        3600.0, "at most one GM summary of shunted (set-aside) mail per this many seconds", _positive)
    gm_bounce_notice_seconds: float = _setting(
        3600.0, "at most one GM summary of bounced mail per this many seconds", _positive)
    postmaster_forwards_per_hour: int = _setting(
        20, "mails to postmaster@ forwarded to the GM per hour (each cut to its first 64 KB); beyond, they are kept "
        "in the inbox and the GM is told how many were not forwarded", _positive)
    inject_log: str = _setting(
        "", "pbm mail inject: file to which a fault of ours appends its traceback (the MTA sees one line); "
        "empty: none")
    outbound_claim_seconds: float = _setting(
        300.0, "how long a server's claim on an outbox row holds (a server that died frees its rows after this)",
        _positive)
    imap_url: str = _setting(
        "", "read mail from this mailbox instead of (or beside) the SMTP listener: imaps://USER@HOST[:PORT]/MAILBOX, "
        "or imap://... with STARTTLS (plain imap:// only to a loopback host); the certificate is verified; "
        "empty: no mailbox", _imap_url)
    imap_password_file: str = _setting(
        "", "file holding the password (an app password) for PBM_IMAP_URL's user (first line; never shown)",
        _readable_file, secret=True)
    mailbox_address: str = _setting(
        "", "the mailbox's own address (gm.games@example.org): account commands there, game NAME at "
        "gm.games+NAME@example.org, postmaster at gm.games+postmaster@..., return paths gm.games+b-TAG@...; "
        "replies come From those addresses", _bare_address)
    imap_done_mailbox: str = _setting(
        "pbm-done", "where mail of ours is moved once stored (created if missing)", _mailbox_name)
    imap_poll_seconds: float = _setting(
        30.0, "how often the mailbox is looked at where the IMAP server offers no IDLE (with IDLE: how often "
        "IDLE is renewed)", _positive)
    sqlite_max_page_count: int = _setting(
        0, "fault injection in tests: cap the SQLite file at this many pages (a real 'disk full'); 0: no cap",
        _not_negative)

    @property
    def listen_host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def listen_port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def http_host_port(self) -> tuple[str, int] | None:
        if not self.http_listen:
            return None
        host, _, port = self.http_listen.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def relay_host_port(self) -> tuple[str, int] | None:
        if not self.relay:
            return None
        host, _, port = self.relay.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def ehlo_name(self) -> str:
        return self.relay_ehlo_name or self.domain

    def relay_password(self) -> str:
        """The AUTH password (first line of PBM_RELAY_PASSWORD_FILE); never logged."""
        with open(self.relay_password_file, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n")

    @property
    def server_address(self) -> str:
        return self.address("pbm")

    def address(self, local: str) -> str:
        """The address of our ``local`` part as the world sees it: ``LOCAL@PBM_DOMAIN``,
        or with PBM_MAILBOX_ADDRESS a plus address of the mailbox (``pbm`` is the
        bare address, a return path ``bounces+TAG`` is ``+b-TAG``)."""
        if not self.mailbox_address:
            return f"{local}@{self.domain}"
        box, _, dom = self.mailbox_address.rpartition("@")
        if local == "pbm":
            return self.mailbox_address
        if local.startswith(BOUNCE_PREFIX):
            local = MAILBOX_BOUNCE_PREFIX + local[len(BOUNCE_PREFIX):]
        return f"{box}+{local}@{dom}"

    def internal_address(self, address: str) -> str | None:
        """The inverse of :meth:`address` for the mailbox: ``LOCAL@PBM_DOMAIN``
        of a (plus) address of the mailbox, None for any other address."""
        if not self.mailbox_address:
            return None
        box, _, dom = self.mailbox_address.lower().rpartition("@")
        local, _, domain = address.strip().lower().rpartition("@")
        if domain != dom:
            return None
        if local == box:
            return f"pbm@{self.domain.lower()}"
        head, plus, tag = local.partition("+")
        if not plus or head != box or not tag:
            return None
        if re.fullmatch(MAILBOX_BOUNCE_PREFIX + r"\d{1,18}-[0-9a-f]+", tag):
            tag = BOUNCE_PREFIX + tag[len(MAILBOX_BOUNCE_PREFIX):]
        return f"{tag}@{self.domain.lower()}"


class SettingsError(Exception):
    """Settings that cannot be used; ``problems`` has one line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Loaded:
    """Settings with where each value came from (``pbm config show``)."""

    settings: Settings
    sources: dict[str, str]
    config_file: str | None
    warnings: list[str]


def env_name(name: str) -> str:
    return "PBM_" + name.upper()


def meaning(name: str) -> str:
    return cast(str, _FIELDS[name].metadata["meaning"])


def is_secret(name: str) -> bool:
    return bool(_FIELDS[name].metadata["secret"])


_FIELDS = {f.name: f for f in fields(Settings)}


def _convert(kind: type, raw: object) -> Any:
    """A value from the environment (always text) or TOML (typed) -> the field's type."""
    if kind is str:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return str(raw)  # e.g. listen = 2525 in TOML: the check says what is wanted
        if not isinstance(raw, str):
            raise ValueError("expected text in quotes")
        return raw
    if isinstance(raw, bool):
        raise ValueError("expected a number")
    if kind is int:
        if isinstance(raw, int):
            return raw
        text = str(raw).strip().replace("_", "")
        if not re.fullmatch(r"[+-]?\d+", text):
            raise ValueError("expected a whole number")
        return int(text)
    if isinstance(raw, (int, float)):
        return float(raw)
    text = str(raw).strip()
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        raise ValueError("expected a number")
    return float(text)


def _example(name: str) -> str:
    default = _FIELDS[name].default
    return f" (e.g. {default})" if isinstance(default, (int, float)) else ""


def _suggest(key: str) -> str:
    close = difflib.get_close_matches(key, list(_FIELDS), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: name -> (value, source, how to name it in a problem)
_Raw = dict[str, tuple[object, str, str]]


def load(env: dict[str, str] | None = None) -> Loaded:
    """Read the settings; raise SettingsError listing every problem."""
    env = dict(os.environ if env is None else env)
    problems: list[str] = []
    warnings: list[str] = []
    raw: _Raw = {}
    config = env.get("PBM_CONFIG") or None
    if config:
        _read_config(config, raw, problems)
    _read_env(env, raw, warnings)
    values, sources = _checked(raw, config, problems)
    if bool(values.get("relay_user")) != bool(values.get("relay_password_file")):
        problems.append("PBM_RELAY_USER and PBM_RELAY_PASSWORD_FILE: give both (SMTP AUTH) or neither")
    # given at all (a bad value has its own problem already)
    mailbox = [bool(raw.get(n, ("",))[0]) for n in ("imap_url", "imap_password_file", "mailbox_address")]
    if any(mailbox) and not all(mailbox):
        problems.append("PBM_IMAP_URL, PBM_IMAP_PASSWORD_FILE and PBM_MAILBOX_ADDRESS: give all three (the mailbox, "
                        "its password and its address) or none")
    elif all(mailbox) and values.get("mailbox_address"):
        dom = str(values["mailbox_address"]).rpartition("@")[2].lower()
        if str(values.get("domain", _FIELDS["domain"].default)).lower() == dom:
            problems.append(f"PBM_DOMAIN: {dom!r} is the mailbox's domain; with PBM_MAILBOX_ADDRESS it is the "
                            "server's inner name, never seen by players: leave it unset (pbm.localhost) or use "
                            "a name that is not a mail domain")
    domain = str(values.get("domain", _FIELDS["domain"].default))
    if values.get("relay") and not values.get("relay_ehlo_name") and _ehlo_name(domain):
        warnings.append(f"PBM_RELAY_EHLO_NAME is empty, so the relay is greeted with PBM_DOMAIN {domain!r}, which is "
                        "not a fully qualified name; a relay that checks answers 504 and no mail goes out: set "
                        "PBM_RELAY_EHLO_NAME to this host's name, such as mail.example.org")
    if problems:
        raise SettingsError(problems)
    return Loaded(Settings(**values), sources, config, warnings)


def _read_config(config: str, raw: _Raw, problems: list[str]) -> None:
    """The settings of the TOML file ``config`` into ``raw``; what cannot be
    read or is no setting into ``problems``."""
    try:
        with open(config, "rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        problems.append(f"PBM_CONFIG: cannot read {config}: {exc.strerror or exc}")
        document = {}
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"PBM_CONFIG: {config} is not valid TOML: {exc}")
        document = {}
    for key, value in document.items():
        name = key.lower()
        if name not in _FIELDS:
            known = ", ".join(sorted(_FIELDS))
            problems.append(f"{config}: unknown setting {key!r}{_suggest(name)}; known settings: {known}")
            continue
        raw[name] = (value, FILE, f"{config}: {name}")


def _read_env(env: dict[str, str], raw: _Raw, warnings: list[str]) -> None:
    """The PBM_ variables of ``env`` into ``raw`` (over the file's); a
    warning for each that is no setting."""
    for key in sorted(env):
        if not key.startswith("PBM_"):
            continue
        name = key[4:].lower()
        if name in _FIELDS:
            raw[name] = (env[key], ENVIRONMENT, key)
        elif not key.startswith(NOT_SETTINGS):
            warnings.append(f"{key} is not a setting and is ignored{_suggest_env(name)}")


def _checked(raw: _Raw, config: str | None, problems: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The accepted values of ``raw`` converted to their fields' types, and
    where every setting came from; a problem for each value not accepted."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {name: DEFAULT for name in _FIELDS}
    for name, (value, source, label) in raw.items():
        f = _FIELDS[name]
        kind = type(f.default)
        try:
            converted = _convert(kind, value)
        except ValueError as exc:
            problems.append(f"{label}: {value!r} is not accepted: {exc}{_example(name)}")
            continue
        check = f.metadata["check"]
        why = check(converted) if check else None
        if why:
            problems.append(f"{label}: {value!r} is not accepted: {why}")
            continue
        values[name] = converted
        sources[name] = source if source == ENVIRONMENT else f"{FILE} {config}"
    return values, sources


def _suggest_env(name: str) -> str:
    close = difflib.get_close_matches(name, list(_FIELDS), n=1)
    return f" (did you mean {env_name(close[0])}?)" if close else ""


def load_settings(env: dict[str, str] | None = None) -> Settings:
    return load(env).settings


def shown(settings: Settings, name: str) -> str:
    """A setting's value as ``pbm config show`` prints it: secrets hidden."""
    value = getattr(settings, name)
    if name == "database_url":
        from sqlalchemy.engine import make_url

        return make_url(value).render_as_string(hide_password=True)
    if is_secret(name) and value:
        return "(hidden)"
    return str(value)


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) of every setting, for help texts and docs."""
    out = []
    for f in fields(Settings):
        default = f.default
        out.append((env_name(f.name), "(empty)" if default == "" else str(default), f.metadata["meaning"]))
    return out
