"""What differs between the sides of a comparison, before any number (Browbeat's metadata
compare): run parameters first, then software versions, deployment facts, task arguments, the
Juice version and the host.

    rows = differences({"A": units_a, "B": units_b})   # [(key, {"A": "0.0", "B": "50.0"})]

A side's value of a key is the one value its runs share, or ``a | b`` when its runs differ.
Identity fields (run ids, repetitions, times of day) are left out: they always differ.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from juice.analysis.configkey import IGNORED
from juice.results.samples import F64, Unit

FAILURE = "failure_pct"  # a run's failed iterations in percent, where it has iterations
SECTIONS = ("params", "versions", "deployment", "task_args", "juice", "host")
# IGNORED (identity fields, never compared): the configuration key's (juice.analysis.configkey)


def _flat(d: object, prefix: str) -> dict[str, str]:
    if isinstance(d, Mapping):
        out: dict[str, str] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: d if isinstance(d, str) else json.dumps(d, sort_keys=True)}


def facts(unit: Unit) -> dict[str, str]:
    """The unit's comparable facts, flattened (``params.delay_ms`` -> ``"50.0"``)."""
    out: dict[str, str] = {}
    for s in SECTIONS:
        v = unit.meta.get(s)
        if v is not None:
            out.update(_flat(v, s))
    return {k: v for k, v in out.items() if k not in IGNORED}


def side_values(units: Sequence[Unit]) -> dict[str, str]:
    vals: dict[str, list[str]] = {}
    for u in units:
        for k, v in facts(u).items():
            if v not in vals.setdefault(k, []):
                vals[k].append(v)
    return {k: " | ".join(v) for k, v in vals.items()}


def differences(sides: Mapping[str, Sequence[Unit]]) -> list[tuple[str, dict[str, str]]]:
    """Keys whose values differ between sides (absent counts as ``-``), parameters first."""
    per = {name: side_values(units) for name, units in sides.items()}
    keys = sorted({k for v in per.values() for k in v},
                  key=lambda k: (SECTIONS.index(k.split(".")[0]) if k.split(".")[0] in SECTIONS else 99, k))
    out = []
    for k in keys:
        row = {name: per[name].get(k, "-") for name in sides}
        if len(set(row.values())) > 1:
            out.append((k, row))
    return out


def config_of(unit: Unit) -> dict[str, str]:
    """What makes runs "the same configuration": workload + parameters without identity."""
    params = unit.meta.get("params")
    out = {"workload": str(unit.workload)}
    if isinstance(params, dict) and params:
        for k in sorted(params):
            if f"params.{k}" not in IGNORED:
                v = params[k]
                out[k] = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    elif unit.meta.get("run_key"):
        out["run_key"] = str(unit.meta["run_key"])
    return out


def failures_of(unit: Unit) -> F64 | None:
    if not unit.iterations:
        return None
    return np.asarray([100.0 if d.get("error") else 0.0 for d in unit.iterations], dtype=np.float64)


def values_of(unit: Unit, metric: str) -> F64 | None:
    return failures_of(unit) if metric == FAILURE else unit.samples.get(metric)
