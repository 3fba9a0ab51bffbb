"""The servers' own counters around a run: what the database and the Keystone cache did, and
how big the tables that grow were (issue 27: the cause of the run-order effect).

    sc = ServerCounters.for_deployment(db, memcached, schema="keystone")
    start = sc.snapshot()          # {"memcached.get_hits": 12, "innodb.buffer_pool_reads": 3, ...}
    ... run the workload ...
    end = sc.snapshot()
    record(start, end)             # the manifest's ``server_counters`` (start, end, derived)

Flat names, one source per prefix, every value an int (a missing counter is left out):

- ``memcached.*``: ``stats`` of every memcached serving Keystone's cache, summed over sites:
  ``get_hits``, ``get_misses``, ``curr_items``, ``evictions``, ``cmd_get``, ``cmd_set``.
- ``innodb.*`` (MariaDB / Galera, summed over nodes): ``buffer_pool_reads`` (reads that missed
  the buffer pool and went to disk), ``buffer_pool_read_requests`` (logical reads),
  ``history_list_length`` (undo history not yet purged: ``INNODB_METRICS``
  ``trx_rseg_history_len``).
- ``mysql.*`` (MariaDB / Galera, summed over nodes): ``refused_max_connections``
  (``Connection_errors_max_connections``: connections refused at ``max_connections``) and
  ``max_used_connections`` (the peak since the server started, read at the run's end).
- ``galera.*`` (summed over nodes): ``cert_failures`` (``wsrep_local_cert_failures``),
  ``cert_index_size``, ``flow_control_paused_ns``.
- ``pg.*`` (PostgreSQL, the Keystone database): ``blks_read`` / ``blks_hit`` of
  ``pg_stat_database`` (shared-buffer misses / hits).
- ``rows.<table>``: ``COUNT(*)`` of the Keystone tables that grow with the write scenarios
  (``TABLES``), read from one server.
- ``keystone.*``: ``full_gcs`` and ``full_gc_ms``, the full garbage collections of every
  Keystone worker and their pauses, summed over sites, from the Keystone logs (a fresh
  worker's first one is a ~0.1-0.2 s pause: ``juice.services.openstack.keystone_warm``).
- ``host.*`` (this machine, where the drivers run; on a local lab also every server):
  ``cpu_busy_jiffies`` / ``cpu_total_jiffies`` of ``/proc/stat`` (busy = all but idle and
  iowait) and ``load1_x100`` (the 1-minute load average × 100). On a shared machine the other
  users' load is part of what a run measures: ``host_cpu_busy`` says how busy it was.

The snapshots are taken OUTSIDE the statement-counter window (``juice.services.databases.counters``): the
probe's own ``SELECT COUNT(*)`` would otherwise count as the run's reads. Reading them is best
effort: a source that fails is left out of the snapshot (``errors`` says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from juice.errors import ServiceError
from juice.services.base import Service

MEMCACHED_STATS = ("get_hits", "get_misses", "curr_items", "evictions", "cmd_get", "cmd_set")
TABLES = ("user", "local_user", "password", "project", "assignment", "revocation_event")
_MYSQL_STATUS = {"Innodb_buffer_pool_reads": "innodb.buffer_pool_reads",
                 "Innodb_buffer_pool_read_requests": "innodb.buffer_pool_read_requests",
                 "wsrep_local_cert_failures": "galera.cert_failures",
                 "wsrep_cert_index_size": "galera.cert_index_size",
                 "wsrep_flow_control_paused_ns": "galera.flow_control_paused_ns",
                 "Connection_errors_max_connections": "mysql.refused_max_connections",
                 "Max_used_connections": "mysql.max_used_connections"}
MYSQL_STATUS_SQL = ("SHOW GLOBAL STATUS WHERE Variable_name IN ("
                    + ",".join(f"'{v}'" for v in _MYSQL_STATUS) + ")")
HISTORY_SQL = "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"
# the counters that are levels (read at the run's start), not totals (read as a difference)
LEVELS = ("memcached.curr_items", "innodb.history_list_length", "galera.cert_index_size", "host.load1_x100")
# peaks since the server started, read at the run's end
PEAKS = ("mysql.max_used_connections",)


def _int(v: object) -> int | None:
    try:
        return int(str(v).strip())
    except ValueError:
        return None


def parse_memcached(stats: Mapping[str, str]) -> dict[str, int]:
    """Pure: the ``memcached.*`` counters of one server's ``stats``."""
    out = {}
    for k in MEMCACHED_STATS:
        v = _int(stats.get(k, ""))
        if v is not None:
            out[f"memcached.{k}"] = v
    return out


