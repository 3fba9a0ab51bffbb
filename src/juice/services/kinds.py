"""``deploy(lab, kind, **opts)``: the one entry the runner and the CLI use.

    with LocalLab.up(spec.parse({"name": "t", "sites": 3, "delay_ms": 20}), ephemeral=True) as lab:
        with deploy(lab, "galera") as db:          # started, healthy, recorded
            ep = db.endpoint(3)                      # Endpoints(read=..., write=...)
        # leaving the block stops every server gracefully

Kinds (``KINDS``, the databases): mariadb (central in site 1), galera (a node per site),
postgres (central), postgres-readlocal (primary in site 1 + a standby in every other site),
cockroach. Buses (``BUSES``; ``ALL_KINDS`` = both): rabbitmq (options ``nodes``: the sites of its
nodes, default one per site; ``cluster``; ``queues`` classic|mirrored|quorum),
rabbitmq-federation (``sites``, ``topics``, ``queues``, ``control_exchange``, ``prefetch``,
``ack_mode``, ``max_hops``), nats (``sites``, ``topology`` cluster|gateways,
``servers_per_site``). A site list may be given as ``[1, 2]``, ``2`` or ``"1,2"`` (``--opt``).
A client in a site without a server uses the first one (``endpoint``).
Started servers are recorded in ``<lab.workdir>/services.json`` (``juice db status/down``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from juice.errors import UserError
from juice.services.base import Endpoint, Endpoints, Progress, ServerRecord, Service, Sites, quiet
from juice.util import atomic

KINDS = ("mariadb", "galera", "postgres", "postgres-readlocal", "cockroach")
BUSES = ("rabbitmq", "rabbitmq-federation", "nats")
ALL_KINDS = KINDS + BUSES
# The options a bus takes from ``build`` (anything else is a UserError naming these).
BUS_OPTIONS: dict[str, tuple[str, ...]] = {
    "rabbitmq": ("nodes", "cluster", "queues"),
    "rabbitmq-federation": ("sites", "topics", "queues", "control_exchange", "prefetch", "ack_mode",
                            "max_hops"),
    "nats": ("sites", "topology", "servers_per_site"),
}
SITE_LISTS = ("nodes", "sites")
RECORD = "services.json"


def _site_list(kind: str, key: str, value: Any) -> list[int]:
    """``[1, 2]``, ``2`` or ``"1,2"`` -> ``[1, 2]`` (UserError otherwise)."""
    try:
        if isinstance(value, str):
            out = [int(x) for x in value.split(",")]
        elif isinstance(value, int) and not isinstance(value, bool):
            out = [value]
        else:
            out = [int(x) for x in value]
    except (TypeError, ValueError):
        raise UserError(f"{kind}: {key}: expected site numbers like 1,2,3, got {value!r}") from None
    if not out:
        raise UserError(f"{kind}: {key}: no site given")
    return out


# Every kind is written against places (``juice.lab.place``): it runs in a local lab and on SSH
# hosts alike (memcached, redis, Keystone, placement and nova too, built by the studies themselves).


def _build_bus(lab: Sites, kind: str, progress: Progress, opts: dict[str, Any]) -> Service:
    allowed = BUS_OPTIONS[kind]
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise UserError(f"{kind}: unknown option {unknown[0]!r} (options: {', '.join(allowed)})")
    for key in SITE_LISTS:
        if key in opts and opts[key] is not None:
            opts[key] = _site_list(kind, key, opts[key])
    if kind == "rabbitmq":
        from juice.services.buses.rabbitmq import RabbitMQ

        return RabbitMQ(lab, progress, **opts)
    if kind == "rabbitmq-federation":
        from juice.services.buses.rabbitmq_federation import RabbitFederation

        if isinstance(opts.get("topics"), str):
            opts["topics"] = [t for t in opts["topics"].split(",") if t]
        return RabbitFederation(lab, progress, **opts)
    from juice.services.buses.nats import Nats

    return Nats(lab, progress, **opts)


def build(lab: Sites, kind: str, progress: Progress = quiet, **opts: Any) -> Service:
    """The service object for ``kind`` (a database or a bus; nothing started). UserError on an
    unknown kind/option, ServiceError on a bad option value."""
    from juice.services.databases.cockroach import Cockroach
    from juice.services.databases.galera import Galera, GaleraOptions
    from juice.services.databases.mariadb import MariaDBCentral
    from juice.services.databases.postgres import PgOptions, Postgres

    try:
        if kind == "mariadb":
            return MariaDBCentral(lab, progress, **opts)
        if kind == "galera":
            gopts = {k: opts.pop(k) for k in list(opts) if k in GaleraOptions.__dataclass_fields__}
            return Galera(lab, progress, options=GaleraOptions(**gopts), **opts)
        if kind in ("postgres", "postgres-readlocal"):
            popts = {k: opts.pop(k) for k in list(opts) if k in PgOptions.__dataclass_fields__}
            return Postgres(lab, progress, read_local=kind == "postgres-readlocal",
                            options=PgOptions(**popts), **opts)
        if kind == "cockroach":
            return Cockroach(lab, progress, **opts)
        if kind in BUSES:
            return _build_bus(lab, kind, progress, dict(opts))
    except TypeError as e:
        raise UserError(f"{kind}: unknown option ({e})") from None
    raise UserError(f"kind: unknown database or bus {kind!r} (databases: {', '.join(KINDS)}; "
                    f"buses: {', '.join(BUSES)})")


def deploy(lab: Sites, kind: str, progress: Progress = quiet, timeout: float = 180.0,
           **opts: Any) -> Service:
    """Build, configure, start and wait for ``kind``; record it; return the handle.

    On failure every server already started is stopped before the error propagates.
    """
    svc = build(lab, kind, progress, **opts)
    t0 = time.monotonic()
    svc.up(timeout)
    record(lab, svc, time.monotonic() - t0)
    return svc


def record(lab: Sites, svc: Service, bringup_s: float) -> None:
    """Write what runs where (and which endpoint each site uses) to services.json."""
    data = {
        "kind": svc.kind,
        "bringup_s": round(bringup_s, 2),
        "servers": [r.as_dict() for r in svc.records()],
        "endpoints": {str(s): {"read": svc.endpoint(s).read.__dict__, "write": svc.endpoint(s).write.__dict__}
                      for s in lab.sites},
        "recorded_at": time.time(),
    }
    atomic.write_json(lab.workdir / RECORD, data)


def check_kind(kind: str, where: str, *, buses: bool = True) -> None:
    """UserError naming ``where`` (a command-line flag) unless ``deploy`` knows ``kind``: a
    database, or a bus too with ``buses``."""
    known = ALL_KINDS if buses else KINDS
    if kind not in known:
        raise UserError(f"{where}: unknown {'server kind' if buses else 'database'} {kind!r} "
                        f"(choose one of {', '.join(known)})")


def load_record(workdir: Path, name: str = RECORD) -> dict[str, Any] | None:
    """The JSON record ``name`` in a lab's ``workdir`` (None when there is none): what ``deploy``
    started (services.json), or Keystone's (``juice keystone``)."""
    try:
        data: dict[str, Any] = json.loads((workdir / name).read_text())
    except FileNotFoundError:
        return None
    return data


