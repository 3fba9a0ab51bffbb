"""OSProfiler's traces read back from its backend (the lab's Redis), by trace id.

    doc = read_traces(place, "redis://10.210.1.2:6379", ["<trace id>", ...], home)
    doc["traces"]["<trace id>"]       # that trace's notifications, as OSProfiler stored them

The reader runs at ``place`` with the OpenStack venv's python (osprofiler and the redis client
are there, not in Juice's venv): ``osprofiler.drivers.base.get_driver(connection)`` opens the
backend as nova's services do, and each trace's stored notifications are returned whole — one
per span start and stop, each with its ``timestamp`` (UTC, microseconds, the clock of the
service that sent it), ``name`` (``wsgi-start``, ``rpc-stop``…), ``trace_id``/``parent_id``,
``service``, ``host`` and ``info`` (request path, called function). The driver's own
``get_report`` tree is not kept: it rounds every time to whole milliseconds from the trace's
first notification, and the comparison with the logs needs absolute times
(``juice.trace.osprofiler`` builds the spans from these notifications). What was read is
deleted from the backend: a long study's Redis holds one run's traces at most.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from juice import onhost
from juice.errors import ServiceError
from juice.lab.place import Place
from juice.onhost.osprofiler_reader import FORMAT as FORMAT  # the document's revision
from juice.services.openstack.os_api import os_env, venv_bin

# runs in the OpenStack venv: connection, output path, trace ids...
READER = onhost.source("osprofiler_reader")


def read_traces(place: Place, connection: str, trace_ids: Sequence[str], home: Path,
                timeout: float = 120.0) -> dict[str, Any]:
    """The stored notifications of ``trace_ids`` (see the module doc); ``home``: a directory at
    ``place`` for the reader's output (removed after). ServiceError naming the step on failure."""
    out = home / "osprofiler-traces.json"
    place.mkdir(home)
    r = place.run([str(venv_bin("python")), "-c", READER, connection, str(out), *trace_ids],
                  timeout=timeout, env=os_env(home))
    if not r.ok:
        tail = " | ".join((r.err or r.out).strip().splitlines()[-3:]) or "no output"
        raise ServiceError(f"reading OSProfiler's traces from {connection}: {tail}")
    raw = place.read(out)
    place.remove(out)
    if raw is None:
        raise ServiceError(f"reading OSProfiler's traces from {connection}: no output file at {place.label}")
    doc: dict[str, Any] = json.loads(raw)
    return doc
