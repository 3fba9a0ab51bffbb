"""Preload VMs as rows: many "already running" servers in seconds, cloned from one that nova
booted itself.

Booting through the API costs ~0.36 s of the host's 2 cores per VM here (1,000 VMs in 358 s),
so 20,000 VMs running (seed 002 went to 75,000) would take two hours. ``clone`` writes what the
API, the conductor, the scheduler and the compute would have written for each new server,
copied from a TEMPLATE server that went through all of them:

- placement: one allocation per server, through placement's own API (``POST /allocations``,
  microversion 1.28, new consumers) with the template's resources, on the node chosen for it —
  so placement itself checks capacity and refuses what does not fit, as for a scheduler's claim;
- the cell database: ``instances``, ``instance_extra``, ``instance_info_caches``,
  ``instance_system_metadata``, ``instance_id_mappings``, ``block_device_mapping``,
  ``instance_actions`` and ``instance_actions_events``; the API database: ``instance_mappings``
  and ``request_specs``. Every column is the template's (read from ``information_schema`` at run
  time, so another nova's schema is copied as it is) with its uuid replaced by the new server's
  wherever it appears (e.g. inside the request spec), except: the name (``display_name`` and
  ``hostname``), the node (``host``, ``launched_on``, ``node``, ``compute_id``), the reservation
  and request ids and the block device mapping's uuid, which are new. By batches of 1,000, each
  written right after its allocations, in one transaction;
- nodes are chosen as the default weighers choose (most free RAM first: servers spread), among
  the nodes with room for the template's resources;
- then it waits until every compute's resource tracker counted them (``compute_nodes
  .running_vms``: its periodic update, 60 s by default), so the scheduler weighs the nodes with
  them, as after real boots.

The computes need nothing: the simulated hypervisor adopts a server that nova's database places
on its node the first time nova asks about it (``juice_nova.virt``). Nova then treats the clones
as its own: listed, counted by quota and by the resource tracker, deleted through the API (its
allocation removed by nova), and their room taken (tests/services/test_nova_preload.py).

Not copied: what a boot leaves elsewhere — notifications, the compute's log lines, the
scheduler's in-memory host state (refreshed from the database) — and the instance's
``created_at``, which is the template's.
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from juice.errors import ServiceError
from juice.openstack.http import issue_token, request
from juice.services.base import Progress, quiet
from juice.services.databases.mariadb import MariaDBServer

CELL, API = "nova_cell1", "nova_api"
# (database, table, the column that names the server)
TABLES = ((CELL, "instances", "uuid"), (CELL, "instance_extra", "instance_uuid"),
          (CELL, "instance_info_caches", "instance_uuid"),
          (CELL, "instance_system_metadata", "instance_uuid"), (CELL, "instance_id_mappings", "uuid"),
          (CELL, "block_device_mapping", "instance_uuid"), (CELL, "instance_actions", "instance_uuid"),
          (API, "instance_mappings", "instance_uuid"), (API, "request_specs", "instance_uuid"))
NEW = {  # columns whose value is the new server's own, not the template's
    "instances": {"display_name": "jp.name", "hostname": "jp.name", "host": "jp.host",
                  "launched_on": "jp.host", "node": "jp.node", "compute_id": "jp.compute_id",
                  "reservation_id": "jp.reservation", "launch_index": "0"},
    "block_device_mapping": {"uuid": "jp.bdm"},
    "instance_actions": {"request_id": "jp.request"},
}
TEXT = {"char", "varchar", "text", "mediumtext", "longtext", "tinytext"}
BATCH = 1000           # servers per POST /allocations and per staging INSERT
MICROVERSION = "placement 1.28"
# the wait for the resource trackers: s + s per live server. Nodes packed in one process are
# updated one after another, each loading its servers: 10,000 on 4 x 50 nodes took 170 s here
WAIT_S = (240.0, 0.05)


@dataclass(frozen=True)
class Node:
    """A compute node as the cell database and placement know it."""

    name: str
    host: str
    compute_id: int
    rp_uuid: str
    free: dict[str, float]   # per resource class: (total - reserved) * ratio - used


def server_of(db: Any) -> MariaDBServer:
    """The MariaDB server to write through: the central one, or Galera's first node."""
    server = getattr(db, "server", None) or getattr(db, "first", None)
    if not isinstance(server, MariaDBServer):
        raise ServiceError(f"preload as rows needs MariaDB or Galera, not {type(db).__name__}")
    return server


