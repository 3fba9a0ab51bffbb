"""Rally's six SLA criteria, with Rally's exact semantics and words (Rally 4.x/5.x,
``rally/plugins/task/sla/*.py``; ``rally.common.streaming_algorithms``).

Each criterion is fed the iterations one by one (``add``), like Rally's ``SLAChecker`` during a
task, and says ``success`` and ``detail()`` at any time; ``results(config, iterations)`` gives
Rally's ``sla_results`` list (``{"criterion", "success", "detail"}``) for a workload's ``sla``
config (``{"failure_rate": {"max": 0}, ...}``). What Rally does, kept here on purpose:

- ``failure_rate``: errors / iterations in percent, ``min`` default 0, ``max`` default 100;
- ``max_seconds_per_iteration``: the longest iteration, failed ones included;
- ``max_avg_duration``: mean duration of the successful iterations (0 when none);
- ``max_avg_duration_per_atomic``: per named action, the mean over successful iterations of
  each of its occurrences (top level; an action never seen counts as 0 s);
- ``outliers``: successful iterations only; an iteration is an outlier when at least
  ``min_iterations`` (default 3) were seen and its duration exceeds the threshold
  ``mean + sigmas * std`` (default 3; sample std) of the iterations BEFORE it (a rolling
  approximation, as Rally's own note says); at most ``max`` (default 0);
- ``performance_degradation``: ``(max / min - 1) * 100`` of successful durations.

The iteration order matters for ``outliers`` only: callers pass the order of the file (a Rally
export sorts by start time), Juice's rally.json is written in that order too.
"""

# Rally's detail strings are kept verbatim (its %-formats), so they read exactly as Rally's:
# ruff: noqa: UP031
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypedDict

from juice.util.jsontypes import as_object


def _float_str(num: float) -> str:
    """Rally's ``strutils.format_float_to_str``."""
    s = "%f" % num
    whole, frac = s.split(".")
    return whole + "." + (frac.rstrip("0") or "0")


def _num(v: object) -> float:
    """A number of an iteration record as float (None, absent or not a number: 0)."""
    f = _limit(v)
    return 0.0 if f is None else f


def _failed(it: Mapping[str, object]) -> bool:
    return bool(it.get("error"))


class CriterionResult(TypedDict):
    """One of Rally's ``sla_results["sla"]`` entries (and a Juice verdict's ``results``)."""

    criterion: str
    success: bool
    detail: str


class Criterion:
    name = ""

    def __init__(self) -> None:
        self.success = True

    def add(self, it: Mapping[str, object]) -> bool:
        raise NotImplementedError

    def detail(self) -> str:
        raise NotImplementedError

    def status(self) -> str:
        return "Passed" if self.success else "Failed"

    def result(self) -> CriterionResult:
        return {"criterion": self.name, "success": self.success, "detail": self.detail()}


class FailureRate(Criterion):
    name = "failure_rate"

    def __init__(self, value: Mapping[str, float]) -> None:
        super().__init__()
        self.min = float(value.get("min", 0) if value.get("min") is not None else 0)
        self.max = float(value.get("max", 100) if value.get("max") is not None else 100)
        self.errors = self.total = 0
        self.rate = 0.0

    def add(self, it: Mapping[str, object]) -> bool:
        self.total += 1
        self.errors += _failed(it)
        self.rate = self.errors * 100.0 / self.total
        self.success = self.min <= self.rate <= self.max
        return self.success

    def detail(self) -> str:
        return "Failure rate criteria %.2f%% <= %.2f%% <= %.2f%% - %s" % (
            self.min, self.rate, self.max, self.status())


class IterationTime(Criterion):
    name = "max_seconds_per_iteration"

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.longest = 0.0

    def add(self, it: Mapping[str, object]) -> bool:
        self.longest = max(self.longest, _num(it.get("duration")))
        self.success = self.longest <= float(self.value)
        return self.success

    def detail(self) -> str:
        return "Maximum seconds per iteration %.2fs <= %.2fs - %s" % (
            self.longest, float(self.value), self.status())


class MaxAverageDuration(Criterion):
    name = "max_avg_duration"

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.total, self.count, self.avg = 0.0, 0, 0.0

    def add(self, it: Mapping[str, object]) -> bool:
        if not _failed(it):
            self.total += _num(it.get("duration"))
            self.count += 1
            self.avg = self.total / self.count
        self.success = self.avg <= float(self.value)
        return self.success

    def detail(self) -> str:
        return "Average duration of one iteration %.2fs <= %.2fs - %s" % (
            self.avg, float(self.value), self.status())


def atomic_durations(it: Mapping[str, object]) -> Iterable[tuple[str, float]]:
    """(name, seconds) of an iteration's top-level atomic actions (list or legacy dict form)."""
    acts = it.get("atomic_actions") or []
    if isinstance(acts, Mapping):
        for name, s in acts.items():
            yield str(name), _num(s)
        return
    for a in acts if isinstance(acts, list) else []:
        if isinstance(a, Mapping):
            start = _num(a.get("started_at"))
            end = _limit(a.get("finished_at")) or start
            yield str(a.get("name")), end - start


