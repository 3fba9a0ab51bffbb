"""Bulk population of N fake compute nodes, incrementally: ``grow(store, have, want)``
inserts nodes ``have+1 .. want`` (the study grows 1K→19K by deltas, never rebuilding).

Families: ``historical`` (2013 tables: a service, a node and ``k`` stats rows per node),
``modern`` (nova's real tables: a service and a node with stats as JSON), ``kv`` (one cache
entry per node holding its state packed as a JSON array, plus an index entry with the node
id range and the field order).
SQL goes through COPY (PostgreSQL) or multi-row INSERTs (MySQL/Galera); caches through
``set_many`` / ``MSET``, by chunks.
"""

from __future__ import annotations

import json
from typing import Any

from juice.studies.schedulerdb import modern
from juice.studies.schedulerdb import schema_2013 as s13
from juice.studies.schedulerdb.dbapi import bulk_insert

CHUNK = 2000
KV_INDEX = "compute_nodes:index"


def kv_key(i: int) -> str:
    return f"cn:{i}"


def kv_encode(value: list[Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def grow(family: str, conn: Any, dialect: str, seed: int, k: int, have: int, want: int) -> int:
    """Insert nodes ``have+1..want``; returns rows/entries written."""
    written = 0
    for lo in range(have + 1, want + 1, CHUNK):
        ids = range(lo, min(want, lo + CHUNK - 1) + 1)
        if family == "historical":
            bulk_insert(conn, dialect, "services", s13.SERVICE_COLS, [s13.service_row(i) for i in ids])
            bulk_insert(conn, dialect, "compute_nodes", s13.NODE_COLS, [s13.node_row(seed, i) for i in ids])
            stats = [r for i in ids for r in s13.stat_rows(seed, i, k)]
            bulk_insert(conn, dialect, "compute_node_stats", s13.STAT_COLS, stats)
            written += 2 * len(ids) + len(stats)
        elif family == "modern":
            bulk_insert(conn, dialect, "services", modern.SERVICE_COLS, [modern.service_row(i) for i in ids])
            bulk_insert(conn, dialect, "compute_nodes", modern.NODE_COLS,
                        [modern.node_row(seed, i, k) for i in ids])
            written += 2 * len(ids)
        elif family == "kv":
            values = {kv_key(i): kv_encode(s13.kv_value(seed, i, k)) for i in ids}
            if dialect == "memcached":
                failed = conn.set_many(values, noreply=False)
                if failed:
                    raise RuntimeError(f"memcached refused {len(failed)} keys (memory too small?)")
            else:
                conn.mset(values)
            written += len(values)
        else:
            raise ValueError(f"family: unknown {family!r}")
    if family == "kv":
        # What the scheduler fetches: the node id range and the packed entries' field order.
        conn.set(KV_INDEX, json.dumps({"lo": 1, "hi": want, "fields": s13.kv_fields(k)}))
    return written


def count(family: str, conn: Any, dialect: str) -> int:
    """How many nodes the store holds now (to resume growing after a restart)."""
    if family == "kv":
        raw = conn.get(KV_INDEX)
        return int(json.loads(raw)["hi"]) if raw else 0
    cur = conn.cursor()
    try:
        cur.execute("SELECT COUNT(*) FROM compute_nodes")
        row = cur.fetchone()
        return int(row[0]) if row else 0
    finally:
        cur.close()
