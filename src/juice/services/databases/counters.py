"""Statement counters: how many reads and writes the database served during a window.

MariaDB/Galera: ``SHOW GLOBAL STATUS`` ``Com_select`` (reads) and ``Com_insert``,
``Com_update``, ``Com_delete``, ``Com_replace`` (+ their ``*_select``/``*_multi`` forms)
(writes) — the seed study's method — summed over the servers. The probe reads them over the
server's unix socket with ``SHOW`` statements, which are not counted as reads or writes.

Galera: the nodes that APPLY a replicated write-set count its INSERT/UPDATE/DELETE in their
``Com_*`` too (measured: a 3-node cluster shows 3× the client's inserts; a DELETE that
matched no row is not replicated, so not multiplied). Summing ``Com_*`` would inflate writes
by up to the node count. So on Galera, reads are ``Com_select`` (appliers never SELECT) and
writes are the client write statements of ``SHOW USER_STATISTICS`` (``UPDATE_COMMANDS`` of
every user but the probe's ``root``; applier threads have no user), with ``userstat`` turned
on by the probe. ``per_command`` then has ``Com_select`` and ``client_writes``.

PostgreSQL: ``pg_stat_statements`` (loaded by every Juice server), ``calls`` summed by the
statement's command keyword, excluding the probe's own role ``juice_probe``. It counts
statements that completed (an erroring statement is not counted, unlike Com_*), and it can
evict entries when more than ``pg_stat_statements.max`` distinct statements run — the
probe reports ``exact = False`` when that happened in the window.

    probe = counters.probe_for(service)
    with probe.window() as w:
        ... run the workload ...
    w.result.reads, w.result.writes, w.result.pct_reads
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from juice.errors import ServiceError, UserError
from juice.services.base import Service
from juice.services.databases.galera import Galera
from juice.services.databases.mariadb import MariaDBCentral, MariaDBServer
from juice.services.databases.postgres import PgServer, Postgres
from juice.spec.target import Target

MYSQL_READS = ("Com_select",)
MYSQL_WRITES = ("Com_insert", "Com_insert_select", "Com_update", "Com_update_multi", "Com_delete",
                "Com_delete_multi", "Com_replace", "Com_replace_select")
PROBE_ROLE = "juice_probe"
PG_READS = ("select",)
PG_WRITES = ("insert", "update", "delete", "merge")


@dataclass(frozen=True)
class Counts:
    """Statement counts of a window. ``per_command`` has every counted command."""

    reads: int
    writes: int
    per_command: dict[str, int] = field(default_factory=dict)
    exact: bool = True

    @property
    def total(self) -> int:
        return self.reads + self.writes

    @property
    def ratio(self) -> float | None:
        """reads per write (None without writes)."""
        return self.reads / self.writes if self.writes else None

    @property
    def pct_reads(self) -> float:
        return 100.0 * self.reads / self.total if self.total else 0.0

    @property
    def pct_writes(self) -> float:
        return 100.0 * self.writes / self.total if self.total else 0.0


def delta(before: dict[str, int], after: dict[str, int], reads: tuple[str, ...],
          writes: tuple[str, ...], exact: bool = True) -> Counts:
    """Pure: the window's counts from two snapshots (missing keys count as 0)."""
    keys = sorted(set(before) | set(after))
    per = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    per = {k: v for k, v in per.items() if v}
    return Counts(reads=sum(per.get(k, 0) for k in reads), writes=sum(per.get(k, 0) for k in writes),
                  per_command=per, exact=exact)


_LEADING = re.compile(r"^(\s+|--[^\n]*\n|/\*.*?\*/|\()+", re.S)
_WORD = re.compile(r"[A-Za-z]+")
_DML = re.compile(r"\b(insert|update|delete|merge)\b", re.I)


def command_of(query: str) -> str:
    """Pure: the command of a (normalized) SQL statement, lower case: select, insert, ...

    ``WITH`` queries count as the data-modifying command they contain, else as ``select``.
    """
    text = _LEADING.sub("", query)
    m = _WORD.match(text)
    word = m.group(0).lower() if m else "other"
    if word == "with":
        dml = _DML.search(text)
        return dml.group(1).lower() if dml else "select"
    if word in ("table", "values"):
        return "select"
    return word


