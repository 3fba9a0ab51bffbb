"""The sweep when a deployment does not come up: its runs are kept as failed, saying why, and
the next deployment of the sweep still runs (issue 28: a configuration whose deployment failed
ended the whole `juice run`). A study written for the test, with no lab: the runner is what
is under test, not a server."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from juice.contract import Progress, Run, Study
from juice.errors import ServiceError, UserError
from juice.sweep import sweep


@dataclass(frozen=True)
class Spec:
    name: str
    configurations: tuple[str, ...]
    broken: str


@dataclass(frozen=True)
class Point:
    configuration: str
    repetition: int

    @property
    def key(self) -> str:
        return f"{self.configuration}-{self.repetition}"

    @property
    def dirname(self) -> str:
        return self.key

    @property
    def label(self) -> str:
        return self.key

    @property
    def lab_key(self) -> int:
        return 0

    @property
    def deployment_key(self) -> str:
        return self.configuration


class Configurations(Study[Spec, Point]):
    """Two runs per configuration, one deployment per configuration; the ``broken`` one's
    deployment raises as NovaDeployment.up does when a service does not start."""

    name = "configurations"
    title = "Configurations"

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.deployed: list[str] = []
        self.torn_down: list[str] = []

    def parse(self, data: Mapping[str, Any], source: str) -> Spec:
        raise NotImplementedError  # the test builds the spec itself

    def expand(self, spec: Spec) -> list[Point]:
        return [Point(c, r) for c in spec.configurations for r in range(2)]

    def lab(self, spec: Spec, points: Sequence[Point], progress: Progress) -> nullcontext[None]:
        return nullcontext(None)

    @contextmanager
    def deployment(self, spec: Spec, lab: Any, points: Sequence[Point],
                   progress: Progress) -> Iterator[str]:
        conf = points[0].configuration
        if conf == spec.broken:
            raise self.error
        self.deployed.append(conf)
        try:
            yield conf
        finally:
            self.torn_down.append(conf)

    def run_point(self, run: Run[Spec, Point], deployment: Any) -> None:
        run.manifest(params={"configuration": deployment, "repetition": run.point.repetition})

    def plan_columns(self, point: Point) -> dict[str, Any]:
        return {"configuration": point.configuration}

    def estimate_s(self, point: Point) -> float:
        return 0.0


def _sweep(study: Configurations, spec: Spec, tmp_path: Path) -> tuple[tuple[int, int, int], list[str]]:
    said: list[str] = []
    counts = sweep.run(study, spec, {}, "", tmp_path, said.append)
    return counts, said


def test_a_deployment_that_fails_keeps_its_runs_as_failed_and_the_sweep_goes_on(tmp_path: Path) -> None:
    study = Configurations(ServiceError("nova-conductor: HTTP 500 from Keystone"))
    spec = Spec("pair", ("before", "after", "again"), broken="after")
    (before, ran, failed), said = _sweep(study, spec, tmp_path)
    assert (before, ran, failed) == (0, 4, 2)
    assert study.deployed == ["before", "again"] and study.torn_down == ["before", "again"]
    done = sorted(d.name.rsplit("-", 2)[0] for d in tmp_path.iterdir() if not d.name.endswith(".failed"))
    assert done == ["again-0", "again-1", "before-0", "before-1"]
    kept = sorted(tmp_path.glob("*.failed"))
    assert [d.name.rsplit("-", 2)[0] for d in kept] == ["after-0", "after-1"]
    for d in kept:
        err = (d / "error.txt").read_text()
        assert "deployment failed before the run" in err and "HTTP 500 from Keystone" in err
        assert not (d / "manifest.json").exists()  # never mistaken for a complete run
    assert any("deployment failed (nova-conductor: HTTP 500 from Keystone)" in s for s in said)
    assert any(s.startswith("[5/6] again-0") for s in said)  # the numbering counts the failed ones
    # a second sweep retries only the failed configuration's runs
    (before, ran, failed), _ = _sweep(study, spec, tmp_path)
    assert (before, ran, failed) == (4, 0, 2)
    assert json.loads(next(tmp_path.glob("before-0-*/manifest.json")).read_text())["run_key"] == "before-0"


@pytest.mark.parametrize("error", [RuntimeError("a bug in the deployment code"),
                                   UserError("site 1: the venv is missing: run `juice hosts prepare SPEC`")])
def test_a_bug_or_the_users_error_still_stops_the_sweep(tmp_path: Path, error: BaseException) -> None:
    study = Configurations(error)
    with pytest.raises(type(error), match=str(error)[:10]):
        _sweep(study, Spec("pair", ("before", "after", "again"), broken="after"), tmp_path)
    assert study.deployed == ["before"] and study.torn_down == ["before"]
    assert not list(tmp_path.glob("after-*")) and not list(tmp_path.glob("again-*"))

