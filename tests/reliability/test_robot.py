"""A robot that answers every mail: the exchange stops by itself.

The robot is a real SMTP client: whenever the relay sink receives a mail for
the robot's address, the robot mails an answer back to the address the mail
came from, quoting it.  Two robots: a polite one (a vacation responder that
marks its answers ``Auto-Submitted: auto-replied``, RFC 3834) and a rude one
that marks nothing and answers everything, forever."""

from __future__ import annotations

import threading
import time
from email.utils import make_msgid

import pytest

from tests.harness import PbmServer

ROBOT = "robot@example.org"
LIMIT = 5  # replies per address per hour before the server goes quiet


class Robot(threading.Thread):
    def __init__(self, pbm: PbmServer, polite: bool):
        super().__init__(daemon=True)
        self.pbm = pbm
        self.polite = polite
        self.sent = 0
        self.seen = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.05):
            mails = self.pbm.inbox(ROBOT)
            for m in mails[self.seen:]:
                self.seen += 1
                headers = {"In-Reply-To": m["Message-ID"], "References": m["Message-ID"]}
                if self.polite:
                    headers["Auto-Submitted"] = "auto-replied"
                body = "I am away. Your mail said:\n\n" + "\n".join("> " + ln for ln in self.pbm.text(m).splitlines())
                msg = self.pbm.build(ROBOT, m["From"].addresses[0].addr_spec, body, subject="Re: " + m["Subject"], headers=headers)
                msg.replace_header("Message-ID", make_msgid(domain="example.org"))
                self.pbm.send_message(msg)
                self.sent += 1


def quiet_for(pbm: PbmServer, robot: Robot, seconds: float, timeout: float = 60) -> None:
    """Wait until nothing has moved for ``seconds``."""
    deadline = time.monotonic() + timeout
    last, since = (-1, -1), time.monotonic()
    while time.monotonic() < deadline:
        pbm.settle()
        now = (len(pbm.all_sent()), robot.sent)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return
        time.sleep(0.1)
    raise AssertionError(f"the exchange did not stop: {last}")


@pytest.mark.parametrize("polite", [True, False], ids=["polite-robot", "rude-robot"])
def test_robot_exchange_stops(make_server, polite):
    pbm = make_server(extra_env={"PBM_REPLY_LIMIT_PER_HOUR": str(LIMIT)}).start()
    robot = Robot(pbm, polite)
    robot.start()
    try:
        pbm.send(ROBOT, "pbm", "help")  # the robot's owner asks for help once
        quiet_for(pbm, robot, 2.0)
    finally:
        robot.stop.set()
        robot.join(5)
    to_robot = pbm.inbox(ROBOT)
    if polite:
        # the server answers the help mail; the robot's auto-reply is dropped unanswered
        assert len(to_robot) == 1 and robot.sent == 1
        (dropped,) = pbm.sql("SELECT note FROM inbox WHERE status = 'dropped'")
        assert "auto-replied" in dropped[0].lower()
    else:
        # the server answers until the hourly limit, says so in the last answer, then goes quiet
        assert len(to_robot) == LIMIT and robot.sent == LIMIT
        assert "will not answer this address again until the hour is over" in " ".join(pbm.text(to_robot[-1]).split())
        unanswered = pbm.sql("SELECT count(*) FROM inbox WHERE note LIKE 'not answered%'")[0][0]
        assert unanswered == 1
    for m in to_robot:  # every answer says it is automatic, so polite robots stay silent
        assert m["Auto-Submitted"] == "auto-replied"
    assert pbm.sql("SELECT count(*) FROM inbox WHERE status IN ('new', 'shunted')")[0][0] == 0
