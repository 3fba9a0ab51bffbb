"""Statement attribution: the statements of a window by kind and table (and, for an UPDATE,
the columns it sets), from the database's own statistics.

    probe = attribution.probe_for(service, schema="keystone")   # None: not for this database
    with probe.window() as w:
        ... run the workload ...
    w.rows        # [Row(kind="update", table="user", columns=("last_active_at",), statements=20), ...]

Sources (before/after snapshots; the difference is the window's):

- MariaDB / Galera: ``performance_schema.events_statements_summary_by_digest`` (``COUNT_STAR``
  per normalized statement, ``DIGEST_TEXT``) of the given schema, summed over the servers.
  MariaDB 10.11 ships ``performance_schema`` OFF; it is ON only when the spec asks for it
  (the Keystone study's ``keystone.write_attribution``), a deviation from the defaults the
  manifest records. On Galera, appliers of replicated write-sets apply row events, not
  statements, so only clients' statements are counted. A digest text is cut at
  ``performance_schema_max_digest_length`` (1,024 bytes): a write's table comes first, a
  SELECT's is its first ``FROM`` or else its first qualified column (``user.id``).
- PostgreSQL: ``pg_stat_statements`` (``calls`` per normalized statement of the database,
  every role but the probe's), already loaded by every Juice server: no option needed.
  Entries evicted during the window make it inexact (``exact``), as for ``counters``.

These are statements, the unit of the %reads/%writes counters (``juice.services.databases.counters``),
so a window's writes by table add up to its write count (MariaDB: ``Com_*`` also counts
statements that failed before they ran; the manifest keeps both).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from juice.services.base import Service
from juice.services.databases.counters import PROBE_ROLE, command_of
from juice.services.databases.galera import Galera
from juice.services.databases.mariadb import MariaDBCentral, MariaDBServer
from juice.services.databases.postgres import PgServer, Postgres

WRITES = ("insert", "update", "delete", "replace", "merge")
READS = ("select",)
_ID = r'[`"]?([A-Za-z_][A-Za-z0-9_$]*)[`"]?'
_QUALIFIED = rf"(?:{_ID}\s*\.\s*)?{_ID}"
_INSERT = re.compile(rf"^\s*(?:insert|replace)\s+(?:ignore\s+)?(?:into\s+)?{_QUALIFIED}", re.I)
_UPDATE = re.compile(rf"^\s*update\s+(?:ignore\s+)?{_QUALIFIED}\s+set\s+(.*?)(?:\bwhere\b|$)", re.I | re.S)
_DELETE = re.compile(rf"^\s*delete\s+(?:ignore\s+)?from\s+{_QUALIFIED}", re.I)
_FROM = re.compile(rf"\bfrom\s+{_QUALIFIED}", re.I)
_COLUMN = re.compile(rf"^\s*{_QUALIFIED}\s*=", re.I)
_DOTTED = re.compile(rf"{_ID}\s*\.\s*{_ID}")
_LEADING = re.compile(r"^(\s+|--[^\n]*\n|/\*.*?\*/|\()+", re.S)


@dataclass(frozen=True)
class Row:
    """The statements of one kind on one table (an UPDATE: and the columns it sets)."""

    kind: str
    table: str
    columns: tuple[str, ...]
    statements: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "table": self.table, "columns": list(self.columns),
                "statements": self.statements}


def _table(m: re.Match[str], first: int = 1) -> str:
    return (m.group(first + 1) or "").lower()


def _set_columns(clause: str) -> tuple[str, ...]:
    """The columns of a SET clause (``a = ?, b = ?``), split at top-level commas."""
    parts, depth, cur = [], 0, ""
    for ch in clause:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    cols = [m.group(2).lower() for p in parts if (m := _COLUMN.match(p))]
    return tuple(sorted(set(cols)))


# MariaDB's digests print a keyword token by its canonical name, even quoted: `user` -> SYSTEM_USER
_DIGEST_ALIASES = {"system_user": "user", "session_user": "user", "current_user": "user"}


def target(sql: str, tables: Collection[str] = ()) -> tuple[str, str, tuple[str, ...]]:
    """Pure: (kind, table, columns) of one normalized statement; table "" when none is named
    (``SELECT 1``); columns only for an UPDATE. With the schema's ``tables``, a name that is
    none of them (a digest's keyword alias, a subquery's alias such as ``anon_1``) is replaced
    by the first name of the statement that is one."""
    kind, table, cols = _target(sql)
    if not tables or table in tables:
        return kind, table, cols
    if _DIGEST_ALIASES.get(table) in tables:
        return kind, _DIGEST_ALIASES[table], cols
    for m in re.finditer(rf"{_ID}", sql):
        name = m.group(1).lower()
        name = _DIGEST_ALIASES.get(name, name) if name not in tables else name
        if name in tables and name != kind:
            return kind, name, cols
    return kind, table, cols


def _target(sql: str) -> tuple[str, str, tuple[str, ...]]:
    kind = command_of(sql)
    text = _LEADING.sub("", sql)
    if kind in WRITES and not text.lower().startswith(kind):  # WITH ... <write>: from the write on
        at = re.search(rf"\b{kind}\b", text, re.I)
        text = text[at.start():] if at else text
    if kind in ("insert", "replace") and (m := _INSERT.match(text)):
        return kind, _table(m), ()
    if kind == "update" and (m := _UPDATE.match(text)):
        return kind, _table(m), _set_columns(m.group(3))
    if kind == "delete" and (m := _DELETE.match(text)):
        return kind, _table(m), ()
    if kind in WRITES:  # a form not recognised: the first table named
        m = _FROM.search(text)
        return kind, _table(m) if m else "", ()
    m = _FROM.search(text)
    if m:
        return kind, _table(m), ()
    d = _DOTTED.search(text)
    return kind, (d.group(1).lower() if d else ""), ()


def rows_of(before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]],
            tables: Collection[str] = ()) -> list[Row]:
    """Pure: statement id -> (text, count) snapshots to the window's rows, largest first
    (``tables``: the schema's, see ``target``)."""
    agg: dict[tuple[str, str, tuple[str, ...]], int] = {}
    for k, (text, n) in after.items():
        d = n - before.get(k, (text, 0))[1]
        if d > 0:
            t = target(text, tables)
            agg[t] = agg.get(t, 0) + d
    return sorted((Row(k, t, c, n) for (k, t, c), n in agg.items()),
                  key=lambda r: (-r.statements, r.kind, r.table, r.columns))


@dataclass
class Window:
    rows: list[Row] = field(default_factory=list)
    exact: bool = True
    tables: list[str] = field(default_factory=list)

    def summary(self, source: str) -> dict[str, Any]:
        """The manifest entry: the rows, the totals by reads and writes, the source, the
        schema's tables (what a row's table is checked against; the tables no statement hit)."""
        writes = sum(r.statements for r in self.rows if r.kind in WRITES)
        reads = sum(r.statements for r in self.rows if r.kind in READS)
        return {"source": source, "exact": self.exact, "reads": reads, "writes": writes,
                "rows": [r.to_dict() for r in self.rows], "schema_tables": sorted(self.tables)}


class Probe:
    source = ""

    def tables(self) -> list[str]:
        """The tables of the schema, from the server's catalog."""
        raise NotImplementedError

    def snapshot(self) -> tuple[dict[str, tuple[str, int]], int]:
        """(statement id -> (normalized text, count) summed over servers, evictions)."""
        raise NotImplementedError

    @contextmanager
    def window(self) -> Iterator[Window]:
        w = Window(tables=[t.lower() for t in self.tables()])
        before, ev0 = self.snapshot()
        yield w
        after, ev1 = self.snapshot()
        w.rows, w.exact = rows_of(before, after, set(w.tables)), ev0 == ev1


class MySQLDigestProbe(Probe):
    source = "performance_schema.events_statements_summary_by_digest"

    def __init__(self, servers: list[MariaDBServer], schema: str) -> None:
        self.servers, self.schema = servers, schema

    def tables(self) -> list[str]:
        return [str(r[0]) for r in self.servers[0].query(
            f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{self.schema}'") if r]

    def snapshot(self) -> tuple[dict[str, tuple[str, int]], int]:
        out: dict[str, tuple[str, int]] = {}
        lost = 0
        for s in self.servers:
            rows = s.query("SELECT DIGEST, COUNT_STAR, REPLACE(REPLACE(DIGEST_TEXT, '\\n', ' '), '\\t', ' ') "
                           "FROM performance_schema.events_statements_summary_by_digest "
                           f"WHERE SCHEMA_NAME = '{self.schema}'")
            for r in rows:
                if len(r) >= 3:
                    text, n = out.get(str(r[0]), (str(r[2]), 0))
                    out[str(r[0])] = (text, n + int(str(r[1])))
            st = s.query("SHOW GLOBAL STATUS LIKE 'Performance_schema_digest_lost'")
            lost += int(str(st[0][1])) if st else 0
        return out, lost


class PgStatementsProbe(Probe):
    source = "pg_stat_statements"

    def __init__(self, servers: list[PgServer], dbname: str, stats_db: str = "juice") -> None:
        # the view lives in the database where the extension was created (Juice's own)
        self.servers, self.dbname, self.stats_db = servers, dbname, stats_db

    def tables(self) -> list[str]:
        return [str(r[0]) for r in self.servers[0].query(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'", self.dbname) if r]

    def snapshot(self) -> tuple[dict[str, tuple[str, int]], int]:
        out: dict[str, tuple[str, int]] = {}
        evictions = 0
        for i, s in enumerate(self.servers):
            rows = s.query(f"SET ROLE {PROBE_ROLE}; SELECT userid::text || ':' || queryid::text, calls, "
                           "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements WHERE dbid = "
                           f"(SELECT oid FROM pg_database WHERE datname = '{self.dbname}') AND userid <> "
                           f"(SELECT oid FROM pg_roles WHERE rolname = '{PROBE_ROLE}')", self.stats_db)
            info = s.query(f"SET ROLE {PROBE_ROLE}; SELECT dealloc FROM pg_stat_statements_info",
                           self.stats_db)
            for r in rows:
                if len(r) >= 3:
                    out[f"{i}:{r[0]}"] = ("\t".join(r[2:]), int(str(r[1])))
            evictions += int(str(info[0][0])) if info and info[0][0] else 0
        return out, evictions


def probe_for(service: Service, schema: str) -> Probe | None:
    """The attribution probe of a deployed database (``schema``: the database whose statements
    count), None for a database without one (CockroachDB)."""
    if isinstance(service, MariaDBCentral):
        return MySQLDigestProbe([service.server], schema)
    if isinstance(service, Galera):
        return MySQLDigestProbe(list(service.nodes.values()), schema)
    if isinstance(service, Postgres):
        return PgStatementsProbe(service.servers(), schema)
    return None