def sql(server: MariaDBServer, script: str, timeout: float = 900.0) -> list[tuple[str, ...]]:
    """Run ``script`` (any number of statements, one session) as root over the server's socket;
    the rows of its SELECTs."""
    return server.query(script, timeout)


def _q(v: str) -> str:
    return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"


def nodes(server: MariaDBServer) -> list[Node]:
    """Every compute node with what placement still has free on it (its own database, read)."""
    rows = sql(server, f"""
SELECT cn.hypervisor_hostname, cn.host, cn.id, cn.uuid, rc, free FROM {CELL}.compute_nodes cn JOIN (
  SELECT rp.uuid AS rp, i.resource_class_id AS rc,
         (i.total - i.reserved) * i.allocation_ratio - COALESCE(SUM(a.used), 0) AS free
  FROM placement.inventories i JOIN placement.resource_providers rp ON rp.id = i.resource_provider_id
  LEFT JOIN placement.allocations a ON a.resource_provider_id = i.resource_provider_id
       AND a.resource_class_id = i.resource_class_id
  GROUP BY rp.uuid, i.resource_class_id, i.total, i.reserved, i.allocation_ratio) f ON f.rp = cn.uuid
WHERE cn.deleted = 0 ORDER BY cn.hypervisor_hostname;""")
    ids = {"0": "VCPU", "1": "MEMORY_MB", "2": "DISK_GB"}  # placement's first standard classes
    ids.update({r[0]: r[1] for r in sql(server, "SELECT id, name FROM placement.resource_classes;")})
    out: dict[str, Node] = {}
    for name, host, cid, rp, rc, free in rows:
        n = out.setdefault(name, Node(name, host, int(cid), rp, {}))
        n.free[ids.get(rc, rc)] = float(free)
    return list(out.values())


def place_servers(free_nodes: Sequence[Node], want: dict[str, int], count: int) -> list[Node]:
    """``count`` nodes (one per server) chosen as nova's default weighers choose: the node with
    the most free RAM first (servers spread), among those with room for ``want``. ServiceError
    when they do not all fit (nothing is written)."""
    room = {n.name: dict(n.free) for n in free_nodes}
    by_name = {n.name: n for n in free_nodes}
    heap = [(-room[n.name].get("MEMORY_MB", 0.0), n.name) for n in free_nodes]
    heapq.heapify(heap)
    chosen: list[Node] = []
    while len(chosen) < count and heap:
        _, name = heapq.heappop(heap)
        r = room[name]
        if any(r.get(rc, 0.0) < amount for rc, amount in want.items()):
            continue  # full: leaves the heap
        for rc, amount in want.items():
            r[rc] -= amount
        chosen.append(by_name[name])
        heapq.heappush(heap, (-r.get("MEMORY_MB", 0.0), name))
    if len(chosen) < count:
        raise ServiceError(f"preload: room for {len(chosen)} more servers of {want} on the "
                           f"{len(free_nodes)} nodes, {count} asked: more or larger computes")
    return chosen


def _columns(server: MariaDBServer) -> dict[tuple[str, str], list[tuple[str, str]]]:
    rows = sql(server, "SELECT table_schema, table_name, column_name, data_type FROM "
                       "information_schema.columns WHERE table_schema IN "
                       f"('{CELL}', '{API}') ORDER BY table_schema, table_name, ordinal_position;")
    cols: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for db, table, col, kind in rows:
        cols.setdefault((db, table), []).append((col, kind))
    return cols


