"""``wan:`` is the one WAN section every study's spec accepts. For the studies whose WAN is
uniform delays (nova, messaging, scheduler-db), ``wan: {delay_ms: [...]}`` plans exactly the
runs of the older spelling (same run keys: results made before stay complete), and anything
else is refused in one line naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from juice import studies
from juice.errors import UserError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _keys(data: dict[str, Any]) -> list[str]:
    study = studies.of(data, "spec.yaml")
    return [p.key for p in study.expand(study.parse(data, "spec.yaml"))]


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return data


@pytest.mark.parametrize("example", ["nova-boot.yaml", "messaging.yaml"])
def test_wan_delay_ms_plans_the_same_runs_as_delay_ms(example: str) -> None:
    old = _example(example)
    old["delay_ms"] = [0, 25]
    new = {k: v for k, v in old.items() if k != "delay_ms"}
    new["wan"] = {"delay_ms": [0, 25]}
    if example == "messaging.yaml":  # its cases run at delays of the spec's list
        for c in old["cases"]:
            c.pop("delay_ms", None)
    assert _keys(new) == _keys(old) and len(_keys(new)) > 0


def test_scheduler_db_takes_its_one_delay_from_wan() -> None:
    old = _example("scheduler-db.yaml")
    old["lab"] = {**old.get("lab", {}), "delay_ms": 25}
    new = {**old, "lab": {k: v for k, v in old["lab"].items() if k != "delay_ms"}, "wan": {"delay_ms": [25]}}
    assert _keys(new) == _keys(old)
    study = studies.of(new, "s.yaml")
    assert study.parse(new, "s.yaml").lab.delay_ms == 25


@pytest.mark.parametrize(("example", "wan", "field"), [
    ("nova-boot.yaml", {"zones": [{"count": 2, "intra_ms": 0, "inter_ms": 5}]}, "wan"),
    ("nova-boot.yaml", {"delay_ms": [0], "jitter_ms": 1}, "wan.jitter_ms"),
    ("messaging.yaml", {"delay_ms": [0], "matrices": []}, "wan.matrices"),
    ("scheduler-db.yaml", {"delay_ms": [0, 10]}, "wan.delay_ms"),
])
def test_what_a_study_cannot_do_is_refused_in_one_line(example: str, wan: dict[str, Any], field: str) -> None:
    data = {**_example(example), "wan": wan}
    with pytest.raises(UserError, match=field) as e:
        studies.of(data, "spec.yaml").parse(data, "spec.yaml")
    assert "\n" not in str(e.value)


def test_both_spellings_at_once_are_refused() -> None:
    data = {**_example("nova-boot.yaml"), "delay_ms": [0], "wan": {"delay_ms": [0]}}
    with pytest.raises(UserError, match="given twice"):
        studies.of(data, "spec.yaml").parse(data, "spec.yaml")
