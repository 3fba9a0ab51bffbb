"""Per-server database counters for the resource sampler: one persistent admin connection per
server (over its unix socket: no network namespace, no WAN), one cheap query per tick.

    src = source_for(record)        # None for servers without counters (memcached, cockroach)
    src.sample()                    # {"db_reads": 1234.0, "db_writes": 56.0, ...} cumulative
    src.close()

Metrics (cumulative: rates come from differences, see ``juice.profile.frames``):

- ``db_reads`` / ``db_writes``: statements this server executed, the counters of
  ``juice.services.databases.counters`` taken per server. MariaDB/Galera: ``Com_select`` and the write
  ``Com_*`` (``MYSQL_WRITES``). On Galera a node's ``Com_*`` writes include the write-sets it
  APPLIED for other nodes (its own work, which is what a resource profile shows; the
  client-only counts of a run are the manifest's ``rwratio``). PostgreSQL:
  ``pg_stat_statements`` calls of every role but the probe's, split by the statement's first
  keyword in SQL (``WITH`` counts as a read: an approximation ``counters.py`` refines).
- Galera only: ``fc_paused_s`` = ``wsrep_flow_control_paused_ns`` / 1e9 (seconds replication
  was paused by flow control since the node started; its rate is the paused fraction of each
  interval) and ``fc_paused`` = ``wsrep_flow_control_paused`` as the server reports it (the
  fraction since the last FLUSH STATUS, i.e. usually since start); ``cluster_size`` =
  ``wsrep_cluster_size`` (a gauge: how many nodes this node's component holds; a partitioned
  node sees 1, and the fault report shows it coming back).

A failing server raises from ``sample``; the sampler counts the error, and the source waits
``RETRY_S`` before it reconnects, so a dead server costs nothing per tick.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from juice.services.base import ServerRecord
from juice.services.databases.counters import MYSQL_READS, MYSQL_WRITES

TIMEOUT_S = 2
RETRY_S = 5.0
_MYSQL_VARS = (*MYSQL_READS, *MYSQL_WRITES, "wsrep_flow_control_paused_ns", "wsrep_flow_control_paused",
               "wsrep_cluster_size")
_MYSQL_SQL = ("SHOW GLOBAL STATUS WHERE Variable_name IN ("
              + ",".join(f"'{v}'" for v in _MYSQL_VARS) + ")")
_PG_SQL = (r"SELECT coalesce(sum(calls) FILTER (WHERE query ~* '^[\s(]*(select|with|table|values)\M'), 0),"
           r" coalesce(sum(calls) FILTER (WHERE query ~* '^[\s(]*(insert|update|delete|merge)\M'), 0)"
           " FROM pg_stat_statements"
           " WHERE userid <> (SELECT oid FROM pg_roles WHERE rolname = 'juice_probe')")


class DbSource(Protocol):
    record: ServerRecord

    def sample(self) -> dict[str, float]: ...

    def close(self) -> None: ...


class _Base:
    def __init__(self, record: ServerRecord) -> None:
        self.record = record
        self.conn: Any = None
        self.retry_at = 0.0

    def _connect(self) -> Any:
        raise NotImplementedError

    def _read(self, conn: Any) -> dict[str, float]:
        raise NotImplementedError

    def sample(self) -> dict[str, float]:
        if self.conn is None:
            if time.monotonic() < self.retry_at:
                return {}
            try:
                self.conn = self._connect()
            except Exception:
                self.retry_at = time.monotonic() + RETRY_S
                raise
        try:
            return self._read(self.conn)
        except Exception:
            self.close()
            self.retry_at = time.monotonic() + RETRY_S
            raise

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # closing a broken connection: nothing more to do
                pass
            self.conn = None


class MySQLSource(_Base):
    """MariaDB / Galera server (``record.extra["socket"]``)."""

    def _connect(self) -> Any:
        import pymysql

        return pymysql.connect(unix_socket=str(self.record.extra["socket"]), user="root",
                               connect_timeout=TIMEOUT_S, read_timeout=TIMEOUT_S,
                               write_timeout=TIMEOUT_S, autocommit=True)

    def _read(self, conn: Any) -> dict[str, float]:
        with conn.cursor() as cur:
            cur.execute(_MYSQL_SQL)
            vals = {str(k): str(v) for k, v in cur.fetchall()}
        return mysql_metrics(vals)


def mysql_metrics(vals: dict[str, str]) -> dict[str, float]:
    """Pure: ``SHOW GLOBAL STATUS`` name -> value text, to the sampler's metrics."""
    out = {"db_reads": float(sum(int(vals.get(k, "0") or 0) for k in MYSQL_READS)),
           "db_writes": float(sum(int(vals.get(k, "0") or 0) for k in MYSQL_WRITES))}
    if vals.get("wsrep_flow_control_paused_ns", "").strip().isdigit():
        out["fc_paused_s"] = int(vals["wsrep_flow_control_paused_ns"]) / 1e9
    try:
        out["fc_paused"] = float(vals["wsrep_flow_control_paused"])
    except (KeyError, ValueError):
        pass
    if vals.get("wsrep_cluster_size", "").strip().isdigit():
        out["cluster_size"] = float(vals["wsrep_cluster_size"])  # a gauge: nodes this node sees
    return out


class PgSource(_Base):
    """PostgreSQL server (``record.extra["socket_dir"]``), as the ``juice_probe`` role."""

    def _connect(self) -> Any:
        import psycopg

        conn = psycopg.connect(host=str(self.record.extra["socket_dir"]), port=self.record.port,
                               user="postgres", dbname="juice", autocommit=True,
                               connect_timeout=TIMEOUT_S, options=f"-c statement_timeout={TIMEOUT_S}s")
        conn.execute(b"SET ROLE juice_probe")
        return conn

    def _read(self, conn: Any) -> dict[str, float]:
        row = conn.execute(_PG_SQL.encode()).fetchone()
        return {"db_reads": float(row[0]), "db_writes": float(row[1])} if row else {}


def source_for(record: ServerRecord) -> DbSource | None:
    """The counter source of a database server record, None for other servers."""
    if not record.pid:
        return None
    if str(record.extra.get("socket", "")).endswith("mysqld.sock"):
        return MySQLSource(record)
    if record.extra.get("socket_dir") and record.kind.startswith("postgres"):
        return PgSource(record)
    return None