def clone_sql(cols: dict[tuple[str, str], list[tuple[str, str]]], template: str) -> str:
    """The INSERT ... SELECT statements that copy the template's rows for every server staged
    in ``jp`` (a pure function of the schema: tested without a server)."""
    out = [f"SET @t = {_q(template)};"]
    for db, table, key in TABLES:
        names, exprs = [], []
        for col, kind in cols.get((db, table), []):
            if col == "id":
                continue
            names.append(f"`{col}`")
            if col in NEW.get(table, {}):
                exprs.append(NEW[table][col])
            elif kind in TEXT:
                exprs.append(f"REPLACE(t.`{col}`, @t, jp.uuid)")
            else:
                exprs.append(f"t.`{col}`")
        if not names:
            raise ServiceError(f"preload: {db}.{table} not found: not the nova schema Juice knows")
        live = " AND t.deleted = 0" if any(c == "deleted" for c, _ in cols[(db, table)]) else ""
        out.append(f"INSERT INTO {db}.{table} ({', '.join(names)}) SELECT {', '.join(exprs)} "
                   f"FROM {db}.{table} t JOIN jp WHERE t.`{key}` = @t{live};")
    ev = [(c, k) for c, k in cols.get((CELL, "instance_actions_events"), []) if c != "id"]
    ev_expr = ["a.id" if c == "action_id" else "jp.host" if c == "host" else f"t.`{c}`" for c, _ in ev]
    out.append(f"INSERT INTO {CELL}.instance_actions_events ({', '.join(f'`{c}`' for c, _ in ev)}) "
               f"SELECT {', '.join(ev_expr)} FROM {CELL}.instance_actions_events t "
               f"JOIN {CELL}.instance_actions ta ON ta.id = t.action_id AND ta.instance_uuid = @t "
               f"JOIN jp JOIN {CELL}.instance_actions a "
               "ON a.instance_uuid = jp.uuid AND a.action = ta.action;")
    return "\n".join(out)


def _stage(names: Sequence[str], chosen: Sequence[Node]) -> tuple[list[str], str]:
    uuids = [str(uuid.uuid4()) for _ in names]
    lines = [f"USE {CELL};", "CREATE TEMPORARY TABLE jp (uuid CHAR(36) PRIMARY KEY, name VARCHAR(255), "
             "host VARCHAR(255), node VARCHAR(255), compute_id INT, reservation VARCHAR(255), "
             "request VARCHAR(255), bdm CHAR(36));"]
    for i in range(0, len(names), BATCH):
        vals = [f"({_q(u)}, {_q(n)}, {_q(c.host)}, {_q(c.name)}, {c.compute_id}, "
                f"{_q('r-' + uuid.uuid4().hex[:8])}, {_q('req-' + str(uuid.uuid4()))}, "
                f"{_q(str(uuid.uuid4()))})"
                for u, n, c in zip(uuids[i:i + BATCH], names[i:i + BATCH], chosen[i:i + BATCH], strict=True)]
        lines.append("INSERT INTO jp VALUES " + ",\n".join(vals) + ";")
    return uuids, "\n".join(lines)