def forget(workdir: Path) -> None:
    (workdir / RECORD).unlink(missing_ok=True)


class Recorded(Service):
    """A database deployed earlier (e.g. by ``juice db up`` in another process), seen through
    its services.json record: ``endpoint``/``records``/``log_files`` answer from the record,
    ``wait_healthy`` checks its servers still run, and ``stop`` does nothing (the database
    belongs to ``juice db down``)."""

    def __init__(self, lab: Sites, rec: dict[str, Any], progress: Progress = quiet) -> None:
        super().__init__(lab, progress)
        self.rec = rec
        self.kind = str(rec["kind"])

    def configure(self) -> None:
        pass

    def start(self) -> None:
        pass

    def wait_healthy(self, timeout: float = 60.0) -> None:
        from juice.errors import ServiceError
        from juice.util import proc

        for s in self.rec.get("servers", []):
            if not proc.alive(s["pid"], s["pid_start"]):
                raise ServiceError(f"{self.kind} in site {s['site']} is not running (pid {s['pid']}): "
                                   "`juice db down` then `juice db up` again")

    def stop(self) -> None:
        pass

    def endpoint(self, site: int) -> Endpoints:
        eps = self.rec["endpoints"]
        e = eps.get(str(site)) or eps[min(eps, key=int)]
        return Endpoints(read=Endpoint(**e["read"]), write=Endpoint(**e["write"]))

    def records(self) -> list[ServerRecord]:
        return [ServerRecord(**s) for s in self.rec.get("servers", [])]

    def log_files(self) -> list[Path]:
        return [Path(s["log"]) for s in self.rec.get("servers", [])]


def attach(lab: Sites) -> Recorded | None:
    """The database recorded in ``lab``'s services.json (None when there is none)."""
    rec = load_record(lab.workdir)
    return Recorded(lab, rec) if rec is not None else None
