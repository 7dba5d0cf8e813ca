"""The HTTP side of `pbm serve` (PBM_HTTP_LISTEN): /healthz and /metrics, read
over a real socket from the real server; and `pbm mail status`, which reads
the same queues for an operator at the console."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import ROOT, PbmServer, free_port


def get(port: int, path: str, timeout: float = 20) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, waiting for the side to come up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
                return resp.status, resp.headers["Content-Type"], resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def scrape(port: int) -> dict[str, float]:
    """Every sample of /metrics by its name and labels, e.g.
    ``pbm_mail_handled_total{result="done"}``."""
    status, ctype, body = get(port, "/metrics")
    assert status == 200 and ctype.startswith("text/plain"), (status, ctype, body[:300])
    samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return samples


def test_healthz_says_the_database_answers_and_what_waits(pbm: PbmServer):
    status, ctype, body = get(pbm.http_port, "/healthz")
    assert status == 200 and ctype == "application/json"
    health = json.loads(body)
    assert health["status"] == "ok" and health["inbox_waiting"] == 0 and health["outbox_pending"] == 0
    # with the worker stopped, a mail waits and /healthz says how long
    pbm.stop()
    pbm.start("worker")
    pbm.send("ann@example.org", "pbm", "help")
    health = json.loads(get(pbm.http_port, "/healthz")[2])
    assert health["inbox_waiting"] == 1 and health["inbox_oldest_waiting_seconds"] >= 0


def test_metrics_move_during_a_burst(pbm: PbmServer):
    """Mails sent from several threads at once while /metrics is scraped:
    the counters only ever grow, and at the end count every mail in, handled
    and delivered, with their latencies."""
    before = scrape(pbm.http_port)
    assert before["pbm_mail_received_total"] == 0 and before["pbm_inbox_waiting"] == 0
    burst, senders = 40, 4
    seen: list[dict[str, float]] = []
    done = threading.Event()

    def scraper() -> None:
        while not done.is_set():
            seen.append(scrape(pbm.http_port))
            time.sleep(0.05)

    def sender(n: int) -> None:
        for i in range(burst // senders):
            pbm.send(f"p{n}-{i}@example.org", "pbm", "help")

    watcher = threading.Thread(target=scraper)
    watcher.start()
    threads = [threading.Thread(target=sender, args=(n,)) for n in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pbm.settle()
    done.set()
    watcher.join()
    after = scrape(pbm.http_port)
    assert len(seen) >= 2
    for name in ("pbm_mail_received_total", 'pbm_mail_handled_total{result="done"}',
                 'pbm_mail_delivered_total{result="sent"}', "pbm_mail_handling_seconds_count"):
        values = [s.get(name, 0) for s in [before, *seen, after]]
        assert values == sorted(values), f"{name} went down: {values}"
    assert after["pbm_mail_received_total"] == burst
    assert after['pbm_mail_handled_total{result="done"}'] == burst
    assert after["pbm_mail_handling_seconds_count"] == burst
    assert after['pbm_mail_handling_seconds_bucket{le="+Inf"}'] == burst
    assert after['pbm_mail_queued_total{kind="reply-unproven"}'] == burst
    assert after['pbm_mail_delivered_total{result="sent"}'] == burst
    assert after["pbm_mail_delivery_seconds_count"] == burst
    assert after["pbm_inbox_waiting"] == 0 and after["pbm_outbox_pending"] == 0
    assert after["pbm_inbox_oldest_waiting_seconds"] == 0
    # a scrape in the middle of the burst saw some of it and not all
    assert any(0 < s["pbm_mail_received_total"] for s in seen)


def test_a_stuck_queue_shows_in_the_gauges_and_in_mail_status(pbm_stopped: PbmServer):
    """The relay is down: the replies wait, the oldest-pending age grows, and
    `pbm mail status` (text and --json) says the relay fails and why."""
    pbm = pbm_stopped
    pbm.env["PBM_RELAY"] = f"127.0.0.1:{free_port()}"  # nothing listens there
    pbm.start()
    pbm.send("ann@example.org", "pbm", "help")
    deadline = time.monotonic() + 20
    while not pbm.sql("SELECT id FROM audit_log WHERE action = 'relay fails'"):
        assert time.monotonic() < deadline, pbm.serve_log()[-2000:]
        time.sleep(0.05)
    samples = scrape(pbm.http_port)
    assert samples["pbm_outbox_pending"] == 1 and samples["pbm_outbox_oldest_pending_seconds"] > 0
    text = pbm.cli("mail", "status").stdout
    assert "inbox: done 1" in text and "outbox: pending 1" in text, text
    assert "oldest reply not yet delivered: 20" in text  # a date, with its age
    assert "relay last fault" in text and "FAILING NOW, mail is kept" in text
    assert "Connection refused" in text or "connect" in text.lower(), text
    assert "retrying outbox" in text and "ann@example.org" in text
    # the README's operator section shows this output as it is
    readme = (ROOT / "README.md").read_text()
    for line in text.splitlines():
        shape = re.split(r"\d", line)[0]
        assert shape in readme, f"README.md does not show a line like {line!r}"
    status = json.loads(pbm.cli("mail", "status", "--json").stdout)
    assert status["outbox"] == {"pending": 1} and status["inbox"] == {"done": 1}
    assert status["relay"]["failing"] is True and status["relay"]["last_accepted_at"] is None
    assert status["waiting"]["outbox_pending"] == 1
    assert status["retrying"][0]["address"] == "ann@example.org" and status["retrying"][0]["error"]


def test_mail_status_when_all_is_well(pbm: PbmServer):
    reply = pbm.mail("ann@example.org", "pbm", "help")
    pbm.settle()
    text = pbm.cli("mail", "status").stdout
    assert "oldest mail not yet handled: none, every mail is handled" in text
    assert "oldest reply not yet delivered: none, the outbox is delivered" in text
    assert f"relay 127.0.0.1:{pbm.sink.port}: last mail accepted 20" in text
    assert "FAILING" not in text and "relay last fault" not in text
    status = json.loads(pbm.cli("mail", "status", "--json").stdout)
    assert status["relay"]["failing"] is False and status["relay"]["last_accepted_id"] is not None
    assert reply["Message-ID"]


def test_an_empty_setting_turns_the_http_side_off(pbm_stopped: PbmServer):
    pbm = pbm_stopped
    pbm.env["PBM_HTTP_LISTEN"] = ""
    pbm.start()
    assert "register HANDLE" in pbm.text(pbm.mail("ann@example.org", "pbm", "help"))  # mail works without it
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", pbm.http_port), timeout=2).close()


def children(parent: int) -> list[tuple[int, list[str]]]:
    """(pid, argv) of the processes whose parent is ``parent``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().decode().split("\0")
        except OSError:
            continue
        if ppid == parent:
            found.append((int(entry), argv))
    return found


