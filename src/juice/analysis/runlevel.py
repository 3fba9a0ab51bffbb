"""Verdicts with the RUN as the unit of evidence.

    a = [13.2, 14.1]                      # one statistic per run (a run's mean boot, its p95...)
    b = [15.0, 16.2, 15.5]
    t = difference(a, b)                  # Welch's t over the runs' statistics
    t.delta, (t.lo, t.hi), t.p, t.method, t.verdict
    t = difference([0.105], [0.082], spread=Spread(cv=0.07, df=9, source="calibration ..."))

**Why runs.** The iterations of one run share the deployment's and the machine's state (caches,
connection pools, what else the host is doing); runs of the same configuration minutes apart
differ by more than one run's iterations say (on this project's 2-core machines: 5.8-9.2 % CV
between runs against a 1.1-1.6 % standard error within one). An interval that resamples the
iterations of one run a side leaves the run-to-run variation out and calls most A/A pairs
"real". Here each run contributes ONE value, its statistic, and the spread between runs is
what a difference is judged against.

**Which test.** The difference of the sides' mean run statistics, ``b - a``, with a Student-t
interval:

- both sides with >= 2 runs and no calibration: Welch's t (each side's own variance,
  Welch-Satterthwaite degrees of freedom). For a balanced design this is the test of the fixed
  effect of a random-intercept (runs) mixed model fitted to the iterations, without needing
  one: the run means carry all the information about a run-level factor. A cluster bootstrap
  (resample runs, then iterations) needs many runs to reach its level: with 2-5 runs a side
  its percentile intervals are too narrow (the bootstrap variance of a mean of k clusters is
  (k-1)/k of the sample's and its tails are those of k points), which is why t is used.
- a side with one run, or a calibration at hand: a pooled relative run-to-run spread (the CV
  of a run's statistic) from every side with >= 2 runs and the host's calibration (A/A runs,
  ``juice.analysis.calibration``), weighted by their degrees of freedom; each side's standard
  error is that CV times its own mean over sqrt(its runs). This assumes the run-to-run CV does
  not depend on the configuration (true for A/A; stated in the output as the method).
  Metrics that are not strictly positive (a failure percentage that is 0) pool absolute
  standard deviations instead.
- one run a side and no calibration: no verdict (``UNKNOWN``): the interval would rest on the
  within-run spread alone.

``p`` is the two-sided t p-value; callers correct for multiple tests (Holm) where they make
several at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy.typing as npt

LEVEL = 0.95
REAL = "real"
NOISE = "within noise"
UNKNOWN = "one run a side: run-to-run variation unknown"
WELCH = "runs (Welch t)"
POOLED = "runs (pooled run-to-run CV)"
SAME = "the same runs on both sides"


@dataclass(frozen=True)
class Spread:
    """A run-to-run spread of one statistic: relative (``cv``: SD of a run's statistic over its
    mean) and absolute (``sd``), with its degrees of freedom and where it comes from."""

    cv: float
    df: int
    source: str
    sd: float = float("nan")
    covers_sides: bool = False  # already pooled over the compared sides' runs: not added again


@dataclass(frozen=True)
class RunDiff:
    """``b`` against ``a`` (means of the runs' statistics), ``b - a`` with its interval."""

    base: float
    value: float
    delta: float
    lo: float
    hi: float
    p: float
    method: str
    n_base: int  # runs
    n: int
    df: float = float("nan")

    @property
    def verdict(self) -> str:
        """Unadjusted: REAL when the interval excludes 0, NOISE, or UNKNOWN (no interval)."""
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            return UNKNOWN
        return REAL if self.lo > 0 or self.hi < 0 else NOISE


# -- Student's t ------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail P(|T| >= |t|) of Student's t with ``df`` degrees of freedom."""
    if not (math.isfinite(t) and df > 0):
        return float("nan")
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile (q > 0.5) of Student's t, by bisection on the tail."""
    if not (0.5 < q < 1.0 and df > 0):
        raise ValueError("t_ppf: 0.5 < q < 1 and df > 0")
    target = 2.0 * (1.0 - q)
    lo, hi = 0.0, 1.0
    while t_sf2(hi, df) > target:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf2(mid, df) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


# -- the difference ---------------------------------------------------------------------

def _mean(v: Sequence[float]) -> float:
    return sum(v) / len(v)


def _var(v: Sequence[float]) -> float:
    m = _mean(v)
    return sum((x - m) ** 2 for x in v) / (len(v) - 1)


def spread_of(stats: Sequence[float], source: str) -> Spread | None:
    """The run-to-run spread of a statistic from its values in several runs of one
    configuration (None with fewer than 2 runs)."""
    v = [float(x) for x in stats if math.isfinite(x)]
    if len(v) < 2:
        return None
    m, sd = _mean(v), math.sqrt(_var(v))
    return Spread(sd / m if m > 0 else float("nan"), len(v) - 1, source, sd)


def pooled_spread(sides: Sequence[Sequence[float]], calibration: Spread | None) -> tuple[Spread | None, bool]:
    """The spread pooled over every side with >= 2 runs and the calibration (df-weighted
    variances): (spread, relative). Relative (CVs) when every side's mean and the calibration's
    CV are positive and finite, else absolute SDs."""
    parts: list[tuple[float, float, int]] = []  # (cv, sd, df)
    for s in sides:
        sp = spread_of(s, "")
        if sp is not None:
            parts.append((sp.cv, sp.sd, sp.df))
    if calibration is not None and calibration.df > 0:
        parts.append((calibration.cv, calibration.sd, calibration.df))
    if not parts:
        return None, True
    means_ok = all(len(s) and _mean(s) > 0 for s in sides)
    relative = means_ok and all(math.isfinite(cv) and cv >= 0 for cv, _, _ in parts)
    df = sum(d for _, _, d in parts)
    if relative:
        var = sum(d * cv * cv for cv, _, d in parts) / df
        return Spread(math.sqrt(var), df, "pooled"), True
    if not all(math.isfinite(sd) for _, sd, _ in parts):
        return None, False
    var = sum(d * sd * sd for _, sd, d in parts) / df
    return Spread(float("nan"), df, "pooled", math.sqrt(var)), False


def difference(a: Sequence[float], b: Sequence[float], spread: Spread | None = None,
               level: float = LEVEL) -> RunDiff:
    """``b - a`` over the runs' statistics (see the module). ``spread``: the host's calibrated
    run-to-run spread of this statistic, if any."""
    av = [float(x) for x in a if math.isfinite(x)]
    bv = [float(x) for x in b if math.isfinite(x)]
    nan = float("nan")
    if not av or not bv:
        return RunDiff(nan, nan, nan, nan, nan, nan, "no runs", len(av), len(bv))
    ma, mb = _mean(av), _mean(bv)
    delta = mb - ma
    if sorted(av) == sorted(bv):  # the same runs on both sides (a result set against itself)
        return RunDiff(ma, mb, 0.0, 0.0, 0.0, 1.0, SAME, len(av), len(bv))
    if spread is None and len(av) >= 2 and len(bv) >= 2:
        va, vb = _var(av) / len(av), _var(bv) / len(bv)
        se2 = va + vb
        if se2 <= 0:
            df = float(len(av) + len(bv) - 2)
            return _with(ma, mb, 0.0, df, WELCH, len(av), len(bv), level)
        df = se2 * se2 / ((va * va / (len(av) - 1)) + (vb * vb / (len(bv) - 1)))
        return _with(ma, mb, math.sqrt(se2), df, WELCH, len(av), len(bv), level)
    pooled: Spread | None
    if spread is not None and spread.covers_sides:
        pooled, relative = spread, math.isfinite(spread.cv) and ma > 0 and mb > 0
    else:
        pooled, relative = pooled_spread([av, bv], spread)
    if pooled is None:
        return RunDiff(ma, mb, delta, nan, nan, nan, UNKNOWN, len(av), len(bv))
    if relative:
        se = pooled.cv * math.sqrt(ma * ma / len(av) + mb * mb / len(bv))
    else:
        se = pooled.sd * math.sqrt(1.0 / len(av) + 1.0 / len(bv))
    own = any(len(s) >= 2 for s in (av, bv)) and not (spread is not None and spread.covers_sides)
    method = POOLED if spread is None else spread.source + (" + these runs" if own else "")
    return _with(ma, mb, se, float(pooled.df), method, len(av), len(bv), level)


def _with(ma: float, mb: float, se: float, df: float, method: str, na: int, nb: int,
          level: float) -> RunDiff:
    delta = mb - ma
    if se == 0.0:
        if delta == 0.0:
            return RunDiff(ma, mb, delta, 0.0, 0.0, 1.0, method, na, nb, df)
        return RunDiff(ma, mb, delta, delta, delta, 0.0, method, na, nb, df)
    half = t_ppf(0.5 + level / 2.0, df) * se
    return RunDiff(ma, mb, delta, delta - half, delta + half, t_sf2(delta / se, df), method, na, nb, df)


def runs_needed(cv: float, effect: float, level: float = LEVEL, power: float = 0.8,
                df_calibration: int | None = None, max_runs: int = 200) -> int | None:
    """Runs a side for a two-sided test at ``level`` to detect a relative change ``effect``
    (0.10 = 10 %) with ``power``, when a run's statistic has run-to-run CV ``cv``: the smallest
    n with t_{1-α/2, df} + t_{power, df} <= effect / (cv · sqrt(2/n)) (df = 2n - 2, or the
    calibration's plus the runs' when the calibration is pooled in). None above ``max_runs``."""
    if not (cv > 0 and effect > 0):
        return None
    for n in range(2, max_runs + 1):
        df = 2 * n - 2 + (df_calibration or 0)
        need = t_ppf(0.5 + level / 2.0, df) + t_ppf(power, df)
        if effect / (cv * math.sqrt(2.0 / n)) >= need:
            return n
    return None


def stat_of(values: npt.ArrayLike | None, stat: str) -> float:
    """A run's ``stat`` ("mean" or "p95") of its ``values`` (NaN without at least 2 values,
    or 1 for the mean)."""
    import numpy as np

    if values is None:
        return float("nan")
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if stat == "mean":
        return float(v.mean()) if len(v) else float("nan")
    if stat == "p95":
        return float(np.quantile(v, 0.95)) if len(v) >= 2 else float("nan")
    raise ValueError(f"stat_of: unknown statistic {stat!r}")
