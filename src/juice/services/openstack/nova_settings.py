"""What nova, its computes and placement run with that differs from their shipped defaults
(nova 34, placement 16, oslo.db, oslo.messaging, gunicorn), and the database connections a
nova deployment may open (the sum of its pools).

    nova_deviations(NovaOptions(schedulers=3))          # [Deviation(...), ...]
    compute_deviations(ComputeOptions(Computes(sites=[2, 3])))
    needed = db_connections(NovaOptions(), placement_workers=2, keystone=KeystoneOptions())

A value equal to ``NovaOptions``'s / ``ComputeOptions``'s default is Juice's choice (source
``juice``, with its reason); any other value was asked for by the caller, i.e. the spec.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from juice.services.deviations import JUICE, SPEC, Deviation, dev, spec_set
from juice.services.openstack.nova_conf import DRIVER, QUOTAS, ComputeOptions, NovaOptions

OSLO_DB_POOL = 5         # oslo.db [database] max_pool_size
OSLO_DB_OVERFLOW = 50    # oslo.db [database] max_overflow
PLACEMENT_POOL = 5       # placement's [placement_database] options are unset: SQLAlchemy's pool_size
PLACEMENT_OVERFLOW = 10  # ... and max_overflow
# [DEFAULT] options (oslo.messaging's, and nova's service_down_time) with their shipped defaults
DEFAULTS_SECTION: dict[str, int | bool] = {
    "rpc_response_timeout": 60, "rpc_conn_pool_size": 30, "executor_thread_pool_size": 64,
    "service_down_time": 60, "vif_plugging_timeout": 300, "vif_plugging_is_fatal": True}
GUNICORN = (("--timeout", "300", "30",
             "a boot's API calls can outlast 30 s under load: gunicorn would kill the worker mid-request"),
            ("--graceful-timeout", "10", "30", "a lab's stop does not wait 30 s per server"))
NCPU = "the number of CPUs"
WORKERS_REASON = ("one machine may carry every site: a worker per CPU in each process would "
                  "oversubscribe it (the spec sets the count)")
ADMIN_HEADROOM = 10  # connections for nova-manage, the probes and an operator


def _default(cls: Any, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            return f.default
    raise KeyError(name)


def nova_deviations(o: NovaOptions) -> list[Deviation]:
    """nova's control plane (api, conductor, scheduler)."""
    out = [dev("nova-api gunicorn", k, v, d, why) for k, v, d, why in GUNICORN]
    if o.api_workers != 1:
        out.append(spec_set("nova-api gunicorn", "--workers", o.api_workers, 1))
    for role, name, opt in (("nova-conductor", "conductor_workers", "[conductor] workers"),
                            ("nova-scheduler", "scheduler_workers", "[scheduler] workers")):
        v = getattr(o, name)
        if v == _default(NovaOptions, name):
            out.append(dev(role, opt, v, NCPU, WORKERS_REASON, JUICE))
        else:
            out.append(spec_set(role, opt, v, NCPU))
    for name, default in (("max_pool_size", OSLO_DB_POOL), ("max_overflow", OSLO_DB_OVERFLOW)):
        v = getattr(o, name)
        if v is not None and v != default:
            out.append(spec_set("nova", f"[database] [api_database] {name}", v, default))
    for name, default in DEFAULTS_SECTION.items():
        v = getattr(o, name)
        if v is not None and v != default:
            out.append(spec_set("nova", f"[DEFAULT] {name}", v, default))
    if o.host_subset_size != 1:
        out.append(spec_set("nova-scheduler", "[filter_scheduler] host_subset_size", o.host_subset_size, 1))
    if o.max_attempts != 3:
        out.append(spec_set("nova", "[scheduler] max_attempts", o.max_attempts, 3))
    for role in ("conductor", "scheduler"):
        if o.level(role) == "DEBUG":
            out.append(dev(f"nova-{role}", "[DEFAULT] debug", True, False,
                           "request ids are logged at DEBUG only (request tracing, seed 004)"))
    out.append(dev("nova", "[quota] " + ", ".join(QUOTAS[:3]) + ", ...", -1, "10, 20, 51200, ...",
                   "the workload boots up to thousands of servers in a few projects"))
    if o.notifications_log:
        out.append(dev("nova", "[oslo_messaging_notifications] driver", "log", "(none)",
                       "a boot's end is read from nova's instance.create.end notification", SPEC))
    out.append(dev("nova", "[notifications] notification_format", "versioned", "unversioned",
                   "the versioned instance.create.end payload (request tracing)"))
    out.append(dev("nova", "[vnc] enabled", False, True, "simulated hosts have no consoles"))
    if o.profiler:
        out.append(dev("nova", "[profiler] enabled", True, False,
                       "OSProfiler traces the same boots as the logs (issue 26's comparison)", SPEC))
        out.append(dev("nova", "[profiler] connection_string", f"{o.profiler}://<control site>:6379",
                       "messaging://", "the traces go to a Redis in the control site, read back "
                       "after each run", SPEC))
    out.append(dev("nova", "[service_user] send_service_user_token", True, False,
                   "required by nova's install guide since 2023.1 (OSSA-2023-003); neutron's default "
                   "policy refuses a user's delete of a compute port without the service token", JUICE))
    return out


