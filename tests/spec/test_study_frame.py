"""The study frame's spec (juice.spec.study): every study's spec derives from StudySpec, declares
the shared fields only where it differs on purpose, and a new study gets them without asking."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar, Literal

import pytest
from pydantic import Field, ValidationError

from juice import studies
from juice.sla.criteria import Sla
from juice.spec.base import PositiveInt
from juice.spec.study import StudySpec, TargetStudySpec
from juice.spec.warmup import SweepRunner

# (study, field): the shared fields a study declares again, each on purpose (its module says why)
OVERRIDES = {
    ("nova", "repetitions"),          # 1..100
    ("messaging", "repetitions"),     # 1..100
    ("scheduler-db", "repetitions"),  # reads per scheduler per point, default 5
    ("scheduler-db", "name"),         # a default name
}


SPECS = {"keystone": "juice.studies.keystone.spec:Experiment",
         "nova": "juice.studies.nova.spec:NovaSpec",
         "scheduler-db": "juice.studies.schedulerdb.spec:SchedulerDbSpec",
         "messaging": "juice.studies.messaging.spec:MessagingSpec"}


def _spec_class(name: str) -> type[StudySpec[Any]]:
    module, _, attr = SPECS[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    assert isinstance(cls, type)
    return cls


@pytest.mark.parametrize("study", list(SPECS))
def test_every_study_declares_only_its_own_fields(study: str) -> None:
    assert set(SPECS) == set(studies.BUILTIN)
    cls = _spec_class(study)
    assert issubclass(cls, StudySpec)
    assert cls.study_name() == study
    own = set(cls.__dict__.get("__annotations__", {}))
    shared = set(StudySpec.model_fields) - {"workload"}
    assert {(study, f) for f in own & shared} <= OVERRIDES
    assert "workload" in own  # each study narrows it to its name
    for f in shared:
        assert cls.model_fields[f].description, f"{study}.{f} has no description"
    assert cls.model_fields["provider"].description == StudySpec.model_fields["provider"].description


class FrameSla(Sla):
    KEYS = ("percentiles",)
    METRICS = ("x_s",)


class Mine(StudySpec[FrameSla]):
    """A new study: its own fields only."""

    WAN_INTO: ClassVar[str | None] = "delay_ms"

    workload: Literal["mine"] = Field(description="the study")
    sites: PositiveInt = 3
    delay_ms: list[float] = Field(default_factory=lambda: [0.0])

    def lab_sites(self) -> int | None:
        return self.sites


class MineOnTargets(TargetStudySpec[FrameSla]):
    workload: Literal["mine2"] = Field(description="the study")
    runner: SweepRunner = Field(default_factory=lambda: SweepRunner(warmup_runs=1))


def _err(cls: type[StudySpec[Any]], data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as e:
        cls.model_validate(data)
    first = e.value.errors()[0]
    return ".".join(str(x) for x in first["loc"]) + ": " + first["msg"]


def test_a_new_study_gets_the_shared_fields_and_checks() -> None:
    s = Mine.model_validate({"workload": "mine", "name": "a", "wan": {"delay_ms": [0, 5]}})
    assert (s.seed, s.repetitions, s.description, s.delay_ms) == (1, 1, "", [0.0, 5.0])
    assert isinstance(s.sla, FrameSla) and s.provider.kind == "local"
    assert "name" in _err(Mine, {"workload": "mine", "name": "a b"})
    assert "seed" in _err(Mine, {"workload": "mine", "name": "a", "seed": -1})
    assert "repetitions" in _err(Mine, {"workload": "mine", "name": "a", "repetitions": 1001})
    assert "wan.delay_ms" in str(_err(Mine, {"workload": "mine", "name": "a", "wan": {"delay_ms": [1, 1]}}))
    hosts = {"kind": "enoslib", "static": {"hosts": [{"address": "192.0.2.1", "user": "root"}]}}
    assert "provider.static.hosts: 1 host(s) for 3 sites" in _err(Mine, {"workload": "mine", "name": "a",
                                                                        "provider": hosts})


def test_a_target_means_no_warmup_run() -> None:
    target = {"auth_url": "http://192.0.2.1:5000/v3", "username": "u", "project_name": "p"}
    lab = MineOnTargets.model_validate({"workload": "mine2", "name": "a"})
    assert lab.runner.warmup_runs == 1 and lab.target is None
    cloud = MineOnTargets.model_validate({"workload": "mine2", "name": "a", "target": target})
    assert cloud.runner.warmup_runs == 0
    assert "runner.warmup_runs: 1, not with a target" in _err(
        MineOnTargets, {"workload": "mine2", "name": "a", "target": target, "runner": {"warmup_runs": 1}})
