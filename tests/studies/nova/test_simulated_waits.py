"""Simulated waits with real nova (issue 28): a constant 2 s spawn time held in nova-compute's
single build slot, recorded in the manifest and stated as simulated in the report."""

from __future__ import annotations

import json
import re
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import pandas as pd

from tests.conftest import Juice
from tests.services.conftest import needs_lab
from tests.stacks import nova_spec

pytestmark = needs_lab

SPAWNED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) "
                     r".*Took ([\d.]+) seconds to spawn the instance", re.M)


def test_a_constant_spawn_time_fills_the_build_slot_and_is_recorded(tmp_path: Path, juice: Juice) -> None:
    spec = nova_spec(tmp_path, "sw", scenarios=["boot_server"], runner={"times": 3, "concurrency": [3]},
                     computes={"processes": 1, "nodes_per_process": 2, "max_concurrent_builds": 1,
                               "spawn_time": {"dist": "constant", "value_s": 2}})
    code, _, err = juice("run", str(spec))
    assert code == 0, err
    runs = [d for d in (tmp_path / "results" / "sw").iterdir() if d.is_dir() and not d.name.startswith(".")]
    assert len(runs) == 1
    run = runs[0]
    man = json.loads((run / "manifest.json").read_text())
    spawn = man["simulation"]["stages"]["spawn"]
    assert spawn["wait_s"] == {"dist": "constant", "value_s": 2, "seed": 1} and spawn["failure"] == 0.0
    boots = pd.read_parquet(run / "boots.parquet")
    assert len(boots) == 3 and boots["ok"].all()
    assert (boots["nova_boot_s"] >= 2.0).all()  # nova's own boot time holds the simulated spawn
    # nova-compute's own record: every spawn took >= 2 s, and with one build slot the spawns
    # never overlapped (each ended >= 2 s after the previous one)
    log = "".join(p.read_text() for p in (run / "logs").glob("juice-c1*.log"))
    spawned = SPAWNED.findall(log)
    assert len(spawned) == 3, log[-2000:]
    assert all(float(took) >= 2.0 for _, took in spawned)
    ends = sorted(datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f") for t, _ in spawned)
    assert all((b - a).total_seconds() >= 1.99 for a, b in pairwise(ends))
    html = (tmp_path / "results" / "sw" / "report.html").read_text()
    assert "Simulated waits and failures" in html and "spawn — SIMULATED: constant (value 2 s)" in html
