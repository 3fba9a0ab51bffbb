"""Is B slower than A? Per measured sample (``iteration``, each atomic action, ``call_s``,
``boot_s``, ``read_s``...), Δ mean and Δ p95 of each side against the first, with bootstrap
intervals, and a verdict that holds over all the tests made at once.

**Intervals.** Each side's values are resampled with ``juice.analysis.bootstrap.replicates``
(its runs are clusters: with several runs on a side, the spread between runs counts); the
difference of replicates gives a percentile interval at ``level`` (95 %).

**Verdict.** A bootstrap p-value per test (twice the smaller share of difference replicates on
either side of 0), then Holm's step-down correction over every test of the comparison (each
metric × {mean, p95} × side): a difference is "real" when its corrected p-value is below
``1 - level``, else "within noise". Comparing a result set with itself is always within noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from juice.analysis.bootstrap import LEVEL, group_rng, interval, replicates
from juice.results.samples import Unit

STATS = ("mean", "p95")
MIN_VALUES = 2


@dataclass
class Delta:
    metric: str
    stat: str  # mean | p95
    side: str  # compared with the first side
    base: float
    value: float
    delta: float
    lo: float
    hi: float
    p: float
    p_holm: float = float("nan")
    verdict: str = ""
    n_base: int = 0
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def pooled(units: Sequence[Unit], metric: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(values, cluster code per value) of ``metric`` over a side's units."""
    vals, codes = [], []
    for i, u in enumerate(units):
        v = u.samples.get(metric)
        if v is not None and len(v):
            vals.append(v)
            codes.append(np.full(len(v), i, np.int64))
    if not vals:
        return np.zeros(0), np.zeros(0, np.int64)
    return np.concatenate(vals), np.concatenate(codes)


def p_value(diff: np.ndarray[Any, Any]) -> float:
    if np.isnan(diff).any():
        return float("nan")
    return min(1.0, 2 * min(float(np.mean(diff <= 0)), float(np.mean(diff >= 0))))


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted)."""
    idx = sorted((i for i, p in enumerate(ps) if not math.isnan(p)), key=lambda i: ps[i])
    m = len(idx)
    out = [float("nan")] * len(ps)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def metrics_of(sides: Mapping[str, Sequence[Unit]]) -> list[str]:
    """Samples measured on every side, ``iteration`` first, in a stable order."""
    common: set[str] | None = None
    for units in sides.values():
        have = {m for u in units for m, v in u.samples.items() if len(v)}
        common = have if common is None else common & have
    return sorted(common or (), key=lambda m: (m != "iteration", m.startswith("atomic:"), m))


def compare(sides: Mapping[str, Sequence[Unit]], level: float = LEVEL) -> list[Delta]:
    names = list(sides)
    base_name = names[0]
    out: list[Delta] = []
    for metric in metrics_of(sides):
        bv, bc = pooled(sides[base_name], metric)
        if len(bv) < MIN_VALUES:
            continue
        breps = replicates(bv, None, bc, (0.95,), group_rng("compare", metric, "base"))
        for name in names[1:]:
            v, c = pooled(sides[name], metric)
            if len(v) < MIN_VALUES:
                continue
            reps = replicates(v, None, c, (0.95,), group_rng("compare", metric, "side"))
            for stat in STATS:
                a = float(np.mean(bv)) if stat == "mean" else float(np.quantile(bv, 0.95))
                b = float(np.mean(v)) if stat == "mean" else float(np.quantile(v, 0.95))
                diff = (reps.mean - breps.mean) if stat == "mean" else \
                    (reps.quantiles[0] - breps.quantiles[0])
                lo, hi = interval(diff, level)
                out.append(Delta(metric, stat, name, a, b, b - a, lo, hi, p_value(diff),
                                 n_base=len(bv), n=len(v)))
    for d, ph in zip(out, holm([d.p for d in out]), strict=True):
        d.p_holm = ph
        d.verdict = "real" if not math.isnan(ph) and ph < 1 - level else "within noise"
    return out
