"""Hosts made of network namespaces, for the tests and benchmarks that need
several machines on one: each host is a network namespace (``ip netns``)
with its own address, joined to the root namespace by a veth pair on a
bridge.  The root namespace keeps the shared services: PostgreSQL (reached
through a TCP forwarder, since it listens on 127.0.0.1 only and is not to be
reconfigured), the relay sink and the load client.

Layout of ``Hosts(count, tag, net)``::

    root namespace                         host i (namespace pbmh-TAG-i)
    bridge pbmh-TAG-br, 10.231.NET.1/24 -- veth -- eth0, 10.231.NET.(11+i)/24, lo up
      forwarder 10.231.NET.1:5432 -> 127.0.0.1:5432 (PostgreSQL)
      relay sink 10.231.NET.1:PORT

Every name starts with ``pbmh-TAG-``; what an earlier run left behind (it
crashed, or was killed) is removed by that prefix before new hosts are made:
the processes still inside those namespaces (by the pids ``ip netns pids``
gives), the namespaces, the bridge and the veths.  A lock file
(``/run/lock/pbm-netns-TAG.lock``, flock) held while the hosts exist keeps
two runs with one tag from tearing down each other's hosts: the second waits.

Needs root and iproute2 (``ip``); ``taskset`` (util-linux) to pin a host to
a core.  The forwarder is socat when it is installed, else a small asyncio
forwarder in Python (``python -m benchmarks.netns forward LISTEN TARGET``).

    with Hosts(2, tag="test", net=1) as hosts, Forwarder(hosts.gateway) as fwd:
        serve = HostServe(hosts, 0, env={...}).start()
        ...
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.servers import RelaySink, descendants

ROOT = Path(__file__).resolve().parent.parent

PREFIX = "pbmh-"
LOCK_DIR = Path("/run/lock")


def missing() -> str | None:
    """Why hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


