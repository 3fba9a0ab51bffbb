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
from collections.abc import Iterable, Mapping
from typing import Any


def _float_str(num: float) -> str:
    """Rally's ``strutils.format_float_to_str``."""
    s = "%f" % num
    whole, frac = s.split(".")
    return whole + "." + (frac.rstrip("0") or "0")


def _failed(it: Mapping[str, Any]) -> bool:
    return bool(it.get("error"))


class Criterion:
    name = ""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.success = True

    def add(self, it: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def detail(self) -> str:
        raise NotImplementedError

    def status(self) -> str:
        return "Passed" if self.success else "Failed"

    def result(self) -> dict[str, Any]:
        return {"criterion": self.name, "success": self.success, "detail": self.detail()}


class FailureRate(Criterion):
    name = "failure_rate"

    def __init__(self, value: Mapping[str, float]) -> None:
        super().__init__(value)
        self.min = float(value.get("min", 0) if value.get("min") is not None else 0)
        self.max = float(value.get("max", 100) if value.get("max") is not None else 100)
        self.errors = self.total = 0
        self.rate = 0.0

    def add(self, it: Mapping[str, Any]) -> bool:
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
        super().__init__(value)
        self.longest = 0.0

    def add(self, it: Mapping[str, Any]) -> bool:
        self.longest = max(self.longest, float(it.get("duration") or 0.0))
        self.success = self.longest <= float(self.value)
        return self.success

    def detail(self) -> str:
        return "Maximum seconds per iteration %.2fs <= %.2fs - %s" % (
            self.longest, float(self.value), self.status())


class MaxAverageDuration(Criterion):
    name = "max_avg_duration"

    def __init__(self, value: float) -> None:
        super().__init__(value)
        self.total, self.count, self.avg = 0.0, 0, 0.0

    def add(self, it: Mapping[str, Any]) -> bool:
        if not _failed(it):
            self.total += float(it.get("duration") or 0.0)
            self.count += 1
            self.avg = self.total / self.count
        self.success = self.avg <= float(self.value)
        return self.success

    def detail(self) -> str:
        return "Average duration of one iteration %.2fs <= %.2fs - %s" % (
            self.avg, float(self.value), self.status())


def atomic_durations(it: Mapping[str, Any]) -> Iterable[tuple[str, float]]:
    """(name, seconds) of an iteration's top-level atomic actions (list or legacy dict form)."""
    acts = it.get("atomic_actions") or []
    if isinstance(acts, Mapping):
        for name, s in acts.items():
            yield str(name), float(s or 0.0)
        return
    for a in acts:
        if isinstance(a, Mapping):
            start = a.get("started_at") or 0.0
            end = a.get("finished_at") or start
            yield str(a.get("name")), float(end) - float(start)


class MaxAverageDurationPerAtomic(Criterion):
    name = "max_avg_duration_per_atomic"

    def __init__(self, value: Mapping[str, float]) -> None:
        super().__init__(value)
        self.sums: dict[str, list[float]] = {}

    def avg(self, atom: str) -> float:
        s = self.sums.get(atom)
        return s[0] / s[1] if s else 0.0

    def add(self, it: Mapping[str, Any]) -> bool:
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

    def __init__(self, value: Mapping[str, Any]) -> None:
        super().__init__(value)
        self.max = int(value.get("max", 0))
        self.min_iterations = int(value.get("min_iterations", 3))
        self.sigmas = float(value.get("sigmas", 3.0))
        self.iterations = self.outliers = 0
        self.threshold: float | None = None
        self.n, self.mean, self.dev_sum = 0, 0.0, 0.0  # Knuth's streaming std, as Rally

    def add(self, it: Mapping[str, Any]) -> bool:
        if not _failed(it):
            d = float(it.get("duration") or 0.0)
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
        super().__init__(value)
        self.max_degradation = float(value["max_degradation"])
        self.lo: float | None = None
        self.hi: float | None = None

    def degradation(self) -> float:
        if self.lo is None or self.hi is None:
            return 0.0
        return (self.hi / self.lo - 1) * 100.0

    def add(self, it: Mapping[str, Any]) -> bool:
        d = float(it.get("duration") or 0.0)
        if not _failed(it) and d > 0.0:  # Rally refuses non-positive durations
            self.lo = d if self.lo is None else min(self.lo, d)
            self.hi = d if self.hi is None else max(self.hi, d)
        self.success = self.degradation() <= self.max_degradation
        return self.success

    def detail(self) -> str:
        return "Current degradation: %s%% - %s" % (_float_str(self.degradation()), self.status())


CLASSES: dict[str, type[Criterion]] = {c.name: c for c in (
    FailureRate, IterationTime, MaxAverageDuration, MaxAverageDurationPerAtomic, Outliers,
    PerformanceDegradation)}


def checker(config: Mapping[str, Any]) -> list[Criterion]:
    """Rally's criteria of ``config`` (its other keys are not Rally's: left to the caller)."""
    return [CLASSES[k](v) for k, v in config.items() if k in CLASSES and v is not None]


def results(config: Mapping[str, Any], iterations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rally's ``sla_results["sla"]`` for ``iterations`` under ``config``."""
    crits = checker(config)
    for it in iterations:
        for c in crits:
            c.add(it)
    return [c.result() for c in crits]
