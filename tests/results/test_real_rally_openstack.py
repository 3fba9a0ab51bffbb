"""`juice analyze` on Rally JSON produced by real rally-openstack runs against a real
Keystone gives the same per-operation means as Rally's own report (its statistics table,
which Rally rounds to 3 decimals)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from juice.analysis import describe
from juice.results import tidy

DATA = Path(__file__).parent / "data"
FILES = sorted(DATA.glob("keystone-*-rally-openstack-4.1.0.json"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_means_match_rallys_own_report(path: Path) -> None:
    workload = json.loads(path.read_text())["tasks"][0]["subtasks"][0]["workloads"][0]
    atomics = workload["statistics"]["durations"]["atomics"]
    table = describe(tidy.load([path])).reset_index()
    ours = {str(r["operation"]): r for _, r in table.iterrows()}
    assert len(atomics) >= 2
    for a in atomics:
        row = ours[a["name"]]
        assert int(row["count"]) == a["data"]["iteration_count"] == workload["total_iteration_count"]
        for mine, theirs in ((row["mean"], a["data"]["avg"]), (row["min"], a["data"]["min"]),
                             (row["max"], a["data"]["max"]), (row["p50"], a["data"]["median"])):
            assert abs(float(mine) - theirs) <= 0.0005 + 1e-9, (a["name"], mine, theirs)