def parse_mysql_status(rows: Sequence[Sequence[object]]) -> dict[str, int]:
    """Pure: the ``innodb.*`` / ``galera.*`` counters of ``SHOW GLOBAL STATUS`` rows."""
    out = {}
    for row in rows:
        if len(row) >= 2 and str(row[0]) in _MYSQL_STATUS:
            v = _int(row[1])
            if v is not None:
                out[_MYSQL_STATUS[str(row[0])]] = v
    return out


def rows_sql(schema: str, quote: str) -> str:
    """One statement counting the rows of every table of ``TABLES`` in ``schema`` (``quote``:
    the identifier quote, ` for MariaDB and " for PostgreSQL)."""
    return "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {quote}{schema}{quote}.{quote}{t}{quote})"
                                 for t in TABLES)


def parse_rows(row: Sequence[object]) -> dict[str, int]:
    """Pure: ``rows.<table>`` from the one row of ``rows_sql``."""
    out = {}
    for t, v in zip(TABLES, row, strict=False):
        n = _int(v)
        if n is not None:
            out[f"rows.{t}"] = n
    return out


def parse_host(proc_stat: str, loadavg: str) -> dict[str, int]:
    """Pure: ``host.*`` from the text of ``/proc/stat`` and ``/proc/loadavg``."""
    out = {}
    for line in proc_stat.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            ticks = [int(x) for x in parts[1:9]]  # user nice system idle iowait irq softirq steal
            out["host.cpu_total_jiffies"] = sum(ticks)
            out["host.cpu_busy_jiffies"] = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
            break
    load = loadavg.split()
    if load:
        out["host.load1_x100"] = round(float(load[0]) * 100)
    return out


def add(total: dict[str, int], part: Mapping[str, int]) -> None:
    for k, v in part.items():
        total[k] = total.get(k, 0) + v


def derived(start: Mapping[str, int], end: Mapping[str, int]) -> dict[str, float]:
    """Pure: what a reader compares between runs. Totals as the window's difference, levels at
    the run's start, and the ratios of the window:

    - ``cache_hit_rate``: memcached get_hits / (get_hits + get_misses) in the window;
    - ``buffer_pool_miss_rate``: buffer-pool reads from disk per logical read in the window
      (``pg.*``: blks_read / (blks_read + blks_hit));
    - ``host_cpu_busy``: the fraction of this machine's CPU time that was busy in the window;
    - ``<counter>``: the window's difference of every other total, or the start's value of a
      level (``LEVELS``, ``rows.*``)."""
    out: dict[str, float] = {}
    for k in sorted(set(start) | set(end)):
        if k in PEAKS:
            if k in end:
                out[k] = float(end[k])
        elif k in LEVELS or k.startswith("rows."):
            if k in start:
                out[k] = float(start[k])
        elif k in start and k in end:
            out[k] = float(end[k] - start[k])
    hits, misses = out.get("memcached.get_hits"), out.get("memcached.get_misses")
    if hits is not None and misses is not None and hits + misses > 0:
        out["cache_hit_rate"] = hits / (hits + misses)
    reads, req = out.get("innodb.buffer_pool_reads"), out.get("innodb.buffer_pool_read_requests")
    if reads is not None and req:
        out["buffer_pool_miss_rate"] = reads / req
    busy, total = out.get("host.cpu_busy_jiffies"), out.get("host.cpu_total_jiffies")
    if busy is not None and total:
        out["host_cpu_busy"] = busy / total
    pr, ph = out.get("pg.blks_read"), out.get("pg.blks_hit")
    if pr is not None and ph is not None and pr + ph > 0:
        out["buffer_pool_miss_rate"] = pr / (pr + ph)
    return out


