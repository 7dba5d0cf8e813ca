"""A mailbox instead of an MX (issue 43): `pbm serve` reads an IMAP mailbox
(PBM_IMAP_URL) and stores each mail of ours in the same inbox table, the same
way, as the SMTP listener does (mail/inbound.py); the worker handles it as any
other mail.  This module is only a second door in front of the same inbox.

* Addresses: the mailbox's own address (PBM_MAILBOX_ADDRESS) is pbm@, its plus
  addresses are the games (``LOCAL+NAME@DOMAIN``), postmaster and the return
  paths (``LOCAL+b-TAG@DOMAIN``).  A mail's recipients are read from the
  headers the final delivery wrote (Delivered-To, X-Original-To), else from
  To and Cc; each of ours is stored as the envelope recipient the pipeline
  knows (``NAME@PBM_DOMAIN``: Settings.internal_address), one inbox row each,
  as the listener does.  The envelope sender is the Return-Path the delivery
  wrote (``<>`` for a bounce), else the From address.
* Exactly once: a mail is stored and committed, with the mailbox's
  UIDVALIDITY and its UID, before it is moved to PBM_IMAP_DONE_MAILBOX (MOVE,
  or COPY, \\Deleted and UID EXPUNGE).  A mail found again after a kill
  between the two (its UIDVALIDITY and UID already on a row) is only moved;
  a copy that comes back under a new UID is the worker's duplicate (the
  Message-ID rule).  Mail that is not for us is never fetched as read
  (BODY.PEEK), never flagged, moved or deleted.
* Waiting: IDLE where the server offers it (imaplib of Python 3.11 has none:
  the command is written on the connection and its lines read here, renewed
  every PBM_IMAP_POLL_SECONDS), a look every PBM_IMAP_POLL_SECONDS otherwise.
* Faults: a refused login at start stops `pbm serve` (one line, exit 2);
  later, a server that goes away or a dropped connection is retried with a
  back-off up to a minute, logged once per outage, and the GM told once
  (the ``mailbox_state`` row, which /healthz and `pbm mail status` read).
"""

from __future__ import annotations

import email.utils
import imaplib
import logging
import re
import select as selectors_
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.parser import BytesHeaderParser
from email.policy import compat32

from sqlalchemy import select
from sqlalchemy.orm import Session

from pbm_server.base import clock
from pbm_server.base.settings import Settings, is_loopback_host, parse_imap_url
from pbm_server.mail.compose import Composer
from pbm_server.mail.inbound import _insert, _rows_of
from pbm_server.mail.outbound import kill_once
from pbm_server.play.notices import tell_gm
from pbm_server.store.db import Database
from pbm_server.store.models import InboundBody, InboundMail, MailboxState

log = logging.getLogger(__name__)

#: messages fetched and stored per commit
CHUNK = 50
#: the longest pause between two attempts to reach a failing mailbox (seconds)
BACKOFF_MAX = 60.0
#: an IMAP command that gets no answer this long is a dropped connection (seconds)
COMMAND_TIMEOUT = 60.0
#: how long a quiet mailbox's last_read_at may lag (seconds)
READ_MARK_EVERY = 10.0

_RESPONSE_CODE = re.compile(r"\[([A-Z-]+)")
#: PBM_FAILPOINT: SIGKILL between a commit of mailbox mail and its move (see MailboxReader._failpoint)
FAILPOINT_KILL_AFTER_COMMIT = "sigkill-after-mailbox-commit:"
#: response codes of a refused login that say the server, not the password, is at fault (RFC 5530)
TEMPORARY_CODES = frozenset({"UNAVAILABLE", "SERVERBUG", "LIMIT", "INUSE", "OVERQUOTA"})


class MailboxRefused(Exception):
    """The mailbox cannot be used as set: a refused login, no TLS where it is
    required.  Its text is one line for the operator."""


@dataclass(frozen=True)
class Fetched:
    uid: int
    mail_from: str
    #: our recipients as the pipeline knows them (LOCAL@PBM_DOMAIN); empty: not ours
    rcpts: list[str]
    raw: bytes


