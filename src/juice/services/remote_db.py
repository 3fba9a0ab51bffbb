"""MariaDB (one server, in site 1) or Galera (a node per site) on SSH hosts (``RemoteLab``).

    db = RemoteDatabase(lab, "galera", progress)
    db.up(timeout=300)            # configure + start + wait_healthy, in phases across hosts
    db.endpoint(2)                # Endpoints: where a client in site 2 reads and writes
    db.stop()

The same server command lines as the local services (``mariadb.server_args``,
``galera.wsrep_args``); what differs is how they get there: every file and command goes
through the host agents (``juice.remote.session``), servers are recorded by pid and stopped
by pid, and the datadirs live under the lab's directory on each host.

Galera: node 1 is initialised (``mariadb-install-db`` + Juice's user, on a socket-only
server), started with ``--wsrep-new-cluster``, then the other nodes join one by one by
rsync SST (``sst: seed``, the local pre-seeding, needs a shared disk: not on hosts).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juice.errors import ServiceError
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, quiet
from juice.services.galera import GaleraOptions, wsrep_args
from juice.services.mariadb import (
    INSTALL_DB,
    PASSWORD,
    PORT,
    USER,
    ServerOptions,
    bootstrap_sql,
    install_db_args,
    server_args,
    template_args,
)

CLIENT = "/usr/bin/mariadb"
REQUIRED = ("/usr/sbin/mariadbd", INSTALL_DB, CLIENT)


if TYPE_CHECKING:
    from juice.lab.remote import RemoteLab


class RemoteDatabase(Service):
    """``kind`` mariadb (central, site 1) or galera (every site) on the hosts of ``lab``."""

    def __init__(
        self, lab: Any, kind: str, progress: Progress = quiet, options: GaleraOptions | None = None
    ) -> None:
        super().__init__(lab, progress)
        self.r: RemoteLab = lab
        if kind not in ("mariadb", "galera"):
            raise ServiceError(f"rdbms: {kind!r} is not supported on SSH hosts yet (mariadb, galera)")
        self.kind = kind
        self.gopts = options or GaleraOptions()
        self.node_sites = list(lab.sites) if kind == "galera" else [1]
        self.procs: dict[int, Any] = {}
        self.timings: dict[str, float] = {}

    def home(self, site: int) -> Path:
        return Path(self.r.root) / f"s{site}" / "db"

    def rel(self, site: int, name: str = "") -> str:
        return f"s{site}/db" + (f"/{name}" if name else "")

    def _opts(self, site: int) -> ServerOptions:
        extra: tuple[tuple[str, str], ...] = ()
        if self.kind == "galera":
            ips = [self.lab.site_ip(s) for s in self.node_sites]
            extra = wsrep_args(ips, self.node_sites.index(site) + 1, self.gopts)
        return ServerOptions(
            bind=self.lab.site_ip(site), buffer_pool_mb=self.gopts.buffer_pool_mb, extra=extra
        )

    def _sql(self, site: int, sql: str, timeout: float = 30) -> str:
        res = self.r[site].run(
            [
                {
                    "argv": [
                        CLIENT,
                        f"--socket={self.home(site) / 'mysqld.sock'}",
                        "-N",
                        "-B",
                        "-u",
                        "root",
                        "-e",
                        sql,
                    ],
                    "timeout": timeout,
                }
            ],
            what="SQL",
        )
        return str(res[0]["out"])

    def _socket_ok(self, site: int) -> bool:
        res = self.r[site].run(
            [[CLIENT, f"--socket={self.home(site) / 'mysqld.sock'}", "-u", "root", "-e", "SELECT 1"]],
            keep_going=True,
        )
        return bool(res[0]["rc"] == 0)

    def _wait(self, site: int, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        proc = self.procs.get(site)
        while not check():
            if proc is not None and not self.r[site].alive(proc):
                raise ServiceError(f"{what} in site {site} exited: {self._log_tail(site)}")
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"{what} in site {site}: not ready after {timeout:.0f} s: {self._log_tail(site)}"
                )
            time.sleep(0.5)

    def _log_tail(self, site: int) -> str:
        raw = self.r[site].get(self.rel(site, "error.log"), max_bytes=1 << 20) or b""
        lines = [x for x in raw.decode(errors="replace").splitlines() if "ERROR" in x or "[ERROR]" in x]
        return lines[-1] if lines else "no error in the log"

    # ---- lifecycle ---------------------------------------------------------------------------
    def configure(self) -> None:
        t0 = time.monotonic()

        def prepare(site: int, s: Any) -> None:
            missing = [
                p
                for p, r in zip(
                    REQUIRED, s.run([["test", "-x", p] for p in REQUIRED], keep_going=True), strict=True
                )
                if r["rc"] != 0
            ]
            if missing:
                raise ServiceError(f"{', '.join(missing)} missing: prepare the host with scripts/setup.sh")
            s.call("mkdir", path=self.rel(site, "data"))
            s.call("mkdir", path=self.rel(site), owner="mysql:mysql")  # mariadbd runs as mysql
            s.put(
                self.rel(site, "my.cnf"),
                "[mariadbd]\n"
                + "\n".join(a.removeprefix("--") for a in server_args(self._opts(site), self.home(site))[2:])
                + "\n",
            )

        self.r.hosts.each(f"{self.kind}: configure", prepare, sites=self.node_sites)
        first = self.node_sites[0]
        s = self.r[first]
        home = self.home(first)
        s.run(
            [["mkdir", "-p", str(home / "tmp")], ["chown", "mysql", str(home / "tmp")],
             install_db_args(home)],
            timeout=180,
            what="mariadb-install-db",
        )
        tmpl = s.spawn(template_args(home), log=self.rel(first, "template.log"))
        self.procs[first] = tmpl
        try:
            self._wait(first, lambda: self._socket_ok(first), 60, "mariadb (socket-only, for its users)")
            self._sql(first, bootstrap_sql().replace("\n", " "))
        finally:
            s.kill([tmpl], grace_s=30)
            self.procs.pop(first, None)
        self.timings["configure_s"] = time.monotonic() - t0
        self.progress(
            f"{self.kind}: datadir initialised on site {first}'s host in {self.timings['configure_s']:.1f} s"
        )

    def start(self) -> None:
        t0 = time.monotonic()
        first, rest = self.node_sites[0], self.node_sites[1:]
        argv = server_args(self._opts(first), self.home(first))
        if self.kind == "galera":
            argv.append("--wsrep-new-cluster")
        self.procs[first] = self.r[first].spawn(argv, log=self.rel(first, "stdout.log"))
        self._wait(first, lambda: self._ready(first), 120, self.kind)
        for site in rest:  # joins one at a time: each gets a full rsync SST from a donor
            self.procs[site] = self.r[site].spawn(
                server_args(self._opts(site), self.home(site)), log=self.rel(site, "stdout.log")
            )
            self._wait(site, lambda site=site: self._ready(site), 300, "galera node")
            self.progress(f"galera: node of site {site} joined ({time.monotonic() - t0:.1f} s)")
        self.timings["start_s"] = time.monotonic() - t0

    def _ready(self, site: int) -> bool:
        if not self._socket_ok(site):
            return False
        if self.kind != "galera":
            return True
        return "Synced" in self._sql(site, "SHOW STATUS LIKE 'wsrep_local_state_comment'")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        def check(site: int, s: Any) -> None:
            ms = s.tcp_ms(self.lab.site_ip(site), PORT)
            if ms is None:
                raise ServiceError(f"{self.kind} in site {site} does not accept TCP connections on {PORT}")

        self.r.hosts.each(f"{self.kind}: health", check, sites=self.node_sites)

    def endpoint(self, site: int) -> Endpoints:
        node = site if self.kind == "galera" else 1
        ep = Endpoint("mysql", self.lab.site_ip(node), PORT, USER, PASSWORD, site=node)
        return Endpoints(read=ep, write=ep)

    def create_database(self, name: str) -> None:
        self._sql(self.node_sites[0], f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")

    def records(self) -> list[ServerRecord]:
        return []  # the host agents hold the pids (they stop them at lab teardown)

    def log_files(self) -> list[Path]:
        return []  # on the hosts: collect_logs fetches them

    def collect_logs(self, dest: Path) -> list[Path]:
        out = []
        for site in self.node_sites:
            raw = self.r[site].get(self.rel(site, "error.log"))
            if raw is not None:
                p = dest / f"{self.kind}-s{site}-error.log"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(raw)
                out.append(p)
        return out

    def stop(self) -> None:
        """Galera nodes in reverse order (the last to stop keeps the cluster state), by pid."""
        for site in reversed(list(self.procs)):
            try:
                self.r[site].kill([self.procs[site]], grace_s=60)
            except Exception as e:  # the host's agent stops it at lab teardown anyway
                self.progress(f"{self.kind} in site {site}: stop failed ({e}); the lab teardown stops it")
        self.procs.clear()

    def facts(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "nodes": self.node_sites,
            "where": "ssh hosts",
            "timings_s": {k: round(v, 2) for k, v in self.timings.items()},
        }
