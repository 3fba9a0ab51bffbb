"""Results made before the study contract (tests/fixtures/results-0.1, real runs of juice 0.1)
stay valid: every run is recognised as complete, `juice run` has nothing to do, and `juice
report` / `juice analyze` re-make exactly the tables and values that version made (later
versions add tables and fields: confidence intervals, constrained fits)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "results-0.1"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
JUICE = [sys.executable, "-m", "juice.cli"]
CASES = [("quickstart", "quickstart.yaml", 8), ("sdb-fixture", "sdb-fixture.yaml", 18)]


def juice(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JUICE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})


def copy(tmp: Path, name: str, spec: str) -> tuple[Path, Path]:
    shutil.copytree(FIXTURE / name, tmp / name)
    shutil.copy(FIXTURE / spec, tmp / spec)
    return tmp / name, tmp / spec


@pytest.mark.parametrize(("name", "spec", "runs"), CASES, ids=[c[0] for c in CASES])
def test_old_runs_plan_as_complete(tmp_path: Path, name: str, spec: str, runs: int) -> None:
    results, spec_path = copy(tmp_path, name, spec)
    cp = juice("plan", str(spec_path), "--results", str(results), "--limit", "0", cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert f"{runs} runs ({runs} done)" in cp.stdout
    assert "to run: 0 runs in 0 labs and 0 deployments" in cp.stdout
    assert "todo" not in cp.stdout


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="juice run needs root")
@pytest.mark.parametrize(("name", "spec", "runs"), CASES, ids=[c[0] for c in CASES])
def test_old_runs_are_not_redone_and_rerender_the_same_tables(tmp_path: Path, name: str, spec: str,
                                                              runs: int) -> None:
    results, spec_path = copy(tmp_path, name, spec)
    before = sorted(p.name for p in results.iterdir())
    cp = juice("run", str(spec_path), "--results", str(results), cwd=tmp_path)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"0 runs completed now, {runs} before, 0 failed" in cp.stdout
    # no lab was even started (another worker's dead lab swept by this command is said, and fine)
    said = re.sub(r"removed\s+leftovers\s+of\s+lab\s+'[^']+'", "", " ".join((cp.stdout + cp.stderr).split()))
    assert "lab " not in said, cp.stdout + cp.stderr
    after = sorted(p.name for p in results.iterdir())
    assert after == sorted([*before, "report.html"])
    html = (results / "report.html").read_text()
    # the old tables are all there, unchanged and in the same order; new tables (confidence
    # intervals, differences, constrained fits) may come between them
    tables = iter(re.findall(r'<table class="data">.*?</table>', html, flags=re.S))
    for i, old in enumerate(EXPECTED[name]):
        assert any(t == old for t in tables), f"old table {i} missing, changed or out of order"


def test_old_keystone_runs_analyze_the_same(tmp_path: Path) -> None:
    results, _ = copy(tmp_path, "quickstart", "quickstart.yaml")
    cp = juice("analyze", str(results), "--json", cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    got, want = json.loads(cp.stdout), EXPECTED["analyze-quickstart"]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() >= w.keys()  # every old key, same value; new ones (intervals) may follow
        for k, v in w.items():
            assert g[k] == (pytest.approx(v, rel=1e-12) if isinstance(v, float) else v), k
