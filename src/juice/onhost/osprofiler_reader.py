"""OSProfiler's stored notifications read back from its backend and deleted there, run AT a
place with the OpenStack venv's Python (osprofiler, oslo.config and the redis client are there,
not in Juice's venv; ``juice.services.tracing.osprofiler`` runs it and reads the document).

    python -c "$(source osprofiler_reader)" CONNECTION OUT TRACE_ID...

``osprofiler.drivers.base.get_driver(CONNECTION)`` opens the backend as nova's services do;
OUT gets ``{"format", "backend", "osprofiler" (its version), "traces": {id: [notification,
...]}}`` (written whole: OUT.tmp, then renamed); prints how many notifications.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

FORMAT = 1  # the document's revision (1: notifications per trace id)


def read(drv: Any, trace_ids: list[str]) -> dict[str, list[Any]]:
    """Each trace's notifications in the order they were stored, deleted from the backend."""
    traces = {}
    for tid in trace_ids:
        key = getattr(drv, "namespace_opt", "osprofiler_opt:") + tid
        traces[tid] = [json.loads(x) for x in reversed(drv.db.lrange(key, 0, -1))]
        drv.db.delete(key)
    return traces


def write(out: str, doc: dict[str, Any]) -> None:
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(out + ".tmp", out)


def main(argv: list[str]) -> None:
    from importlib.metadata import version

    from oslo_config import cfg
    from osprofiler import opts
    from osprofiler.drivers import base

    opts.set_defaults(cfg.CONF)
    conn, out, ids = argv[0], argv[1], argv[2:]
    drv = base.get_driver(conn)
    traces = read(drv, ids)
    write(out, {"format": FORMAT, "backend": drv.get_name(), "osprofiler": version("osprofiler"),
                "traces": traces})
    print(sum(len(v) for v in traces.values()))


if __name__ == "__main__":
    main(sys.argv[1:])
