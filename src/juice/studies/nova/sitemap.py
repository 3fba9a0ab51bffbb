"""What runs in each site of a nova deployment, and the memory it needs there: the ``--dry-run``
plan on hosts (``roles``) and the memory plan checked before anything starts (``check``).

    parts(spec, point, stack)   # {site: [Part("nova-api", 197.0), ...]}
    check(lab, plans)           # per machine: the largest plan against its MemAvailable (UserError)

The memory of each part is its resident memory measured on this machine kind (peak RSS over a
small run's resource profile; ``benchmarks/verdicts.md``'s runs of 2026-11-27, the nova
simulation's figures in ``benchmarks/nova.md``, glance's and neutron's in
``docs/nova-simulation.md``). A plan, not a bound: a loaded server grows (a nova-compute by a
few MB under 60 concurrent boots, a forked node from 26 to 34 MB), which is why a machine must
keep ``HEADROOM`` of its available memory free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from juice.errors import UserError

if TYPE_CHECKING:
    from juice.lab.place import Lab, Place
    from juice.services.openstack.nova_deploy import NovaStack
    from juice.studies.nova.points import NovaPoint
    from juice.studies.nova.spec import NovaSpec

# resident memory, MB (see the module doc for where each was measured)
MB = {
    "mariadb": 175.0,            # mariadbd, shipped defaults (a 128 MB buffer pool)
    "galera": 155.0,             # one MariaDB + galera-4 node
    "rabbitmq": 160.0,           # beam.smp + epmd
    "keystone": 160.0,           # gunicorn master + 1 worker
    "placement_master": 25.0, "placement_worker": 108.0,
    "glance": 275.0,             # master + 2 workers
    "neutron": 207.0,            # neutron-api, 1 worker
    "ovn": 31.0,                 # NB and SB ovsdb-servers + ovn-northd
    # neutron-rpc-server (ML2/OVS): its parent, RPC and state-report workers, PSS (their RSS, 537 MB,
    # counts the pages the forked workers share three times) after 50 simulated agents' reports
    "neutron_rpc": 231.0,
    "fakes": 41.0,               # one stand-in server
    "haproxy": 10.0,
    "api_master": 30.0, "api_worker": 167.0,
    "conductor_process": 145.0,  # the parent and each worker
    "scheduler_process": 133.0,  # the parent and each worker, per nova-scheduler
    "compute_process": 180.0,    # a nova-compute process after boots
    "node_shared": 0.04,         # a node more in a shared process (27.5-38.6 KB measured)
    "node_forked": 34.0,         # a forked node's private memory after 60 concurrent boots
    "driver": 55.0,              # the load driver
}
HEADROOM = 0.8  # the plan must fit in this share of a machine's MemAvailable
THREADS_FORKED_NODE = 80  # a forked node's threads (78 measured: benchmarks/nova.md); each takes a pid


@dataclass(frozen=True)
class Part:
    label: str         # as the plan prints it
    mb: float          # the memory it needs there
    threads: int = 0   # counted where they are many (forked nodes): each takes a pid


def parts(spec: NovaSpec, p: NovaPoint, st: NovaStack) -> dict[int, list[Part]]:
    """Each site's parts for point ``p`` on the stack ``st`` (``study._stack``)."""
    out: dict[int, list[Part]] = {k: [] for k in range(1, spec.sites + 1)}
    home, nova, comp = spec.controllers_site, st.nova, st.computes
    for k, here in out.items():
        if p.db == "galera":
            here.append(Part("galera node", MB["galera"]))
        elif k == home:
            here.append(Part("database (mariadb)", MB["mariadb"]))
        if st.haproxy and k == (st.haproxy_site or nova.control_site):
            here.append(Part("haproxy", MB["haproxy"]))
        mq = sum(1 for s in st.bus_sites if s == k)
        if mq:
            here.append(Part("rabbitmq" + (f" x {mq}" if mq > 1 else ""), mq * MB["rabbitmq"]))
        if k in (st.keystone_sites or (st.keystone_site,)):
            here.append(Part("keystone", MB["keystone"]))
        if k == st.placement_site:
            here.append(Part("placement",
                             MB["placement_master"] + st.placement_workers * MB["placement_worker"]))
        if k == st.fakes_site:
            glance = st.image_service == "glance"
            net, net_mb = {"ovn": ("neutron-api, ovn-central", MB["neutron"] + MB["ovn"]),
                           "ovs": ("neutron-api, neutron-rpc-server", MB["neutron"] + MB["neutron_rpc"]),
                           }.get(st.network_service, ("fake-neutron", MB["fakes"]))
            here.append(Part(", ".join(["glance-api" if glance else "fake-glance", net]),
                             (MB["glance"] if glance else MB["fakes"]) + net_mb))
        if k == nova.api:
            here.append(Part("nova-api", MB["api_master"] + nova.api_workers * MB["api_worker"]))
        if k == nova.conductor:
            here.append(Part("nova-conductor", (1 + nova.conductor_workers) * MB["conductor_process"]))
        scheds = sum(1 for s in nova.scheduler_placement if s == k)
        if scheds:
            here.append(Part(f"{scheds} nova-scheduler",
                             scheds * (1 + nova.scheduler_workers) * MB["scheduler_process"]))
        procs = sum(1 for s in comp.sites if s == k)
        if procs:
            npp = spec.computes.nodes_per_process
            per_node = MB["node_forked"] if comp.forked else MB["node_shared"]
            here.append(Part(f"{procs} nova-compute x {npp} nodes"
                             + (" (forked: one nova-compute per node)" if comp.forked else ""),
                             procs * (MB["compute_process"] + npp * per_node),
                             procs * npp * THREADS_FORKED_NODE if comp.forked else 0))
        if k == spec.driver_site:
            here.append(Part("load driver", MB["driver"]))
    return out