def policies(pid: int) -> set[int]:
    """The scheduling policies of a process's threads (/proc's field 41)."""
    found = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
            found.add(int(fh.read().rsplit(")", 1)[1].split()[38]))
    return found


@pytest.mark.process
@pytest.mark.http_side
@pytest.mark.dbneutral  # the processes' CPU policy: the same on either database
@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_mail_runs_as_sched_batch_and_the_http_side_does_not(pbm: PbmServer):
    """PBM_CPU_POLICY=batch (the default): every thread of the listener and
    of the back end is SCHED_BATCH, so none of their wake-ups preempts a
    password check; the HTTP side's threads keep the normal policy."""
    pbm.mail("ann@example.org", "pbm", "help")  # the listener and the back end started and at work
    assert get(pbm.http_port, "/healthz")[0] == 200  # the HTTP side too (it starts on its own)
    kids = children(pbm.proc.pid)
    backend = [pid for pid, argv in kids if "--without" in argv and "http" in argv]
    http = [pid for pid, argv in kids if "--without" in argv and "http" not in argv]
    assert len(backend) == 1 and len(http) == 1, kids
    assert policies(pbm.proc.pid) == policies(backend[0]) == {os.SCHED_BATCH}
    assert policies(http[0]) == {os.SCHED_OTHER}


@pytest.mark.nodb
@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_a_system_that_refuses_the_cpu_policy_gets_one_warning_and_mail_goes_on(monkeypatch, caplog):
    """A container may forbid changing the policy: `pbm serve` says so on
    one line and goes on under the policy it has."""
    from pbm_server.running import server

    def refused(pid, policy, param):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_getscheduler", lambda pid: os.SCHED_OTHER)
    monkeypatch.setattr(os, "sched_setscheduler", refused)
    with caplog.at_level("WARNING", logger="pbm_server.running.server"):
        server._schedule("batch")
    assert [r.getMessage() for r in caplog.records] == [
        "could not set the CPU policy batch (PBM_CPU_POLICY): [Errno 1] Operation not permitted"]


@pytest.mark.process
@pytest.mark.http_side
def test_the_http_side_runs_in_its_own_process_and_is_restarted(pbm: PbmServer):
    """With the listener in its own process (the default), the HTTP side is a
    process of its own, supervised like the back ends: killed, it comes back
    on the same port, and its counters cover the mail the back end handled."""
    assert json.loads(get(pbm.http_port, "/healthz")[2])["status"] == "ok"
    pbm.mail("ann@example.org", "pbm", "help")
    pids = [pid for pid, argv in children(pbm.proc.pid) if "--without" in argv and "http" not in argv]
    assert len(pids) == 1, (children(pbm.proc.pid), pbm.serve_log()[-2000:])
    os.kill(pids[0], signal.SIGKILL)
    pbm.mail("bob@example.org", "pbm", "help")
    # back after the supervisor's pause; counting starts afresh, from the mail after its start
    samples = scrape(pbm.http_port)
    assert samples["pbm_inbox_waiting"] == 0
    pbm.mail("cat@example.org", "pbm", "help")
    assert scrape(pbm.http_port)["pbm_mail_received_total"] >= 1
    assert "the HTTP side exited" in pbm.serve_log()


@pytest.mark.process
@pytest.mark.nodb  # its own SQLite file, whatever the pass: the SQLite pass runs it (docs/testing.md)
def test_a_port_in_use_is_one_line_at_start(tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    env = dict(os.environ, PBM_DATABASE_URL=f"sqlite:///{tmp_path}/pbm.db", PBM_LISTEN=f"127.0.0.1:{free_port()}",
               PBM_HTTP_LISTEN=f"127.0.0.1:{port}")
    try:
        run = subprocess.run([sys.executable, "-m", "pbm_server.running.cli", "serve"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    finally:
        busy.close()
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (f"pbm: PBM_HTTP_LISTEN: cannot listen on 127.0.0.1:{port}: "
                                                   "Address already in use"), run.stderr
    assert "Traceback" not in run.stderr
