"""OSProfiler on the same boots (issue 26), for real: a nova run with ``profiler: redis`` (a
Redis in the control site, ``[profiler]`` in every nova role, signed trace headers per boot),
its traces read back into the run, `juice trace` comparing them with the log-based phases, and
the run's Redis gone afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from juice.trace import flow
from juice.trace.report import trace_sections
from tests.conftest import Juice
from tests.services.conftest import needs_lab
from tests.stacks import nova_spec

pytestmark = needs_lab


def _redis_of_this_process() -> list[int]:
    """redis-server processes serving a lab of this test process (``nova<pid>`` in their --dir)."""
    lab = f"/nova{os.getpid() % 100000}/"
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"redis-server") and any(lab.encode() in a for a in argv):
            out.append(int(d.name))
    return out


def test_boots_traced_by_osprofiler_and_the_logs_agree_per_phase(tmp_path: Path, juice: Juice) -> None:
    spec = nova_spec(tmp_path, "osp", scenarios=["boot_server"], runner={"times": 3, "concurrency": [1]},
                     users={"tenants": 1, "users_per_tenant": 1}, poll_interval_s=0.5, profiler="redis",
                     computes={"processes": 1, "nodes_per_process": 3})
    code, _, err = juice("run", str(spec), "--no-report")
    assert code == 0, err
    results = tmp_path / "results" / "osp"
    (run,) = [d for d in results.iterdir() if d.is_dir() and not d.name.startswith(".")]
    boots = pd.read_parquet(run / "boots.parquet")
    assert len(boots) == 3 and boots["ok"].all() and boots["trace_id"].notna().all()
    doc = json.loads((run / "osprofiler.json").read_text())
    assert doc["backend"] == "redis" and set(doc["traces"]) == set(boots["trace_id"])
    for tid in boots["trace_id"]:  # every boot: its own trace, from nova-api to nova-compute
        services = {n["service"] for n in doc["traces"][tid]}
        assert "osapi_compute" in services, (tid, services)
    man = json.loads((run / "manifest.json").read_text())
    assert man["deployment"]["nova"]["profiler"] == "redis"
    assert any(d["option"] == "[profiler] enabled" and d["value"] == "true" for d in man["deviations"])
    assert not _redis_of_this_process()  # the run's Redis stopped with its deployment

    code, out, err = juice("trace", str(run), "--out", str(tmp_path / "trace"))
    assert code == 0, err
    assert "OSProfiler − Juice per phase" in out
    table = pd.read_parquet(tmp_path / "trace" / "trace_osprofiler.parquet")
    phases = [p for row in table["phase"] for p in row.split("+")]
    assert {"api", "scheduler", "conductor"} <= set(phases) and set(phases) <= set(flow.PHASES)
    assert (table["boots"] == 3).all()
    assert (table["diff_median_lo_s"] <= table["diff_median_hi_s"]).all()
    html = "".join(trace_sections([run]))  # the report's tracing section, from the stored run
    assert "Checked against OSProfiler on the same boots" in html and "claim" in html
