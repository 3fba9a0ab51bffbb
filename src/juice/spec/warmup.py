"""``runner.warmup_runs``: discarded warm-up runs per deployment, a field any study's spec declares.

    runner: {warmup_runs: 1}      # the Keystone and nova studies' default; 0 = none

Before the first measured run of each deployment it brings up, the sweep
(``juice.sweep.sweep``) runs that deployment's first point (in the run order) once more per
warm-up run, through the same ``study.run_point``, and keeps it as ``<run>.warmup``: complete
and inspectable, never counted (``juice.results.store.counted``: no report table, no
``juice compare`` unit, no SLA verdict, never a complete run of its point). A first run on a
fresh deployment is slower (Keystone: 0.241 s against 0.174 s a mean iteration later in the
same deployment, issue 38), so without it the point that comes first is biased.

The field is never part of a run key (runs stored before it, or with another value, stay
complete; a resumed sweep whose deployments are all complete opens nothing and runs no
warm-up); each measured run records it as ``order.warmup_runs``. Against an existing cloud
(``target:``) nothing is deployed: the default there is 0 (:func:`zero_against_target`) and any
other value is refused (:func:`check_target`; ``juice run --dry-run`` lists every request the
measured runs send to someone's cloud, and a warm-up would send more).

A study declares it on its ``runner`` model with :func:`field` (a study with no runner options
of its own uses :class:`SweepRunner`); the sweep reads it with ``juice.sweep.warmup.runs_of``.
Specs without it have no warm-up run.
"""

from __future__ import annotations

from typing import Annotated, Any

from annotated_types import Le
from pydantic import BaseModel, Field

from juice.spec.base import NonNegativeInt, Strict

MAX_WARMUP_RUNS = 10
WarmupRuns = Annotated[NonNegativeInt, Le(MAX_WARMUP_RUNS)]
WARMUP_RUNS_DOC = (f"0..{MAX_WARMUP_RUNS}: discarded runs of its first point before the measured runs of "
                   "each deployment (kept as <run>.warmup, never counted, not in the run key)")


def field(default: int) -> Any:
    """The ``warmup_runs`` field of a study's runner model, with that study's default (``Any``
    as pydantic's ``Field``: the model's annotation types the attribute)."""
    return Field(default=default, description=WARMUP_RUNS_DOC)


class SweepRunner(Strict):
    """``runner:`` of a study whose runs have no runner options of their own: the sweep's."""

    warmup_runs: WarmupRuns = field(0)


def zero_against_target(data: object) -> object:
    """A spec's raw data with ``runner.warmup_runs: 0`` when it has a ``target`` and does not set
    the field (a ``mode="before"`` model validator's body); otherwise unchanged."""
    if not isinstance(data, dict) or data.get("target") is None:
        return data
    runner = data.get("runner")
    if runner is None:
        return {**data, "runner": {"warmup_runs": 0}}
    if isinstance(runner, dict) and "warmup_runs" not in runner:
        return {**data, "runner": {**runner, "warmup_runs": 0}}
    if isinstance(runner, BaseModel) and "warmup_runs" not in runner.model_fields_set:
        return {**data, "runner": runner.model_copy(update={"warmup_runs": 0})}
    return data


def check_target(has_target: bool, warmup_runs: int) -> None:
    """ValueError for warm-up runs against an existing cloud (see the module doc)."""
    if has_target and warmup_runs:
        raise ValueError(f"runner.warmup_runs: {warmup_runs}, not with a target (an existing cloud is not a "
                         "fresh deployment Juice brings up; warm-up runs would send requests --dry-run "
                         "does not list): 0 or leave it out")