class MaxAverageDurationPerAtomic(Criterion):
    name = "max_avg_duration_per_atomic"

    def __init__(self, value: Mapping[str, float]) -> None:
        super().__init__()
        self.value = value
        self.sums: dict[str, list[float]] = {}

    def avg(self, atom: str) -> float:
        s = self.sums.get(atom)
        return s[0] / s[1] if s else 0.0

    def add(self, it: Mapping[str, object]) -> bool:
        if not _failed(it):
            for name, d in atomic_durations(it):
                s = self.sums.setdefault(name, [0.0, 0.0])
                s[0] += d
                s[1] += 1
        self.success = all(self.avg(a) <= float(v) for a, v in self.value.items())
        return self.success

    def detail(self) -> str:
        lines = ["Action: '%s'. %.2fs <= %.2fs" % (a, self.avg(a), float(v)) for a, v in self.value.items()]
        return "\n".join(["Average duration of one iteration for atomic actions:", *lines,
                          "Status: %s" % self.status()])


class Outliers(Criterion):
    name = "outliers"

    def __init__(self, value: Mapping[str, float]) -> None:
        super().__init__()
        self.max = int(value.get("max", 0))
        self.min_iterations = int(value.get("min_iterations", 3))
        self.sigmas = float(value.get("sigmas", 3.0))
        self.iterations = self.outliers = 0
        self.threshold: float | None = None
        self.n, self.mean, self.dev_sum = 0, 0.0, 0.0  # Knuth's streaming std, as Rally

    def add(self, it: Mapping[str, object]) -> bool:
        if not _failed(it):
            d = _num(it.get("duration"))
            self.iterations += 1
            if self.iterations >= self.min_iterations and self.threshold and d > self.threshold:
                self.outliers += 1
            self.n += 1
            prev = self.mean
            self.mean += (d - prev) / self.n
            self.dev_sum += (d - prev) * (d - self.mean)
            if self.iterations >= 2:
                self.threshold = self.mean + self.sigmas * math.sqrt(self.dev_sum / (self.n - 1))
        self.success = self.outliers <= self.max
        return self.success

    def detail(self) -> str:
        return "Maximum number of outliers %i <= %i - %s" % (self.outliers, self.max, self.status())


class PerformanceDegradation(Criterion):
    name = "performance_degradation"

    def __init__(self, value: Mapping[str, float]) -> None:
        super().__init__()
        self.max_degradation = float(value["max_degradation"])
        self.lo: float | None = None
        self.hi: float | None = None

    def degradation(self) -> float:
        if self.lo is None or self.hi is None:
            return 0.0
        return (self.hi / self.lo - 1) * 100.0

    def add(self, it: Mapping[str, object]) -> bool:
        d = _num(it.get("duration"))
        if not _failed(it) and d > 0.0:  # Rally refuses non-positive durations
            self.lo = d if self.lo is None else min(self.lo, d)
            self.hi = d if self.hi is None else max(self.hi, d)
        self.success = self.degradation() <= self.max_degradation
        return self.success

    def detail(self) -> str:
        return "Current degradation: %s%% - %s" % (_float_str(self.degradation()), self.status())


_BY_LIMIT: dict[str, Callable[[float], Criterion]] = {
    c.name: c for c in (IterationTime, MaxAverageDuration)}
_BY_FIELDS: dict[str, Callable[[Mapping[str, float]], Criterion]] = {
    c.name: c for c in (FailureRate, MaxAverageDurationPerAtomic, Outliers, PerformanceDegradation)}


def _limit(v: object) -> float | None:
    """A criterion's number as Rally's ``float()`` reads it (numbers, numeric text); None else."""
    if not isinstance(v, int | float | str):
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _criterion(name: str, value: object) -> Criterion | None:
    """Rally's criterion ``name`` configured with ``value`` (None: not one of Rally's, or a
    limit that is not a number)."""
    if name in _BY_LIMIT:
        limit = _limit(value)
        return None if limit is None else _BY_LIMIT[name](limit)
    if name in _BY_FIELDS:
        return _BY_FIELDS[name]({str(k): f for k, v in as_object(value).items()
                                 if (f := _limit(v)) is not None})
    return None


def checker(config: Mapping[str, object]) -> list[Criterion]:
    """Rally's criteria of ``config`` (its other keys are not Rally's: left to the caller)."""
    return [c for k, v in config.items() if v is not None and (c := _criterion(k, v)) is not None]


def results(config: Mapping[str, object], iterations: Iterable[Mapping[str, object]]
            ) -> list[CriterionResult]:
    """Rally's ``sla_results["sla"]`` for ``iterations`` under ``config``."""
    crits = checker(config)
    for it in iterations:
        for c in crits:
            c.add(it)
    return [c.result() for c in crits]
