"""Is B slower than A? Per measured sample (``iteration``, each atomic action, ``call_s``,
``boot_s``, ``read_s``...), Δ mean and Δ p95 of each side against the first, with intervals
whose unit of evidence is the RUN, and a verdict that holds over all the tests made at once.

**Intervals.** Each run contributes one value per statistic (its mean, its p95); the sides are
compared on those (``juice.analysis.runlevel``): Welch's t with two or more runs a side; a
pooled run-to-run CV when a side has one run and the other several, or when this host has a
calibration (``juice calibrate``, ``juice.compare.calibration``); with one run a side and no
calibration there is NO verdict ("one run a side: run-to-run variation unknown"), because the
iterations of one run share its deployment's state and cannot show how much the next run
would differ. ``method`` says which, per row.

**Only means lean on a calibration.** A run's p95 has heavy tails between runs (one run in
twenty with a GC pause or a slow worker has a p95 twice the others'): judged one run a side
against a calibrated spread, A/A pairs were called "real" in 10-12 % of cases on this
project's machines, against 0-2 % for the mean (benchmarks/verdicts.md). So a p95 needs runs
on its sides (two or more on one side at least) to be judged.

**Verdict.** The two-sided t p-value per test, then Holm's step-down correction over every
test of the comparison that has one (each metric × {mean, p95} × side): a difference is
"real" when its corrected p-value is below ``1 - level``, else "within noise". Comparing a
result set with itself is always within noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from juice.analysis.runlevel import LEVEL, UNKNOWN, difference, stat_of
from juice.compare.calibration import Store, spread_for
from juice.results.samples import F64, Unit

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
    n_base: int = 0  # values
    n: int = 0
    method: str = ""  # juice.analysis.runlevel: how the interval was made
    runs_base: int = 0
    runs: int = 0

    def to_dict(self) -> dict[str, object]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def pooled(units: Sequence[Unit], metric: str) -> tuple[F64, npt.NDArray[np.int64]]:
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


def p_value(diff: F64) -> float:
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


def compare(sides: Mapping[str, Sequence[Unit]], level: float = LEVEL,
            calibration: Store | None = None) -> list[Delta]:
    names = list(sides)
    base_name = names[0]
    out: list[Delta] = []
    for metric in metrics_of(sides):
        bv, _ = pooled(sides[base_name], metric)
        if len(bv) < MIN_VALUES:
            continue
        for name in names[1:]:
            v, _ = pooled(sides[name], metric)
            if len(v) < MIN_VALUES:
                continue
            for stat in STATS:
                a_runs = [stat_of(u.samples.get(metric), stat) for u in sides[base_name]]
                b_runs = [stat_of(u.samples.get(metric), stat) for u in sides[name]]
                spread = None
                if calibration is not None and stat == "mean":  # see CALIBRATED_STATS
                    spread = spread_for(calibration, sides[base_name], metric, stat) \
                        or spread_for(calibration, sides[name], metric, stat)
                r = difference(a_runs, b_runs, spread, level)
                a = float(np.mean(bv)) if stat == "mean" else float(np.quantile(bv, 0.95))
                b = float(np.mean(v)) if stat == "mean" else float(np.quantile(v, 0.95))
                out.append(Delta(metric, stat, name, a, b, b - a, r.lo, r.hi, r.p,
                                 n_base=len(bv), n=len(v), method=r.method, runs_base=r.n_base,
                                 runs=r.n))
    for d, ph in zip(out, holm([d.p for d in out]), strict=True):
        d.p_holm = ph
        if math.isnan(ph):
            d.verdict = UNKNOWN if d.method == UNKNOWN else "–"
        else:
            d.verdict = "real" if ph < 1 - level else "within noise"
    return out
