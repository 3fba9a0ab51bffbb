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
from types import TracebackType
from typing import Any

from juice.errors import UserError
from juice.lab.place import Lab
from juice.lab.setns import in_site
from juice.results.store import tool_version
from juice.services import deploy
from juice.services.base import Progress, Service
from juice.studies.schedulerdb import dbapi, modern, populate
from juice.studies.schedulerdb import schema_2013 as s13
from juice.studies.schedulerdb.spec import CACHE_BACKENDS

DATABASES = {"historical": "nova_2013", "modern": "nova"}
CACHE_MB = 1024


class BackendSession:
    """``with BackendSession(lab, "mariadb", progress) as b: b.prepare("historical") ...``"""

    def __init__(self, lab: Lab, backend: str, progress: Progress) -> None:
        self.lab, self.backend, self.progress = lab, backend, progress
        self.svc: Service | None = None
        self.prepared: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, int] = {}

    def netns(self, site: int) -> str:
        """The network namespace of ``site`` on this machine: the study's readers and updaters
        are processes here that enter it (UserError for a lab whose sites are not here)."""
        names = {s: ns for ns, s in (self.lab.local_namespaces() or {}).items()}
        if site not in names:
            raise UserError(f"scheduler-db: site {site} of lab {self.lab.name} is not a namespace on "
                            "this machine; the study runs its readers in a local lab (lab: in the spec)")
        return names[site]

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> BackendSession:
        b = self.backend
        if b == "memcached":
            from juice.services.memcached import Memcached

            self.svc = Memcached(self.lab, self.progress, sites=[1], memory_mb=CACHE_MB).up()
        elif b == "redis":
            from juice.services.redis import Redis

            self.svc = Redis(self.lab, self.progress, site=1, maxmemory_mb=CACHE_MB).up()
        else:
            self.svc = deploy(self.lab, b, self.progress)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
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

    def connect(self, family: str, site: int = 1) -> Any:
        """A connection opened inside ``site`` (usable from this process's threads)."""
        ep = self.endpoint(site, family)
        return in_site(self.netns(site), lambda: dbapi.connect(ep))

    # ---- data ----------------------------------------------------------------------------
    def prepare(self, family: str) -> dict[str, Any]:
        """Create ``family``'s empty layout (once per session); returns facts for manifests."""
        if family in self.prepared:
            return self.prepared[family]
        facts: dict[str, Any] = {"family": family}
        if family in DATABASES:
            db = DATABASES[family]
            admin_ep = self.endpoint(1, family)
            admin_ep["database"] = "juice"
            admin = in_site(self.netns(1), lambda: dbapi.connect(admin_ep))
            try:
                if self.driver == "mysql":
                    dbapi.execute(admin, f"DROP DATABASE IF EXISTS {db}")
                    dbapi.execute(admin, f"CREATE DATABASE {db} CHARACTER SET utf8")
                else:
                    dbapi.execute(admin, f"DROP DATABASE IF EXISTS {db}")
                    dbapi.execute(admin, f"CREATE DATABASE {db} OWNER juice")
            finally:
                admin.close()
            if family == "historical":
                conn = self.connect(family)
                try:
                    for stmt in s13.ddl(self.driver):
                        dbapi.execute(conn, stmt)
                finally:
                    conn.close()
                facts["schema"] = "juice DDL modelled on nova 2013.1 models (schema_2013.py)"
            else:
                ep = self.endpoint(1, family)
                scheme = "mysql+pymysql" if self.driver == "mysql" else "postgresql+psycopg2"
                url = f"{scheme}://{ep['user']}:{ep['password']}@{ep['host']}:{ep['port']}/{db}"
                facts["schema"] = modern.sync(self.lab, 1, url)
                self.progress(f"{self.backend}: nova schema by nova-manage db sync in "
                              f"{facts['schema']['seconds']} s ({facts['schema']['nova_version']})")
        else:
            conn = self.connect(family)
            try:
                conn.flush_all() if self.backend == "memcached" else conn.flushall()
            finally:
                conn.close()
            facts["schema"] = "one entry per node (JSON: node + service + stats) and an index entry"
        self.prepared[family] = facts
        self.nodes[family] = 0
        return facts

    def grow(self, family: str, nodes: int, seed: int, k: int) -> float:
        """Populate ``family`` up to ``nodes`` nodes (inserting only the delta); seconds taken."""
        import time

        have = self.nodes.get(family, 0)
        if nodes <= have:
            return 0.0
        t0 = time.monotonic()
        conn = self.connect(family)
        try:
            populate.grow(family, conn, self.driver, seed, k, have, nodes)
            if family in DATABASES and self.driver == "postgresql":
                dbapi.execute(conn, "ANALYZE")
        finally:
            conn.close()
        self.nodes[family] = nodes
        took = time.monotonic() - t0
        self.progress(f"{self.backend}/{family}: {have} → {nodes} nodes in {took:.1f} s")
        return took

    def versions(self) -> dict[str, str]:
        if self.backend in ("mariadb", "galera"):
            v = {"mariadbd": tool_version(["mariadbd", "--version"])}
            if self.backend == "galera":
                v["galera"] = tool_version(["sh", "-c", "dpkg-query -W galera-4"])
            return v
        if self.backend == "postgres":
            return {"postgres": tool_version(["/usr/lib/postgresql/15/bin/postgres", "--version"])}
        if self.backend == "memcached":
            return {"memcached": tool_version(["memcached", "-V"])}
        return {"redis": tool_version(["redis-server", "--version"])}
