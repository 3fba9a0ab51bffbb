"""Whether a run is in a regime where packing simulated nodes into nova-compute processes
distorts per-phase times (issue 29).

With ``computes.isolation: shared``, the N nodes of one nova-compute process share what a real
hypervisor has to itself: one RPC topic and executor (``executor_thread_pool_size`` threads),
one build pool (``max_concurrent_builds`` slots), one claim lock and one heartbeat. While the
boots in flight per process stay within its build slots and RPC executor threads, a boot
waits where it would on a real node; beyond them, the wait moves into the process's shared
queues (measured: rpc_compute 0.27 s with 20 processes x 1 node against 4.94 s with 1 process x
20 nodes, at 60 concurrent boots; benchmarks/nova.md). A run is flagged ``distorted`` when it
has more than one node per process AND more boots in flight per process (concurrency /
processes, the scheduler spreading them) than the smaller of the two limits. With
``isolation: fork`` or one node per process, each node is its own nova-compute: never flagged.

    cols = columns(manifest)          # the report frame's columns of one run
    verdict(row)                      # (distorted, one sentence)
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from juice.report.findings import Finding

BUILD_SLOTS = 10        # nova's max_concurrent_builds default (and the spec's)
EXECUTOR_THREADS = 64   # oslo.messaging's executor_thread_pool_size default


def columns(man: dict[str, Any]) -> dict[str, Any]:
    """The compute layout of a run from its manifest (older runs: what they ran, by default:
    shared isolation, 10 build slots, 64 executor threads)."""
    params = man.get("params") or {}
    comp = ((man.get("deployment") or {}).get("computes") or {})
    spec_comp = ((man.get("spec") or {}).get("computes") or {})
    server = ((man.get("spec") or {}).get("server") or {})
    procs = comp.get("processes", params.get("compute_processes"))
    npp = comp.get("nodes_per_process", spec_comp.get("nodes_per_process"))
    if npp is None and procs and params.get("nodes"):
        npp = int(params["nodes"]) // max(1, int(procs))
    mem = comp.get("memory") or {}
    return {"compute_isolation": comp.get("isolation", params.get("compute_isolation", "shared")),
            "nodes_per_process": npp, "compute_processes": procs,
            "max_concurrent_builds": comp.get("max_concurrent_builds",
                                              spec_comp.get("max_concurrent_builds", BUILD_SLOTS)),
            "executor_threads": server.get("executor_thread_pool_size", EXECUTOR_THREADS),
            "mb_per_node": mem.get("mb_per_node"), "added_mb_per_node": mem.get("added_mb_per_node")}


def verdict(row: pd.Series | dict[str, Any]) -> tuple[bool | None, str]:  # type: ignore[type-arg]
    """(distorted, the sentence) for one run's row; None when the layout is unknown (a target
    cloud, an open-loop run: its in-flight count is not set ahead)."""
    r = dict(row)
    iso = r.get("compute_isolation") or "shared"
    npp, procs = r.get("nodes_per_process"), r.get("compute_processes")
    conc, rate = r.get("concurrency"), r.get("rate")
    if not npp or not procs or pd.isna(npp) or pd.isna(procs):
        return None, "no simulated computes (an existing cloud): no packing to judge"
    npp, procs = int(npp), int(procs)
    if iso == "fork" or npp == 1:
        how = "forked, one nova-compute per node" if iso == "fork" else "one node per nova-compute"
        return False, f"not distorted by packing: {how}"
    if (rate is not None and not pd.isna(rate)) or conc is None or pd.isna(conc):
        return None, f"{npp} nodes per process, open loop: in-flight boots per process not known ahead"
    slots, threads = int(r.get("max_concurrent_builds") or BUILD_SLOTS), int(r.get("executor_threads")
                                                                              or EXECUTOR_THREADS)
    per_proc = float(conc) / procs
    limit, what = min((slots, "build slots (max_concurrent_builds)"),
                      (threads, "RPC executor threads (executor_thread_pool_size)"))
    if per_proc > limit:
        return True, (f"DISTORTED: ~{per_proc:.0f} boots in flight per nova-compute process ({conc:g} over "
                      f"{procs}) exceed its {limit} {what}, shared by its {npp} nodes: waits move into the "
                      "process's RPC queue and build pool (rpc_compute, claim, spawn phases); a real node "
                      "has its own (computes.isolation: fork)")
    return False, (f"within limits: ~{per_proc:.0f} boots in flight per process ({npp} nodes each) within "
                   f"its {slots} build slots and {threads} RPC executor threads (the nodes still share one "
                   "claim lock and heartbeat)")


def table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its layout and the verdict."""
    rows = []
    for _, r in df.iterrows():
        bad, why = verdict(r)
        rows.append({"run": r.get("run"), "concurrency": r.get("concurrency"),
                     "layout": f"{r.get('compute_processes')} x {r.get('nodes_per_process')} "
                               f"({r.get('compute_isolation') or 'shared'})",
                     "MB per node (PSS)": r.get("mb_per_node"),
                     "added MB per node (fork)": r.get("added_mb_per_node"),
                     "distorted": {True: "yes", False: "no", None: "-"}[bad], "why": why})
    return pd.DataFrame(rows)


def findings(df: pd.DataFrame) -> list[Finding]:
    """One sentence over the runs: how many are in a distorting regime, and the first one's why."""
    if df.empty:
        return []
    verdicts = [verdict(r) for _, r in df.iterrows()]
    bad = [why for d, why in verdicts if d]
    judged = [v for v in verdicts if v[0] is not None]
    if not judged:
        return []
    if not bad:
        return [Finding(f"No run is in a regime where packing simulated nodes into processes distorts a "
                        f"phase ({len(judged)} runs judged: {judged[0][1]})")]
    return [Finding(f"{len(bad)} of {len(judged)} runs are in a regime where packing simulated nodes into "
                    f"processes distorts per-phase times; e.g. {bad[0]}")]
