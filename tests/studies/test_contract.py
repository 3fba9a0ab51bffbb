"""The study contract: a toy study written against it alone (tests/studies/toy.py) runs
through `juice plan`, `juice run`, `juice report` and `juice analyze`; and those commands
contain no study name (the registry is the one place that knows them)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
import yaml

from juice import studies
from tests.conftest import Juice
from tests.studies.toy import Toy

SRC = Path(__file__).resolve().parents[2] / "src" / "juice"
GENERIC = ["cli/run.py", "cli/analyze.py", "sweep/sweep.py", "report/html.py"]


def test_registry_knows_the_built_in_studies() -> None:
    assert studies.names()[:2] == ["keystone", "scheduler-db"]
    assert all(studies.get(n).name == n for n in studies.names())
    with pytest.raises(Exception, match="unknown study 'nope'"):
        studies.get("nope")


@pytest.mark.parametrize("rel", GENERIC)
def test_generic_commands_name_no_study(rel: str) -> None:
    """No import of a study package and no study name as a string in the generic commands
    (docstrings and help texts may use examples)."""
    tree = ast.parse((SRC / rel).read_text())
    names = set(studies.BUILTIN)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert node.module.split(".")[:3] in (["juice", "studies"], ["juice", "studies", "base"]) \
                or not node.module.startswith("juice.studies"), f"{rel} imports {node.module}"
        if isinstance(node, ast.Compare | ast.Dict | ast.Call):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    assert sub.value not in names, f"{rel}: compares or passes the study name {sub.value!r}"


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a lab needs root")
def test_toy_study_runs_plans_reports_and_analyzes(toy: Toy, tmp_path: Path, juice: Juice) -> None:
    spec = tmp_path / "toy.yaml"
    spec.write_text(yaml.safe_dump({"workload": "toy", "name": "pings", "delay_ms": [0, 5], "count": 3,
                                    "repetitions": 2}))
    results = tmp_path / "out"
    code, out, err = juice("plan", str(spec), "--results", str(results))
    assert code == 0, err
    assert "pings (Toy pings): 4 runs (0 done)" in out and "to run: 4 runs in 2 labs" in out

    code, out, err = juice("run", str(spec), "--results", str(results))
    assert code == 0, out + err
    runs = sorted(d for d in results.iterdir() if d.is_dir())
    assert len(runs) == 4 and not any(d.name.endswith(".failed") for d in runs)
    assert "4 runs completed now, 0 before, 0 failed" in out
    assert re.search(r"toy: 12 pings, median RTT [0-9.]+ ms", out)
    report = (results / "report.html").read_text()
    assert "<h2>Toy pings</h2>" in report
    # the 5 ms one-way lab answered in about 10 ms round trip, the 0 ms one in far less
    rows = re.findall(r"<tr><td[^>]*>([0-9.]+)</td><td[^>]*>([0-9]+)</td><td[^>]*>([0-9.]+)</td>", report)
    assert [(float(d), int(n)) for d, n, _ in rows] == [(0.0, 6), (5.0, 6)]
    assert float(rows[0][2]) < 5.0 < float(rows[1][2])

    code, out, err = juice("run", str(spec), "--results", str(results), "--no-report")
    assert code == 0 and "0 runs completed now, 4 before, 0 failed" in out
    assert "lab toy" not in out + err  # complete: no lab started
    code, out, err = juice("analyze", str(results), "--json")
    assert code == 0, err
    assert [r["count"] for r in yaml.safe_load(out)] == [6, 6]