class Probe:
    """Snapshots of statement counters of every server of a deployment."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    def snapshot(self) -> tuple[dict[str, int], int]:
        """(counters summed over servers, eviction counter)."""
        raise NotImplementedError

    @contextmanager
    def window(self) -> Iterator[Window]:
        """The counters' difference over the block. A server that cannot be read (one that
        refuses connections at its max_connections is part of what a run may measure) leaves
        the window unmeasured, with ``error`` saying why: the block itself runs regardless."""
        w = Window()
        try:
            before, ev0 = self.snapshot()
        except ServiceError as e:
            w.error = _first_line(e)
            yield w
            return
        yield w
        try:
            after, ev1 = self.snapshot()
        except ServiceError as e:
            w.error = _first_line(e)
            return
        w.result = delta(before, after, self.reads, self.writes, exact=ev0 == ev1)


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


@dataclass
class Window:
    result: Counts = field(default_factory=lambda: Counts(0, 0))
    error: str | None = None  # why the window could not be measured


class MySQLProbe(Probe):
    reads, writes = MYSQL_READS, MYSQL_WRITES

    def __init__(self, servers: list[MariaDBServer]) -> None:
        self.servers = servers

    def snapshot(self) -> tuple[dict[str, int], int]:
        names = ",".join(f"'{n}'" for n in (*MYSQL_READS, *MYSQL_WRITES))
        total: dict[str, int] = {}
        for s in self.servers:
            for k, v in s.query(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})"):
                total[str(k)] = total.get(str(k), 0) + int(str(v))
        return total, 0


class GaleraProbe(Probe):
    """See the module doc: Com_select for reads, USER_STATISTICS for client writes."""

    reads, writes = ("Com_select",), ("client_writes",)

    def __init__(self, servers: list[MariaDBServer]) -> None:
        self.servers = servers
        for s in servers:
            s.query("SET GLOBAL userstat = ON")
        # the column of UPDATE_COMMANDS in SHOW USER_STATISTICS, asked once (before any window)
        cols = [str(r[0]) for r in servers[0].query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'information_schema'"
            " AND TABLE_NAME = 'USER_STATISTICS' ORDER BY ORDINAL_POSITION")] if servers else []
        self.update_col = cols.index("UPDATE_COMMANDS") if "UPDATE_COMMANDS" in cols else 15

    def snapshot(self) -> tuple[dict[str, int], int]:
        total = {"Com_select": 0, "client_writes": 0}
        for s in self.servers:
            for _k, v in s.query("SHOW GLOBAL STATUS WHERE Variable_name = 'Com_select'"):
                total["Com_select"] += int(str(v))
            for row in s.query("SHOW USER_STATISTICS"):
                if str(row[0]) != "root":
                    total["client_writes"] += int(str(row[self.update_col]))
        return total, 0



class PgProbe(Probe):
    reads, writes = PG_READS, PG_WRITES

    def __init__(self, servers: list[PgServer], dbname: str = "juice") -> None:
        self.servers, self.dbname = servers, dbname

    def snapshot(self) -> tuple[dict[str, int], int]:
        total: dict[str, int] = {}
        evictions = 0
        for s in self.servers:
            # as the probe's own role (its statements are left out of the counts); query texts
            # on one line each (psql prints a row per line)
            rows = s.query(f"SET ROLE {PROBE_ROLE}; SELECT calls, regexp_replace(query, '\\s+', ' ', 'g') "
                           "FROM pg_stat_statements WHERE userid <> "
                           "(SELECT oid FROM pg_roles WHERE rolname = 'juice_probe')", self.dbname)
            info = s.query(f"SET ROLE {PROBE_ROLE}; SELECT dealloc FROM pg_stat_statements_info", self.dbname)
            for calls, query in (r for r in rows if len(r) == 2):
                cmd = command_of(str(query))
                total[cmd] = total.get(cmd, 0) + int(str(calls))
            evictions += int(str(info[0][0])) if info and info[0][0] else 0
        return total, evictions


class RemoteMySQLProbe(Probe):
    """``SHOW GLOBAL STATUS`` of one MySQL/MariaDB server given by URL (a user's cloud: a
    read-only account is enough; SHOW needs no privilege). Counts every client of that server,
    not only the run's. ``mysql://user:password@host:port``."""

    reads, writes = MYSQL_READS, MYSQL_WRITES

    def __init__(self, url: str) -> None:
        from urllib.parse import unquote, urlsplit

        u = urlsplit(url)
        if u.scheme not in ("mysql", "mysql+pymysql", "mariadb") or not u.hostname:
            raise ServiceError("database URL: expected mysql://user:password@host:port (MySQL/MariaDB)")
        self.host, self.port = u.hostname, u.port or 3306
        self.user, self.password = unquote(u.username or ""), unquote(u.password or "")
        self.where = f"{u.hostname}:{self.port}"

    def snapshot(self) -> tuple[dict[str, int], int]:
        import pymysql

        names = ",".join(f"'{n}'" for n in (*MYSQL_READS, *MYSQL_WRITES))
        try:
            conn = pymysql.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                                   connect_timeout=10, read_timeout=30)
        except pymysql.MySQLError as e:
            why = e.args[-1] if e.args else e
            raise ServiceError(f"database {self.where}: cannot connect ({why})") from None
        try:
            with conn.cursor() as cur:
                cur.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
                return {str(k): int(str(v)) for k, v in cur.fetchall()}, 0
        finally:
            conn.close()


def probe_for(service: Service) -> Probe:
    """The counter probe of a deployed database service."""
    if isinstance(service, MariaDBCentral):
        return MySQLProbe([service.server])
    if isinstance(service, Galera):
        return GaleraProbe(list(service.nodes.values()))
    if isinstance(service, Postgres):
        return PgProbe(service.servers())
    raise ServiceError(f"no statement counter probe for {service.kind!r}")


def target_probe(t: Target) -> RemoteMySQLProbe | None:
    """The statement-counter probe of ``target.db_url_env`` (checked now), or None."""
    if t.db_url_env is None:
        return None
    url = os.environ.get(t.db_url_env)
    if not url:
        raise UserError(f"target.db_url_env: the environment variable {t.db_url_env} is not set "
                        "(mysql://user:password@host:port of a read-only account)")
    try:
        probe = RemoteMySQLProbe(url)
        probe.snapshot()
    except ServiceError as e:
        raise UserError(f"target.db_url_env: {e}") from None
    return probe
