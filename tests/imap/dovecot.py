"""A real Dovecot for the mailbox tests: started on a free loopback port with
a configuration, a passwd-file user and a mail directory of its own (never the
system's instance), in the foreground as a child process of the test.  Mail
goes in with IMAP APPEND, as a provider's delivery would put it there."""

from __future__ import annotations

import imaplib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.harness import free_port

DOVECOT = "/usr/sbin/dovecot"
USER = "games"
PASSWORD = "imap-pass-1234"


def installed() -> bool:
    return os.path.exists(DOVECOT) and os.path.exists("/usr/lib/dovecot/imap")


def _users() -> tuple[str, str, str]:
    """(internal user, login user, mail user): the package's own users when
    the tests run as root (Dovecot refuses to run its processes as root),
    else the user running the tests for all three."""
    if os.getuid() != 0:
        me = pwd.getpwuid(os.getuid()).pw_name
        return me, me, me
    return "dovecot", "dovenull", "dovecot"


CONFIG = """\
protocols = imap
listen = {address}
base_dir = {dir}/run
state_dir = {dir}/state
instance_name = pbmtest-{port}
log_path = {dir}/dovecot.log
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
first_valid_uid = 1
default_internal_user = {internal}
default_internal_group = {internal}
default_login_user = {login}
mail_location = maildir:{dir}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {dir}/passwd
}}
userdb {{
  driver = static
  args = uid={mail} gid={mail} home={dir}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = {address}
    port = {port}
  }}
  inet_listener imaps {{
    address = {address}
    port = {tls_port}
  }}
}}
service anvil {{
  chroot =
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""


class Dovecot:
    def __init__(self, tmp: Path, address: str = "127.0.0.1", tls: bool = False):
        # a directory Dovecot's own users can read (pytest's tmp_path is the tester's alone)
        self.dir = Path(tempfile.mkdtemp(prefix="pbm-dovecot-"))
        self.dir.chmod(0o755)
        self.port = free_port()
        self.address = address
        internal, login, mail = _users()
        #: with ``tls``: a certificate for localhost from a CA of its own (trustme), imaps on
        #: tls_port and STARTTLS on port; ``ca_file`` is that CA
        self.tls_port = free_port() if tls else 0
        self.ca_file: Path | None = None
        ssl = "ssl = no"
        if tls:
            import trustme

            ca = trustme.CA()
            leaf = ca.issue_cert("localhost", "127.0.0.1")
            leaf.cert_chain_pems[0].write_to_path(str(self.dir / "cert.pem"))
            leaf.private_key_pem.write_to_path(str(self.dir / "key.pem"))
            self.ca_file = tmp / "imap-ca.pem"
            ca.cert_pem.write_to_path(str(self.ca_file))
            ssl = f"ssl = yes\nssl_cert = <{self.dir}/cert.pem\nssl_key = <{self.dir}/key.pem"
        (self.dir / "dovecot.conf").write_text(CONFIG.format(dir=self.dir, port=self.port, internal=internal,
                                                             login=login, mail=mail, address=address, ssl=ssl,
                                                             tls_port=self.tls_port))
        (self.dir / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
        (self.dir / "passwd").chmod(0o644)
        (self.dir / "mail").mkdir(exist_ok=True)
        if os.getuid() == 0:
            shutil.chown(self.dir / "mail", mail, mail)
        self.password_file = tmp / "imap-password"
        self.password_file.write_text(PASSWORD + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"imap://{USER}@{self.address}:{self.port}/INBOX"

    def start(self) -> Dovecot:
        # a session of its own: stop() ends the master and every IMAP process it started
        self.proc = subprocess.Popen([DOVECOT, "-F", "-c", str(self.dir / "dovecot.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("dovecot exited:\n" + self.log())
            try:
                with socket.create_connection((self.address, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("dovecot did not listen:\n" + self.log())

    def stop(self) -> None:
        """The server goes away: the master and its IMAP processes (whose
        connections close: a client in IDLE is told BYE or sees the end)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # its IMAP processes, which outlive the master for a while
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        self.proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        p = self.dir / "dovecot.log"
        return p.read_text(errors="replace") if p.exists() else ""

    # -- as a provider's delivery and as the account's owner -------------------------
    def connect(self) -> imaplib.IMAP4:
        conn = imaplib.IMAP4(self.address, self.port, timeout=30)
        conn.login(USER, PASSWORD)
        return conn

    def append(self, *raws: bytes, mailbox: str = "INBOX") -> None:
        """Put mails into the mailbox, as the provider's delivery does."""
        conn = self.connect()
        try:
            for raw in raws:
                typ, data = conn.append(mailbox, "", imaplib.Time2Internaldate(time.time()), raw)
                assert typ == "OK", data
        finally:
            conn.logout()

    def subjects(self, mailbox: str) -> list[str]:
        """The Subject of every mail in ``mailbox`` (none if it does not exist)."""
        conn = self.connect()
        try:
            typ, _ = conn.select(f'"{mailbox}"', readonly=True)
            if typ != "OK":
                return []
            typ, data = conn.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
            if typ != "OK" or data == [None]:
                return []
            return [part[1].decode().split(":", 1)[1].strip() for part in data if isinstance(part, tuple)]
        finally:
            conn.logout()

    def count(self, mailbox: str) -> int:
        conn = self.connect()
        try:
            typ, data = conn.status(f'"{mailbox}"', "(MESSAGES)")
            if typ != "OK":
                return 0
            return int(data[0].decode().rsplit("MESSAGES", 1)[1].strip(" )"))
        finally:
            conn.logout()
