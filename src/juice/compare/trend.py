"""A figure followed over time (Rally's ``task trends``, with uncertainty): runs of the same
configuration, ordered by when they ran, each metric with its bootstrap interval, and the
step changes between consecutive runs that are real.

    for s in trend(units([Path("results/nightly")])):
        s.config, [r.name for r in s.runs], [(p.metric, p.stat) for p in s.points]
        [st for st in s.steps if st.verdict == "real"]   # "between run 3 and run 4"

**Same configuration.** Runs are grouped by what they stored, never by their directory
names: the workload and the run's parameters (``manifest.json`` ``params``; Rally: the
scenario and its runner) without the identity fields that always differ (``run_id``,
``repetition``, ``source``, ``task``: ``juice.compare.metadata.IGNORED``); a run without
parameters falls back to its ``run_key``. **Time** is the manifest's ``started_at`` (Rally:
the workload's or the task's ``created_at``); a run without one cannot be placed (UserError).

**Metrics.** Every sample ``juice.results.samples`` knows (``iteration``, ``atomic:<action>``,
``call_s``, ``oneway_s``, ``boot_s``, ``nova_boot_s``, ``read_s``) as mean and p95, and
``failure_pct`` (failed iterations, in percent) when runs have iterations. Intervals: the
run's values resampled (``juice.analysis.bootstrap.replicates``; ``failure_pct`` is the mean
of 0/100 per iteration), a percentile interval at ``level``.

**Steps.** For each consecutive pair of runs and each metric × stat: one run a side, so the
run is the unit (``juice.analysis.runlevel``) and the step is judged against this host's
calibrated run-to-run variation (``juice calibrate``; ``juice.compare.calibration``), never
against the spread of the iterations inside the two runs. Without a calibration a step has no
verdict ("one run a side: run-to-run variation unknown"); a p95 step never has one (a run's
p95 is too heavy-tailed between runs: ``juice.compare.deltas``). The t p-values of the steps that
have one are Holm-corrected together (all series): a step is "real" when its corrected
p-value is below ``1 - level``. A run's own interval (``points``) still resamples its
iterations: it describes that run, it does not judge a change.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from juice.analysis.bootstrap import LEVEL, Replicates, group_rng, interval, replicates
from juice.analysis.runlevel import UNKNOWN, difference
from juice.compare.calibration import Store
from juice.compare.deltas import MIN_VALUES, holm
from juice.compare.metadata import FAILURE, config_of
from juice.compare.metadata import values_of as _values
from juice.errors import UserError
from juice.results.samples import F64, Unit

STATS = ("mean", "p95")


def _clean(d: dict[str, object]) -> dict[str, object]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


@dataclass
class TrendRun:
    name: str
    path: str
    time: float  # epoch seconds
    n: int  # iterations (or values of the first sample) in the run

    @property
    def when(self) -> str:
        return dt.datetime.fromtimestamp(self.time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class Point:
    """One metric × stat of one run."""

    metric: str
    stat: str  # mean | p95
    run: int  # index in the series' runs
    value: float
    lo: float
    hi: float
    n: int


@dataclass
class Step:
    """The change of a metric × stat from run ``before`` to run ``after`` (= before + 1)."""

    metric: str
    stat: str
    before: int
    after: int
    delta: float
    lo: float
    hi: float
    p: float
    p_holm: float = float("nan")
    verdict: str = ""
    method: str = ""


@dataclass
class Series:
    config: dict[str, str]  # the shared configuration (flattened)
    runs: list[TrendRun]
    points: list[Point] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config.items()) or "(no parameters recorded)"

    def metrics(self) -> list[tuple[str, str]]:
        """(metric, stat) pairs in the order first seen."""
        return list(dict.fromkeys((p.metric, p.stat) for p in self.points))

    def to_dict(self) -> dict[str, object]:
        return {"config": self.config, "label": self.label,
                "runs": [{**asdict(r), "when": r.when} for r in self.runs],
                "points": [_clean(asdict(p)) for p in self.points],
                "steps": [_clean(asdict(s)) for s in self.steps]}


def _when(unit: Unit) -> float:
    raw = unit.meta.get("started_at")
    if raw is None:
        raw = unit.meta.get("created_at")
    if isinstance(raw, int | float) and math.isfinite(raw):
        return float(raw)
    if isinstance(raw, str) and raw:
        try:
            t = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).timestamp()
    where = unit.path / "manifest.json" if unit.kind == "juice" else unit.path
    raise UserError(f"{where}: run {unit.name} has no start time (started_at / created_at): it "
                    "cannot be placed in a trend; leave it out")


def _metrics(group: Sequence[Unit]) -> list[str]:
    have = {m for u in group for m, v in u.samples.items() if len(v) >= MIN_VALUES}
    out = sorted(have, key=lambda m: (m != "iteration", m.startswith("atomic:"), m))
    if any(u.iterations for u in group):
        out.insert(1 if "iteration" in have else 0, FAILURE)
    return out


def _stat(v: F64, stat: str) -> float:
    return float(np.mean(v)) if stat == "mean" else float(np.quantile(v, 0.95))


def _rep(r: Replicates, stat: str) -> F64:
    out: F64 = r.mean if stat == "mean" else r.quantiles[0]
    return out


def group(units: Sequence[Unit]) -> list[tuple[dict[str, str], list[Unit]]]:
    """Units grouped by configuration, each group in time order (ties: by name)."""
    groups: dict[str, tuple[dict[str, str], list[Unit]]] = {}
    for u in units:
        cfg = config_of(u)
        groups.setdefault(json.dumps(cfg, sort_keys=True), (cfg, []))[1].append(u)
    out = []
    for cfg, us in groups.values():
        timed = sorted(((_when(u), u.name, i) for i, u in enumerate(us)))
        out.append((cfg, [us[i] for _, _, i in timed]))
    return out


def series_of(cfg: dict[str, str], runs: Sequence[Unit], level: float = LEVEL,
              calibration: Store | None = None) -> Series:
    """One configuration's series (steps uncorrected: :func:`trend` corrects them all)."""
    s = Series(cfg, [])
    for u in runs:
        n = len(u.iterations) if u.iterations is not None else \
            max((len(v) for v in u.samples.values()), default=0)
        s.runs.append(TrendRun(u.name, str(u.path), _when(u), n))
    for metric in _metrics(runs):
        reps: list[Replicates | None] = []
        vals: list[F64 | None] = []
        for i, u in enumerate(runs):
            v = _values(u, metric)
            ok = v is not None and len(v) >= MIN_VALUES
            vals.append(v if ok else None)
            reps.append(replicates(v, None, None, (0.95,), group_rng("trend", metric, u.name, i))
                        if ok and v is not None else None)
        for stat in (("mean",) if metric == FAILURE else STATS):
            for i, (v, r) in enumerate(zip(vals, reps, strict=True)):
                if v is not None and r is not None:
                    lo, hi = interval(_rep(r, stat), level)
                    s.points.append(Point(metric, stat, i, _stat(v, stat), lo, hi, len(v)))
            for i in range(len(runs) - 1):
                a, b, ra, rb = vals[i], vals[i + 1], reps[i], reps[i + 1]
                if a is None or b is None or ra is None or rb is None:
                    continue
                spread = calibration.spread(str(cfg.get("workload")), cfg, metric, stat) \
                    if calibration is not None and stat == "mean" else None  # as compare.deltas
                d = difference([_stat(a, stat)], [_stat(b, stat)], spread, level)
                s.steps.append(Step(metric, stat, i, i + 1, d.delta, d.lo, d.hi, d.p,
                                    method=d.method))
    return s


def trend(units: Sequence[Unit], level: float = LEVEL, calibration: Store | None = None) -> list[Series]:
    """Every configuration's series (those with one run included: no step), the step tests
    Holm-corrected together; series with the most runs first."""
    out = [series_of(cfg, us, level, calibration) for cfg, us in group(units)]
    steps = [st for s in out for st in s.steps]
    for st, ph in zip(steps, holm([st.p for st in steps]), strict=True):
        st.p_holm = ph
        if math.isnan(ph):
            st.verdict = UNKNOWN if st.method == UNKNOWN else "–"
        else:
            st.verdict = "real" if ph < 1 - level else "within noise"
    return sorted(out, key=lambda s: (-len(s.runs), s.label))
