"""The scheduler's read of all compute-node state, one function per track. Each returns a
``ReadResult``: rows the store returned, node objects built, and the time spent fetching
(query + transfer + driver decoding) and hydrating (building the scheduler's objects in
Python) — the read's duration is their sum. All of it is timed in the scheduler process.

- ``historical-2013.1``: nova 2013.1 ``compute_node_get_all``, an ORM query with
  ``joinedload('service')`` and ``joinedload('stats')``: ONE SELECT with two LEFT OUTER JOINs
  returning nodes × stats rows; hydration emulates the ORM's identity map (one object per
  node/service/stat, stats appended to their node). A lower bound of SQLAlchemy's own cost.
- ``historical-2013.2``: the hand-written replacement (nova 2013.2): three plain SELECTs
  (nodes, services of nova-compute, stats ordered by node) joined in Python with dicts and
  ``itertools.groupby``.
- ``modern``: what a current scheduler issues per request: ``ServiceList.get_by_binary
  ('nova-compute', include_disabled=True)`` (every service) and
  ``ComputeNodeList.get_all_by_uuids`` for the placement candidates (at most
  ``max_placement_results`` = 1000 uuids); stats are a JSON column, parsed per node.
- ``modern-all``: the same with ``ComputeNodeList.get_all`` (every node).
- ``kv``: the cache design: one entry per node (its HostState fields packed as a JSON
  array) plus an index entry (id range, field order); the scheduler reads the index, then
  ``get_many``/``MGET`` of every node key by chunks of ``KV_BATCH``, decodes each value and
  wraps it in a ``PackedState`` (field access by the published order, no per-node dict).
"""

from __future__ import annotations

import itertools
import json
import random
import time
from dataclasses import dataclass
from typing import Any

from juice.studies.schedulerdb import schema_2013 as s13
from juice.studies.schedulerdb.dbapi import qi
from juice.studies.schedulerdb.populate import KV_INDEX, kv_key

KV_BATCH = 1000


@dataclass
class ReadResult:
    rows: int
    objects: int
    fetch_s: float
    hydrate_s: float

    @property
    def seconds(self) -> float:
        return self.fetch_s + self.hydrate_s


class Obj:
    """A hydrated entity (what the ORM's mapped instance carries: its column attributes)."""

    __slots__ = ("__dict__",)


class PackedState:
    """A node's state from the cache: its decoded values plus the shared field positions
    (``state["free_ram_mb"]``); built per node without copying into a dict."""

    __slots__ = ("pos", "values")

    def __init__(self, pos: dict[str, int], values: list[object]) -> None:
        self.pos, self.values = pos, values

    def __getitem__(self, field: str) -> object:
        return self.values[self.pos[field]]


