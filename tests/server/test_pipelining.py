"""Delivery with SMTP PIPELINING (RFC 2920; pbm_server/mail/outbound.py,
Stream): when the relay offers it, a mail's MAIL, RCPT and
DATA go in one write, after the text of the mail before it (the standard
lets a mail's text begin a group), and the last text alone; every refusal
raises (or gives) what smtplib's one command at a time raises, so delivery
judges it the same (outbound._judge), and the session is left ready for the
next mail.  The relay is a real aiosmtpd server that offers PIPELINING (it
reads commands from its stream in order); between us and it, a plain TCP
pipe notes each piece the client writes."""

from __future__ import annotations

import smtplib
import socket
import threading
from collections.abc import Iterator

import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import text

from pbm_server.base.settings import load_settings
from pbm_server.mail.inbound import store_messages
from pbm_server.mail.outbound import Stream, pipelines
from tests.harness import free_port
from tests.server.test_relay_faults import PolicySink

#: drives nothing the database changes (how mail is read and written, the MTA in front, the relay, the
#: HTTP edge): .ci/run runs it in the SQLite pass only (docs/testing.md, "dbneutral")
pytestmark = pytest.mark.dbneutral

SENDER, RCPT = "bounces@pbm.test", "player@example.org"


def send_one(smtp: smtplib.SMTP, sender: str, rcpt: str, raw: bytes, options: list[str]) -> None:
    """One mail as delivery sends it -- a :class:`Stream` of one when the
    relay offers PIPELINING, else smtplib one command at a time --, raising
    what became of it."""
    if not pipelines(smtp):
        smtp.sendmail(sender, [rcpt], raw, mail_options=options)
        return
    stream = Stream(smtp)
    _, refused = stream.send(sender, rcpt, raw, options)
    refused = refused or stream.finish()
    if refused is not None:
        raise refused
MAIL = (b"From: pbm@pbm.test\r\nTo: player@example.org\r\nSubject: t\r\n\r\n"
        b"line one\r\n.a line starting with a dot\r\n..two dots\r\n.\r\nlast line\r\n")


class PipeliningSink(PolicySink):
    """PolicySink (answers to MAIL, RCPT and DATA set by the test), offering
    PIPELINING, or not (``offer``)."""

    def __init__(self) -> None:
        super().__init__()
        self.offer = True

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        if self.offer:
            responses = [*responses[:-1], "250-PIPELINING", responses[-1]]
        return responses


class WritesSeen:
    """A TCP pipe to ``port``: what the client writes, piece by piece (on
    loopback each send the client makes arrives as one piece here when it
    waits for an answer between them)."""

    def __init__(self, port: int) -> None:
        self.port, self.listen_port = port, free_port()
        self.pieces: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", self.listen_port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            relay = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self._pump, args=(client, relay, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(relay, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, note: bool) -> None:
        try:
            while data := src.recv(65536):
                if note:
                    self.pieces.append(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def relay() -> Iterator[tuple[PipeliningSink, WritesSeen]]:
    handler = PipeliningSink()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port, enable_SMTPUTF8=True)
    controller.start()
    pipe = WritesSeen(port)
    try:
        yield handler, pipe
    finally:
        pipe.close()
        controller.stop()


def _session(pipe: WritesSeen) -> smtplib.SMTP:
    smtp = smtplib.SMTP("127.0.0.1", pipe.listen_port, local_hostname="pbm.test", timeout=10)
    smtp.ehlo()
    return smtp


def _commands(pipe: WritesSeen) -> list[bytes]:
    """The pieces the client wrote after its greeting."""
    return [p for p in pipe.pieces if not p.upper().startswith(b"EHLO")]


