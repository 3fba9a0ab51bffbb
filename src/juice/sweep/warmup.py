"""Warm-up runs: the runs the sweep makes on a fresh deployment before measuring, never counted.

    k = runs_of(spec)                       # the spec's runner.warmup_runs (0 without the field)
    firsts = firsts_of(todo)                # the first point of each deployment to bring up
    seconds = estimate_s(study, todo, k)    # what they add to the plan

Why (issue 38): a fresh deployment's first run is slower than its later ones, even after
Keystone's pre-warm (MariaDB authenticate at 0 ms: a mean iteration of 0.241 s in position 1,
0.174 s in position 8). The point that comes first in a deployment carries that bias into
every comparison it takes part in. A discarded run of that same point, through the same
``study.run_point``, takes the first-run cost instead of it.

What a warm-up run is: the first point of its deployment in the run order (the one its first
measured run runs), run ``k`` times before it; stored as ``<run>-<stamp>.warmup``
(``juice.results.store.RunDir`` with ``WARMUP_SUFFIX``; ``.warmup.failed`` when it fails) with
``warmup_run: true`` and ``order`` (mode, seed, deployment, ``warmup_runs``, ``warmup_index``)
in its manifest. Its profile and deviations are kept as for any run; no SLA verdict is
recorded and nothing counts it (``juice.results.store.counted``, ``juice.sweep.sweep.completed``
also skips a ``warmup_run`` manifest wherever it lies). Every measured run's ``order`` gets
``warmup_runs``: how many warm-up runs its deployment had (its ``position`` still counts the
measured runs only: 0 = the first measured run).

A warm-up run costs one run of the deployment's first point; ``juice plan`` adds it to its
estimate and says so. Deployments whose points are all complete are not brought up, so a
resumed sweep runs no warm-up for them; a deployment brought up again for its remaining points
gets its warm-up again (it is fresh again). A warm-up run that fails is kept as
``.warmup.failed`` and the measured runs go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from juice.contract import P, S, Study


def runs_of(spec: object) -> int:
    """The spec's ``runner.warmup_runs``; 0 for a spec without that field."""
    n = getattr(getattr(spec, "runner", None), "warmup_runs", 0)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def firsts_of(points: Sequence[P]) -> list[P]:
    """The first point of each deployment the sweep brings up for ``points`` (in run order:
    one per run of adjacent points with equal ``lab_key`` and ``deployment_key``)."""
    return [next(g) for _k, g in groupby(points, key=lambda p: (p.lab_key, p.deployment_key))]


def estimate_s(study: Study[S, P], todo: Sequence[P], k: int) -> float:
    """Seconds the warm-up runs of ``todo``'s deployments add (``k`` runs of each first point)."""
    return float(k * sum(study.estimate_s(p) for p in firsts_of(todo))) if k else 0.0


def plan_line(k: int, deployments: int, took: str) -> str:
    """What ``juice plan`` says about them (``took``: their estimate, formatted)."""
    if not k:
        return "warm-up runs: none (runner.warmup_runs is 0, or not a field of this spec)"
    if not deployments:
        return f"warm-up runs: none to make ({k} per deployment brought up; every deployment is complete)"
    return (f"warm-up runs: {k * deployments} ({k} per deployment brought up, runner.warmup_runs: its "
            f"first point before its measured runs, kept as <run>.warmup, not counted), {took} of "
            "the estimate")
