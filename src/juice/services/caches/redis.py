"""Redis: one ``redis-server`` in one site, bound to the site address, no persistence.

    rd = Redis(lab, progress, site=1, maxmemory_mb=1024)  # pure: nothing started
    rd.up()                                               # configure + start + wait_healthy (bounded)
    rd.address(3)                                         # "10.210.1.2:6379" (what a client in site 3 uses)
    rd.info(1)["used_memory"]                             # the server's INFO, read from inside site 1
    rd.stop()                                             # TERM, then KILL after a grace period

The cache alternative of the scheduler-db study (next to ``services.memcached``). The server
runs at its site's place (``process.spawn``: a namespace here, an SSH host there) in the
foreground, without RDB snapshots or an AOF and without protected mode (a lab-only address);
it logs to stdout, appended to ``<root>/s<site>/redis/redis.log``. The started process IS
redis-server: its pid is recorded directly (no pid file needed). ``INFO`` is asked with
``redis-cli`` at the client's place.
"""

from __future__ import annotations

import socket
from pathlib import Path

from juice.errors import ServiceError
from juice.lab.place import Place
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import Deviation, dev
from juice.services.process import Server, SiteServer
from juice.util import proc

REDIS = "/usr/bin/redis-server"
CLI = "/usr/bin/redis-cli"
PORT = 6379


def server_args(ip: str, port: int, home: Path, maxmemory_mb: int) -> list[str]:
    """The redis-server command line: foreground, log on stdout, no RDB/AOF, no protected
    mode (lab-only address)."""
    return [REDIS, "--bind", ip, "--port", str(port), "--save", "", "--appendonly", "no",
            "--protected-mode", "no", "--daemonize", "no", "--dir", str(home),
            "--maxmemory", f"{maxmemory_mb}mb", "--logfile", ""]


def version() -> str:
    """redis-server's version (e.g. ``7.0.15``), or ``unknown``."""
    try:
        cp = proc.run([REDIS, "--version"], check=False, timeout=10)
    except Exception:
        return "unknown"
    for word in cp.stdout.split():
        if word.startswith("v="):
            return word[2:]
    return "unknown"


def command(host: str, port: int, *words: str, timeout: float = 3.0) -> bytes:
    """One inline command (``PING``, ``INFO``...) over RESP; the raw reply (run it where
    ``host`` is reachable)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(" ".join(words).encode() + b"\r\n")
        buf = s.recv(65536)
        if buf.startswith(b"$"):  # a bulk string: read until its announced length is in
            size = int(buf[1:buf.index(b"\r\n")])
            for _ in range(1000):  # bounded: INFO is a few kB
                if len(buf) >= buf.index(b"\r\n") + 2 + size:
                    break
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return buf


def parse_info(reply: bytes) -> dict[str, str]:
    """``INFO``'s ``key:value`` lines as a dict (sections and comments skipped)."""
    out: dict[str, str] = {}
    for line in reply.decode(errors="replace").splitlines()[1:]:
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


class Redis(SiteServer, Service):
    """One redis-server in ``site`` (default 1); clients of every site use it."""

    kind = "redis"
    DIR = "redis"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, site: int = 1, port: int = PORT,
                 maxmemory_mb: int = 1024) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise ServiceError(f"site: {site} is not a site of this lab (1..{len(lab.sites)})")
        if not 0 < port < 65536:
            raise ServiceError(f"port: {port} is not a TCP port")
        if maxmemory_mb < 1:
            raise ServiceError(f"maxmemory_mb: must be >= 1, got {maxmemory_mb}")
        self.site, self.port, self.maxmemory_mb = site, port, maxmemory_mb
        self.server: Server | None = None

    @property
    def log(self) -> Path:
        return self.home / "redis.log"

    def address(self, site: int) -> str:
        """``ip:port`` of the server (the same for a client in any site)."""
        return f"{self.lab.site_ip(self.site)}:{self.port}"

    # ---- lifecycle -----------------------------------------------------------------------
    def configure(self) -> None:
        place = self.place
        if not place.run(["test", "-x", REDIS]).ok:
            raise ServiceError(f"{place.label}: {REDIS} is missing: run scripts/setup.sh")
        place.remove(self.home)
        place.mkdir(self.home)
        place.write(self.home / "cmdline", " ".join(server_args(
            place.address, self.port, self.home, self.maxmemory_mb)) + "\n")

    def start(self) -> None:
        argv = server_args(self.lab.site_ip(self.site), self.port, self.home, self.maxmemory_mb)
        self.spawn_server(argv, log=self.log, what=f"redis in site {self.site}")
        self.progress(f"redis starting in site {self.site} on port {self.port}")

    def info(self, site: int) -> dict[str, str]:
        """The server's ``INFO``, queried from inside ``site`` (``redis-cli`` there)."""
        r = self.lab.place(site).run([CLI, "-h", self.lab.site_ip(self.site), "-p", str(self.port), "INFO"],
                                     timeout=10)
        if not r.ok:
            why = (r.err or r.out).strip().splitlines()
            raise ServiceError(f"redis INFO from site {site}: {why[-1] if why else 'no answer'}")
        return parse_info(b"\n" + r.out.encode())  # parse_info skips a RESP header line

    def ping(self) -> bool:
        """True when OUR server answers (its ``process_id`` is the one we started: another
        redis already on the port does not count)."""
        if self.server is None:
            return False
        try:
            return self.info(self.site).get("process_id") == str(self.server.pid)
        except (OSError, ValueError, ServiceError):
            return False

    def wait_healthy(self, timeout: float = 60.0) -> None:
        self.wait_server(self.ping, timeout, not_started=f"redis in site {self.site}: not started")
        self.progress(f"redis ready: {self.address(self.site)}")

    def stop(self) -> None:
        if self.stop_server(grace_s=10):
            self.progress(f"redis stopped in site {self.site}")

    def endpoint(self, site: int) -> Endpoints:
        ep = Endpoint("redis", self.lab.site_ip(self.site), self.port, "", site=self.site)
        return Endpoints(read=ep, write=ep)

    def deviations(self) -> list[Deviation]:
        """What redis-server runs with that differs from its defaults."""
        return [dev("redis", "save", '""', "3600 1 300 100 60 10000",
                    "a cache of throw-away lab data: no snapshots to disk"),
                dev("redis", "maxmemory", f"{self.maxmemory_mb}mb", "0 (no limit)",
                    "bounded memory on a machine shared by every site")]

    def records(self) -> list[ServerRecord]:
        return self.server_records(self.kind, port=self.port, datadir=self.home)

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log)]
