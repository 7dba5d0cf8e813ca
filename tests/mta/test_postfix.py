"""Postfix in front of `pbm serve`, end to end (issue 16, "Done when").

Each test starts a loopback-only Postfix instance of its own (config, queue and
data directories in a temporary directory, ports picked free; `postfix -c DIR
start` / `stop`) with Debian's postfix package (.ci/postfix-install), and
`pbm serve` behind it:

* the SMTP path: the game domain's transport is `smtp:[127.0.0.1]:PORT` (the
  listener), `reject_unverified_recipient` refuses mistyped games at RCPT;
* the pipe path: the transport is a `pipe` service running `pbm mail inject
  --from ${sender} --to ${recipient}` as `nobody`;
* outbound: pbm's replies go to a loopback submission service of the same
  Postfix, which delivers the players' mail to Maildirs (virtual(8)); mail to
  an unknown player is accepted and then bounced by Postfix to the reply's
  return path, which comes back to pbm and is handled (the outbox row becomes
  `bounced`, the GM's summary arrives in the GM's Maildir).

The site part of the configuration is the one docs/operations.md shows
("Postfix in front of pbm serve"); a test checks that they agree.  Skipped only
when the postfix binary is absent."""

from __future__ import annotations

import json
import mailbox
import os
import pwd
import shutil
import smtplib
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, make_msgid
from pathlib import Path

import pytest

from tests.harness import ROOT, PbmServer, free_port, wait_until

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

DOMAIN = "games.example.test"
PLAYERS = "players.example.test"
GM = f"gm@{PLAYERS}"
PIPE_USER = "nobody"


def postfix_binary() -> str | None:
    found = shutil.which("postfix") or ("/usr/sbin/postfix" if os.path.exists("/usr/sbin/postfix") else None)
    return found


# -- the configuration: the site part is what docs/operations.md shows ----------------------------

SITE_MAIN = """\
relay_domains = {domain}
transport_maps = texthash:{conf}/transport
smtpd_recipient_restrictions = reject_unauth_destination, reject_unverified_recipient
unverified_recipient_reject_code = 550
pbm_destination_recipient_limit = 1
"""

SITE_TRANSPORT = {"smtp": "{domain}  smtp:[127.0.0.1]:{pbm_port}\n", "pipe": "{domain}  pbm:\n"}

SITE_MASTER = """\
pbm       unix  -       n       n       -       -       pipe
  flags=R user={user} argv={pbm} mail inject --from ${{sender}} --to ${{recipient}}
{submit}      inet  n       -       n       -       -       smtpd
  -o mynetworks=127.0.0.0/8
  -o smtpd_recipient_restrictions=permit_mynetworks,reject
"""

#: as docs/operations.md writes the site part
DOCS_VALUES = {"domain": "games.example.test", "conf": "/etc/postfix", "pbm_port": "2525", "user": "pbm",
               "pbm": "/usr/local/lib/pbm-server/pbm", "submit": "2026"}

# what makes the test instance one of its own: loopback only, its own directories,
# no relaying for 127.0.0.1 on the inbound port (there the test's clients are the
# outside world), players' mail delivered to Maildirs
INSTANCE_MAIN = """\
compatibility_level = 3.6
queue_directory = {dir}/queue
data_directory = {dir}/data
maillog_file = {dir}/maillog
maillog_file_prefixes = {dir}
myhostname = mta.{domain}
mydestination =
alias_maps =
alias_database =
local_recipient_maps =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 192.0.2.1/32
smtpd_peername_lookup = no
smtp_host_lookup = native
address_verify_map =
virtual_mailbox_domains = {players}
virtual_mailbox_base = {dir}/mail
virtual_mailbox_maps = texthash:{conf}/mailboxes
virtual_uid_maps = static:{uid}
virtual_gid_maps = static:{gid}
"""

INSTANCE_MASTER = """\
127.0.0.1:{mx} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       -       0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
"""

# the submission service accepts any address of the players' domain and lets
# virtual(8) bounce the unknown ones afterwards, as a remote MX behind the relay would
SUBMIT_INSTANCE = "  -o smtpd_reject_unlisted_recipient=no\n"


