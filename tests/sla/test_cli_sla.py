"""``juice sla`` on stored results (old Juice runs, real Rally files) and ``--set``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from juice.errors import UserError
from juice.spec.overrides import apply, arguments

ROOT = Path(__file__).parents[2]
OLD = ROOT / "tests" / "fixtures" / "results-0.1" / "quickstart"
RALLY_FILE = ROOT / "tests" / "results" / "data" / "keystone-auth-rally-openstack-4.1.0.json"


def juice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "juice.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)


def test_old_results_judged_against_a_criteria_file(tmp_path: Path) -> None:
    ok = tmp_path / "ok.yaml"
    ok.write_text("sla: {failure_rate: {max: 100}, max_avg_duration: 1000}\n")
    cp = juice("sla", str(OLD), "--criteria", str(ok))
    assert cp.returncode == 0, cp.stderr
    lines = [x for x in cp.stdout.splitlines() if x.startswith(("PASS", "FAIL"))]
    runs = [d for d in OLD.iterdir() if (d / "manifest.json").exists()]
    assert len(lines) == 2 * len(runs) and all(x.startswith("PASS") for x in lines)
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_avg_duration: 0.000001\n")
    cp = juice("sla", str(OLD), "--criteria", str(bad))
    assert cp.returncode == 1
    assert sum(x.startswith("FAIL") for x in cp.stdout.splitlines()) == len(runs)
    assert f"{len(runs)} criteria FAILED" in cp.stdout


def test_no_criteria_and_bad_criteria_are_exit_2(tmp_path: Path) -> None:
    cp = juice("sla", str(OLD))
    assert cp.returncode == 2 and "--criteria" in cp.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("failure_rate: {maximum: 1}\n")
    cp = juice("sla", str(OLD), "--criteria", str(bad))
    assert cp.returncode == 2 and "failure_rate.maximum" in cp.stderr and len(cp.stderr.splitlines()) == 1


def test_a_rally_file_against_its_own_sla_agrees_with_rally() -> None:
    cp = juice("sla", str(RALLY_FILE))
    assert cp.returncode == 0, cp.stderr
    assert "Failure rate criteria 0.00% <= 0.00% <= 0.00% - Passed" in cp.stdout
    assert "Rally's stored verdicts: 1 agree, 0 differ" in cp.stdout


def test_set_overrides_values_as_yaml_and_records_them() -> None:
    data = {"runner": {"times": 30}, "wan": {"delay_ms": [0]}, "scenarios": [{"name": "a", "args": {}}]}
    out, args = apply(data, ["runner.times=200", "wan.delay_ms=[0, 50]", "scenarios.0.args.n=3",
                             "keystone.cache=[false]"])
    assert out["runner"]["times"] == 200 and out["wan"]["delay_ms"] == [0, 50]
    assert out["scenarios"][0]["args"] == {"n": 3} and out["keystone"] == {"cache": [False]}
    assert data["runner"]["times"] == 30  # the file's mapping is left alone
    assert args == arguments(["runner.times=200", "wan.delay_ms=[0, 50]", "scenarios.0.args.n=3",
                              "keystone.cache=[false]"])
    for bad, why in (("runner.times", "KEY=VALUE"), ("scenarios.3.x=1", "index 0..0"),
                     ("runner.times.x=1", "not a mapping"), ("a..b=1", "empty part")):
        with pytest.raises(UserError, match=why):
            apply(data, [bad])


def test_set_is_validated_like_the_file() -> None:
    cp = juice("plan", "examples/quickstart.yaml", "--set", "runner.times=abc")
    assert cp.returncode == 2
    assert "examples/quickstart.yaml (with --set): runner.times" in cp.stderr
    cp = juice("plan", "examples/quickstart.yaml", "--set", "runner.times=5",
               "--set", "wan.delay_ms=[0, 10, 50]")
    assert cp.returncode == 0, cp.stderr
    assert "24 runs" in cp.stdout  # 2 rdbms x 3 delays x 2 scenarios x 2 repetitions
