"""Judge one unit (a run, or a Rally workload) against an ``Sla``.

    verdict = judge(unit, sla)        # unit: juice.results.samples.Unit
    verdict.passed, verdict.results   # [{"criterion", "success", "detail", ...}]

Rally's six criteria are fed the unit's iterations in order (``juice.sla.rally``); the rest
read its samples and counts. Every result has Rally's three keys (``criterion``, ``success``,
``detail``) plus ``value`` and ``limit`` (and ``interval`` with ``confidence``); a criterion
whose data the unit lacks fails and says so (a check that cannot be made is not a pass).

With ``confidence: c`` an estimate passes only if its interval at level ``c`` lies inside the
limit: proportions (failure rate, success %) use the Wilson score interval (it stays honest at
0 failures, where a bootstrap collapses to a point), means and percentiles the percentile
bootstrap of ``juice.analysis.bootstrap`` (fixed seed: a verdict re-made is the same).

**What the interval covers.** An SLA is about the configuration, and a run is one draw of it:
the next run of the same configuration differs by more than its iterations say. Where this
host has a calibration (``juice calibrate``: ``juice.compare.calibration``) for the run's
configuration and a mean, the mean's interval is the run-to-run one, value ± t · CV · value
(the CV of a run's mean between A/A runs already holds the spread within a run); the
result's ``interval_method`` says so. Without one, the interval resamples this run's
iterations only, and its detail says the run-to-run variation is not in it. Percentiles and
proportions are always within the run (a run's p95 is too heavy-tailed between runs to
calibrate: ``juice.compare.deltas``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Required, TypedDict

import numpy as np

from juice.analysis.bootstrap import group_rng, interval, replicates
from juice.analysis.runlevel import Spread, t_ppf
from juice.compare.calibration import Store, spread_for
from juice.results.samples import F64, Unit
from juice.sla import rally
from juice.sla.criteria import Sla


class Result(TypedDict, total=False):
    """One criterion's verdict (a stored verdict's ``results`` entry; Rally's three keys first)."""

    criterion: Required[str]
    success: Required[bool]
    detail: Required[str]
    value: float | dict[str, float] | None
    limit: object  # the criterion's configuration: a number or a mapping
    interval: list[float] | dict[str, list[float]]
    interval_method: str | dict[str, str]


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(k: int, n: int, level: float) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n, in percent."""
    if n <= 0:
        return (float("nan"), float("nan"))
    z = _z(level)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (100.0 * max(0.0, mid - half), 100.0 * min(1.0, mid + half))


def stat(values: F64, name: str) -> float:
    if not len(values):
        return float("nan")
    if name == "mean":
        return float(np.mean(values))
    if name == "max":
        return float(np.max(values))
    return float(np.quantile(values, int(name[1:]) / 100))


def stat_interval(values: F64, name: str, level: float, *key: object) -> tuple[float, float]:
    """Bootstrap interval of ``stat(values, name)`` (``max`` has none: NaN)."""
    if name == "max" or len(values) < 2:
        return (float("nan"), float("nan"))
    q = 0.5 if name == "mean" else int(name[1:]) / 100
    reps = replicates(values, None, None, (q,), group_rng("sla", name, *key))
    return interval(reps.mean if name == "mean" else reps.quantiles[0], level)


@dataclass
class Verdict:
    unit: str
    results: list[Result] = field(default_factory=list)
    confidence: float | None = None

    @property
    def passed(self) -> bool:
        return all(r["success"] for r in self.results)

    def rally(self) -> list[rally.CriterionResult]:
        """Rally's ``sla_results["sla"]``: the three keys of each result."""
        return [{"criterion": r["criterion"], "success": bool(r["success"]), "detail": r["detail"]}
                for r in self.results]

    def to_dict(self) -> dict[str, object]:
        return {"pass": self.passed, "confidence": self.confidence, "results": self.results}


def _status(ok: bool) -> str:
    return "Passed" if ok else "Failed"


WITHIN = "within this run only (run-to-run variation not in it; juice calibrate)"


def _with_ci(res: Result, ci: tuple[float, float], ok: bool, level: float, unit: str = "",
             method: str = WITHIN) -> None:
    lo, hi = ci
    res["interval"] = [lo, hi]
    res["interval_method"] = method
    res["success"] = bool(res["success"] and ok)
    shown = "n/a" if math.isnan(lo) else f"{lo:.3f}{unit}..{hi:.3f}{unit}"
    res["detail"] += f" ({level:.0%} interval {shown}, {method}: {_status(ok)})"


def mean_interval(values: F64, level: float, spread: Spread | None,
                  *key: object) -> tuple[tuple[float, float], str]:
    """(interval, method) of a run's mean as an estimate of its configuration's mean."""
    if spread is not None and len(values) and math.isfinite(spread.cv) and spread.df > 0:
        m = float(np.mean(values))
        half = t_ppf(0.5 + level / 2.0, spread.df) * spread.cv * abs(m)
        return (m - half, m + half), f"run-to-run, {spread.source}"
    return stat_interval(values, "mean", level, *key), WITHIN


