"""One backend deployed in the study's lab, reused by every point that uses it.

Where things run: the server(s) of a central backend (mariadb, postgres, memcached, redis)
are in site 1 with the schedulers and the updaters (the seed's single box, no WAN in the
path). Galera has a node in every site: the schedulers read from node 1 (site 1) while the
updaters run in sites 2..k and write through their local node, so every update is
certified across the WAN before it commits and is applied on node 1 during the reads.

Each layout lives in its own database: ``nova_2013`` (historical, Juice's DDL) and ``nova``
(modern, made by nova-manage). Caches hold one layout (``kv``).
"""

from __future__ import annotations

import dataclasses
import time
from types import TracebackType
from typing import IO, Any

from juice.lab.place import Lab
from juice.services import deploy
from juice.services.base import Progress, Service
from juice.studies.schedulerdb import modern
from juice.studies.schedulerdb import schema_2013 as s13
from juice.studies.schedulerdb.spec import CACHE_BACKENDS
from juice.studies.schedulerdb.worker import WorkerProc

DATABASES = {"historical": "nova_2013", "modern": "nova"}
CACHE_MB = 1024
HEADROOM = 10  # connections for population (the admin worker), probes and an operator
SHIPPED_MAX_CONNECTIONS = {"mariadb": 151, "galera": 151, "postgres": 100, "postgres-readlocal": 100}