def recipients(settings: Settings, raw: bytes) -> tuple[str, list[str]]:
    """(envelope sender, our recipients as LOCAL@PBM_DOMAIN) of a mail as the
    mailbox holds it: the recipients from the delivery's own headers
    (Delivered-To, X-Original-To) when one of them is a plus address of ours,
    else those of To and Cc that are ours, else the bare address if the
    delivery's headers name it (a Bcc); the sender from Return-Path, else From."""
    head = BytesHeaderParser(policy=compat32).parsebytes(raw, headersonly=True)

    def ours(names: tuple[str, ...]) -> list[str]:
        found: list[str] = []
        values = [str(v) for n in names for v in (head.get_all(n) or [])]
        for _, addr in email.utils.getaddresses(values):
            inner = settings.internal_address(addr) if addr else None
            if inner is not None and inner not in found:
                found.append(inner)
        return found

    delivered = ours(("Delivered-To", "X-Original-To", "X-Delivered-To", "Envelope-To"))
    written = ours(("To", "Cc"))
    bare = f"pbm@{settings.domain.lower()}"
    # the delivery's own header names the plus address: it is the envelope's; a delivery
    # that wrote only the bare mailbox (some do, whatever the +tag) says less than To and Cc
    rcpts = delivered if any(r != bare for r in delivered) else (written or delivered)
    return_path = head.get_all("Return-Path")
    if return_path:
        sender = email.utils.parseaddr(str(return_path[0]))[1]
        if str(return_path[0]).strip() in ("<>", ""):
            sender = ""
    else:
        sender = email.utils.parseaddr(str(head.get("From", "")))[1]
    return sender, rcpts


def store_fetched(db: Database, key: str, uidvalidity: int, items: list[Fetched]) -> tuple[list[int], int]:
    """Store the mails of ours among ``items`` in one transaction, each with
    ``uidvalidity`` and its UID, as the listener stores mail (one body, one
    inbox row per recipient); a UID stored before (a kill between the commit
    and the move) is not stored again.  The new inbox ids, and the number of
    mails already there."""
    mine = [f for f in items if f.rcpts]
    if not mine:
        return [], 0
    with db.write() as s:
        known = set(s.scalars(select(InboundMail.imap_uid).where(
            InboundMail.imap_uidvalidity == uidvalidity, InboundMail.imap_uid.in_([f.uid for f in mine]))))
        new = [f for f in mine if f.uid not in known]
        if not new:
            return [], len(known)
        bodies, flat, _ = _rows_of([(f.mail_from, f.rcpts, f.raw) for f in new])
        body_ids = _insert(s, db, InboundBody, [dict(raw=raw, rcpt_tos=r) for raw, r in bodies])
        now = clock.now()
        rows = [dict(received_at=now, mail_from=sender, rcpt_tos=list(r), body_id=body_ids[n], status="new",
                     imap_uidvalidity=uidvalidity, imap_uid=new[n].uid) for sender, r, n in flat]
        ids = _insert(s, db, InboundMail, rows)
        _mark(s, key, now)
    return ids, len(known)


def _mark(s: Session, key: str, now: datetime) -> None:
    """The mailbox ``key`` was read at ``now``."""
    state = s.get(MailboxState, key)
    if state is None:
        s.add(MailboxState(mailbox=key, last_read_at=now))
    else:
        state.last_read_at = now


def _one_line(exc: BaseException) -> str:
    text = exc.args[0] if exc.args else exc
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())[:300] or type(exc).__name__


def _fault_text(exc: BaseException, where: str) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"the mailbox at {where}: its TLS certificate was not accepted ({exc.verify_message or exc.reason}); "
                "a private CA: SSL_CERT_FILE=/path/ca.pem in the server's environment")
    if isinstance(exc, ConnectionRefusedError):
        return f"the mailbox at {where}: nothing accepts connections there (connection refused)"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"the mailbox at {where}: no answer (timed out)"
    if isinstance(exc, imaplib.IMAP4.abort):
        return f"the mailbox at {where}: the connection was dropped ({_one_line(exc)})"
    return f"the mailbox at {where}: {type(exc).__name__}: {_one_line(exc)}"


