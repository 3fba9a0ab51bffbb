"""``deploy(lab, kind, **opts)``: the one entry the runner and the CLI use.

    with LocalLab.up(spec.parse({"name": "t", "sites": 3, "delay_ms": 20}), ephemeral=True) as lab:
        with deploy(lab, "galera") as db:          # started, healthy, recorded
            ep = db.endpoint(3)                      # Endpoints(read=..., write=...)
        # leaving the block stops every server gracefully

Kinds: mariadb (central in site 1), galera (a node per site), postgres (central),
postgres-readlocal (primary in site 1 + a standby in every other site), cockroach.
Started servers are recorded in ``<lab.workdir>/services.json`` (``juice db status/down``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from juice.errors import UserError
from juice.services.base import Progress, Service, Sites, quiet
from juice.util import atomic

KINDS = ("mariadb", "galera", "postgres", "postgres-readlocal", "cockroach")
RECORD = "services.json"


def build(lab: Sites, kind: str, progress: Progress = quiet, **opts: Any) -> Service:
    """The service object for ``kind`` (nothing started). UserError on an unknown kind/option."""
    from juice.services.cockroach import Cockroach
    from juice.services.galera import Galera, GaleraOptions
    from juice.services.mariadb import MariaDBCentral
    from juice.services.postgres import PgOptions, Postgres

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
    except TypeError as e:
        raise UserError(f"{kind}: unknown option ({e})") from None
    raise UserError(f"kind: unknown database {kind!r} (choose one of {', '.join(KINDS)})")


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


def load_record(workdir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((workdir / RECORD).read_text())
    except FileNotFoundError:
        return None
    return data


def forget(workdir: Path) -> None:
    (workdir / RECORD).unlink(missing_ok=True)
