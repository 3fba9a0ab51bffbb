"""The 2013 compute-node layout, written as Juice's own DDL modelled on nova 2013.1 (Grizzly)
``nova/db/sqlalchemy/models.py``: ``services``, ``compute_nodes`` (one per service) and
``compute_node_stats`` (key/value rows, ``stats_per_node`` per node, soft-delete column and the
``(compute_node_id, deleted)`` index Grizzly had). Also the fake data every track and backend
shares, generated deterministically from (seed, node id) so any process can rebuild a row.

Pure module: no I/O. ``ddl(dialect)`` returns statements for ``mysql`` or ``postgresql``.
"""

from __future__ import annotations

import json
import random
import uuid

TABLES = ("compute_node_stats", "compute_nodes", "services")
STAT_KEYS = ("num_instances", "num_vm_active", "num_vm_building", "num_vm_stopped", "num_task_None",
             "num_task_spawning", "num_os_type_linux", "num_os_type_windows", "io_workload",
             "num_proj_demo")
NODE_COLS = ("id", "created_at", "updated_at", "deleted_at", "deleted", "service_id", "vcpus",
             "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used",
             "hypervisor_type", "hypervisor_version", "hypervisor_hostname", "free_ram_mb",
             "free_disk_gb", "current_workload", "running_vms", "cpu_info", "disk_available_least")
SERVICE_COLS = ("id", "created_at", "updated_at", "deleted_at", "deleted", "host", "binary", "topic",
                "report_count", "disabled")
STAT_COLS = ("created_at", "updated_at", "deleted_at", "deleted", "key", "value", "compute_node_id")
NOW = "2013-10-29 12:00:00"
UUID_NS = uuid.UUID("6f1c2a52-61a2-4c1e-9a52-8d3c4f1e0b2a")
CPU_INFO = json.dumps({"vendor": "Intel", "model": "SandyBridge", "arch": "x86_64",
                       "features": ["sse", "sse2", "ssse3", "sse4.1", "sse4.2", "avx", "aes", "vmx",
                                    "pclmuldq", "popcnt", "x2apic", "tsc-deadline", "xsave"],
                       "topology": {"cores": 6, "threads": 2, "sockets": 2}})


def ddl(dialect: str) -> list[str]:
    """CREATE TABLE statements (dropping any previous copy) for ``mysql`` or ``postgresql``."""
    if dialect == "mysql":
        pk, dt, txt, eng = "INT NOT NULL AUTO_INCREMENT PRIMARY KEY", "DATETIME", "MEDIUMTEXT", \
            " ENGINE=InnoDB DEFAULT CHARSET=utf8"
        q = "`"
    elif dialect == "postgresql":
        pk, dt, txt, eng, q = "SERIAL PRIMARY KEY", "TIMESTAMP", "TEXT", "", '"'
    else:
        raise ValueError(f"dialect: expected mysql or postgresql, got {dialect!r}")
    common = (f"created_at {dt} NULL, updated_at {dt} NULL, deleted_at {dt} NULL, "
              "deleted INT NOT NULL DEFAULT 0")
    return [
        *(f"DROP TABLE IF EXISTS {t}" for t in TABLES),
        f"CREATE TABLE services (id {pk}, {common}, host VARCHAR(255), {q}binary{q} VARCHAR(255), "
        f"topic VARCHAR(255), report_count INT NOT NULL, disabled BOOLEAN){eng}",
        f"CREATE TABLE compute_nodes (id {pk}, {common}, service_id INT NOT NULL, vcpus INT NOT NULL, "
        "memory_mb INT NOT NULL, local_gb INT NOT NULL, vcpus_used INT NOT NULL, "
        "memory_mb_used INT NOT NULL, local_gb_used INT NOT NULL, hypervisor_type TEXT NOT NULL, "
        "hypervisor_version INT NOT NULL, hypervisor_hostname VARCHAR(255), free_ram_mb INT, "
        f"free_disk_gb INT, current_workload INT, running_vms INT, cpu_info {txt} NOT NULL, "
        f"disk_available_least INT){eng}",
        f"CREATE TABLE compute_node_stats (id {pk}, {common}, {q}key{q} VARCHAR(511) NOT NULL, "
        f"value VARCHAR(255), compute_node_id INT NOT NULL){eng}",
        "CREATE INDEX compute_node_stats_node_id_and_deleted_idx ON compute_node_stats "
        "(compute_node_id, deleted)",
        "CREATE INDEX compute_nodes_service_id_idx ON compute_nodes (service_id)",
    ]