def record(start: Snapshot, end: Snapshot) -> dict[str, object]:
    """The manifest's ``server_counters``: both snapshots and what is derived from them."""
    out: dict[str, object] = {"start": start.values, "end": end.values,
                           "derived": derived(start.values, end.values),
                           "window": "around the drivers, outside the statement-counter window"}
    errors = sorted(set(start.errors) | set(end.errors))
    if errors:
        out["errors"] = errors
    return out


@dataclass
class Snapshot:
    values: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class ServerCounters:
    """Reads the counters of a deployment's database servers and memcacheds."""

    def __init__(self, mysql: Sequence[Any] = (), pg: Sequence[Any] = (), memcached: Any = None,
                 schema: str = "keystone", host: bool = True, keystone: Any = None) -> None:
        self.mysql, self.pg, self.memcached, self.schema = list(mysql), list(pg), memcached, schema
        self.host, self.keystone = host, keystone

    @classmethod
    def for_deployment(cls, db: Service, memcached: Any = None, schema: str = "keystone",
                       keystone: Any = None) -> ServerCounters:
        """``keystone``: anything with ``gc_counters() -> dict[str, int]`` (``Keystone``)."""
        from juice.services.databases.galera import Galera
        from juice.services.databases.mariadb import MariaDBCentral
        from juice.services.databases.postgres import Postgres

        kw: dict[str, Any] = {"memcached": memcached, "schema": schema, "keystone": keystone}
        if isinstance(db, MariaDBCentral):
            return cls(mysql=[db.server], **kw)
        if isinstance(db, Galera):
            return cls(mysql=list(db.nodes.values()), **kw)
        if isinstance(db, Postgres):
            return cls(pg=db.servers(), **kw)
        return cls(**kw)

    def snapshot(self) -> Snapshot:
        snap = Snapshot()
        for name, read in (("host", self._host), ("memcached", self._memcached), ("mysql", self._mysql),
                           ("postgres", self._pg), ("keystone", self._keystone)):
            try:
                add(snap.values, read())
            except (ServiceError, OSError, ValueError, IndexError) as e:
                snap.errors.append(f"{name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return snap

    def _host(self) -> dict[str, int]:
        if not self.host:
            return {}
        with open("/proc/stat") as st, open("/proc/loadavg") as la:
            return parse_host(st.read(), la.read())

    def _keystone(self) -> dict[str, int]:
        return dict(self.keystone.gc_counters()) if self.keystone is not None else {}

    def _memcached(self) -> dict[str, int]:
        total: dict[str, int] = {}
        if self.memcached is not None:
            for site in self.memcached.server_sites:
                add(total, parse_memcached(self.memcached.stats(site)))
        return total

    def _mysql(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for s in self.mysql:
            add(total, parse_mysql_status(s.query(MYSQL_STATUS_SQL)))
            hist = s.query(HISTORY_SQL)
            v = _int(hist[0][0]) if hist else None
            if v is not None:
                add(total, {"innodb.history_list_length": v})
        if self.mysql:
            rows = self.mysql[0].query(rows_sql(self.schema, "`"))
            add(total, parse_rows(rows[0]) if rows else {})
        return total

    def _pg(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for s in self.pg:
            rows = s.query("SELECT blks_read, blks_hit FROM pg_stat_database "
                           f"WHERE datname = '{self.schema}'")
            if rows and len(rows[0]) == 2:
                add(total, {"pg.blks_read": int(rows[0][0]), "pg.blks_hit": int(rows[0][1])})
        if self.pg:
            rows = self.pg[0].query(rows_sql("public", '"'), self.schema)
            add(total, parse_rows(rows[0]) if rows else {})
        return total