def test_with_pipelining_a_mail_takes_two_writes_and_arrives_as_written(relay):
    handler, pipe = relay
    smtp = _session(pipe)
    for _ in range(3):
        send_one(smtp, SENDER, RCPT, MAIL, [])
    smtp.quit()
    assert [(rcpts, body) for rcpts, body in handler.messages] == [([RCPT], MAIL)] * 3
    assert handler.senders == [SENDER] * 3
    pieces = _commands(pipe)[:-1]  # QUIT last
    assert len(pieces) == 6  # per mail: the commands, then the text
    for commands, body in zip(pieces[::2], pieces[1::2], strict=True):
        assert commands == f"MAIL FROM:<{SENDER}> SIZE={len(MAIL)}\r\nRCPT TO:<{RCPT}>\r\nDATA\r\n".encode()
        assert body.endswith(b"\r\n.\r\n") and b"\r\n..a line starting with a dot\r\n...two dots\r\n..\r\n" in body


def test_a_non_ascii_recipient_goes_pipelined_with_smtputf8(relay):
    """Delivery asks SMTPUTF8 for an address beyond ASCII (outbound._deliver):
    the pipelined commands carry it and the address in UTF-8."""
    handler, pipe = relay
    smtp = _session(pipe)
    send_one(smtp, SENDER, "jörg@example.org", MAIL, ["SMTPUTF8"])
    smtp.quit()
    assert handler.messages == [(["jörg@example.org"], MAIL)]
    [commands] = [p for p in _commands(pipe) if p.startswith(b"MAIL FROM:")]
    assert commands == (f"MAIL FROM:<{SENDER}> SIZE={len(MAIL)} SMTPUTF8\r\nRCPT TO:<jörg@example.org>\r\n"
                        "DATA\r\n").encode()


def test_without_pipelining_offered_each_command_waits_for_its_answer(relay):
    handler, pipe = relay
    handler.offer = False
    smtp = _session(pipe)
    send_one(smtp, SENDER, RCPT, MAIL, [])
    smtp.quit()
    assert handler.messages == [([RCPT], MAIL)]
    assert [p.split(b":")[0].split(b"\r\n")[0] for p in _commands(pipe)][:3] == [b"mail FROM", b"rcpt TO", b"data"]


REFUSALS = {
    "sender": ("mail_answer", "530 5.7.0 Must issue a STARTTLS command first", smtplib.SMTPSenderRefused),
    "recipient": ("rcpt_answers", "550 5.1.1 <player@example.org>: Recipient address rejected", smtplib.SMTPRecipientsRefused),
    "recipient later": ("rcpt_answers", "450 4.2.0 <player@example.org>: greylisted", smtplib.SMTPRecipientsRefused),
    "text": ("refuse_with", "554 5.7.1 message content rejected", smtplib.SMTPDataError),
}


def _refuse(handler: PipeliningSink, field: str, answer: str | None) -> None:
    if field == "rcpt_answers":
        handler.rcpt_answers = {RCPT: answer} if answer else {}
    else:
        setattr(handler, field, answer)


@pytest.mark.parametrize("what", sorted(REFUSALS))
def test_a_refusal_raises_what_smtplib_raises_and_the_session_goes_on(relay, what):
    """The same refusal, with and without PIPELINING: the same exception,
    code and text; and the next mail on the same session goes through."""
    handler, pipe = relay
    field, answer, kind = REFUSALS[what]
    raised = []
    for offer in (False, True):
        handler.offer = offer
        smtp = _session(pipe)
        _refuse(handler, field, answer)
        with pytest.raises(kind) as caught:
            send_one(smtp, SENDER, RCPT, MAIL, [])
        exc = caught.value
        raised.append(exc.recipients if isinstance(exc, smtplib.SMTPRecipientsRefused)
                      else (exc.smtp_code, exc.smtp_error))
        _refuse(handler, field, None)
        send_one(smtp, SENDER, RCPT, MAIL, [])  # the session is in step again
        smtp.quit()
    assert raised[0] == raised[1]
    assert handler.messages == [([RCPT], MAIL)] * 2


def _replies_waiting(pbm, server, count: int) -> None:
    """``help`` from p0@example.org, p1, ... stored and handled: a reply to
    each waits in the outbox."""
    mails = []
    for n in range(count):
        msg = pbm.build(f"p{n}@example.org", "pbm", "help")
        mails.append((msg["From"], [msg["To"]], bytes(msg)))
    store_messages(server.db, mails)
    while server.worker.run_once():
        pass