def host(i: int) -> str:
    return f"compute-{i:05d}"


def node_uuid(i: int) -> str:
    """Stable uuid of node ``i`` (what placement would return as a candidate)."""
    return str(uuid.uuid5(UUID_NS, str(i)))


def _rng(seed: int, i: int, version: int) -> random.Random:
    return random.Random(seed * 1_000_003 + i * 7919 + version)


def usage(seed: int, i: int, version: int = 0) -> dict[str, int]:
    """The changing part of node ``i``'s state (``version`` > 0 for an update)."""
    r = _rng(seed, i, version)
    vms = r.randint(0, 40)
    vcpus_used = min(32, vms)
    mem_used = 512 + vms * 2048
    disk_used = vms * 20
    return {"vcpus_used": vcpus_used, "memory_mb_used": mem_used, "local_gb_used": disk_used,
            "free_ram_mb": 131072 - mem_used, "free_disk_gb": 2000 - disk_used,
            "current_workload": r.randint(0, 5), "running_vms": vms,
            "disk_available_least": 2000 - disk_used - r.randint(0, 50)}


def stats(seed: int, i: int, k: int, version: int = 0) -> list[tuple[str, str]]:
    """``k`` (key, value) stats of node ``i``: the seed's 10 rows per node by default."""
    r = _rng(seed, i, version + 1_000_000)
    keys = [STAT_KEYS[j] if j < len(STAT_KEYS) else f"extra_{j}" for j in range(k)]
    return [(key, str(r.randint(0, 40))) for key in keys]


def service_row(i: int) -> tuple[object, ...]:
    return (i, NOW, NOW, None, 0, host(i), "nova-compute", "compute", 0, False)


def node_row(seed: int, i: int) -> tuple[object, ...]:
    u = usage(seed, i)
    return (i, NOW, NOW, None, 0, i, 32, 131072, 2000, u["vcpus_used"], u["memory_mb_used"],
            u["local_gb_used"], "QEMU", 1005003, host(i), u["free_ram_mb"], u["free_disk_gb"],
            u["current_workload"], u["running_vms"], CPU_INFO, u["disk_available_least"])


def stat_rows(seed: int, i: int, k: int, version: int = 0) -> list[tuple[object, ...]]:
    return [(NOW, NOW, None, 0, key, value, i) for key, value in stats(seed, i, k, version)]


HOST_STATE = ("vcpus", "vcpus_used", "memory_mb", "memory_mb_used", "free_ram_mb", "local_gb",
              "local_gb_used", "free_disk_gb", "disk_available_least", "running_vms", "current_workload",
              "hypervisor_type", "hypervisor_version", "hypervisor_hostname")


def kv_fields(k: int) -> list[str]:
    """Field order of a packed cache entry (published in the index entry)."""
    return ["id", "uuid", "host", "updated_at", *HOST_STATE, "service_disabled", "service_updated_at",
            *(f"stats.{key}" for key, _ in stats(0, 0, k))]


def kv_value(seed: int, i: int, k: int, version: int = 0) -> list[object]:
    """Node ``i``'s state as one packed cache entry: the values of ``kv_fields(k)`` in order —
    what the scheduler's HostState is built from (resources, usage, hypervisor, its
    service's liveness, its stats), not the static blobs (cpu_info) a per-minute report need
    not repeat. ~220 bytes as JSON."""
    row = dict(zip(NODE_COLS, node_row(seed, i), strict=True))
    row.update(usage(seed, i, version))
    return [i, node_uuid(i), host(i), NOW, *(row[c] for c in HOST_STATE), False, NOW,
            *(int(v) for _, v in stats(seed, i, k, version))]
