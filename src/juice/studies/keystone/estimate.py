"""A rough duration estimate for ``juice plan``: good to a factor of ~2, stated as such.

Model (seconds), calibrated on this project's 2-core host (benchmarks/keystone.md):
a deployment costs its bring-up (database, then Keystone in every site); a WAN point costs the
ping check; a run costs its drivers' start and Rally-like context (~3 s) plus its window.
An iteration sends ``requests`` HTTP requests (Rally's client set-up included), each ~12 ms,
plus per Galera commit 1.5 RTT; a driver outside site 1 in front of a CENTRAL database pays
~7 WAN round trips per request with Keystone's cache on (~60 with it off: measured 10.9 s per
authenticate iteration at 100 ms RTT). The window is the larger of the latency-bound time
(``times / concurrency`` iterations in a row, the slowest driver) and the CPU-bound time (all
drivers' requests at ~10 ms of Keystone CPU each, shared by the host's cores).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from juice.studies.keystone.matrix import RunPoint

# (HTTP requests, database commits) per iteration (rally-openstack 4.1.0 request sequence).
SCENARIO_COST = {
    "authenticate_user_and_validate_token": (15, 0),
    "create_add_and_list_user_roles": (14, 3),
    "create_and_list_tenants": (14, 1),
    "get_entities": (23, 4),
    "create_user_update_password": (15, 6),
    "create_user_set_enabled_and_delete": (16, 5),
    "create_and_list_users": (15, 3),
}
REQUEST_S = 0.012
REQUEST_CPU_S = 0.010
CENTRAL_RTTS_PER_REQUEST = {True: 7.0, False: 60.0}  # by Keystone cache on/off
RUN_OVERHEAD_S = 3.0
CENTRAL = ("mariadb", "postgres", "postgres-readlocal")


def rtt_s(p: RunPoint) -> float:
    if p.wan.delay_ms is not None:
        return 2 * p.wan.delay_ms / 1000
    if p.wan.zones is not None:
        return 2 * p.wan.zones[2] / 1000
    if p.wan.matrix is not None:
        return 2 * max(max(r) for r in p.wan.matrix) / 1000
    return 0.0


def _cost(p: RunPoint) -> tuple[int, int]:
    return SCENARIO_COST.get(p.scenario.split(".")[-1], (15, 2))


def iteration_s(p: RunPoint) -> float:
    """Latency of one iteration for the slowest driver of ``p``."""
    requests, commits = _cost(p)
    rtt = rtt_s(p)
    t = requests * REQUEST_S
    if p.rdbms == "galera":
        t += commits * 1.5 * rtt
    elif p.rdbms in CENTRAL and p.load == "high" and p.sites > 1:
        t += requests * CENTRAL_RTTS_PER_REQUEST[p.cache] * rtt
    return t


def run_s(p: RunPoint) -> float:
    r = p.runner
    times, rate = float(r.times) + float(r.warmup or 0), r.rate
    drivers = p.sites if p.load == "high" else 1
    latency_bound = times / float(rate) if rate else times / float(r.concurrency) * iteration_s(p)
    if p.max_rps:  # an existing cloud: every request through the rate cap (the RTT is unknown here)
        latency_bound = max(latency_bound, drivers * times * _cost(p)[0] / p.max_rps)
    cpu_bound = drivers * times * _cost(p)[0] * REQUEST_CPU_S / float(os.cpu_count() or 1)
    return RUN_OVERHEAD_S + float(r.warmup_s or 0.0) + max(latency_bound, cpu_bound)


def deployment_s(sites: int, rdbms: str, first_rtt_s: float) -> float:
    db = {"mariadb": 5.0, "postgres": 6.0, "postgres-readlocal": 6.0 + 2.0 * sites,
          "galera": 5.0 + 2.0 * sites + 10 * first_rtt_s, "cockroach": 10.0 + 2.0 * sites}.get(rdbms, 10.0)
    keystone = 8.0 + 1.5 * sites
    return db + keystone


def total_s(points: Sequence[RunPoint]) -> float:
    """Estimated seconds to run ``points`` (e.g. the runs not done yet)."""
    total = 0.0
    labs: set[int] = set()
    deployments: set[tuple[object, ...]] = set()
    last_wan: tuple[tuple[object, ...], str] | None = None  # a WAN change per change (run order)
    for p in points:
        if p.target is not None:  # no lab, no deployment: a token and the RTT probes
            total += 2.0 if not deployments else 0.0
            deployments.add(p.deployment)
            total += run_s(p)
            continue
        if p.sites not in labs:
            labs.add(p.sites)
            total += 1.0 + 0.05 * p.sites
        if p.deployment not in deployments:
            deployments.add(p.deployment)
            total += deployment_s(p.sites, p.rdbms, rtt_s(p))
        if (p.deployment, p.wan.label) != last_wan:
            last_wan = (p.deployment, p.wan.label)
            total += 2.0 + 0.02 * p.sites * p.sites
        total += run_s(p)
    return total