def _fetch(conn: Any, sql: str, params: Any = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        names = [d[0] for d in cur.description]
        return names, list(cur.fetchall())
    finally:
        cur.close()


def sql_2013_1(dialect: str) -> str:
    """The SELECT SQLAlchemy emitted for the 2013.1 joined-load query (columns labelled)."""
    def cols(table: str, alias: str, names: tuple[str, ...]) -> list[str]:
        return [f"{alias}.{qi(dialect, c)} AS {table}_{c}" for c in names]
    sel = (cols("compute_nodes", "compute_nodes", s13.NODE_COLS)
           + cols("services_1", "services_1", s13.SERVICE_COLS)
           + cols("compute_node_stats_1", "compute_node_stats_1", ("id", *s13.STAT_COLS)))
    return ("SELECT " + ", ".join(sel) + " FROM compute_nodes "
            "LEFT OUTER JOIN services AS services_1 ON compute_nodes.service_id = services_1.id "
            "AND compute_nodes.deleted = 0 "
            "LEFT OUTER JOIN compute_node_stats AS compute_node_stats_1 "
            "ON compute_node_stats_1.compute_node_id = compute_nodes.id AND compute_node_stats_1.deleted = 0 "
            "WHERE compute_nodes.deleted = 0")


def read_2013_1(conn: object, dialect: str) -> ReadResult:
    t0 = time.perf_counter()
    names, rows = _fetch(conn, sql_2013_1(dialect))
    t1 = time.perf_counter()
    nlen, slen = len(s13.NODE_COLS), len(s13.SERVICE_COLS)
    node_names = [n.removeprefix("compute_nodes_") for n in names[:nlen]]
    svc_names = [n.removeprefix("services_1_") for n in names[nlen:nlen + slen]]
    stat_names = [n.removeprefix("compute_node_stats_1_") for n in names[nlen + slen:]]
    nodes: dict[object, Obj] = {}
    services: dict[object, Obj] = {}
    stats: dict[object, Obj] = {}
    for r in rows:  # the identity map: each entity built once, relations wired
        node = nodes.get(r[0])
        if node is None:
            node = Obj()
            node.__dict__.update(zip(node_names, r[:nlen], strict=True))
            node.stats = []  # type: ignore[attr-defined]
            sid = r[nlen]
            svc = services.get(sid)
            if svc is None and sid is not None:
                svc = Obj()
                svc.__dict__.update(zip(svc_names, r[nlen:nlen + slen], strict=True))
                services[sid] = svc
            node.service = svc  # type: ignore[attr-defined]
            nodes[r[0]] = node
        st_id = r[nlen + slen]
        if st_id is not None and st_id not in stats:
            st = Obj()
            st.__dict__.update(zip(stat_names, r[nlen + slen:], strict=True))
            stats[st_id] = st
            node.stats.append(st)  # type: ignore[attr-defined]
    t2 = time.perf_counter()
    return ReadResult(len(rows), len(nodes), t1 - t0, t2 - t1)


def read_2013_2(conn: object, dialect: str) -> ReadResult:
    t0 = time.perf_counter()
    b = qi(dialect, "binary")
    ncols, nrows = _fetch(conn, "SELECT * FROM compute_nodes WHERE deleted = 0 ORDER BY service_id")
    scols, srows = _fetch(conn, f"SELECT * FROM services WHERE deleted = 0 AND {b} = 'nova-compute' "
                                "ORDER BY id")
    tcols, trows = _fetch(conn, "SELECT * FROM compute_node_stats WHERE deleted = 0 "
                                "ORDER BY compute_node_id")
    t1 = time.perf_counter()
    stats = [dict(zip(tcols, r, strict=True)) for r in trows]
    services = {r[scols.index("id")]: dict(zip(scols, r, strict=True)) for r in srows}
    nodes = []
    for r in nrows:
        node = dict(zip(ncols, r, strict=True))
        node["service"] = services.get(node["service_id"])
        nodes.append(node)
    nodes.sort(key=lambda n: n["id"])
    it = iter(nodes)
    for nid, group in itertools.groupby(stats, lambda s: s["compute_node_id"]):
        rows = list(group)
        for node in it:
            if node["id"] == nid:
                node["stats"] = rows
                break
            node["stats"] = []
    t2 = time.perf_counter()
    return ReadResult(len(nrows) + len(srows) + len(trows), len(nodes), t1 - t0, t2 - t1)


def candidates(nodes: int, limit: int, seed: int, rep: int) -> list[str]:
    """The uuids placement would return: ``min(nodes, limit)`` of them, drawn per request."""
    r = random.Random(seed * 31 + rep)
    ids = r.sample(range(1, nodes + 1), min(nodes, limit))
    return [s13.node_uuid(i) for i in ids]


def _hydrate_modern(ncols: list[str], nrows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    out = []
    for r in nrows:
        node = dict(zip(ncols, r, strict=True))
        for f in ("stats", "supported_instances", "pci_stats"):  # ComputeNode._from_db_object
            if node.get(f):
                node[f] = json.loads(node[f])
        out.append(node)
    return out


def read_modern(conn: object, dialect: str, nodes: int, limit: int | None, seed: int, rep: int) -> ReadResult:
    """``limit`` None = ``ComputeNodeList.get_all``; else ``get_all_by_uuids`` of candidates."""
    uuids = candidates(nodes, limit, seed, rep) if limit is not None else None
    t0 = time.perf_counter()
    b = qi(dialect, "binary")
    scols, srows = _fetch(conn, f"SELECT services.* FROM services WHERE services.deleted = 0 "
                                f"AND services.{b} = 'nova-compute'")
    if uuids is None:
        ncols, nrows = _fetch(conn, "SELECT cn.* FROM compute_nodes AS cn WHERE cn.deleted = 0 "
                                    "ORDER BY cn.id ASC")
    else:
        marks = ", ".join(["%s"] * len(uuids))
        ncols, nrows = _fetch(conn, f"SELECT cn.* FROM compute_nodes AS cn WHERE cn.deleted = 0 "
                                    f"AND cn.uuid IN ({marks}) ORDER BY cn.id ASC", uuids)
    t1 = time.perf_counter()
    services = {r[scols.index("host")]: dict(zip(scols, r, strict=True)) for r in srows}
    hosts = _hydrate_modern(ncols, nrows)
    for h in hosts:  # HostManager pairs each node with its service by host
        h["service"] = services.get(h["host"])
    t2 = time.perf_counter()
    return ReadResult(len(srows) + len(nrows), len(hosts), t1 - t0, t2 - t1)


def read_kv(client: Any, driver: str) -> ReadResult:
    t0 = time.perf_counter()
    raw = client.get(KV_INDEX)
    index = json.loads(raw) if raw else {"lo": 1, "hi": 0, "fields": []}
    fields = index["fields"]
    keys = [kv_key(i) for i in range(index["lo"], index["hi"] + 1)]
    values: list[bytes] = []
    for start in range(0, len(keys), KV_BATCH):
        chunk = keys[start:start + KV_BATCH]
        if driver == "memcached":
            got = client.get_many(chunk)
            values.extend(got[k] for k in chunk if k in got)
        else:
            values.extend(v for v in client.mget(chunk) if v is not None)
    t1 = time.perf_counter()
    pos = {f: i for i, f in enumerate(fields)}
    states = [PackedState(pos, json.loads(v)) for v in values]
    t2 = time.perf_counter()
    return ReadResult(len(values), len(states), t1 - t0, t2 - t1)


def read(conn: object, driver: str, track: str, nodes: int, candidates_limit: int, seed: int,
         rep: int) -> ReadResult:
    """One scheduler read of ``track`` (see the module doc)."""
    if track == "historical-2013.1":
        return read_2013_1(conn, driver)
    if track == "historical-2013.2":
        return read_2013_2(conn, driver)
    if track == "modern":
        return read_modern(conn, driver, nodes, candidates_limit, seed, rep)
    if track == "modern-all":
        return read_modern(conn, driver, nodes, None, seed, rep)
    if track == "kv":
        return read_kv(conn, driver)
    raise ValueError(f"track: unknown {track!r}")


def family(track: str) -> str:
    """Which data layout a track reads: historical, modern or kv."""
    if track.startswith("historical"):
        return "historical"
    if track.startswith("modern"):
        return "modern"
    return "kv"

