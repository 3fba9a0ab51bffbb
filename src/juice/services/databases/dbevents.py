"""The database's own record of what went wrong during a run: deadlocks, Galera certification
failures and brute-force aborts, refused connections (issue 28: root causes from the servers).

Seed 004 traced its failed boots to Galera multi-writer deadlocks and certification failures
and to connection limits; seed 000 saw MariaDB refuse 98 % of requests at 45 sites. A failed
boot's log line says "Deadlock found" whether InnoDB chose a victim or Galera's certification
rejected a write-set; the servers' counters tell them apart. Per run (a window, like
``counters``), summed over the servers of the deployment (MariaDB or every Galera node):

| counter | what |
|---|---|
| ``Innodb_deadlocks`` | deadlocks InnoDB detected and resolved by rolling a victim back |
| ``wsrep_local_cert_failures`` | write-sets of this node that failed certification (Galera) |
| ``wsrep_local_bf_aborts`` | local transactions aborted by a replicated one (Galera brute force) |
| ``Connection_errors_max_connections`` | connections refused: ``max_connections`` reached |
| ``Aborted_connects`` | failed connection attempts (any reason) |
| ``Max_used_connections`` | the peak since the server started (not a delta: the largest value) |

``max_connections`` is read too, so a report can put the peak beside the limit. Counters a
server does not have (wsrep_* on a plain MariaDB) are absent. PostgreSQL: ``deadlocks`` of
``pg_stat_database`` (summed over databases) — its only equivalent here.

    probe = dbevents.probe_for(service)          # None when the service has no such counters
    with probe.window() as w:
        ... the run ...
    w.result      # {"Innodb_deadlocks": 0, "wsrep_local_cert_failures": 3, ..., "max_connections": 151}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from juice.errors import ServiceError

DELTAS = ("Innodb_deadlocks", "wsrep_local_cert_failures", "wsrep_local_bf_aborts",
          "Connection_errors_max_connections", "Aborted_connects")
PEAKS = ("Max_used_connections",)
LIMIT = "max_connections"
PG_DELTAS = ("deadlocks",)


class _Queryable(Protocol):
    def query(self, sql: str) -> list[tuple[Any, ...]]: ...


@dataclass
class Window:
    result: dict[str, int] = field(default_factory=dict)


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Counters over a window: increases for the counters, the larger value for the peaks."""
    out: dict[str, int] = {}
    for k, v in after.items():
        if k in PEAKS or k == LIMIT:
            out[k] = v
        elif k in before:
            out[k] = max(0, v - before[k])  # a restarted server starts again from 0
    return out


class Probe:
    """Snapshots of the event counters of every server of a deployment."""

    def snapshot(self) -> dict[str, int]:
        raise NotImplementedError

    @contextmanager
    def window(self) -> Iterator[Window]:
        w = Window()
        before = self.snapshot()
        yield w
        w.result = delta(before, self.snapshot())


class MySQLEvents(Probe):
    def __init__(self, servers: Sequence[_Queryable]) -> None:
        self.servers = list(servers)

    def snapshot(self) -> dict[str, int]:
        names = ",".join(f"'{n}'" for n in (*DELTAS, *PEAKS))
        total: dict[str, int] = {}
        for s in self.servers:
            try:
                rows = s.query(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
                limit = s.query(f"SHOW GLOBAL VARIABLES WHERE Variable_name = '{LIMIT}'")
            except ServiceError:  # a node down (a fault) misses one snapshot only
                continue
            for k, v in rows:
                name, value = str(k), int(str(v))
                total[name] = max(total.get(name, 0), value) if name in PEAKS else total.get(name, 0) + value
            for _k, v in limit:
                total[LIMIT] = int(str(v))
        return total


class PgEvents(Probe):
    def __init__(self, servers: Sequence[_Queryable]) -> None:
        self.servers = list(servers)

    def snapshot(self) -> dict[str, int]:
        total = {"deadlocks": 0}
        for s in self.servers:
            try:
                for (v,) in s.query("SELECT COALESCE(SUM(deadlocks), 0) FROM pg_stat_database"):
                    total["deadlocks"] += int(str(v))
            except ServiceError:
                continue
        return total


def probe_for(service: Any) -> Probe | None:
    """The event probe of a deployed database service (None for one without counters here)."""
    from juice.services.databases.galera import Galera
    from juice.services.databases.mariadb import MariaDBCentral
    from juice.services.databases.postgres import Postgres

    if isinstance(service, MariaDBCentral):
        return MySQLEvents([service.server])
    if isinstance(service, Galera):
        return MySQLEvents(list(service.nodes.values()))
    if isinstance(service, Postgres):
        return PgEvents(service.servers())
    return None
