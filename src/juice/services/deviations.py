"""Server settings that differ from the shipped defaults, as data.

Every server starts with its upstream defaults (MariaDB 10.11, PostgreSQL 15, RabbitMQ 3.10,
Keystone 30, nova 34, placement 16, gunicorn, memcached) unless the spec sets an option; what
Juice changes anyway is listed with its reason. A service exposes its list as
``deviations() -> list[Deviation]``; the sweep stores the list of each run's deployment in
the run's manifest (``deviations``, optional: runs of earlier versions have none) and the
report shows it (``juice.report.deviations``)::

    Deviation("mariadb", "max_connections", "300", "151", "nova's pools: ...", source="juice")
    of([db, keystone])            # every service's deviations, duplicates removed
    add_to_manifest(path, devs)   # atomically, the manifest's mtime kept

Addresses, ports, sockets, paths, users and log destinations a lab needs are wiring, not
deviations; a limit, a timeout or a tuning knob is one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

JUICE = "juice"  # Juice changes it (the reason says why)
SPEC = "spec"    # the spec sets it (an axis or an option, or the study's default for it)
SOURCES = (JUICE, SPEC)
SET_IN_SPEC = "set in the spec"


@dataclass(frozen=True)
class Deviation:
    """One option of one server that differs from the shipped default."""

    server: str   # e.g. mariadb, galera, postgres, keystone, nova-conductor, memcached
    option: str   # its upstream name: max_connections, [database] max_pool_size, --timeout
    value: str    # what Juice runs it with
    default: str  # what the server ships with
    reason: str
    source: str = JUICE  # juice | spec

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Deviation | None:
        """The deviation stored as ``d`` (None when ``d`` is not one)."""
        try:
            return cls(server=str(d["server"]), option=str(d["option"]), value=str(d["value"]),
                       default=str(d["default"]), reason=str(d.get("reason", "")),
                       source=str(d.get("source", JUICE)))
        except (KeyError, TypeError):
            return None


def dev(server: str, option: str, value: object, default: object, reason: str,
        source: str = JUICE) -> Deviation:
    """A Deviation with values shown as the config file spells them (booleans lower case)."""
    def show(v: object) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)
    return Deviation(server, option, show(value), show(default), reason, source)


def spec_set(server: str, option: str, value: object, default: object, why: str = "") -> Deviation:
    """A deviation the spec asked for."""
    return dev(server, option, value, default, f"{SET_IN_SPEC}{f' ({why})' if why else ''}", SPEC)


def of(services: Iterable[object]) -> list[Deviation]:
    """The deviations of every object of ``services`` that has ``deviations()`` (in order,
    duplicates removed: servers sharing a configuration list it once)."""
    out: list[Deviation] = []
    seen: set[Deviation] = set()
    for svc in services:
        fn = getattr(svc, "deviations", None)
        if not callable(fn):
            continue
        found: object = fn()
        for d in found if isinstance(found, Iterable) else ():
            if isinstance(d, Deviation) and d not in seen:
                seen.add(d)
                out.append(d)
    return out


def stored(manifest: Mapping[str, object]) -> list[Deviation]:
    """The deviations a run's manifest records ([] for runs made before they were recorded)."""
    raw = manifest.get("deviations")
    if not isinstance(raw, list):
        return []
    return [d for x in raw if isinstance(x, Mapping) and (d := Deviation.from_dict(x)) is not None]


def add_to_manifest(manifest: Path, devs: Iterable[Deviation]) -> None:
    """Add ``"deviations": [...]`` to a run's manifest.json, atomically, keeping its mtime (the
    tidy cache compares mtimes; this entry changes no parameter of the run)."""
    from juice.util import atomic

    st = manifest.stat()
    data = json.loads(manifest.read_text())
    data["deviations"] = [d.as_dict() for d in devs]
    atomic.write_json(manifest, data)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