# -- CPU of a process tree ---------------------------------------------------------------------
def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its descendants, including
    those that already exited and were waited for (their time is in their
    parent's cutime/cstime)."""
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in descendants(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return total / tck


# -- the hosts ------------------------------------------------------------------------------------
class Hosts:
    """``count`` hosts as network namespaces on one bridge of the root namespace."""

    def __init__(self, count: int, tag: str = "test", net: int = 1, lock_timeout: float = 300.0):
        if not 1 <= count <= 200 or not 0 <= net <= 255:
            raise ValueError("1 to 200 hosts, net 0 to 255")
        # interface names have at most 15 characters: pbmh-TAG-br, pbmh-TAG-v12
        if not tag.isalnum() or len(PREFIX) + len(tag) + 4 > 15:
            raise ValueError("tag: letters and digits, at most 6")
        self.count = count
        self.tag = tag
        self.prefix = f"{PREFIX}{tag}-"
        self.bridge = f"{self.prefix}br"
        self.gateway = f"10.231.{net}.1"
        self.names = [f"{self.prefix}{i}" for i in range(count)]
        self.addresses = [f"10.231.{net}.{11 + i}" for i in range(count)]
        self._lock_timeout = lock_timeout
        self._lock_fd: int | None = None

    # -- make and tear down
    def __enter__(self) -> "Hosts":
        self.make()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _lock(self) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK_DIR / f"pbm-netns-{self.tag}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self._lock_timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise RuntimeError(f"hosts {self.prefix}* are held by another run "
                                       f"(lock {LOCK_DIR}/pbm-netns-{self.tag}.lock)") from None
                time.sleep(0.2)
        self._lock_fd = fd

    def make(self) -> None:
        why = missing()
        if why:
            raise RuntimeError(why)
        self._lock()
        try:
            self.clean()
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, (name, addr) in enumerate(zip(self.names, self.addresses, strict=True)):
                outer, inner = f"{self.prefix}v{i}", f"{self.prefix}p{i}"
                _ip("netns", "add", name)
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
                _ip("link", "set", outer, "master", self.bridge)
                _ip("link", "set", outer, "up")
                _ip("link", "set", inner, "netns", name)
                _ip("-n", name, "link", "set", inner, "name", "eth0")
                _ip("-n", name, "addr", "add", f"{addr}/24", "dev", "eth0")
                _ip("-n", name, "link", "set", "eth0", "up")
                _ip("-n", name, "link", "set", "lo", "up")
            for addr in self.addresses:
                self._wait_reachable(addr)
        except BaseException:
            self.close()
            raise

    def _wait_reachable(self, addr: str, timeout: float = 10.0) -> None:
        """The bridge forwards only once its port left the listening state:
        wait until the host answers (a refused connection is an answer)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((addr, 9), timeout=0.3):
                    return
            except ConnectionRefusedError:
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"host {addr} cannot be reached from the root namespace")

    def clean(self) -> None:
        """Remove every namespace, bridge and veth with this run's prefix, and
        end the processes left inside those namespaces."""
        names = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines() if line.strip()]
        for name in names:
            if not name.startswith(self.prefix):
                continue
            pids = [int(p) for p in _ip("netns", "pids", name, check=False).stdout.split() if p.isdigit()]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while pids and time.monotonic() < deadline:
                pids = [p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"]
                time.sleep(0.05)
            _ip("netns", "del", name, check=False)
        for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
            parts = line.split(":", 2)
            if len(parts) < 2:
                continue
            ifname = parts[1].strip().split("@", 1)[0]
            if ifname.startswith(self.prefix):
                _ip("link", "del", ifname, check=False)

    def close(self) -> None:
        try:
            self.clean()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # -- running things inside
    def command(self, index: int, argv: list[str], core: int | None = None) -> list[str]:
        """``argv`` to run in host ``index``, pinned to CPU ``core`` if given
        (``ip netns exec`` and ``taskset`` both exec, so the pid is argv's)."""
        pin = ["taskset", "-c", str(core)] if core is not None else []
        return ["ip", "netns", "exec", self.names[index], *pin, *argv]

    def run(self, index: int, argv: list[str], core: int | None = None, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(index, argv, core), **kw)

    def popen(self, index: int, argv: list[str], core: int | None = None, **kw) -> subprocess.Popen:
        """A process in host ``index``, in a process group of its own (so the
        whole host's tree can be killed at once)."""
        kw.setdefault("start_new_session", True)
        return subprocess.Popen(self.command(index, argv, core), **kw)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def wait_port(host: str, port: int, proc: subprocess.Popen | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the process exited ({proc.returncode}) before {host}:{port} answered")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port}")


# -- the forwarder to PostgreSQL ------------------------------------------------------------------
class Forwarder:
    """TCP from ``listen_host:listen_port`` (in the root namespace, where the
    hosts reach it) to ``target``: socat if installed, else Python."""

    def __init__(self, listen_host: str, listen_port: int = 5432, target: tuple[str, int] = ("127.0.0.1", 5432),
                 use_socat: bool | None = None):
        self.host, self.port, self.target = listen_host, listen_port, target
        self.use_socat = shutil.which("socat") is not None if use_socat is None else use_socat
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Forwarder":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Forwarder":
        if self.use_socat:
            argv = ["socat", f"TCP-LISTEN:{self.port},bind={self.host},reuseaddr,fork,backlog=512,nodelay",
                    f"TCP:{self.target[0]}:{self.target[1]},nodelay"]
        else:
            argv = [sys.executable, "-m", "benchmarks.netns", "forward", f"{self.host}:{self.port}",
                    f"{self.target[0]}:{self.target[1]}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        # a process group of its own: socat's children (one per connection) go with it
        self.proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
        wait_port(self.host, self.port, self.proc)
        return self

    @property
    def kind(self) -> str:
        return "socat" if self.use_socat else "python"

    def cpu(self) -> float:
        return tree_cpu(self.proc.pid) if self.proc else 0.0

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, OSError):
            pass


async def _forward(listen: tuple[str, int], target: tuple[str, int]) -> None:
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        for w in (writer, up_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))

    server = await asyncio.start_server(one, *listen, reuse_address=True, backlog=512)
    async with server:
        await server.serve_forever()


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


# -- pbm serve in a host ----------------------------------------------------------------------------
def via(url: str, host: str, port: int) -> str:
    """A database URL with its host and port replaced (the forwarder's)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(host=host, port=port).render_as_string(hide_password=False)


class HostServe:
    """A complete `pbm serve` (listener, back ends, delivery, scheduler; no
    HTTP side unless ``env`` gives PBM_HTTP_LISTEN) in host ``index``,
    listening on the host's own address, from this interpreter (the
    worktree's venv).  ``env`` completes the environment: PBM_DATABASE_URL
    (through the forwarder), PBM_RELAY, PBM_DOMAIN ..."""

    def __init__(self, hosts: Hosts, index: int, env: dict[str, str], cwd: Path, core: int | None = None, port: int = 2525):
        self.hosts, self.index, self.core, self.port = hosts, index, core, port
        self.address = hosts.addresses[index]
        self.cwd = Path(cwd)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.env.update({"PBM_HTTP_LISTEN": "", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
        self.env.update(env)
        self.env["PBM_LISTEN"] = f"{self.address}:{port}"
        self.proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.cwd / "serve.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> "HostServe":
        return self.launch().wait()

    def launch(self) -> "HostServe":
        """Start `pbm serve` without waiting for it (see :meth:`wait`): several
        hosts start side by side."""
        self._log = open(self.log_path, "ab")
        self.proc = self.hosts.popen(self.index, [sys.executable, "-m", "pbm_server.running.cli", "serve"], self.core,
                                     env=self.env, cwd=self.cwd, stdout=self._log, stderr=subprocess.STDOUT)
        return self

    def wait(self, timeout: float = 60.0) -> "HostServe":
        """Until the listener answers on the host's address."""
        try:
            wait_port(self.address, self.port, self.proc, timeout=timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; serve.log of host {self.index}:\n{self.log()[-3000:]}") from None
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        return descendants(self.proc.pid) if self.running else []

    def cpu(self) -> float:
        return tree_cpu(self.proc.pid) if self.running else 0.0

    def kill(self) -> None:
        """SIGKILL to the host's whole process group: the listener and its back ends at once."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.kill()  # whatever of the group is left
        self._log.close()


# -- a relay sink on a given address -------------------------------------------------------------------
class AddressedSink(RelaySink):
    """benchmarks/servers.py's RelaySink (In-Reply-To, Message-ID, time of
    each accepted message), listening on ``host`` (the hosts' gateway)."""

    def __init__(self, host: str):
        super().__init__(host)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "forward":
        try:
            asyncio.run(_forward(_host_port(sys.argv[2]), _host_port(sys.argv[3])))
        except KeyboardInterrupt:
            pass
    else:
        print("usage: python -m benchmarks.netns forward HOST:PORT TARGET_HOST:TARGET_PORT", file=sys.stderr)
        sys.exit(2)