def total_mb(site_parts: Sequence[Part]) -> float:
    return sum(x.mb for x in site_parts)


def mem_available_mb(text: str) -> float | None:
    """``MemAvailable`` of a ``/proc/meminfo`` text, in MB (None when absent)."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return float(line.split()[1]) / 1024.0
    return None


def shortfall(need_mb: float, available_mb: float) -> bool:
    return need_mb > HEADROOM * available_mb


def _cat(place: Place, path: str) -> str:
    """A /proc file at ``place`` ("" when it cannot be read): read by ``cat`` there, since a
    host's agent reads files under the lab's directory only."""
    res = place.run(["cat", path], timeout=30)
    return res.out if res.ok else ""


def check(lab: Lab, plans: Sequence[dict[int, list[Part]]]) -> list[str]:
    """The largest of ``plans`` (``parts`` of each deployment), per machine (sites that share one
    add up), against each machine's MemAvailable: lines to print; ``UserError`` naming the
    machine and the numbers when one is short."""
    if not plans:
        return []
    plan = max(plans, key=lambda pl: sum(total_mb(v) for v in pl.values()))
    by_machine: dict[str, list[int]] = {}
    for k in plan:
        by_machine.setdefault(lab.place(k).machine, []).append(k)
    lines = []
    for sites in by_machine.values():
        need = sum(total_mb(plan[k]) for k in sites)
        place = lab.place(sites[0])
        avail = mem_available_mb(_cat(place, "/proc/meminfo"))
        where = place.label if len(sites) == 1 else f"sites {', '.join(map(str, sites))} ({place.label})"
        if avail is None:
            lines.append(f"memory plan: {where} needs ~{need / 1024:.1f} GB (its MemAvailable unknown)")
            continue
        big = max((x for k in sites for x in plan[k]), key=lambda x: x.mb)
        if shortfall(need, avail):
            raise UserError(
                f"computes: {where} would need ~{need / 1024:.1f} GB but has {avail / 1024:.1f} GB "
                f"available (the plan keeps {1 - HEADROOM:.0%} free; the largest part: {big.label}, "
                f"~{big.mb / 1024:.1f} GB): fewer nodes per host, more hosts, or "
                "computes.isolation: shared")
        lines.append(f"memory plan: {where} ~{need / 1024:.1f} GB of {avail / 1024:.1f} GB available "
                     f"(largest: {big.label}, ~{big.mb / 1024:.1f} GB)")
        threads = sum(x.threads for k in sites for x in plan[k])
        for knob, fix in (("pid_max", "4194304"), ("threads-max", "4194304")):
            raw = _cat(place, f"/proc/sys/kernel/{knob}") if threads else ""
            limit = int(raw.strip()) if raw.strip().isdigit() else 0
            if threads and limit and threads > HEADROOM * limit:
                raise UserError(f"computes: {where} would run ~{threads:,} threads of forked nodes but "
                                f"its kernel.{knob} is {limit:,}: raise it there (sysctl -w "
                                f"kernel.{knob}={fix}), fewer nodes per host, or computes.isolation: shared")
    return lines