def _rally_part(unit: Unit, sla: Sla, level: float | None,
                spread: Callable[[str], Spread | None]) -> list[Result]:
    config = sla.rally_config()
    if not config:
        return []
    if unit.iterations is None:
        return [{"criterion": k, "success": False, "value": None, "limit": v,
                 "detail": f"no iterations in {unit.name}: {k} cannot be judged - Failed"}
                for k, v in config.items()]
    crits = rally.checker(config)
    for it in unit.iterations:
        for c in crits:
            c.add(it)
    out: list[Result] = []
    ok_durs = unit.samples.get("iteration", np.zeros(0))
    for c in crits:
        verdict = c.result()
        r: Result = {"criterion": verdict["criterion"], "success": verdict["success"],
                     "detail": verdict["detail"],
                     "limit": config[c.name]}
        if isinstance(c, rally.FailureRate):
            r["value"] = c.rate
            if level is not None:
                lo, hi = wilson(c.errors, c.total, level)
                ok = c.total > 0 and lo >= c.min and hi <= c.max
                _with_ci(r, (lo, hi), ok, level, "%")
        elif isinstance(c, rally.IterationTime):
            r["value"] = c.longest
        elif isinstance(c, rally.MaxAverageDuration):
            r["value"] = c.avg
            if level is not None:
                ci, how = mean_interval(ok_durs, level, spread("iteration"), unit.name)
                _with_ci(r, ci, not math.isnan(ci[1]) and ci[1] <= float(c.value), level, "s", how)
        elif isinstance(c, rally.MaxAverageDurationPerAtomic):
            r["value"] = {a: c.avg(a) for a in c.value}
            if level is not None:
                got = {a: mean_interval(unit.samples.get(f"atomic:{a}", np.zeros(0)), level,
                                        spread(f"atomic:{a}"), unit.name, a) for a in c.value}
                cis = {a: ci for a, (ci, _) in got.items()}
                ok = all(not math.isnan(hi) and hi <= float(c.value[a]) for a, (lo, hi) in cis.items())
                r["interval"] = {a: list(ci) for a, ci in cis.items()}
                r["interval_method"] = {a: how for a, (_, how) in got.items()}
                r["success"] = bool(r["success"] and ok)
                r["detail"] += f" ({level:.0%} intervals' upper ends " + ", ".join(
                    f"{a}: {ci[1]:.3f}s" for a, ci in cis.items()) + f": {_status(ok)})"
        elif isinstance(c, rally.Outliers):
            r["value"] = c.outliers
        elif isinstance(c, rally.PerformanceDegradation):
            r["value"] = c.degradation()
        out.append(r)
    return out


def _count(unit: Unit, key: str, label: str, limit: int) -> Result:
    v = unit.counts.get(key)
    if v is None:
        return {"criterion": key, "success": False, "value": None, "limit": {"max": limit},
                "detail": f"{label}: not measured in {unit.name} - Failed"}
    ok = v <= limit
    return {"criterion": key, "success": ok, "value": v, "limit": {"max": limit},
            "detail": f"{label} {v:g} <= {limit} - {_status(ok)}"}


def _success_pct(unit: Unit, minimum: float, level: float | None) -> Result:
    its = unit.iterations
    if not its:
        return {"criterion": "success_pct", "success": False, "value": None, "limit": {"min": minimum},
                "detail": f"Success rate: no iterations in {unit.name} - Failed"}
    k = sum(1 for d in its if not d.get("error"))
    v = 100.0 * k / len(its)
    r: Result = {"criterion": "success_pct", "success": v >= minimum, "value": v, "limit": {"min": minimum},
         "detail": f"Success rate {v:.2f}% >= {minimum:.2f}% - {_status(v >= minimum)}"}
    if level is not None:
        ci = wilson(k, len(its), level)
        _with_ci(r, ci, ci[0] >= minimum, level, "%")
    return r


def _percentiles(unit: Unit, metric: str, limits: Mapping[str, float],
                 level: float | None) -> list[Result]:
    out: list[Result] = []
    vals = unit.samples.get(metric)
    for name, lim in limits.items():
        crit = f"percentiles.{metric}.{name}"
        if vals is None or not len(vals):
            out.append({"criterion": crit, "success": False, "value": None, "limit": lim,
                        "detail": f"{metric} {name}: no samples in {unit.name} - Failed"})
            continue
        v = stat(vals, name)
        r: Result = {"criterion": crit, "success": v <= lim, "value": v, "limit": lim,
             "detail": f"{metric} {name} {v:.3f}s <= {lim:.3f}s ({len(vals)} samples) - {_status(v <= lim)}"}
        if level is not None and name != "max":
            ci = stat_interval(vals, name, level, unit.name, metric)
            _with_ci(r, ci, not math.isnan(ci[1]) and ci[1] <= lim, level, "s")
        out.append(r)
    return out


def judge(unit: Unit, sla: Sla, calibration: Store | None = None) -> Verdict:
    """Every criterion of ``sla`` on ``unit`` (Rally's first, in Rally's order); with
    ``calibration``, the means' intervals carry this host's run-to-run variation."""
    level = sla.confidence

    def spread(metric: str) -> Spread | None:
        return spread_for(calibration, [unit], metric, "mean") if calibration is not None else None

    res = _rally_part(unit, sla, level, spread)
    if sla.success_pct is not None:
        res.append(_success_pct(unit, sla.success_pct.min, level))
    if sla.lost is not None:
        res.append(_count(unit, "lost", "Lost deliveries", sla.lost.max))
    if sla.duplicated is not None:
        res.append(_count(unit, "duplicated", "Duplicated deliveries", sla.duplicated.max))
    for metric, lim in sla.percentiles.items():
        res.extend(_percentiles(unit, metric, lim.limits(), level))
    return Verdict(unit.name, res, level)
