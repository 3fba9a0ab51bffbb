"""A real nova run with injected failures (capacity for K = 2 servers, 3 concurrent boots ⇒ one
"No valid host"), traced through `juice trace`: every boot reaches the terminal state the API
returned, the failure is classed by component and template, the tables are written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from tests.conftest import Juice
from tests.services.conftest import needs_lab

pytestmark = needs_lab


def test_a_run_with_no_valid_host_traces_to_the_apis_states(tmp_path: Path, juice: Juice) -> None:
    spec = tmp_path / "tr.yaml"
    spec.write_text(yaml.safe_dump({
        "workload": "nova", "name": "tr", "results": str(tmp_path / "results"), "sites": 2,
        "computes": {"processes": 1, "nodes_per_process": 1, "vcpus": 2},
        "flavor": {"vcpus": 1, "ram_mb": 256, "disk_gb": 1}, "scenarios": ["boot_server"],
        "runner": {"times": 3, "concurrency": [3]}, "allow_over_capacity": True, "poll_interval_s": 0.5}))
    code, _, err = juice("run", str(spec), "--no-report")
    assert code == 0, err
    code, out, err = juice("trace", str(tmp_path / "results"), "--out", str(tmp_path / "trace"))
    assert code == 0, err
    assert "boots traced" in out
    boots = pd.read_parquet(tmp_path / "trace" / "trace_boots.parquet")
    assert len(boots) == 3 and boots["matches_api"].all(), boots.to_string()
    assert sorted(boots["state"]) == ["active", "active", "no_valid_host"]
    faults = pd.read_parquet(tmp_path / "trace" / "trace_faults.parquet")
    assert faults["count"].sum() == 1 and faults["component"].tolist() == ["conductor"]
    assert faults["fault"].iloc[0].startswith("No valid host was found")
    skew = pd.read_parquet(tmp_path / "trace" / "trace_skew.parquet")
    # one host: the true offset of every site is 0, and it lies within the bounds found
    assert ((skew["lo_s"] <= 1e-9) & (skew["hi_s"] >= -1e-9)).all() and (skew["offset_s"].abs() < 0.05).all()
