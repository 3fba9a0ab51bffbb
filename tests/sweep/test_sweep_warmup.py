"""The sweep's warm-up runs (``runner.warmup_runs``, juice.sweep.warmup; issue 38: a fresh
deployment's first run is slow, so the point that always comes first was biased): one discarded
run of each deployment's first point before its measured runs, stored as ``<run>.warmup``,
counted nowhere (report, compare units, analyze, resumption), and the run keys unchanged.

The toy study of tests/studies/toy.py without its lab (``LablessToy``, a fake for what is not
under test here: the runner is, not a network), so these are fast unit tests."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from juice import studies
from juice.contract import Progress, Run
from juice.errors import JuiceError
from juice.results import samples, tidy
from juice.sweep import sweep, warmup
from tests.studies.toy import Toy, ToyPoint, ToySpec


class LablessToy(Toy):
    """The toy study with no lab: one deployment per one-way delay (its lab key), each run
    storing made-up round-trip times (twice the delay); it records what the sweep asked."""

    def __init__(self, fail_warmup: bool = False) -> None:
        self.fail_warmup = fail_warmup
        self.labs: list[float] = []
        self.ran: list[str] = []

    def lab(self, spec: ToySpec, points: Sequence[ToyPoint], progress: Progress) -> Any:
        self.labs.append(points[0].delay_ms)
        return nullcontext(None)

    def deployment(self, spec: ToySpec, lab: Any, points: Sequence[ToyPoint],
                   progress: Progress) -> nullcontext[Any]:
        return nullcontext(points[0].delay_ms)

    def run_point(self, run: Run[ToySpec, ToyPoint], deployment: Any) -> None:
        p = run.point
        self.ran.append(run.rd.name)
        run.manifest(params={"delay_ms": p.delay_ms, "count": p.count, "repetition": p.repetition})
        if self.fail_warmup and run.rd.name.endswith(".warmup"):
            raise JuiceError("the fresh deployment answered nothing")
        run.rd.write_json("pings.json", {"rtt_ms": [2 * p.delay_ms + 0.1] * p.count})


@pytest.fixture
def toy() -> Iterator[LablessToy]:
    study = LablessToy()
    studies.register(study)
    yield study
    studies.unregister(study.name)


def spec_of(study: Toy, warmup_runs: int | None) -> ToySpec:
    data: dict[str, Any] = {"workload": "toy", "name": "pings", "delay_ms": [0, 5], "count": 2,
                            "repetitions": 2}
    if warmup_runs is not None:
        data["runner"] = {"warmup_runs": warmup_runs}
    return study.parse(data, "toy.yaml")


def sweep_run(study: Toy, spec: ToySpec, study_dir: Path) -> tuple[tuple[int, int, int], list[str]]:
    said: list[str] = []
    return sweep.run(study, spec, {}, "", study_dir, said.append), said


def manifest(d: Path) -> dict[str, Any]:
    data = json.loads((d / "manifest.json").read_text())
    assert isinstance(data, dict)
    return data


def warmups(study_dir: Path) -> list[Path]:
    return sorted(study_dir.glob("*.warmup"))


def test_one_warmup_run_per_deployment_before_its_measured_runs(toy: LablessToy, tmp_path: Path) -> None:
    spec = spec_of(toy, 1)
    (before, ran, failed), said = sweep_run(toy, spec, tmp_path)
    assert (before, ran, failed) == (0, 4, 0)
    # per deployment: its warm-up run first (the deployment's first point), then its measured runs
    assert [n.rsplit("-", 2)[0] + (".warmup" if n.endswith(".warmup") else "") for n in toy.ran] == [
        "ping-0ms-r0.warmup", "ping-0ms-r0", "ping-0ms-r1",
        "ping-5ms-r0.warmup", "ping-5ms-r0", "ping-5ms-r1"]
    kept = warmups(tmp_path)
    assert [d.name.split("-")[1] for d in kept] == ["0ms", "5ms"]
    points = toy.expand(spec)
    for d, first in zip(kept, (points[0], points[2]), strict=True):
        m = manifest(d)
        assert m["warmup_run"] is True and m["run_key"] == first.key
        assert m["order"]["warmup_runs"] == 1 and m["order"]["warmup_index"] == 0
        assert "order_index" not in m and "position" not in m["order"]
    measured = [d for d in tmp_path.iterdir() if d.is_dir() and not d.name.endswith(".warmup")]
    assert len(measured) == 4
    for d in measured:
        m = manifest(d)
        assert "warmup_run" not in m
        assert m["order"]["warmup_runs"] == 1
        assert m["order"]["position"] == m["params"]["repetition"]  # 0 = the first measured run
    lines = [s for s in said if s.startswith("warm-up run")]
    assert lines == [f"warm-up run of this deployment (not counted): {p.label}"
                     for p in (points[0], points[2])]
    assert "4 to run, after 2 warm-up runs (not counted)" in said[0]


def test_warmup_runs_are_in_no_report_compare_or_analysis(toy: LablessToy, tmp_path: Path) -> None:
    study_dir = tmp_path / "pings"
    sweep_run(toy, spec_of(toy, 1), study_dir)
    assert len(warmups(study_dir)) == 2
    units = samples.units([study_dir])  # what juice compare and juice trend read
    assert sorted(u.name.rsplit("-", 2)[0] for u in units) == [
        "ping-0ms-r0", "ping-0ms-r1", "ping-5ms-r0", "ping-5ms-r1"]
    found = tidy.discover([study_dir])
    assert len(found.runs) == 4 and found.warmup == warmups(study_dir)
    assert set(sweep.completed(toy, study_dir).values()).isdisjoint(warmups(study_dir))
    table = toy.analyze([study_dir], [], {}, None)
    assert table is not None and table["count"].tolist() == [4, 4]  # 2 runs x 2 pings per delay
    html = studies.report([study_dir], tmp_path / "report.html").read_text()
    assert "4 runs." in html and "2 warm-up runs (<code>.warmup</code>) not counted." in html
    # one given by its own path is read: kept for inspection
    assert [u.path for u in samples.units([warmups(study_dir)[0]])] == [warmups(study_dir)[0]]


def test_a_resumed_sweep_warms_up_only_the_deployments_it_brings_up(toy: LablessToy,
                                                                     tmp_path: Path) -> None:
    spec = spec_of(toy, 1)
    sweep_run(toy, spec, tmp_path)
    first = warmups(tmp_path)
    pl = sweep.plan(toy, spec, tmp_path)
    assert (len(pl.todo), pl.deployments, pl.warmup_s) == (0, 0, 0.0)
    toy.labs.clear()
    (before, ran, failed), said = sweep_run(toy, spec, tmp_path)
    assert (before, ran, failed) == (4, 0, 0)
    assert toy.labs == [] and not any("warm-up" in s for s in said) and warmups(tmp_path) == first
    # the 5 ms deployment loses a run: brought up again, it is fresh again and gets its warm-up
    gone = next(tmp_path.glob("ping-5ms-r1-*[0-9]"))
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()
    (before, ran, failed), said = sweep_run(toy, spec, tmp_path)
    assert (before, ran, failed) == (3, 1, 0) and toy.labs == [5.0]
    again = [d for d in warmups(tmp_path) if d not in first]
    assert [d.name.split("-")[1] for d in again] == ["5ms"]
    assert manifest(again[0])["run_key"] == toy.expand(spec)[3].key  # its first point left to run
    assert sum("warm-up run of this deployment" in s for s in said) == 1


def test_the_plan_counts_the_warmup_runs(toy: LablessToy, tmp_path: Path) -> None:
    with_two, without = spec_of(toy, 2), spec_of(toy, 0)
    pl, pl0 = sweep.plan(toy, with_two, tmp_path), sweep.plan(toy, without, tmp_path)
    firsts = warmup.firsts_of(pl.todo)
    assert [p.key for p in firsts] == [pl.todo[0].key, pl.todo[2].key]
    assert (pl.warmup_runs, pl.deployments) == (2, 2) and pl0.warmup_s == 0.0
    assert pl.warmup_s == 2 * sum(toy.estimate_s(p) for p in firsts)
    assert pl.estimate_s == pl0.estimate_s + pl.warmup_s
    assert warmup.plan_line(2, 2, "4 s").startswith("warm-up runs: 4 (2 per deployment brought up")


def test_without_warmup_runs_the_sweep_is_as_before(toy: LablessToy, tmp_path: Path) -> None:
    for k in (None, 0):  # a spec without the field, and 0
        d = tmp_path / f"k{k}"
        (_before, ran, _failed), said = sweep_run(toy, spec_of(toy, k), d)
        assert ran == 4 and warmups(d) == [] and not any("warm-up" in s for s in said)
        assert {manifest(r)["order"]["warmup_runs"] for r in d.iterdir()} == {0}


def test_a_failed_warmup_run_is_kept_and_the_measured_runs_go_on(tmp_path: Path) -> None:
    toy = LablessToy(fail_warmup=True)
    (before, ran, failed), said = sweep_run(toy, spec_of(toy, 1), tmp_path)
    assert (before, ran, failed) == (0, 4, 0)
    kept = sorted(tmp_path.glob("*.warmup.failed"))
    assert len(kept) == 2 and warmups(tmp_path) == []
    assert "fresh deployment answered nothing" in (kept[0] / "error.txt").read_text()
    assert sum("warm-up run failed" in s for s in said) == 2
    assert len(sweep.completed(toy, tmp_path)) == 4


def test_a_manifest_saying_warmup_run_is_never_a_complete_run(toy: LablessToy, tmp_path: Path) -> None:
    spec = spec_of(toy, 1)
    sweep_run(toy, spec, tmp_path)
    first = toy.expand(spec)[0]
    for f in next(tmp_path.glob("ping-0ms-r0-*[0-9]")).iterdir():  # its measured run removed,
        f.unlink()
    next(tmp_path.glob("ping-0ms-r0-*[0-9]")).rmdir()
    warmups(tmp_path)[0].rename(tmp_path / "ping-0ms-r0-by-hand")  # its warm-up renamed by hand
    assert manifest(tmp_path / "ping-0ms-r0-by-hand")["run_key"] == first.key
    assert first.key not in sweep.completed(toy, tmp_path) and len(sweep.completed(toy, tmp_path)) == 3