def test_the_server_delivers_its_replies_pipelined(pbm_stopped, relay):
    """`pbm serve`'s delivery, through the relay that offers PIPELINING:
    one write a reply (its commands after the text before), the last text
    alone; each marked sent once."""
    from pbm_server.running.server import Server

    handler, pipe = relay
    pbm = pbm_stopped
    settings = load_settings({**pbm.env, "PBM_RELAY": f"127.0.0.1:{pipe.listen_port}"})
    server = Server(settings, parts=("worker", "outbound"), processes=1)
    try:
        _replies_waiting(pbm, server, 4)
        assert server.outbound.step() == 4
        with server.db.engine.connect() as c:
            assert c.execute(text("SELECT status, count(*) FROM outbox GROUP BY status")).all() == [("sent", 4)]
    finally:
        server.outbound._end_session()
        server.worker.close()
        server.db.dispose()
    assert sorted(r for (r,), _ in handler.messages) == [f"p{n}@example.org" for n in range(4)]
    # one write a mail: its commands after the text of the mail before; the last text alone
    writes = [p for p in _commands(pipe) if p.upper() not in (b"QUIT\r\n", b"NOOP\r\n")]
    assert len(writes) == 5, writes
    assert writes[0].startswith(b"MAIL FROM:") and writes[0].endswith(b"\r\nDATA\r\n")
    assert all(b"\r\n.\r\nMAIL FROM:" in p and p.endswith(b"\r\nDATA\r\n") for p in writes[1:4])
    assert writes[4].endswith(b"\r\n.\r\n") and b"MAIL FROM:" not in writes[4]


class RefusingTexts(PipeliningSink):
    """Refuses the text of the mails to the recipients in ``texts`` (the
    answer to the end of DATA), with their answers."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, str] = {}

    async def handle_DATA(self, server, session, envelope):
        for rcpt in envelope.rcpt_tos:
            if rcpt.lower() in self.texts:
                return self.texts[rcpt.lower()]
        return await super().handle_DATA(server, session, envelope)


def test_refusals_in_a_stream_settle_each_mail_as_one_at_a_time_would(pbm_stopped):
    """Six replies over a relay that refuses the recipient of the second
    (550), the text of the third (554, read with the fourth's commands),
    defers the text of the fifth (451) and takes the rest: each row ends as
    it would one command at a time -- failed, failed, to be tried again --
    the others sent once, none lost, none sent twice; the session after a
    refused text goes on, and the sixth, whose commands went with the
    deferred text, is sent all the same before the pass stops."""
    from pbm_server.running.server import Server

    handler = RefusingTexts()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    pbm = pbm_stopped
    settings = load_settings({**pbm.env, "PBM_RELAY": f"127.0.0.1:{port}"})
    server = Server(settings, parts=("worker", "outbound"), processes=1)
    handler.rcpt_answers = {"p1@example.org": "550 5.1.1 <p1@example.org>: Recipient address rejected"}
    handler.texts = {"p2@example.org": "554 5.7.1 message content rejected",
                     "p4@example.org": "451 4.3.0 try again later"}
    try:
        _replies_waiting(pbm, server, 6)
        server.outbound.step()

        def rows() -> dict[str, tuple[str, int]]:
            with server.db.engine.connect() as c:
                return {to: (status, attempts) for to, status, attempts in
                        c.execute(text("SELECT to_addr, status, attempts FROM outbox")).all()}

        after = rows()
        assert [after[f"p{n}@example.org"][0] for n in (0, 3, 5)] == ["sent"] * 3
        assert after["p1@example.org"][0] == "failed" and after["p2@example.org"][0] == "failed"
        assert after["p4@example.org"] == ("pending", 1)  # deferred: tried again after its delay
    finally:
        server.outbound._end_session()
        server.worker.close()
        server.db.dispose()
        controller.stop()
    taken = sorted(r for (r,), _ in handler.messages)
    assert taken == ["p0@example.org", "p3@example.org", "p5@example.org"]
