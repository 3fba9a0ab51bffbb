"""Boot time vs VMs running, a point per boot (seed 002), from stored boots only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from juice.studies.nova import slope
from juice.studies.nova.report import load


def _run(root: Path, name: str, preload: int, per_1000: float, scenario: str = "NovaServers.boot_server",
         n: int = 40, method: str | None = None) -> None:
    d = root / name
    d.mkdir(parents=True)
    params = {"study": "s", "workload": "nova", "scenario": scenario, "concurrency": 1, "db": "mariadb",
              "schedulers": 1, "preload": preload, "times": n, "repetition": 0, "delay_ms": 0.0}
    man = {"workload": "nova", "params": params, "running_vms": preload,
           **({"preload_method": method} if method else {})}
    (d / "manifest.json").write_text(json.dumps(man))
    (d / "summary.json").write_text(json.dumps({"boots": n, "active": n}))
    # one boot at a time: each ACTIVE before the next POST, so boot i sees preload + i running
    boot = np.array([2.0 + per_1000 * (preload + i) / 1000 + 0.01 * ((i * 7) % 5) for i in range(n)])
    post = np.cumsum(np.r_[0.0, boot[:-1] + 0.5]) + 1000.0
    pd.DataFrame({"ok": True, "t_post": post, "nova_boot_s": boot, "request_id": [f"r{i}" for i in range(n)]}
                 ).to_parquet(d / "boots.parquet")


def test_each_boot_counts_the_vms_active_before_its_post_and_the_slope_is_found(tmp_path: Path) -> None:
    _run(tmp_path, "a", 0, 5.0)
    _run(tmp_path, "b", 1000, 5.0)
    df = load([tmp_path])
    p = slope.points(df)
    assert sorted(p[p["run"] == "a"]["running"]) == list(range(40))
    assert p[p["run"] == "b"]["running"].min() == 1000
    fig, table = slope.figure(df, ["db", "concurrency"])
    assert "<svg" in fig and len(table) == 1
    row = table.iloc[0]
    assert abs(row["slope (s per 1,000 VMs)"] - 5.0) < 0.5 and row["verdict"] == "grows"
    lo, hi = (float(x) for x in row["95 % interval"].strip("[]").split(","))
    assert lo <= row["slope (s per 1,000 VMs)"] <= hi


def test_boot_and_delete_runs_and_short_spans_give_no_slope(tmp_path: Path) -> None:
    _run(tmp_path, "d", 0, 5.0, scenario="NovaServers.boot_and_delete_server")
    _run(tmp_path, "s", 0, 5.0, n=10)  # 10 VMs: below MIN_SPAN
    df = load([tmp_path])
    assert set(slope.points(df)["run"]) == {"s"}
    fig, table = slope.figure(df, ["db"])
    assert fig == "" and table.empty


def test_the_report_says_how_the_running_vms_were_preloaded(tmp_path: Path) -> None:
    from juice.studies.nova.report import _preloaded_note

    _run(tmp_path, "a", 0, 5.0)
    _run(tmp_path, "b", 20000, 5.0, method="cloned as rows")
    note = _preloaded_note(load([tmp_path]))
    assert "up to 20,000" in note and "cloned as rows" in note
    old = tmp_path / "old"
    _run(old, "c", 500, 5.0)  # a run made before the manifest said how: no note, no error
    assert _preloaded_note(load([old])) == ""


def test_one_run_per_level_resamples_boots_within_runs_and_says_so(tmp_path: Path) -> None:
    _run(tmp_path, "a", 0, 5.0)
    _run(tmp_path, "b", 1000, 5.0)
    (tmp_path / "b" / "summary.json").write_text(json.dumps({"boots": 40, "active": 40, "failed": 3}))
    _, one = slope.figure(load([tmp_path]), ["db"])
    assert one.iloc[0]["interval over"].startswith("boots within each run (one run per level")
    assert one.iloc[0]["failed boots (not points)"] == 3
    _run(tmp_path, "a2", 0, 5.0)
    _run(tmp_path, "b2", 1000, 5.0)
    _, two = slope.figure(load([tmp_path]), ["db"])
    assert two.iloc[0]["interval over"] == "runs, then boots" and two.iloc[0]["runs"] == 4