class MailboxReader:
    """The thread that reads PBM_IMAP_URL into the inbox (see the module's text)."""

    def __init__(self, db: Database, settings: Settings, composer: Composer,
                 on_commit: Callable[[int], None] | None = None, on_mail: Callable[[], None] | None = None):
        parsed = parse_imap_url(settings.imap_url)
        assert parsed is not None, "PBM_IMAP_URL is checked by the settings"
        self.scheme, self.user, self.host, self.port, self.mailbox = parsed
        self.db = db
        self.settings = settings
        self.composer = composer
        self.on_commit = on_commit
        self.on_mail = on_mail
        self.where = f"{self.scheme}://{self.host}:{self.port}/{self.mailbox}"
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: imaplib.IMAP4 | None = None
        #: UIDVALIDITY and the next UID not yet looked at, while it holds
        self._validity: int | None = None
        self._next_uid = 1
        #: an outage was logged (in this process); the state row says it for all
        self._failing = False
        self._first_read = True
        self._marked = 0.0
        #: tests: False makes the reader COPY, flag and expunge as on a server without MOVE
        self.use_move = True
        self.stored = 0  # mails stored so far (benchmarks)
        self._stored_here = 0  # for the failpoint
        self.moved = 0

    # -- connection ---------------------------------------------------------------------
    def _password(self) -> str:
        with open(self.settings.imap_password_file, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n")

    def _connect(self) -> imaplib.IMAP4:
        """A logged-in connection with the mailbox selected.  A refused login
        or missing TLS raises MailboxRefused; anything else is a fault of the
        network or the server (retried)."""
        context = ssl.create_default_context()  # the system's trust store; SSL_CERT_FILE honoured
        conn: imaplib.IMAP4
        if self.scheme == "imaps":
            conn = imaplib.IMAP4_SSL(self.host, self.port, ssl_context=context, timeout=COMMAND_TIMEOUT)
        else:
            conn = imaplib.IMAP4(self.host, self.port, timeout=COMMAND_TIMEOUT)
            if "STARTTLS" in conn.capabilities:
                try:
                    conn.starttls(ssl_context=context)
                except imaplib.IMAP4.error as exc:
                    conn.shutdown()
                    raise MailboxRefused(f"PBM_IMAP_URL: {self.host} refused STARTTLS: {_one_line(exc)}") from exc
            elif not is_loopback_host(self.host):
                conn.shutdown()
                raise MailboxRefused(f"PBM_IMAP_URL: {self.host}:{self.port} offers no STARTTLS; a mailbox not on "
                                     "this machine is read over TLS only: use imaps://")
        try:
            conn.login(self.user, self._password())
        except imaplib.IMAP4.abort:
            raise
        except imaplib.IMAP4.error as exc:
            conn.shutdown()
            code = _RESPONSE_CODE.search(_one_line(exc))
            if code is not None and code.group(1) in TEMPORARY_CODES:
                raise  # the server's own trouble (RFC 5530): tried again, not a wrong password
            raise MailboxRefused(f"PBM_IMAP_URL: {self.host} refused the login of {self.user!r} with the password "
                                 f"in PBM_IMAP_PASSWORD_FILE: {_one_line(exc)}") from exc
        try:
            return self._open(conn)
        except BaseException:
            try:
                conn.shutdown()
            except Exception:
                pass
            raise

    def _open(self, conn: imaplib.IMAP4) -> imaplib.IMAP4:
        """The logged-in ``conn`` with the mailbox selected and the done mailbox there."""
        typ, data = conn.capability()  # what the server offers after the login (MOVE, UIDPLUS, IDLE)
        if typ == "OK" and data and data[-1]:
            conn.capabilities = tuple(data[-1].decode("ascii", "replace").upper().split())
        typ, data = conn.select(_quoted(self.mailbox))
        if typ != "OK":
            raise MailboxRefused(f"PBM_IMAP_URL: there is no mailbox {self.mailbox!r} at {self.host}: "
                                 f"{_one_line(imaplib.IMAP4.error(data[0] if data else b''))}")
        self._ensure_done_mailbox(conn)
        validity = conn.response("UIDVALIDITY")[1]
        value = int(validity[0]) if validity and validity[0] else 0
        if value != self._validity:
            self._validity, self._next_uid = value, 1
        return conn

    def _ensure_done_mailbox(self, conn: imaplib.IMAP4) -> None:
        done = self.settings.imap_done_mailbox
        typ, data = conn.list('""', _quoted(done))
        if typ == "OK" and any(d for d in data if d):
            return
        typ, data = conn.create(_quoted(done))
        if typ != "OK":
            raise MailboxRefused(f"PBM_IMAP_DONE_MAILBOX: {self.host} would not create the mailbox {done!r}: "
                                 f"{_one_line(imaplib.IMAP4.error(data[0] if data else b''))}")
        log.info("mailbox: created %s at %s for the mail that is handled", done, self.host)

    def check(self) -> None:
        """At start: log in once; a refused login raises MailboxRefused (the
        CLI says it in one line and exits 2).  A server that cannot be reached
        is no reason not to start: the reader keeps trying."""
        try:
            self._conn = self._connect()
        except MailboxRefused:
            raise
        except (OSError, imaplib.IMAP4.error, EOFError):
            self._conn = None  # the reader's first try says why (once: MailboxReader._fault)

    # -- the loop -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="mailbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        else:
            self._drop(logout=True)  # the connection check() made

    def run(self) -> None:
        pause = 1.0
        while not self._stopping.is_set():
            try:
                if self._conn is None:
                    self._conn = self._connect()
                self._works_again()
                while not self._stopping.is_set():
                    self.read_once(self._conn)
                    pause = 1.0  # the back-off starts afresh only once the mailbox was read
                    self._wait(self._conn)
            except MailboxRefused as exc:
                self._fault(str(exc))
            except (OSError, imaplib.IMAP4.error, EOFError, ValueError) as exc:
                self._fault(_fault_text(exc, self.where))
            except Exception as exc:  # a fault of ours (the database): retried the same way
                log.exception("mailbox: reading failed")
                self._fault(f"the mailbox could not be read into the inbox: {type(exc).__name__}: {_one_line(exc)}")
            self._drop()
            if self._stopping.wait(pause):
                break
            pause = min(pause * 2, BACKOFF_MAX)
        self._drop(logout=True)

    def _drop(self, logout: bool = False) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if logout:
                conn.logout()
            else:
                conn.shutdown()
        except Exception:
            pass

    def read_once(self, conn: imaplib.IMAP4) -> int:
        """Store every new mail of ours and move it to the done mailbox; the
        number of mails of ours handled."""
        typ, data = conn.uid("SEARCH", f"UID {self._next_uid}:*")
        if typ != "OK":
            raise imaplib.IMAP4.error(f"SEARCH failed: {data!r}")
        uids = sorted(int(u) for u in (data[0] or b"").split() if int(u) >= self._next_uid)
        handled = 0
        for at in range(0, len(uids), CHUNK):
            chunk = uids[at:at + CHUNK]
            fetched = self._fetch(conn, chunk)
            ids, again = store_fetched(self.db, self.where, self._validity or 0, fetched)
            if ids and self.on_commit is not None:
                self.on_commit(len(ids))
            mine = [f.uid for f in fetched if f.rcpts]
            self._failpoint(len(ids))
            if mine:
                self._move(conn, mine)
            self.stored += len(mine) - again
            self.moved += len(mine)
            handled += len(mine)
            self._next_uid = max(chunk) + 1
            if ids:
                log.info("mailbox: %d mail(s) stored as inbox %s..%s and moved to %s%s", len(mine) - again,
                         ids[0], ids[-1], self.settings.imap_done_mailbox,
                         f"; {again} stored before were only moved" if again else "")
            elif again:  # a chunk of mail stored before a crash and not moved then: only moved now
                log.info("mailbox: %d mail(s) stored before were only moved to %s", again,
                         self.settings.imap_done_mailbox)
            self._marked = time.monotonic() if ids else self._marked
        if time.monotonic() - self._marked >= READ_MARK_EVERY:
            with self.db.write() as s:
                _mark(s, self.where, clock.now())
            self._marked = time.monotonic()
        return handled

    def _failpoint(self, stored: int) -> None:
        """Rehearsals: with PBM_FAILPOINT ``sigkill-after-mailbox-commit:N`` the
        process kills itself (SIGKILL) once N mails of the mailbox are
        committed and not yet moved -- the moment the UIDs kept with the rows
        are for.  Once: a file ``failpoint-fired`` beside PBM_MAILDIR records it."""
        failpoint = self.settings.failpoint
        if not failpoint.startswith(FAILPOINT_KILL_AFTER_COMMIT) or not stored:
            return
        self._stored_here += stored
        wanted = failpoint[len(FAILPOINT_KILL_AFTER_COMMIT):]
        if self._stored_here < (int(wanted) if wanted.isdigit() else 1):
            return
        kill_once(self.settings)

    def _fetch(self, conn: imaplib.IMAP4, uids: list[int]) -> list[Fetched]:
        typ, data = conn.uid("FETCH", ",".join(map(str, uids)), "(UID RFC822.SIZE BODY.PEEK[])")
        if typ != "OK":
            raise imaplib.IMAP4.error(f"FETCH failed: {data!r}")
        out: list[Fetched] = []
        for part in data:
            if not isinstance(part, tuple):
                continue
            meta = part[0].decode("ascii", "replace")
            m = re.search(r"UID (\d+)", meta)
            size = re.search(r"RFC822\.SIZE (\d+)", meta)
            if m is None:
                continue
            uid, raw = int(m.group(1)), part[1]
            if size is not None and int(size.group(1)) > self.settings.max_message_bytes:
                log.warning("mailbox: UID %d is larger than PBM_MAX_MESSAGE_BYTES (%s bytes); left in %s", uid,
                            size.group(1), self.mailbox)
                out.append(Fetched(uid, "", [], b""))
                continue
            sender, rcpts = recipients(self.settings, raw)
            out.append(Fetched(uid, sender, rcpts, raw))
        return out

    def _move(self, conn: imaplib.IMAP4, uids: list[int]) -> None:
        """Our stored mails out of the read mailbox into the done mailbox."""
        which = ",".join(map(str, uids))
        done = _quoted(self.settings.imap_done_mailbox)
        if self.use_move and "MOVE" in conn.capabilities:
            typ, data = conn.uid("MOVE", which, done)
            if typ != "OK":
                raise imaplib.IMAP4.error(f"MOVE failed: {data!r}")
            return
        typ, data = conn.uid("COPY", which, done)
        if typ != "OK":
            raise imaplib.IMAP4.error(f"COPY failed: {data!r}")
        conn.uid("STORE", which, "+FLAGS.SILENT", r"(\Deleted)")
        if "UIDPLUS" in conn.capabilities:
            conn.uid("EXPUNGE", which)  # only ours: a \Deleted flag someone else set is left alone
        else:
            conn.expunge()

    def _wait(self, conn: imaplib.IMAP4) -> None:
        """Until new mail may be there: IDLE where offered, else a pause."""
        if "IDLE" not in conn.capabilities:
            self._stopping.wait(self.settings.imap_poll_seconds)
            return
        tag: bytes = conn._new_tag()  # imaplib has no IDLE before 3.14: its tag and lines by hand
        conn.send(tag + b" IDLE\r\n")
        line = conn.readline()
        if not line or line.startswith(b"* BYE"):
            raise imaplib.IMAP4.abort(f"the server said {line.strip().decode('ascii', 'replace') or 'nothing'}")
        if not line.startswith(b"+"):
            raise imaplib.IMAP4.error(f"IDLE refused: {line!r}")
        sock = conn.socket()
        ends = time.monotonic() + self.settings.imap_poll_seconds
        # any line the server sends while idling (new mail, an expunge, "still
        # here", BYE) ends the IDLE: the lines are then read after DONE, so
        # none is left in imaplib's buffer where select() cannot see it
        while not self._stopping.is_set() and time.monotonic() < ends:
            if isinstance(sock, ssl.SSLSocket) and sock.pending():
                break
            if selectors_.select([sock], [], [], 0.25)[0]:
                break
        conn.send(b"DONE\r\n")
        while True:
            line = conn.readline()
            if not line:
                raise imaplib.IMAP4.abort("the server closed the connection during IDLE")
            if line.startswith(b"* BYE"):
                raise imaplib.IMAP4.abort(f"the server said {line.strip().decode('ascii', 'replace')}")
            if line.startswith(tag):
                if not line[len(tag):].strip().startswith(b"OK"):
                    raise imaplib.IMAP4.error(f"IDLE ended with {line!r}")
                return

    # -- faults ---------------------------------------------------------------------------
    def _fault(self, text: str) -> None:
        """Once per outage: the log at ERROR and the GM told (through the outbox:
        the relay is another matter); the state row says since when."""
        now = clock.now()
        first = not self._failing
        self._failing = True
        if first:
            log.error("%s; new mail waits in the mailbox and is read when it answers again (retried with "
                      "back-off up to %.0f s)", text, BACKOFF_MAX)
        try:
            with self.db.write() as s:
                state = s.get(MailboxState, self.where)
                if state is None:
                    state = MailboxState(mailbox=self.where)
                    s.add(state)
                if state.fault_since is None:
                    state.fault_since = now
                state.fault = text
                if state.told_at is None or state.told_at < state.fault_since:
                    state.told_at = now
                    tell_gm(s, self.composer, self.settings.gm_address,
                            "The mailbox cannot be read: new mail waits there until it can; none is lost.",
                            [("mailbox", self.where), ("error", text), ("what happens",
                             "the server tries again with growing pauses; this notice is not repeated until "
                             "the mailbox has been read again")], now, kind="gm-mailbox")
                    told = True
                else:
                    told = False
        except Exception:
            log.exception("mailbox: could not record that the mailbox fails")
            return
        if told and self.on_mail is not None:
            self.on_mail()

    def _works_again(self) -> None:
        """After a connection: an outage recorded (here or before a restart) is over."""
        if not self._failing and not self._first_read:
            return
        if self._failing:
            log.warning("mailbox %s is read again", self.where)
        self._failing = self._first_read = False
        with self.db.write() as s:
            state = s.get(MailboxState, self.where)
            if state is not None:
                state.fault_since = None
                state.fault = None
                state.last_read_at = clock.now()


def _quoted(name: str) -> str:
    """A mailbox name as an IMAP string."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