class Preloader:
    """Clone a template server into many (see the module doc). ``placement_url``/``site``: where
    placement answers and from where to reach it; ``token()``: an admin token."""

    def __init__(self, lab: Any, db: Any, placement_url: str, site: int, creds: Any,
                 progress: Progress = quiet) -> None:
        self.lab, self.server, self.url, self.site = lab, server_of(db), placement_url, site
        self.creds, self.progress = creds, progress

    def _placement(self, method: str, path: str, body: Any = None) -> Any:
        token = issue_token(self.lab, self.site, self.creds)
        r = request(self.lab, self.site, method, self.url + path, body=body, timeout=300.0,
                    headers={"X-Auth-Token": token, "OpenStack-API-Version": MICROVERSION})
        if r.status not in (200, 204):
            raise ServiceError(f"preload: placement {method} {path}: {r.status} {r.body[:300]!r}")
        return r.json() if r.status == 200 else None

    def clone(self, template: str, names: Sequence[str], wait_s: float | None = None,
              wait: bool = True) -> list[str]:
        """New servers named ``names``, each a copy of ``template`` (an ACTIVE server nova booted)
        on a node chosen for it; their uuids. By batches of ``BATCH``: placement's allocations
        (placement checks the room), then at once their rows in one transaction (allocations taken
        back if the rows fail), so that a resource tracker rarely meets an allocation whose server
        is not written yet (it then looks the server up, one conductor call each). A failure leaves
        the batches before it in place, whole."""
        t0 = time.monotonic()
        held = self._placement("GET", f"/allocations/{template}")
        if not held.get("allocations"):
            raise ServiceError(f"preload: the template server {template} holds no allocation")
        (want,) = [{rc: int(v) for rc, v in a["resources"].items()} for a in held["allocations"].values()]
        chosen = place_servers(nodes(self.server), want, len(names))
        project, user = held["project_id"], held["user_id"]
        copy = clone_sql(_columns(self.server), template)
        uuids: list[str] = []
        for i in range(0, len(names), BATCH):  # allocations, then at once their rows
            batch, stage = _stage(names[i:i + BATCH], chosen[i:i + BATCH])
            body = {u: {"allocations": {c.rp_uuid: {"resources": want}}, "project_id": project,
                        "user_id": user, "consumer_generation": None}
                    for u, c in zip(batch, chosen[i:i + BATCH], strict=True)}
            self._placement("POST", "/allocations", body)
            try:
                sql(self.server, f"{stage}\nSTART TRANSACTION;\n{copy}\nCOMMIT;")
            except BaseException:
                self._release(batch, project, user)
                raise
            uuids += batch
            self.progress(f"preload: {len(uuids)} of {len(names)} servers written "
                          f"({time.monotonic() - t0:.0f} s)")
        if wait:  # else the caller waits (wait_tracked), e.g. after restarting the computes
            self.progress("preload: waiting for the computes' resource trackers to count them")
            self.wait_tracked(wait_s if wait_s is not None else WAIT_S[0] + WAIT_S[1] * self._live())
        return uuids

    def _live(self) -> int:
        ((n,),) = sql(self.server, f"SELECT COUNT(*) FROM {CELL}.instances WHERE deleted = 0;")
        return int(n)

    def _release(self, consumers: Sequence[str], project: str, user: str) -> None:
        """Take back allocations made for servers whose rows were not written (best effort)."""
        for i in range(0, len(consumers), BATCH):
            body = {u: {"allocations": {}, "project_id": project, "user_id": user,
                        "consumer_generation": 1} for u in consumers[i:i + BATCH]}
            try:
                self._placement("POST", "/allocations", body)
            except (ServiceError, OSError) as e:
                self.progress(f"preload: could not take back {len(body)} allocations: {e}")

    def wait_tracked(self, wait_s: float) -> None:
        """Until every compute node's resource tracker counts the servers on it (bounded): its
        periodic update (60 s by default), or a compute's start-up, which updates at once."""
        q = (f"SELECT COUNT(*), COALESCE(SUM(ABS(cn.running_vms - COALESCE(i.c, 0))), 0) "
             f"FROM {CELL}.compute_nodes cn LEFT JOIN (SELECT node, COUNT(*) AS c FROM {CELL}.instances "
             "WHERE deleted = 0 GROUP BY node) i ON i.node = cn.hypervisor_hostname "
             "WHERE cn.deleted = 0 AND cn.running_vms <> COALESCE(i.c, 0);")
        t0 = time.monotonic()
        deadline, said = t0 + wait_s, t0
        while True:
            ((behind, missing),) = sql(self.server, q)
            if int(behind) == 0:
                return
            if time.monotonic() - said >= 30.0:
                said = time.monotonic()
                self.progress(f"preload: {behind} nodes not updated yet ({missing} servers to count; "
                              f"{said - t0:.0f} s of at most {wait_s:.0f})")
            if time.monotonic() > deadline:
                raise ServiceError(f"preload: {behind} compute nodes had not counted {missing} servers "
                                   f"within {wait_s:.0f} s (their periodic resource update)")
            time.sleep(2.0)
