"""``runner.warmup_runs`` (juice.spec.warmup) in the studies' specs: its default per study, never
part of a run key (so runs stored before it, or with another value, stay complete), 0 against
an existing cloud and refused there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from juice import studies
from juice.errors import UserError
from juice.sweep import warmup

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _params(p: Any) -> Any:
    """A point's parameters (a method of Keystone and nova points, a field of messaging's)."""
    return p.params() if callable(p.params) else p.params


@pytest.mark.parametrize(("example", "default"), [("quickstart.yaml", 1), ("nova-boot.yaml", 1),
                                                  ("messaging.yaml", 0)])
def test_the_default_and_keys_that_do_not_depend_on_it(example: str, default: int) -> None:
    study, spec, _ = studies.load_spec(EXAMPLES / example)
    assert warmup.runs_of(spec) == default
    points = study.expand(spec)
    for k in (0, 1, 3):
        _, other, _ = studies.load_spec(EXAMPLES / example, [f"runner.warmup_runs={k}"])
        assert warmup.runs_of(other) == k
        again = study.expand(other)
        assert [p.key for p in again] == [p.key for p in points]
        assert [_params(p) for p in again] == [_params(p) for p in points]  # no new column either


def test_the_keystone_run_key_hashes_no_warmup_runs() -> None:
    _, spec, _ = studies.load_spec(EXAMPLES / "quickstart.yaml", ["runner.warmup_runs=2"])
    assert "warmup_runs" not in spec.runner.key_dump() and "order" not in spec.runner.key_dump()


@pytest.mark.parametrize("example", ["existing-cloud.yaml", "existing-cloud-nova.yaml"])
def test_against_an_existing_cloud_there_is_no_warmup_run(example: str) -> None:
    _, spec, _ = studies.load_spec(EXAMPLES / example)
    assert warmup.runs_of(spec) == 0
    _, spec, _ = studies.load_spec(EXAMPLES / example, ["runner.warmup_runs=0"])
    assert warmup.runs_of(spec) == 0
    with pytest.raises(UserError, match=r"runner.warmup_runs: 1, not with a target"):
        studies.load_spec(EXAMPLES / example, ["runner.warmup_runs=1"])


def test_a_spec_without_the_field_has_none() -> None:
    _, spec, _ = studies.load_spec(EXAMPLES / "scheduler-db.yaml")
    assert warmup.runs_of(spec) == 0
    with pytest.raises(UserError, match="runner"):
        studies.load_spec(EXAMPLES / "scheduler-db.yaml", ["runner.warmup_runs=1"])
