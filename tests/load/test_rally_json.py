"""Rally export: accepted by the REAL `rally task import` and rendered by `rally task report`."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from pathlib import Path

import pytest

from juice.load import rally_json
from juice.load.api import DictEnv, LoadResult
from juice.load.iterations import read_iterations, write_iterations, write_summary
from juice.load.runner import RunnerSpec, run_scenario
from tests.load.fakes import FakeNested, FakeSleep
from tests.load.rallycli import Rally


def _results() -> list[LoadResult]:
    closed = asyncio.run(run_scenario(FakeNested(), DictEnv(1),  # type: ignore[arg-type]
                                      RunnerSpec(times=6, concurrency=2)))
    opened = asyncio.run(run_scenario(FakeSleep(0.004, fail_every=3), DictEnv(2),
                                      RunnerSpec(type="open", rate=400, times=9)))
    return [closed, opened]


def test_format_1_2_shape_and_nested_children() -> None:
    closed, opened = _results()
    doc = rally_json.to_rally([closed, opened])
    assert doc["info"]["format_version"] == "1.2"
    task = doc["tasks"][0]
    assert [s["title"] for s in task["subtasks"]] == ["Fake.nested", "Fake.sleep"]
    w0 = task["subtasks"][0]["workloads"][0]
    assert w0["runner"] == {"constant": {"times": 6, "concurrency": 2, "timeout": 600.0}}
    outer = w0["data"][0]["atomic_actions"][0]
    assert [c["name"] for c in outer["children"]] == ["inner.a", "inner.b"]
    rows = w0["statistics"]["durations"]["atomics"]
    assert [c["name"] for c in rows[0]["children"]] == ["inner.a", "inner.b"]
    w1 = task["subtasks"][1]["workloads"][0]
    assert "rps" in w1["runner"] and w1["failed_iteration_count"] == 3
    assert w1["pass_sla"] is False and task["pass_sla"] is False
    assert w1["data"][0]["error"][0] == "ValueError"
    merged = rally_json.to_rally([closed, closed], merge_sites=True)
    (mw,) = merged["tasks"][0]["subtasks"][0]["workloads"]
    assert mw["total_iteration_count"] == 12


def test_iterations_jsonl_round_trip(tmp_path: Path) -> None:
    results = _results()
    n = write_iterations(tmp_path / "iterations.jsonl", results)
    rows = read_iterations(tmp_path / "iterations.jsonl")
    assert n == len(rows) == 15
    assert [s for s, _ in rows] == ["Fake.nested"] * 6 + ["Fake.sleep"] * 9
    assert [r for _, r in rows] == results[0].records + results[1].records
    write_summary(tmp_path / "summary.json", results)
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert [s["iterations"] for s in summ] == [6, 9] and "records" not in summ[0]
    assert summ[1]["dropped"]["count"] == 0 and summ[1]["failed_iterations"] == 3


def test_real_rally_imports_and_reports(tmp_path: Path, rally_cli: Rally) -> None:
    rally = rally_cli
    closed, opened = _results()
    (tmp_path / "new.json").write_text(json.dumps(rally_json.to_rally([closed, opened])))
    (tmp_path / "old.json").write_text(json.dumps(rally_json.to_rally_legacy([closed, opened])))
    uuids = []
    for f in ("new.json", "old.json"):
        m = re.search(r"Task UUID: ([0-9a-f-]{36})", rally("task", "import", "--file",
                                                           str(tmp_path / f), "--env", "juice"))
        assert m, f"no task uuid printed for {f}"
        uuids.append(m.group(1))
    rally("task", "report", *uuids, "--json", "--out", str(tmp_path / "report.json"))
    rally("task", "report", *uuids, "--html-static", "--out", str(tmp_path / "report.html"))
    assert "Fake.sleep" in (tmp_path / "report.html").read_text()
    back = json.loads((tmp_path / "report.json").read_text())["tasks"]
    new = {w["scenario"].popitem()[0]: w for s in back[0]["subtasks"] for w in s["workloads"]}
    assert new["Fake.sleep"]["total_iteration_count"] == 9
    assert new["Fake.sleep"]["failed_iteration_count"] == 3
    assert new["Fake.nested"]["total_iteration_count"] == 6
    # Rally recomputed the statistics from our data[]: its atomic mean is ours
    ours = statistics.fmean(a["finished_at"] - a["started_at"]
                            for r in opened.records for a in r.atomic_actions)
    (row,) = [a for a in new["Fake.sleep"]["statistics"]["durations"]["atomics"]
              if a["name"] == "fake.sleep"]
    assert row["data"]["avg"] == pytest.approx(ours, abs=0.0011)
    assert row["data"]["iteration_count"] == 9
    # and our own statistics block equals the one Rally computes
    mine = rally_json.to_rally([opened])["tasks"][0]["subtasks"][0]["workloads"][0]
    assert mine["statistics"] == new["Fake.sleep"]["statistics"]
    nested = new["Fake.nested"]["statistics"]["durations"]["atomics"][0]
    assert [c["name"] for c in nested["children"]] == ["inner.a", "inner.b"]
    legacy = [w for s in back[1]["subtasks"] for w in s["workloads"]]
    assert [w["total_iteration_count"] for w in legacy] == [6, 9]
