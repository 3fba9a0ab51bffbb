"""CockroachDB: one node per site, ``--locality=region=s<k>``, joined, then ``init``.

Only when a ``cockroach`` binary is on PATH: CockroachDB is not packaged for Debian and is
not downloadable from this machine, so ``Cockroach(...)`` raises a clear UserError naming
what to install when it is missing. Clients speak the PostgreSQL protocol (port 26257,
user root, insecure mode — lab only).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from juice.errors import ServiceError, UserError
from juice.services.base import (
    Endpoint,
    Endpoints,
    LocalSites,
    Progress,
    ServerRecord,
    Service,
    quiet,
    wait_for,
)
from juice.services.process import Server, spawn, stop_all

SQL_PORT = 26257
HTTP_PORT = 8080
MISSING = ("cockroach binary not found on PATH: CockroachDB is not packaged for Debian; install it "
           "yourself (https://www.cockroachlabs.com/docs/stable/install-cockroachdb-linux) and "
           "put `cockroach` on PATH, then rerun")


def binary() -> str:
    """Path of ``cockroach``; UserError (exit 2) with what to do when it is missing."""
    path = shutil.which("cockroach")
    if path is None:
        raise UserError(MISSING)
    return path


def start_args(exe: str, store: Path, ip: str, site: int, join: list[str], cache_mb: int = 128) -> list[str]:
    """Pure: the ``cockroach start`` command line of the node in ``site``."""
    return [exe, "start", "--insecure", f"--store=path={store}", f"--listen-addr={ip}:{SQL_PORT}",
            f"--http-addr={ip}:{HTTP_PORT}", f"--locality=region=s{site}",
            "--join=" + ",".join(f"{j}:{SQL_PORT}" for j in join), f"--cache={cache_mb}MiB",
            f"--max-sql-memory={cache_mb}MiB", f"--pid-file={store / 'cockroach.pid'}"]


class Cockroach(Service):
    """A CockroachDB cluster, one node per site (see module doc)."""

    kind = "cockroach"

    def __init__(self, lab: LocalSites, progress: Progress = quiet, *,
                 sites: list[int] | None = None) -> None:
        super().__init__(lab, progress)
        self.lab: LocalSites = lab  # not yet written against places: a local lab only
        self.exe = binary()
        self.node_sites = sites or list(lab.sites)
        self.servers: dict[int, Server] = {}

    def home(self, site: int) -> Path:
        return self.lab.workdir / f"s{site}" / "cockroach"

    def log(self, site: int) -> Path:
        return self.home(site) / "cockroach.log"

    def configure(self) -> None:
        for s in self.node_sites:
            shutil.rmtree(self.home(s), ignore_errors=True)
            self.home(s).mkdir(parents=True)

    def start(self) -> None:
        join = [self.lab.site_ip(s) for s in self.node_sites[:3]]
        for s in self.node_sites:
            argv = start_args(self.exe, self.home(s), self.lab.site_ip(s), s, join)
            self.servers[s] = spawn(self.lab.place(s), argv, log=self.log(s), what=f"cockroach in site {s}")
        first = self.node_sites[0]
        self.lab.run(first, [self.exe, "init", "--insecure",
                             f"--host={self.lab.site_ip(first)}:{SQL_PORT}"], timeout=120)
        self.progress(f"cockroach cluster of {len(self.node_sites)} initialized")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        first = self.node_sites[0]

        def live() -> bool:
            cp = self.lab.run(first, [self.exe, "node", "status", "--insecure", "--format=tsv",
                                      f"--host={self.lab.site_ip(first)}:{SQL_PORT}"], check=False)
            return cp.returncode == 0 and cp.stdout.count("\ttrue\t") >= len(self.node_sites)
        def exited() -> str | None:
            return next((f"node in site {s} {why}" for s, srv in self.servers.items()
                         if (why := srv.exited())), None)
        wait_for(live, timeout, "cockroach nodes live", self.log(first), interval=1.0, fail=exited)

    def stop(self) -> None:
        stop_all(self.servers.values(), grace_s=30)
        self.servers.clear()

    def endpoint(self, site: int) -> Endpoints:
        local = site if site in self.node_sites else self.node_sites[0]
        ep = Endpoint("postgresql", self.lab.site_ip(local), SQL_PORT, "root", "", "defaultdb", local)
        return Endpoints(read=ep, write=ep)

    def records(self) -> list[ServerRecord]:
        return [srv.record(self.kind, port=SQL_PORT, datadir=self.home(s))
                for s, srv in self.servers.items()]

    def log_files(self) -> list[Path]:
        return [self.log(s) for s in self.node_sites]

    def describe(self) -> str:
        if not self.servers:
            raise ServiceError("cockroach: not started")
        return f"{len(self.servers)} nodes"
