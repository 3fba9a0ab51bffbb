"""A rough duration estimate for ``juice plan``: good to a factor of ~2, stated as such.

Model (seconds): a deployment costs its bring-up (database, then Keystone in every site);
a WAN point costs the ping check; a run costs its drivers' start and Rally-like context
(~3 s) plus ``times / concurrency`` iterations (closed loop) or ``times / rate`` (open
loop). An iteration costs ~20 ms per API call on this class of host plus, for each write,
the replication round trips of the RDBMS across the WAN (Galera: 1.5 RTT per commit, the
central databases: one RTT when the driver is not in site 1).
"""

from __future__ import annotations

from collections.abc import Sequence

from juice.spec.matrix import RunPoint

# (API calls, writes) per iteration, from the scenarios' definitions (rally-openstack 4.1.0).
SCENARIO_COST = {
    "authenticate_user_and_validate_token": (2, 0),
    "create_add_and_list_user_roles": (3, 2),
    "create_and_list_tenants": (2, 1),
    "get_entities": (8, 3),
    "create_user_update_password": (2, 2),
    "create_user_set_enabled_and_delete": (3, 3),
    "create_and_list_users": (2, 1),
}
CALL_S = 0.02
RUN_OVERHEAD_S = 3.0


def rtt_s(p: RunPoint) -> float:
    if p.wan.delay_ms is not None:
        return 2 * p.wan.delay_ms / 1000
    if p.wan.zones is not None:
        return 2 * p.wan.zones[2] / 1000
    if p.wan.matrix is not None:
        return 2 * max(max(r) for r in p.wan.matrix) / 1000
    return 0.0


def iteration_s(p: RunPoint) -> float:
    calls, writes = SCENARIO_COST.get(p.scenario.split(".")[-1], (3, 1))
    rtt = rtt_s(p)
    if p.rdbms == "galera":
        per_write = 1.5 * rtt
    elif p.load == "high":  # drivers outside site 1 pay a round trip per statement batch
        per_write = rtt
    else:
        per_write = 0.0
    remote_reads = calls * rtt if p.load == "high" and p.rdbms != "galera" and not p.cache else 0.0
    return calls * CALL_S + writes * per_write + remote_reads


def run_s(p: RunPoint) -> float:
    r = p.runner
    times, rate = float(r["times"]), r.get("rate")
    window = times / float(rate) if rate else times / float(r["concurrency"]) * iteration_s(p)
    return RUN_OVERHEAD_S + window


def deployment_s(sites: int, rdbms: str, first_rtt_s: float) -> float:
    db = {"mariadb": 5.0, "postgres": 6.0, "postgres-readlocal": 6.0 + 2.0 * sites,
          "galera": 5.0 + 2.0 * sites + 10 * first_rtt_s, "cockroach": 10.0 + 2.0 * sites}.get(rdbms, 10.0)
    keystone = 8.0 + 1.5 * sites
    return db + keystone


def total_s(points: Sequence[RunPoint]) -> float:
    """Estimated seconds to run ``points`` (e.g. the runs not done yet)."""
    total = 0.0
    labs: set[int] = set()
    deployments: set[tuple[int, str, bool]] = set()
    wans: set[tuple[tuple[int, str, bool], str]] = set()
    for p in points:
        if p.sites not in labs:
            labs.add(p.sites)
            total += 1.0 + 0.05 * p.sites
        if p.deployment not in deployments:
            deployments.add(p.deployment)
            total += deployment_s(p.sites, p.rdbms, rtt_s(p))
        if (p.deployment, p.wan.label) not in wans:
            wans.add((p.deployment, p.wan.label))
            total += 2.0 + 0.02 * p.sites * p.sites
        total += run_s(p)
    return total