class BackendSession:
    """``with BackendSession(lab, "mariadb", progress) as b: b.prepare("historical") ...``"""

    def __init__(self, lab: Lab, backend: str, progress: Progress, *, readers: int = 0,
                 update_workers: int = 0) -> None:
        self.lab, self.backend, self.progress = lab, backend, progress
        self.readers, self.update_workers = readers, update_workers
        self.svc: Service | None = None
        self.prepared: dict[str, dict[str, object]] = {}
        self.nodes: dict[str, int] = {}
        self.log: IO[bytes] | None = None

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> BackendSession:
        b = self.backend
        if b == "memcached":
            from juice.services.caches.memcached import Memcached

            self.svc = Memcached(self.lab, self.progress, sites=[1], memory_mb=CACHE_MB).up()
        elif b == "redis":
            from juice.services.caches.redis import Redis

            self.svc = Redis(self.lab, self.progress, site=1, maxmemory_mb=CACHE_MB).up()
        else:
            self.svc = deploy(self.lab, b, self.progress, **self.connection_limit())
        return self

    def connection_limit(self) -> dict[str, Any]:
        """``max_connections`` for the database when the study's workers may open more than its
        shipped default (MariaDB/Galera 151, PostgreSQL 100), with how it was counted; {}: the
        default (nothing passed)."""
        shipped = SHIPPED_MAX_CONNECTIONS.get(self.backend)
        updaters = len(self.updater_sites) * self.update_workers
        needed = self.readers + updaters + HEADROOM
        if shipped is None or needed <= shipped:
            return {}
        return {"max_connections": needed, "max_connections_reason": (
            f"the study's connections: {self.readers} scheduler readers + {len(self.updater_sites)} "
            f"updater process(es) x {self.update_workers} + {HEADROOM} for population and probes "
            f"(more than the shipped {shipped})")}

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.svc is not None:
            self.svc.stop()
            self.svc = None

    # ---- where ---------------------------------------------------------------------------
    @property
    def reader_site(self) -> int:
        return 1

    @property
    def updater_sites(self) -> list[int]:
        if self.backend == "galera":
            return [s for s in self.lab.sites if s != 1]
        return [1]

    @property
    def driver(self) -> str:
        if self.backend in CACHE_BACKENDS:
            return self.backend
        return "postgresql" if self.backend == "postgres" else "mysql"

    def endpoint(self, site: int, family: str) -> dict[str, Any]:
        """The endpoint dict a client in ``site`` uses for ``family``'s data."""
        assert self.svc is not None
        ep = dataclasses.asdict(self.svc.endpoint(site).write)
        ep["driver"] = self.driver
        if family in DATABASES:
            ep["database"] = DATABASES[family]
        return ep

    def admin(self, family: str, database: str | None = None) -> WorkerProc:
        """A worker in site 1 connected to ``family``'s store (``database`` overrides the
        database name: the server's own, to create or drop one). Close it after use."""
        ep = self.endpoint(1, family)
        if database is not None:
            ep["database"] = database
        return WorkerProc(self.lab, 1, {"role": "admin", "endpoint": ep, "timeout_s": 3600}, self._log())

    def _log(self) -> IO[bytes]:
        if self.log is None:
            self.log = open(self.lab.workdir / f"admin-{self.backend}.log", "ab")  # noqa: SIM115
        return self.log

    def _admin_exec(self, family: str, statements: list[str], database: str | None = None) -> None:
        w = self.admin(family, database)
        try:
            w.call({"cmd": "exec", "statements": statements}, timeout=600)
        finally:
            w.close()

    # ---- data ----------------------------------------------------------------------------
    def prepare(self, family: str) -> dict[str, Any]:
        """Create ``family``'s empty layout (once per session); returns facts for manifests."""
        if family in self.prepared:
            return self.prepared[family]
        facts: dict[str, Any] = {"family": family}
        if family in DATABASES:
            db = DATABASES[family]
            create = (f"CREATE DATABASE {db} CHARACTER SET utf8" if self.driver == "mysql"
                      else f"CREATE DATABASE {db} OWNER juice")
            self._admin_exec(family, [f"DROP DATABASE IF EXISTS {db}", create], database="juice")
            if family == "historical":
                self._admin_exec(family, list(s13.ddl(self.driver)))
                facts["schema"] = "juice DDL modelled on nova 2013.1 models (schema_2013.py)"
            else:
                ep = self.endpoint(1, family)
                scheme = "mysql+pymysql" if self.driver == "mysql" else "postgresql+psycopg2"
                url = f"{scheme}://{ep['user']}:{ep['password']}@{ep['host']}:{ep['port']}/{db}"
                facts["schema"] = modern.sync(self.lab, 1, url)
                self.progress(f"{self.backend}: nova schema by nova-manage db sync in "
                              f"{facts['schema']['seconds']} s ({facts['schema']['nova_version']})")
        else:
            w = self.admin(family)
            try:
                w.call({"cmd": "flush"}, timeout=120)
            finally:
                w.close()
            facts["schema"] = "one entry per node (JSON: node + service + stats) and an index entry"
        self.prepared[family] = facts
        self.nodes[family] = 0
        return facts

    def grow(self, family: str, nodes: int, seed: int, k: int) -> float:
        """Populate ``family`` up to ``nodes`` nodes (inserting only the delta), by a worker in
        site 1; seconds taken."""
        have = self.nodes.get(family, 0)
        if nodes <= have:
            return 0.0
        t0 = time.monotonic()
        w = self.admin(family)
        try:
            w.call({"cmd": "grow", "family": family, "seed": seed, "k": k, "have": have, "want": nodes,
                    "analyze": family in DATABASES and self.driver == "postgresql"}, timeout=3600)
        finally:
            w.close()
        self.nodes[family] = nodes
        took = time.monotonic() - t0
        self.progress(f"{self.backend}/{family}: {have} → {nodes} nodes in {took:.1f} s")
        return took

    def versions(self) -> dict[str, str]:
        """The servers' versions, asked where they run (site 1)."""
        if self.backend in ("mariadb", "galera"):
            v = {"mariadbd": self._version(["mariadbd", "--version"])}
            if self.backend == "galera":
                v["galera"] = self._version(["sh", "-c", "dpkg-query -W galera-4"])
            return v
        if self.backend == "postgres":
            return {"postgres": self._version(["/usr/lib/postgresql/15/bin/postgres", "--version"])}
        if self.backend == "memcached":
            return {"memcached": self._version(["memcached", "-V"])}
        return {"redis": self._version(["redis-server", "--version"])}

    def _version(self, argv: list[str]) -> str:
        """First line of ``argv``'s output at site 1's place, or 'absent' (as ``tool_version``)."""
        r = self.lab.place(1).run(argv, timeout=30)
        if r.rc in (None, 127):
            return "absent"
        return ((r.out or r.err).strip().splitlines() or ["?"])[0]
