"""CockroachDB: one node per site, ``--locality=region=s<k>``, joined, then ``init``.

Every node runs at its site's PLACE (``juice.lab.place``: a namespace here or an SSH host):
its store and log under ``<root>/s<k>/cockroach/``, ``cockroach init`` and ``node status`` run
there. Only when a ``cockroach`` binary is on the PATH of every node's place: CockroachDB is not
packaged for Debian and is not downloadable from this machine, so ``configure`` raises a clear
UserError naming the site and what to install when it is missing. Clients speak the PostgreSQL
protocol (port 26257, user root, insecure mode — lab only).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.services.deviations import Deviation, dev
from juice.services.process import Server, spawn, stop_all

SQL_PORT = 26257
HTTP_PORT = 8080
MISSING = ("cockroach binary not found on PATH: CockroachDB is not packaged for Debian; install it "
           "yourself (https://www.cockroachlabs.com/docs/stable/install-cockroachdb-linux) and "
           "put `cockroach` on PATH, then rerun")


def binary() -> str:
    """Path of ``cockroach`` on this machine; UserError (exit 2) with what to do when it is missing."""
    path = shutil.which("cockroach")
    if path is None:
        raise UserError(MISSING)
    return path


def binary_at(place: Place) -> str:
    """Path of ``cockroach`` at ``place`` (its PATH); UserError naming the site when missing."""
    r = place.run(["sh", "-c", "command -v cockroach"], timeout=30)
    path = r.out.strip().splitlines()[0] if r.ok and r.out.strip() else ""
    if not path:
        raise UserError(f"{place.label}: {MISSING}")
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

    def __init__(self, lab: Sites, progress: Progress = quiet, *,
                 sites: list[int] | None = None) -> None:
        super().__init__(lab, progress)
        self.node_sites = sites or list(lab.sites)
        for s in self.node_sites:
            if s not in lab.sites:
                raise UserError(f"cockroach: sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        self.exes: dict[int, str] = {}     # site -> the binary there (found by ``configure``)
        self.servers: dict[int, Server] = {}

    def place(self, site: int) -> Place:
        return self.lab.place(site)

    def home(self, site: int) -> Path:
        return self.place(site).root / f"s{site}" / "cockroach"

    def log(self, site: int) -> Path:
        return self.home(site) / "cockroach.log"

    def configure(self) -> None:
        self.exes = {s: binary_at(self.place(s)) for s in self.node_sites}
        for s in self.node_sites:
            self.place(s).remove(self.home(s))
            self.place(s).mkdir(self.home(s))

    def _cli(self, site: int, *args: str, timeout: float = 60.0) -> tuple[bool, str]:
        """``cockroach <args> --insecure --host=<site's node>`` at ``site``'s place."""
        r = self.place(site).run([self.exes[site], *args, "--insecure",
                                  f"--host={self.lab.site_ip(site)}:{SQL_PORT}"], timeout=timeout)
        return r.ok, (r.out + r.err).strip()

    def start(self) -> None:
        join = [self.lab.site_ip(s) for s in self.node_sites[:3]]
        for s in self.node_sites:
            argv = start_args(self.exes[s], self.home(s), self.lab.site_ip(s), s, join)
            self.servers[s] = spawn(self.place(s), argv, log=self.log(s), what=f"cockroach in site {s}")
        first = self.node_sites[0]
        ok, out = self._cli(first, "init", timeout=120)
        if not ok and "already been initialized" not in out:
            last = out.splitlines()[-1] if out else "no output"
            raise ServiceError(f"cockroach init in site {first} failed: {last}")
        self.progress(f"cockroach cluster of {len(self.node_sites)} initialized")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        first = self.node_sites[0]

        def live() -> bool:
            ok, out = self._cli(first, "node", "status", "--format=tsv")
            return ok and out.count("\ttrue\t") >= len(self.node_sites)

        def exited() -> str | None:
            return next((f"node in site {s} {why}" for s, srv in self.servers.items()
                         if (why := srv.exited())), None)

        self.servers[first].wait_ready(live, timeout, "cockroach nodes live", interval=1.0, fail=exited)

    def stop(self) -> None:
        stop_all(self.servers.values(), grace_s=30)
        self.servers.clear()

    def endpoint(self, site: int) -> Endpoints:
        local = site if site in self.node_sites else self.node_sites[0]
        ep = Endpoint("postgresql", self.lab.site_ip(local), SQL_PORT, "root", "", "defaultdb", local)
        return Endpoints(read=ep, write=ep)

    def deviations(self) -> list[Deviation]:
        """What the nodes run with that differs from CockroachDB's defaults (--cache 128MiB
        is the default)."""
        return [dev("cockroach", "--max-sql-memory", "128MiB", "25% of the machine's memory",
                    "memory: a node per site, up to 45 on one machine")]

    def records(self) -> list[ServerRecord]:
        return [srv.record(self.kind, port=SQL_PORT, datadir=self.home(s))
                for s, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place(s), self.log(s)) for s in self.node_sites]

    def describe(self) -> str:
        if not self.servers:
            raise ServiceError("cockroach: not started")
        return f"{len(self.servers)} nodes"
