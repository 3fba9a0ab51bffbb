"""What server logs gained during a window, fetched from the places the servers run at.

    logs = [(place, path), ...]                 # a service's ``logs()``
    marks = log_sizes(logs)                    # before the window: each log's size at its place
    ... the run ...
    names = copy_slices(logs, marks, rundir / "logs")   # each log's new bytes, as <name>

Both steps run one small Python program per place (``sys.executable``: the Juice venv is at
the same path on every host, as for the load drivers): the sizes in one call, then the new
bytes of every log of the place copied into a directory under the place's ``root``, fetched
here (``place.fetch``, at most 64 MiB a file) and removed. A log that is gone or shrank gives
what it holds past the mark (nothing). Names are the logs' file names (a later log of the same
name replaces an earlier one, as for local copies).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from juice import onhost
from juice.errors import ServiceError
from juice.lab.place import Place

Logs = Sequence[tuple[Place, Path]]
Marks = dict[tuple[str, str], int]   # (place label, path) -> size in bytes

LOGFILES_PY = onhost.source("logfiles")  # juice.onhost.logfiles: sizes, slices


def _by_place(logs: Logs) -> dict[str, tuple[Place, list[Path]]]:
    out: dict[str, tuple[Place, list[Path]]] = {}
    for place, path in logs:
        out.setdefault(place.label, (place, []))[1].append(path)
    return out


def _json_at(place: Place, argv: list[str], what: str) -> dict[str, int]:
    r = place.run([sys.executable, "-c", *argv], timeout=300)
    if not r.ok:
        why = (r.err or r.out).strip().splitlines()
        raise ServiceError(f"{place.label}: {what}: {why[-1] if why else 'failed'}")
    data: dict[str, int] = json.loads(r.out)
    return data


def log_sizes(logs: Logs) -> Marks:
    """Each log's size now, at its place (0: not there yet)."""
    marks: Marks = {}
    for label, (place, paths) in _by_place(logs).items():
        sizes = _json_at(place, [LOGFILES_PY, "sizes", *map(str, paths)], "log sizes")
        marks.update({(label, str(p)): int(sizes.get(str(p), 0)) for p in paths})
    return marks


def copy_slices(logs: Logs, marks: Mapping[tuple[str, str], int], dest: Path) -> list[str]:
    """What each log gained since ``marks``, into ``dest/<log name>``; the names written."""
    dest.mkdir(parents=True, exist_ok=True)
    out: list[str] = []
    for label, (place, paths) in _by_place(logs).items():
        tmp = place.root / f"log-slices-{place.site}-{uuid.uuid4().hex[:8]}"
        args = [a for p in paths for a in (str(p), str(marks.get((label, str(p)), 0)))]
        try:
            copied = _json_at(place, [LOGFILES_PY, "slice", str(tmp), *args], "log slices")
            for i, p in enumerate(paths):
                fetched = copied.get(str(p), 0) > 0 and place.fetch(tmp / str(i), dest / p.name)
                if fetched and p.name not in out:
                    out.append(p.name)
        finally:
            place.remove(tmp)
    return out
