"""Redis as a small Service (one ``redis-server`` in one site, no persistence), for the
scheduler-db cache alternative. Runs in the foreground inside the site namespace, bound to
the site address; its pid is the started process (``ip netns exec`` execs the server).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

from juice.errors import ServiceError
from juice.services.base import (
    Endpoint,
    Endpoints,
    Progress,
    ServerRecord,
    Service,
    Sites,
    quiet,
    reap,
    wait_for,
)
from juice.util import proc

REDIS = "/usr/bin/redis-server"
PORT = 6379


def server_args(ip: str, port: int, home: Path, maxmemory_mb: int) -> list[str]:
    """The redis-server command line: no RDB/AOF, no protected mode (lab-only address)."""
    return [REDIS, "--bind", ip, "--port", str(port), "--save", "", "--appendonly", "no",
            "--protected-mode", "no", "--daemonize", "no", "--dir", str(home),
            "--maxmemory", f"{maxmemory_mb}mb", "--logfile", str(home / "redis.log")]


def _ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class Redis(Service):
    kind = "redis"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, site: int = 1, port: int = PORT,
                 maxmemory_mb: int = 1024) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise ServiceError(f"site: {site} is not a site of this lab")
        self.site, self.port, self.maxmemory_mb = site, port, maxmemory_mb
        self.child: subprocess.Popen[bytes] | None = None
        self.pid_start: int | None = None

    @property
    def home(self) -> Path:
        return self.lab.workdir / f"s{self.site}" / "redis"

    def configure(self) -> None:
        if not Path(REDIS).exists():
            raise ServiceError(f"{REDIS} is missing: run scripts/setup.sh")
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)

    def start(self) -> None:
        with open(self.home / "stdout.log", "ab") as out:
            self.child = self.lab.popen(self.site, server_args(self.lab.site_ip(self.site), self.port,
                                                               self.home, self.maxmemory_mb),
                                        stdout=out, stderr=out)
        self.pid_start = proc.start_time(self.child.pid)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        from juice.services.client import in_site

        ns = getattr(self.lab, "site_ns")(self.site)  # noqa: B009 (Sites has no site_ns)
        ip = self.lab.site_ip(self.site)
        child = self.child

        def exited() -> str | None:
            return f"redis exited ({child.returncode})" if child and child.poll() is not None else None
        wait_for(lambda: bool(in_site(ns, lambda: _ping(ip, self.port), timeout=10)), timeout,
                 f"redis in site {self.site}", self.home / "redis.log", interval=0.05, fail=exited)
        self.progress(f"redis ready: {ip}:{self.port}")

    def stop(self) -> None:
        if self.child is None:
            return
        if proc.alive(self.child.pid, self.pid_start):
            proc.terminate([self.child.pid], grace_s=10)
        reap(self.child)
        self.child = None
        self.progress("redis stopped")

    def endpoint(self, site: int) -> Endpoints:
        ep = Endpoint("redis", self.lab.site_ip(self.site), self.port, "", site=self.site)
        return Endpoints(read=ep, write=ep)

    def records(self) -> list[ServerRecord]:
        pid = self.child.pid if self.child else 0
        return [ServerRecord(kind=self.kind, site=self.site, pid=pid, pid_start=self.pid_start,
                             datadir=str(self.home), log=str(self.home / "redis.log"), port=self.port)]

    def log_files(self) -> list[Path]:
        return [self.home / "redis.log"]