class Postfix:
    def __init__(self, base: Path, binary: str, path: str, pbm_port: int, pbm_command: str, submit_options: str = ""):
        self.dir = base / "postfix"
        self.conf = self.dir / "conf"
        self.binary = binary
        self.mx = free_port()
        self.submit = free_port()
        nobody = pwd.getpwnam(PIPE_USER)
        values = {"dir": str(self.dir), "conf": str(self.conf), "domain": DOMAIN, "players": PLAYERS,
                  "uid": nobody.pw_uid, "gid": nobody.pw_gid, "mx": self.mx, "pbm_port": pbm_port,
                  "user": PIPE_USER, "pbm": pbm_command, "submit": f"127.0.0.1:{self.submit}"}
        for sub in ("conf", "queue", "data", "mail"):
            (self.dir / sub).mkdir(parents=True)
        shutil.chown(self.dir / "data", "postfix")
        os.chown(self.dir / "mail", nobody.pw_uid, nobody.pw_gid)
        (self.conf / "main.cf").write_text(SITE_MAIN.format(**values) + INSTANCE_MAIN.format(**values))
        master = SITE_MASTER.format(**values) + INSTANCE_MASTER.format(**values)
        master = master.replace("  -o smtpd_recipient_restrictions=permit_mynetworks,reject\n",
                                "  -o smtpd_recipient_restrictions=permit_mynetworks,reject\n" + SUBMIT_INSTANCE
                                + submit_options)
        (self.conf / "master.cf").write_text(master)
        (self.conf / "transport").write_text(SITE_TRANSPORT[path].format(**values))
        (self.conf / "mailboxes").write_text(f"ann@{PLAYERS} ann/\nbob@{PLAYERS} bob/\n{GM} gm/\n")

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.binary, "-c", str(self.conf), *args], capture_output=True, text=True)

    def start(self) -> None:
        done = self.run("start")
        assert done.returncode == 0, f"postfix did not start: {done.stderr}\n{self.log()}"
        wait_until(self._answers, timeout=30, what="postfix to answer on its ports")

    def _answers(self) -> bool:
        try:
            for port in (self.mx, self.submit):
                with smtplib.SMTP("127.0.0.1", port, timeout=5) as smtp:
                    smtp.noop()
            return True
        except OSError:
            return False

    def _master_alive(self) -> bool:
        """Whether Postfix's master still runs (its pid file outlives it)."""
        try:
            pid = int((self.dir / "queue" / "pid" / "master.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return False
        return True

    def stop(self) -> None:
        self.run("stop")
        deadline = time.monotonic() + 30
        while self._master_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._master_alive():
            self.run("abort")

    def log(self) -> str:
        path = self.dir / "maillog"
        return path.read_text(errors="replace") if path.exists() else "(no maillog)"

    def maildir(self, user: str) -> list[EmailMessage]:
        path = self.dir / "mail" / user
        if not (path / "new").is_dir():
            return []
        box = mailbox.Maildir(path, factory=None, create=False)
        msgs = [BytesParser(policy=policy.default).parsebytes(box.get_bytes(key)) for key in box.keys()]
        return sorted(msgs, key=lambda m: str(m.get("Date", "")))

    def wait_mail(self, user: str, count: int, timeout: float = 60) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.maildir(user)
            if len(got) >= count:
                return got
            time.sleep(0.1)
        raise AssertionError(f"{user} has {len(self.maildir(user))} mails, expected {count}; maillog:\n{self.log()[-4000:]}")

    def send(self, mail_from: str, rcpt: str, msg: EmailMessage) -> None:
        """A mail from the outside world to the MX port."""
        with smtplib.SMTP("127.0.0.1", self.mx, timeout=60) as smtp:
            smtp.sendmail(mail_from, [rcpt], msg.as_bytes())


def message(frm: str, to: str, body: str, subject: str = "commands", headers: dict | None = None) -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = frm, to, subject
    msg["Date"] = format_datetime(datetime.now(timezone.utc))
    msg["Message-ID"] = make_msgid(domain=PLAYERS)
    for k, v in (headers or {}).items():
        msg[k] = v
    msg.set_content(body)
    return msg


def text(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",))
    return " ".join((part.get_content() if part is not None else "").split())


def pipe_interpreter(base: Path) -> str:
    """A pbm the pipe's user can run: a wrapper script that adds the venv's
    site-packages to an interpreter that user can execute (the venv's own, or,
    when it lives under a directory closed to others such as /root, the
    system's Python of the same version)."""
    purelib = sysconfig.get_paths()["purelib"]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    nobody = pwd.getpwnam(PIPE_USER)
    for python in candidates:
        if not os.path.exists(python):
            continue
        try:
            probe = subprocess.run(
                [python, "-c", f"import site; site.addsitedir({purelib!r}); import pbm_server.running.cli, sqlalchemy"],
                user=nobody.pw_uid, group=nobody.pw_gid, capture_output=True, cwd="/")
        except PermissionError:
            continue  # e.g. a venv whose interpreter lives under /root
        if probe.returncode == 0:
            wrapper = base / "pbm"
            wrapper.write_text(
                "#!/bin/sh\n# pbm for Postfix's pipe: the settings, then the CLI\n"
                f"export PBM_CONFIG={base / 'pbm.toml'}\n"
                f"exec {python} -c 'import site, sys; site.addsitedir({json.dumps(purelib)}); "
                "from pbm_server.running.cli import main; sys.argv[0] = \"pbm\"; main()' \"$@\"\n")
            wrapper.chmod(0o755)
            return str(wrapper)
    pytest.fail(f"no Python that {PIPE_USER} can run imports pbm_server from {purelib}: "
                "the pipe cannot run pbm mail inject here")


@pytest.fixture
def base():
    """A directory the pipe's user can reach (pytest's tmp_path is closed to others)."""
    if postfix_binary() is None:
        pytest.skip("the postfix binary is absent (install it with .ci/postfix-install)")
    path = Path(tempfile.mkdtemp(prefix="pbm-mta-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def start_both(base: Path, path: str, process: bool = False, submit_options: str = "") -> tuple[PbmServer, Postfix]:
    """``process``: `pbm serve` as a subprocess; ``submit_options``: more
    ``-o`` lines for the submission service pbm relays through."""
    work = base / "server"
    work.mkdir()
    pbm = PbmServer(work, domain=DOMAIN, gm_address=GM, process=process)
    pbm.sink.stop()  # Postfix is the relay here
    postfix = Postfix(base, postfix_binary() or "", path, pbm.port,
                      pipe_interpreter(base) if path == "pipe" else "/bin/false", submit_options)
    pbm.env["PBM_RELAY"] = f"127.0.0.1:{postfix.submit}"
    pbm.env["PBM_RELAY_EHLO_NAME"] = f"pbm.{DOMAIN}"
    (base / "pbm.toml").write_text(f'database_url = "{pbm.db_url}"\ndomain = "{DOMAIN}"\n'
                                   f'gm_address = "{GM}"\ninject_log = "{work / "inject.log"}"\n')
    pbm.cli("db", "upgrade")
    nobody = pwd.getpwnam(PIPE_USER)
    for p in [work, *work.iterdir()]:  # the pipe's user writes the database (SQLite: its directory too)
        os.chown(p, nobody.pw_uid, nobody.pw_gid)
    postfix.start()
    return pbm, postfix


@contextmanager
def running(pbm: PbmServer, postfix: Postfix, *without: str) -> Iterator[tuple[PbmServer, Postfix]]:
    """The server started (without the parts named) for the time of the
    block; then the server closed and Postfix stopped, whatever happened."""
    try:
        pbm.start(*without)
        yield pbm, postfix
    finally:
        pbm.close()
        postfix.stop()


@pytest.fixture
def smtp_path(base):
    with running(*start_both(base, "smtp")) as both:
        yield both


@pytest.fixture
def pipe_path(base):
    with running(*start_both(base, "pipe"), "listener") as both:
        yield both


def assert_bounce_comes_back(pbm: PbmServer, postfix: Postfix) -> None:
    """The server answers gone@, Postfix accepts the reply and then bounces
    it to the reply's return path, which reaches pbm and is handled."""
    msg = message(f"gone@{PLAYERS}", f"pbm@{DOMAIN}", "help")
    postfix.send(f"gone@{PLAYERS}", f"pbm@{DOMAIN}", msg)
    wait_until(lambda: pbm.sql("SELECT count(*) FROM outbox WHERE status = 'bounced'")[0][0] == 1, timeout=90,
               what="the reply to gone@ to come back as a bounce; maillog:\n" + postfix.log()[-3000:])
    to, kind, error = pbm.sql("SELECT to_addr, kind, last_error FROM outbox WHERE status = 'bounced'")[0]
    assert to == f"gone@{PLAYERS}" and kind.startswith("reply")
    assert "5.1.1" in error
    summary = [m for m in postfix.wait_mail("gm", 1) if "bounced" in str(m["Subject"])]
    assert summary, [m["Subject"] for m in postfix.maildir("gm")]
    assert f"gone@{PLAYERS}" in text(summary[0]) and "5.1.1" in text(summary[0])
    # the GM's summary also went out with a return path of ours
    assert str(summary[0]["Return-Path"]).startswith("<bounces+")
    pbm.settle()
    assert pbm.sql("SELECT count(*) FROM inbox WHERE note LIKE 'bounce for outbox%'")[0][0] == 1


def test_smtp_path_relay_and_a_bounce_through_postfix(smtp_path):
    pbm, postfix = smtp_path
    # a mistyped game is refused at RCPT by Postfix (it asked the listener)
    with smtplib.SMTP("127.0.0.1", postfix.mx, timeout=60) as smtp:
        smtp.mail(f"ann@{PLAYERS}")
        code, reply = smtp.rcpt(f"nosuch@{DOMAIN}")
        assert code == 550 and b"No game named nosuch" in reply, (code, reply)
        code, reply = smtp.rcpt("someone@elsewhere.example")
        assert code in (454, 554) and b"Relay access denied" in reply  # never an open relay
    # a command mail is relayed to the listener, answered, and the answer delivered by Postfix
    msg = message(f"ann@{PLAYERS}", f"pbm@{DOMAIN}", "help")
    postfix.send(f"ann@{PLAYERS}", f"pbm@{DOMAIN}", msg)
    reply = postfix.wait_mail("ann", 1)[0]
    assert reply["In-Reply-To"] == msg["Message-ID"] and reply["Auto-Submitted"] == "auto-replied"
    assert str(reply["Return-Path"]).startswith("<bounces+") and str(reply["Return-Path"]).endswith(f"@{DOMAIN}>")
    assert "help" in text(reply).lower()
    # a null sender is never answered
    postfix.send("", f"pbm@{DOMAIN}", message(f"robot@{PLAYERS}", f"pbm@{DOMAIN}", "help", subject="auto"))
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE status = 'dropped'")[0][0] == 1, timeout=60,
               what="the null-sender mail dropped")
    assert_bounce_comes_back(pbm, postfix)
    assert len(postfix.maildir("ann")) == 1


def test_pipe_path_through_postfix(pipe_path):
    pbm, postfix = pipe_path
    pbm.cli("game", "new", "giveaway", "ring")
    # Bcc'd: the To header names pbm@, the envelope the game: the game answers
    msg = message(f"ann@{PLAYERS}", f"pbm@{DOMAIN}", "games", subject="which games")
    postfix.send(f"ann@{PLAYERS}", f"ring@{DOMAIN}", msg)
    reply = postfix.wait_mail("ann", 1)[0]
    assert reply["From"].addresses[0].addr_spec == f"ring@{DOMAIN}", (text(reply), postfix.log()[-2000:])
    assert reply["Auto-Submitted"] == "auto-replied"
    wait_until(lambda: any("relay=pbm" in ln and "status=sent" in ln for ln in postfix.log().splitlines()),
               what="Postfix to log the pipe delivery")
    # a game that does not exist: pbm mail inject exits 67 and Postfix bounces with its line
    postfix.send(f"ann@{PLAYERS}", f"nosuch@{DOMAIN}", message(f"ann@{PLAYERS}", f"nosuch@{DOMAIN}", "JOIN"))
    mails = postfix.wait_mail("ann", 2)
    bounce = [m for m in mails if m.get_content_type() == "multipart/report"]
    assert bounce, [m["Subject"] for m in mails]
    assert "no game named nosuch here" in bounce[0].as_string()
    assert "Traceback" not in bounce[0].as_string()
    # a null sender (the pipe's ${sender} is MAILER-DAEMON) is stored and never answered
    postfix.send("", f"pbm@{DOMAIN}", message(f"robot@{PLAYERS}", f"pbm@{DOMAIN}", "help", subject="auto"))
    wait_until(lambda: pbm.sql("SELECT count(*) FROM inbox WHERE status = 'dropped'")[0][0] == 1, timeout=60,
               what="the null-sender mail dropped; maillog:\n" + postfix.log()[-2000:])
    assert pbm.sql("SELECT mail_from FROM inbox WHERE status = 'dropped'") == [("",)]
    # bounces come back through the pipe too
    assert_bounce_comes_back(pbm, postfix)
    assert len([m for m in postfix.maildir("ann") if m.get_content_type() != "multipart/report"]) == 1


def test_the_docs_show_the_configuration_this_test_uses():
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert "## Postfix in front of pbm serve" in docs
    wanted = (SITE_MAIN + SITE_TRANSPORT["smtp"] + SITE_TRANSPORT["pipe"] + SITE_MASTER).format(**DOCS_VALUES)
    missing = [line for line in wanted.splitlines() if line.strip() and line.strip() not in docs]
    assert not missing, f"docs/operations.md lacks: {missing}"
    readme = (ROOT / "README.md").read_text()
    for words in ("relay_domains", "transport_maps", "reject_unverified_recipient",
                  "--from ${sender} --to ${recipient}", "pbm_destination_recipient_limit = 1"):
        assert words in readme, words
