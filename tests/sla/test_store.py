"""A run's verdict stored in its manifest and in rally.json, and read back by the REAL Rally
(``rally task import`` + ``rally task report``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from juice.load import rally_json
from juice.load.iterations import write_iterations
from juice.sla.criteria import IterationSla, MessagingSla, Sla
from juice.sla.store import record, stored
from juice.util.validation import validate
from tests.load.rallycli import Rally
from tests.load.test_rally_json import _results


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run-1"
    run.mkdir()
    results = _results()  # Fake.nested: 6 iterations, none failed; Fake.sleep: 9, 3 failed
    write_iterations(run / "iterations.jsonl", results)
    rally_json.write_rally(run / "rally.json", results)
    (run / "manifest.json").write_text(json.dumps({"workload": "keystone", "params": {"x": 1}}))
    return run


def test_the_verdict_goes_into_the_manifest_and_rally_json(tmp_path: Path) -> None:
    run = _run(tmp_path)
    mtime = (run / "manifest.json").stat().st_mtime_ns
    sla = IterationSla.model_validate({"failure_rate": {"max": 25}, "max_avg_duration": 60.0,
                                       "success_pct": {"min": 50}})
    v = record(run, sla)
    # 3 of 15 iterations failed (20 %) for the run as a whole: within 25 %
    assert v.passed
    assert [r["criterion"] for r in v.results] == ["failure_rate", "max_avg_duration", "success_pct"]
    assert v.results[0]["value"] == pytest.approx(20.0)
    man = stored(run)
    assert man is not None and man["pass"] is True and man["criteria"]["failure_rate"] == {"max": 25.0}
    assert (run / "manifest.json").stat().st_mtime_ns == mtime  # the tidy cache stays valid
    doc = json.loads((run / "rally.json").read_text())
    ws = {s["title"]: s["workloads"][0] for s in doc["tasks"][0]["subtasks"]}
    # per workload, as Rally judges: Fake.sleep alone failed 3 of 9 (33 %) > 25 %
    assert ws["Fake.nested"]["pass_sla"] is True and ws["Fake.sleep"]["pass_sla"] is False
    assert ws["Fake.sleep"]["sla"] == {"failure_rate": {"max": 25.0}, "max_avg_duration": 60.0}
    assert ws["Fake.sleep"]["sla_results"]["sla"][0] == {
        "criterion": "failure_rate", "success": False,
        "detail": "Failure rate criteria 0.00% <= 33.33% <= 25.00% - Failed"}
    assert doc["tasks"][0]["pass_sla"] is False


def test_confidence_needs_the_far_end_inside(tmp_path: Path) -> None:
    run = _run(tmp_path)
    loose = record(run, Sla.model_validate({"success_pct": {"min": 60}}))
    strict = record(run, Sla.model_validate({"success_pct": {"min": 60}, "confidence": 0.95}))
    # 12 of 15 succeeded (80 %): above 60 %, but the Wilson interval's low end (~55 %) is not
    assert loose.passed and not strict.passed
    lo, hi = strict.results[0]["interval"]
    assert lo < 60 < 80 < hi


def test_criteria_a_study_cannot_judge_are_one_line_errors() -> None:
    from juice.errors import UserError

    with pytest.raises(UserError, match=r"spec: sla: lost: not a criterion of this study"):
        validate(IterationSla, {"lost": {"max": 0}}, "spec: sla", expected="x", unknown_key_hint="")
    with pytest.raises(UserError, match=r"percentiles.boot_s: not measured by this study"):
        validate(MessagingSla, {"percentiles": {"boot_s": {"p95": 1}}}, "s", expected="x",
                 unknown_key_hint="")
    with pytest.raises(UserError, match=r"failure_rate: .*give min or max"):
        validate(Sla, {"failure_rate": {}}, "s", expected="x", unknown_key_hint="")


def test_real_rally_import_shows_the_sla(tmp_path: Path, rally_cli: Rally) -> None:
    rally = rally_cli
    run = _run(tmp_path)
    record(run, IterationSla.model_validate({"failure_rate": {"max": 25}, "max_seconds_per_iteration": 60.0}))
    m = re.search(r"Task UUID: ([0-9a-f-]{36})",
                  rally("task", "import", "--file", str(run / "rally.json"), "--env", "juice"))
    assert m
    rally("task", "report", m.group(1), "--json", "--out", str(tmp_path / "report.json"))
    rally("task", "report", m.group(1), "--html-static", "--out", str(tmp_path / "report.html"))
    task = json.loads((tmp_path / "report.json").read_text())["tasks"][0]
    ws = {s["title"]: s["workloads"][0] for s in task["subtasks"]}
    assert ws["Fake.sleep"]["pass_sla"] is False and task["pass_sla"] is False
    assert [r["criterion"] for r in ws["Fake.sleep"]["sla_results"]["sla"]] == \
        ["failure_rate", "max_seconds_per_iteration"]
    assert "33.33% <= 25.00% - Failed" in (tmp_path / "report.html").read_text()