def compute_deviations(c: ComputeOptions) -> list[Deviation]:
    """The simulated compute hosts (nova-compute with Juice's fake driver)."""
    out = [
        dev("nova-compute", "compute_driver", DRIVER, "(none: libvirt in deployments)",
            "simulated compute hosts, many nodes per process (not what is measured)"),
        dev("nova-compute", "reserved_host_memory_mb", 0, 512,
            "simulated nodes are exact: a node holds exactly its flavors"),
        dev("nova-compute", "cpu_allocation_ratio", 1.0, "4.0 (initial_cpu_allocation_ratio)",
            "simulated nodes are exact: a node holds exactly its flavors"),
        dev("nova-compute", "ram_allocation_ratio", 1.0, "1.5 (initial_ram_allocation_ratio)",
            "simulated nodes are exact: a node holds exactly its flavors"),
    ]
    if c.max_concurrent_builds != 10:
        out.append(spec_set("nova-compute", "max_concurrent_builds", c.max_concurrent_builds, 10))
    return out


def placement_deviations(workers: int, max_pool_size: int | None,
                         max_overflow: int | None) -> list[Deviation]:
    """placement under gunicorn."""
    out = [dev("placement gunicorn", k, v, d, why) for k, v, d, why in GUNICORN]
    if workers != 1:
        out.append(dev("placement gunicorn", "--workers", workers, 1,
                       "every scheduler and every compute's periodic report call placement", JUICE))
    for name, v, default in (("max_pool_size", max_pool_size, PLACEMENT_POOL),
                             ("max_overflow", max_overflow, PLACEMENT_OVERFLOW)):
        if v is not None and v != default:
            out.append(spec_set("placement", f"[placement_database] {name}", v, default))
    return out


def pool_of(max_pool_size: int | None, max_overflow: int | None, pool_default: int = OSLO_DB_POOL,
            overflow_default: int = OSLO_DB_OVERFLOW) -> int:
    """Connections one engine may hold: pool + overflow (the defaults when unset)."""
    pool = pool_default if max_pool_size is None else max_pool_size
    over = overflow_default if max_overflow is None else max_overflow
    return pool + max(over, 0)


def db_connections(o: NovaOptions, *, placement_workers: int, keystone: int,
                   glance: int = 0, neutron: int = 0) -> tuple[int, str]:
    """The most connections a nova deployment's database may be asked for: every process's
    pools (nova's api, conductor and scheduler processes have an engine per database, api
    and cell1, each with its own pool), placement's workers, ``keystone``'s and ``glance``'s
    (their own sums; glance 0: the stand-in, no database; ``neutron`` likewise), plus headroom
    for nova-manage and the probes. Returns (count, how it was counted)."""
    per = pool_of(o.max_pool_size, o.max_overflow)
    procs = o.api_workers + o.conductor_workers + len(o.scheduler_placement) * o.scheduler_workers
    nova = procs * 2 * per
    per_placement = PLACEMENT_POOL + PLACEMENT_OVERFLOW
    placement = placement_workers * per_placement
    total = nova + placement + keystone + glance + neutron + ADMIN_HEADROOM
    how = (f"the deployment's pools: nova {procs} processes x 2 databases x {per} "
           f"(max_pool_size + max_overflow) = {nova}, placement {placement_workers} x "
           f"{per_placement}, Keystone {keystone}, " + (f"glance {glance}, " if glance else "")
           + (f"neutron {neutron}, " if neutron else "")
           + f"{ADMIN_HEADROOM} for nova-manage and probes")
    return total, how
