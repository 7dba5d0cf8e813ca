"""Install pbm-server the way an operator would, and make it answer a mail.

Builds the sdist and, from it, the wheel (``python -m build``), checks that the
wheel carries every template, migration and game package of the checkout,
installs the wheel alone into a fresh venv outside the checkout, and from an
empty directory runs ``pbm --version``, ``pbm db upgrade``, ``pbm game new
giveaway g1`` and ``pbm serve``, sends ``help`` and a game command over SMTP
and waits for both replies in the Maildir (read back with ``pbm mail show``).
Any missing file or failing step exits non-zero with what went wrong.

Usage: python3 .ci/wheel_check.py [--keep]     (standard library only)
"""

from __future__ import annotations

import os
import random
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from email.message import EmailMessage
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def step(title: str) -> None:
    print(f"-- {title}", flush=True)


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, expect: int = 0) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != expect:
        sys.exit(f"FAILED: {' '.join(map(str, args))} exited {proc.returncode} (expected {expect})\n"
                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def free_port() -> int:
    """A free port below the kernel's ephemeral range: the test suites run
    beside this check, and a port from that range (bind to 0) can be taken as
    the local port of one of their outgoing connections before we bind it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    chooser = random.SystemRandom()
    for _ in range(200):
        port = chooser.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    sys.exit("FAILED: no free port below the ephemeral range")


def expected_files() -> set[str]:
    """Paths inside the wheel that the checkout says must be there."""
    want = set()
    for top, target in (("templates", "pbm_server/templates"), ("migrations", "pbm_server/migrations")):
        for path in (CHECKOUT / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                want.add(f"{target}/{path.relative_to(CHECKOUT / top).as_posix()}")
    for top in ("pbm_server", "games"):
        for path in (CHECKOUT / top).rglob("*.py"):
            if "__pycache__" not in path.parts:
                want.add(path.relative_to(CHECKOUT).as_posix())
    return want


def wait_for(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    sys.exit(f"FAILED: timed out waiting for {what}")


def main() -> None:
    keep = "--keep" in sys.argv
    tmp = Path(tempfile.mkdtemp(prefix="pbm-wheel-"))
    py = sys.executable
    server = None
    try:
        step("build the sdist, then the wheel from the sdist")
        tools = tmp / "tools"
        run([py, "-m", "venv", str(tools)], tmp)
        run([str(tools / "bin/python"), "-m", "pip", "install", "-q", "build"], tmp)
        dist = tmp / "dist"
        run([str(tools / "bin/python"), "-m", "build", "--outdir", str(dist), str(CHECKOUT)], tmp)
        wheels = sorted(dist.glob("*.whl"))
        sdists = sorted(dist.glob("*.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            sys.exit(f"FAILED: expected one wheel and one sdist in {dist}, found {os.listdir(dist)}")

        step("the wheel carries every template, migration and module")
        names = set(zipfile.ZipFile(wheels[0]).namelist())
        missing = sorted(expected_files() - names)
        if missing:
            sys.exit("FAILED: missing from the wheel:\n  " + "\n  ".join(missing))

        step("install the wheel alone into a fresh venv")
        venv = tmp / "venv"
        run([py, "-m", "venv", str(venv)], tmp)
        run([str(venv / "bin/python"), "-m", "pip", "install", "-q", str(wheels[0])], tmp)
        pbm = str(venv / "bin/pbm")

        work = tmp / "empty"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBM_") and k != "PYTHONPATH"}
        port = free_port()
        http_port = free_port()
        env.update({"PBM_LISTEN": f"127.0.0.1:{port}", "PBM_DOMAIN": "pbm.localhost",
                    "PBM_HTTP_LISTEN": f"127.0.0.1:{http_port}"})

        step("the installed code is the wheel's, not the checkout's")
        where = run([str(venv / "bin/python"), "-c", "import pbm_server, games; print(pbm_server.__file__, games.__file__)"],
                    work, env)
        if str(CHECKOUT) in where or "site-packages" not in where:
            sys.exit(f"FAILED: imports do not come from the venv: {where}")

        step("pbm --version, db upgrade, game new, serve --help")
        version = run([pbm, "--version"], work, env)
        if not version.startswith("pbm-server "):
            sys.exit(f"FAILED: pbm --version printed {version!r}")
        run([pbm, "db", "upgrade"], work, env)
        run([pbm, "game", "new", "giveaway", "g1"], work, env)
        if "PBM_MAX_MESSAGE_BYTES" not in run([pbm, "serve", "--help"], work, env):
            sys.exit("FAILED: pbm serve --help does not list the settings")
        bad = run([pbm, "serve"], work, {**env, "PBM_MAX_MESSAGE_BYTES": "1MB"}, expect=2)
        if "Traceback" in bad or "PBM_MAX_MESSAGE_BYTES" not in bad:
            sys.exit(f"FAILED: a bad setting did not get one clear line: {bad}")

        step("pbm serve answers mail over SMTP")
        log = open(tmp / "serve.log", "w")
        server = subprocess.Popen([pbm, "serve"], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_for(listening, "the listener")
        for to, body in (("pbm@pbm.localhost", "help\n"), ("g1@pbm.localhost", "JOIN\n")):
            msg = EmailMessage()
            msg["From"], msg["To"], msg["Subject"] = "player@example.org", to, "commands"
            msg.set_content(body)
            with smtplib.SMTP("127.0.0.1", port, timeout=30) as smtp:
                smtp.send_message(msg)
        new = work / "var" / "outbox" / "new"
        wait_for(lambda: new.is_dir() and len(list(new.iterdir())) >= 2, "two replies in var/outbox/new")
        shown = run([pbm, "mail", "show", "--last", "2"], work, env)
        for needle in ("register HANDLE PASSWORD", "help KIND", "g1"):
            if needle not in shown:
                sys.exit(f"FAILED: the replies lack {needle!r}:\n{shown}")
        step("its HTTP side answers /healthz and /metrics")

        def http(path: str) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}{path}", timeout=10) as resp:
                return resp.read().decode()

        def http_up() -> bool:
            try:
                return '"status":"ok"' in http("/healthz")
            except OSError:
                return False

        wait_for(http_up, "/healthz")
        metrics = http("/metrics")
        if "pbm_inbox_waiting" not in metrics or "pbm_mail_handling_seconds_bucket" not in metrics:
            sys.exit(f"FAILED: /metrics lacks the mail figures:\n{metrics[:2000]}")
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
        server = None
        if code != 0:
            sys.exit(f"FAILED: pbm serve exited {code} on SIGTERM:\n{(tmp / 'serve.log').read_text()[-3000:]}")
        served = (tmp / "serve.log").read_text()
        if "Traceback" in served:
            sys.exit(f"FAILED: pbm serve logged a traceback:\n{served[-3000:]}")
        print(f"OK: {wheels[0].name} ({len(names)} files) installs and answers mail from an empty directory")
    finally:
        if server is not None:
            server.kill()
        if keep:
            print(f"kept {tmp}")
        else:
            subprocess.run(["rm", "-rf", str(tmp)])


if __name__ == "__main__":
    main()
