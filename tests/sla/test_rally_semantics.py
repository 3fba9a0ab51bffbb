"""Juice's SLA criteria against REAL Rally: Rally's own plugins (``rally.task.sla.SLAChecker``
in the Rally venv) judge the same iterations of real Rally files, and the verdicts and the
detail strings must be the same."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from juice.paths import cache_dir
from juice.results.samples import rally_units
from juice.sla import rally
from juice.sla.criteria import Sla
from juice.sla.judge import judge

DATA = Path(__file__).parents[1] / "results" / "data"
RALLY_PY = cache_dir() / "rally" / "bin" / "python"
FILES = ["keystone-auth-rally-openstack-4.1.0.json", "keystone-cuup-rally-openstack-4.1.0.json",
         "seed-table1-rally-5.1.1.json", "seed-table1-legacy.json"]


def _configs(durations: list[float]) -> list[dict[str, object]]:
    """Criteria placed around the data so that some pass and some fail."""
    s = sorted(durations)
    mid = s[len(s) // 2]
    return [
        {"failure_rate": {"max": 0}, "max_seconds_per_iteration": s[-1] * 1.01,
         "max_avg_duration": mid * 2, "outliers": {"max": 0, "min_iterations": 3, "sigmas": 1.0},
         "performance_degradation": {"max_degradation": 10.0}},
        {"failure_rate": {"min": 5, "max": 20}, "max_seconds_per_iteration": mid,
         "max_avg_duration": mid * 0.5, "outliers": {"max": 3, "sigmas": 2.0},
         "performance_degradation": {"max_degradation": 1e6}},
    ]


RALLY_SNIPPET = """
import json, sys
from rally.plugins.task.sla import failure_rate, iteration_time, max_average_duration
from rally.plugins.task.sla import max_average_duration_per_atomic, outliers, performance_degradation
from rally.task import sla
jobs = json.load(sys.stdin)
out = []
for config, data in jobs:
    checker = sla.SLAChecker({"sla": config})
    for it in data:
        checker.add_iteration(it)
    out.append(checker.results())
print(json.dumps(out))
"""


@pytest.mark.skipif(not RALLY_PY.exists(), reason="Rally venv missing: run scripts/setup.sh")
def test_verdicts_and_details_equal_rallys_own_plugins() -> None:
    jobs, ours = [], []
    for name in FILES:
        for unit in rally_units(DATA / name):
            assert unit.iterations
            durs = [float(d["duration"]) for d in unit.iterations]
            atom = next(n for n in unit.samples if n.startswith("atomic:"))[7:]
            for config in _configs(durs):
                avg = float(unit.samples["atomic:" + atom].mean())
                config = {**config, "max_avg_duration_per_atomic": {atom: avg, "never.ran": 0.5}}
                data = [{**d, "atomic_actions": d["atomic_actions"] if isinstance(d["atomic_actions"], list)
                         else [{"name": k, "started_at": 0.0, "finished_at": v, "children": []}
                               for k, v in d["atomic_actions"].items()]} for d in unit.iterations]
                jobs.append([config, data])
                ours.append(judge(unit, Sla.model_validate(config)).rally())
    cp = subprocess.run([str(RALLY_PY), "-c", RALLY_SNIPPET], input=json.dumps(jobs), capture_output=True,
                        text=True, timeout=300, check=True)
    theirs = json.loads(cp.stdout)
    assert len(theirs) == len(ours) == 2 * 4
    def by_name(res: list[list[dict[str, object]]]) -> list[list[dict[str, object]]]:
        return [sorted(r, key=lambda x: str(x["criterion"])) for r in res]

    assert by_name(ours) == by_name(theirs)
    verdicts = {r["success"] for res in ours for r in res}
    assert verdicts == {True, False}  # the configs exercise both outcomes


def test_rally_default_values_and_zero_iterations() -> None:
    (c,) = rally.checker({"failure_rate": {"max": 10}})
    assert c.result() == {"criterion": "failure_rate", "success": True,
                          "detail": "Failure rate criteria 0.00% <= 0.00% <= 10.00% - Passed"}
    res = rally.results({"performance_degradation": {"max_degradation": 50}},
                        [{"duration": 1.0, "error": []}, {"duration": 2.0, "error": []},
                         {"duration": 9.0, "error": ["X"]}])
    assert res == [{"criterion": "performance_degradation", "success": False,
                    "detail": "Current degradation: 100.0% - Failed"}]
