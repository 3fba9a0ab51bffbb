"""Whether a run's compute layout distorts per-phase times (``juice.studies.nova.regime``),
judged from manifests as each version of Juice wrote them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from juice.studies.nova import regime


def manifest(conc: int, procs: int, npp: int, *, isolation: str | None = None, builds: int | None = None,
             threads: int | None = None, old: bool = False) -> dict[str, Any]:
    params = {"concurrency": conc, "nodes": procs * npp, "compute_processes": procs}
    if old:  # what the first nova runs stored: params only
        return {"params": params}
    comp: dict[str, Any] = {"processes": procs, "nodes_per_process": npp,
                            "max_concurrent_builds": builds or 10}
    if isolation:
        comp["isolation"] = isolation
        comp["memory"] = {"added_mb_per_node": 12.5, "mb_per_node": 40.0}
    server = {"executor_thread_pool_size": threads} if threads else {}
    return {"params": params, "deployment": {"computes": comp}, "spec": {"server": server}}


def row(man: dict[str, Any]) -> dict[str, Any]:
    return {**man["params"], **regime.columns(man)}


def test_packed_nodes_beyond_the_build_slots_are_flagged() -> None:
    bad, why = regime.verdict(row(manifest(60, 4, 25)))
    assert bad is True
    assert "~15 boots in flight per nova-compute process (60 over 4)" in why and "10 build slots" in why
    ok, why = regime.verdict(row(manifest(20, 4, 25)))
    assert ok is False and "within limits" in why
    # the smaller limit decides: 8 executor threads with 10 build slots
    bad, why = regime.verdict(row(manifest(40, 4, 25, threads=8)))
    assert bad is True and "8 RPC executor threads" in why


def test_one_service_per_node_is_never_flagged() -> None:
    for man in (manifest(200, 1, 20, isolation="fork"), manifest(200, 20, 1)):
        bad, why = regime.verdict(row(man))
        assert bad is False and "not distorted" in why
    cols = regime.columns(manifest(5, 1, 3, isolation="fork"))
    assert (cols["added_mb_per_node"], cols["mb_per_node"]) == (12.5, 40.0)


def test_older_manifests_are_judged_by_their_defaults() -> None:
    cols = regime.columns(manifest(60, 4, 25, old=True))
    assert cols == {"compute_isolation": "shared", "nodes_per_process": 25, "compute_processes": 4,
                    "max_concurrent_builds": 10, "executor_threads": 64, "mb_per_node": None,
                    "added_mb_per_node": None}
    assert regime.verdict(row(manifest(60, 4, 25, old=True)))[0] is True


def test_open_loop_and_targets_get_no_verdict_and_findings_count_runs() -> None:
    assert regime.verdict({**row(manifest(1000, 2, 10)), "rate": 2.0})[0] is None
    assert regime.verdict({"concurrency": 5, "nodes_per_process": 0, "compute_processes": 0})[0] is None
    df = pd.DataFrame([{"run": f"r{i}", **row(m)} for i, m in enumerate(
        [manifest(60, 4, 25), manifest(5, 4, 25), manifest(60, 1, 3, isolation="fork")])])
    [f] = regime.findings(df)
    assert f.text.startswith("1 of 3 runs are in a regime where packing simulated nodes")
    t = regime.table(df)
    assert list(t["distorted"]) == ["yes", "no", "no"] and t["layout"].iloc[2] == "1 x 3 (fork)"
    [none] = regime.findings(df.iloc[1:])
    assert none.text.startswith("No run is in a regime")
