"""Runs that differ only in how the simulated nodes are laid out (20 processes x 1 node; 1 x 20
forked; 1 x 20 shared) are three configurations: three rows of the per-configuration table,
never one row of 3 runs (issue 38); runs that differ only where nothing records it are named."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from juice.studies.nova import metrics, report

LAYOUTS = ((20, 1, "shared"), (1, 20, "fork"), (1, 20, "shared"))


def boots(mean: float, n: int = 60) -> list[dict[str, Any]]:
    return [{"driver": 1, "index": i, "id": f"vm{i}", "name": f"s{i}", "status": "ACTIVE", "ok": True,
             "rally_boot_s": mean + 1 + 0.01 * i, "api_s": 0.2, "nova_boot_s": mean + 0.01 * i,
             "schedule_to_build_s": mean / 2, "polls": 3, "host": "c1", "fault": None, "error_class": None,
             "error_type": None, "t_post": 1000.0 + i, "request_id": f"req-{i}"} for i in range(n)]


def write_run(root: Path, name: str, procs: int, npp: int, iso: str, mean: float, *, rep: int = 0,
              key: str = "", spec: dict[str, Any] | None = None) -> None:
    """A nova run as the study stores it (manifest, summary, boots), laid out ``procs`` x ``npp``."""
    params = {"study": "layout", "workload": "nova", "scenario": "NovaServers.boot_server", "sites": 2,
              "delay_ms": 0.0, "db": "mariadb", "schedulers": 1, "host_subset_size": 1,
              "concurrency_backend": "threading", "max_pool_size": 10, "preload": 0, "concurrency": 60,
              "times": 60, "repetition": rep, "seed": 1 + rep, "nodes": procs * npp,
              "compute_processes": procs, **({"compute_isolation": "fork"} if iso == "fork" else {})}
    computes = {"processes": procs, "nodes_per_process": npp, "nodes": procs * npp, "isolation": iso,
                "max_concurrent_builds": 10, "timings": {"registered_s": 30.0 + mean}}
    man = {"workload": "nova", "run_key": key or name, "juice": "0.2.0", "params": params,
           "running_vms": 0, "spec": spec or {"name": "layout"},
           "deployment": {"db": "mariadb", "computes": computes, "timings": {"up_s": mean}}}
    d = root / name
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps(man))
    rows = boots(mean)
    (d / "summary.json").write_text(json.dumps(metrics.summarize(rows, window_s=60.0)))
    pd.DataFrame(rows).to_parquet(d / "boots.parquet")


def test_runs_differing_only_in_the_compute_layout_are_three_rows(tmp_path: Path) -> None:
    for i, (procs, npp, iso) in enumerate(LAYOUTS):
        write_run(tmp_path, f"boot_server-c60-r0-layout{i}", procs, npp, iso, mean=5.0 + i)
    t = report.table([tmp_path], [])
    assert t is not None
    assert len(t) == 3 and list(t["runs"]) == [1, 1, 1] and list(t["boots"]) == [60, 60, 60]
    # the layout is in the table, each row its own medians
    layout = {(r.compute_isolation, int(r.nodes_per_process)): r.nova_median for r in t.itertuples()}
    assert set(layout) == {("shared", 1), ("fork", 20), ("shared", 20)}
    assert layout[("shared", 1)] < layout[("fork", 20)] < layout[("shared", 20)]
    html = "".join(report.sections([tmp_path]))
    section = html[html.index("Per configuration and concurrency"):]
    table = re.search(r'<table class="data">.*?</table>', section, flags=re.S)
    assert table is not None and table.group(0).count("<tr>") == 4  # heading + 3 configurations
    assert "<th>compute_isolation</th><th>nodes_per_process</th>" in table.group(0)
    assert "Also part of the configuration here" in section and "<code>compute_isolation</code>" in section
    # the findings do not pool the layouts either: one set per layout, each named
    start = html.index("<h3>Findings</h3>")
    findings = html[start:html.index("</section>", start)]
    for name in ("compute_isolation=fork, nodes_per_process=20",
                 "compute_isolation=shared, nodes_per_process=1",
                 "compute_isolation=shared, nodes_per_process=20"):
        assert f"<li>{name}: No boot failed" in findings


def test_repetitions_of_one_layout_stay_one_row(tmp_path: Path) -> None:
    for rep in range(2):
        write_run(tmp_path, f"boot_server-c60-r{rep}", 1, 20, "fork", mean=5.0 + rep, rep=rep)
    t = report.table([tmp_path], [])
    assert t is not None and len(t) == 1 and int(t["runs"].iloc[0]) == 2
    df = report.load([tmp_path])
    assert df.attrs["config_extra"] == [] and df.attrs["config_notes"] == []


def test_runs_that_differ_only_in_their_spec_are_flagged(tmp_path: Path) -> None:
    spec = {"name": "a", "computes": {"spawn_time": {"fixed_s": 1}}}
    write_run(tmp_path, "boot_server-c60-a", 1, 20, "fork", 5.0, key="k1", spec=spec)
    write_run(tmp_path, "boot_server-c60-b", 1, 20, "fork", 6.0, key="k2",
              spec={**spec, "name": "b", "computes": {"spawn_time": {"fixed_s": 9}}})
    t = report.table([tmp_path], [])
    assert t is not None and len(t) == 1  # nothing recorded tells them apart
    assert "computes.spawn_time.fixed_s (1 / 9)" in t.attrs["note"]
    html = "".join(report.sections([tmp_path]))
    section = html[html.index("Per configuration and concurrency"):]
    assert "Pooled though they may differ:" in section
    assert "boot_server-c60-a, boot_server-c60-b share every recorded field" in section
