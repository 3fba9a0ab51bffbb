"""The modern track: nova's real cell-database schema, made by the released nova's own
``nova-manage db sync --local_cell`` (run from the OpenStack venv, in its own process, inside
the lab site, with a generated nova.conf), then filled by bulk SQL with rows shaped like
what a current nova-compute writes (stats as a JSON column, no stats table, NUMA topology,
service_id NULL and ``host`` set, a uuid per node).

``sync(lab, site, url)`` needs the database to exist; ``node_row``/``service_row`` are pure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from juice.errors import ServiceError
from juice.lab.place import Lab
from juice.paths import cache_dir
from juice.studies.schedulerdb import schema_2013 as s13

NODE_COLS = ("id", "created_at", "updated_at", "deleted_at", "deleted", "service_id", "vcpus",
             "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used",
             "hypervisor_type", "hypervisor_version", "cpu_info", "disk_available_least",
             "free_ram_mb", "free_disk_gb", "current_workload", "running_vms", "hypervisor_hostname",
             "host_ip", "supported_instances", "pci_stats", "metrics", "extra_resources", "stats",
             "numa_topology", "host", "ram_allocation_ratio", "cpu_allocation_ratio", "uuid",
             "disk_allocation_ratio", "mapped")
SERVICE_COLS = ("id", "created_at", "updated_at", "deleted_at", "deleted", "host", "binary", "topic",
                "report_count", "disabled", "disabled_reason", "last_seen_up", "forced_down", "version",
                "uuid")
SUPPORTED = json.dumps([["x86_64", "kvm", "hvm"], ["i686", "kvm", "hvm"]])
PCI_STATS = json.dumps({"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova",
                        "nova_object.version": "1.1", "nova_object.data": {"objects": []}})


def _numa() -> str:
    cells = []
    for c in range(2):
        cells.append({"nova_object.name": "NUMACell", "nova_object.namespace": "nova",
                      "nova_object.version": "1.5",
                      "nova_object.data": {"id": c, "cpuset": [], "pcpuset": list(range(c * 16, c * 16 + 16)),
                                           "memory": 65536, "cpu_usage": 0, "memory_usage": 0,
                                           "pinned_cpus": [], "siblings": [[i, i + 8] for i in range(8)],
                                           "mempages": [{"size_kb": 4, "total": 16777216, "used": 0,
                                                         "reserved": 0}],
                                           "network_metadata": {"physnets": [], "tunneled": False},
                                           "socket": c}})
    return json.dumps({"nova_object.name": "NUMATopology", "nova_object.namespace": "nova",
                       "nova_object.version": "1.2", "nova_object.data": {"cells": cells}})


NUMA = _numa()


def stats_json(seed: int, i: int, k: int, version: int = 0) -> str:
    return json.dumps(dict(s13.stats(seed, i, k, version)))


def node_row(seed: int, i: int, k: int) -> tuple[object, ...]:
    u = s13.usage(seed, i)
    return (i, s13.NOW, s13.NOW, None, 0, None, 32, 131072, 2000, u["vcpus_used"], u["memory_mb_used"],
            u["local_gb_used"], "QEMU", 8002000, s13.CPU_INFO, u["disk_available_least"], u["free_ram_mb"],
            u["free_disk_gb"], u["current_workload"], u["running_vms"], s13.host(i),
            f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}", SUPPORTED, PCI_STATS, "[]", None,
            stats_json(seed, i, k), NUMA, s13.host(i), 1.0, 4.0, s13.node_uuid(i), 1.0, 1)


def service_row(i: int) -> tuple[object, ...]:
    return (i, s13.NOW, s13.NOW, None, 0, s13.host(i), "nova-compute", "compute", 10, False, None,
            s13.NOW, False, 66, s13.node_uuid(i + 10_000_000))


def nova_manage() -> Path:
    return cache_dir() / "openstack" / "bin" / "nova-manage"


def render_conf(url: str, state_path: Path) -> str:
    """The minimal nova.conf ``db sync`` needs: the cell database only."""
    return (f"[DEFAULT]\nstate_path = {state_path}\nuse_stderr = true\n"
            f"[database]\nconnection = {url}\n")


def sync(lab: Lab, site: int, url: str) -> dict[str, object]:
    """Create nova's cell-DB schema at ``url`` with ``nova-manage db sync --local_cell``
    (its own venv and process, inside ``site``). Returns what ran and how long it took."""
    exe = nova_manage()
    if not exe.exists():
        raise ServiceError(f"{exe} is missing: run scripts/setup.sh (the OpenStack venv)")
    place = lab.place(site)
    conf = place.root / "schedulerdb-nova.conf"
    place.write(conf, render_conf(url, place.root), mode=0o600)
    t0 = time.monotonic()
    cp = place.run([str(exe), "--config-file", str(conf), "db", "sync", "--local_cell"], timeout=600)
    took = time.monotonic() - t0
    if not cp.ok:
        tail = " | ".join((cp.err or cp.out).strip().splitlines()[-3:])
        raise ServiceError(f"nova-manage db sync in {place.label} failed (exit {cp.rc}): {tail}")
    ver = place.run([str(exe), "--version"], timeout=120)
    return {"command": "nova-manage db sync --local_cell", "seconds": round(took, 2),
            "nova_version": ((ver.out or ver.err).strip().splitlines() or ["?"])[-1]}
