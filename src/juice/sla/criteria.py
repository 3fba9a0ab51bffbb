"""The ``sla:`` section of a spec: Rally's criteria, the studies' own, and ``confidence``.

    sla:
      failure_rate: {max: 1}                 # percent of failed iterations (Rally)
      max_seconds_per_iteration: 2.0         # the longest iteration (Rally)
      max_avg_duration: 0.5                  # mean of successful iterations (Rally)
      max_avg_duration_per_atomic: {keystone_v3.create_user: 0.1}        # (Rally)
      outliers: {max: 1, min_iterations: 10, sigmas: 3}                  # (Rally)
      performance_degradation: {max_degradation: 50}                     # percent (Rally)
      success_pct: {min: 99}                 # successful iterations, percent
      lost: {max: 0}                         # messaging: deliveries lost
      duplicated: {max: 0}                   # messaging: deliveries duplicated
      percentiles: {call_s: {p95: 0.05}, oneway_s: {p99: 0.2}}   # any measured sample
      confidence: 0.95                       # pass only if the interval's far end is inside

Rally's six keep Rally's meaning exactly (``juice.sla.rally``). ``percentiles`` bounds a
sample's ``mean``, ``p50``, ``p90``, ``p95``, ``p99`` or ``max`` (seconds); the samples are
those ``juice.results.samples`` names (``iteration``, ``atomic:<action>``, ``call_s``,
``oneway_s``, ``boot_s``, ``nova_boot_s``, ``read_s``). ``confidence`` (0.5..0.999) turns the
criteria that estimate something (failure rate, success %, means, percentiles) into "the far
end of the bootstrap interval at that level is inside the limit": a pass that noise cannot
overturn. Extremes and counts (longest iteration, outliers, degradation, lost, duplicated)
are what they are.

Each study accepts the criteria its runs can be judged on (``SHAPES``); a spec naming another
is refused with a one-line error.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from annotated_types import Ge, Gt, Interval, Le
from pydantic import Field, model_validator

from juice.spec.base import FiniteFloat, NonNegativeInt, Percent, Seconds, Strict, StrictStr
from juice.util.jsontypes import JSONObject

# Rally's six criteria, in Rally's order (juice.sla.rally implements them)
RALLY_NAMES = ("failure_rate", "max_seconds_per_iteration", "max_avg_duration",
               "max_avg_duration_per_atomic", "outliers", "performance_degradation")

PositiveSeconds = Annotated[FiniteFloat, Gt(0), Le(86_400 * 30)]
METRICS_ITER = ("iteration",)
STATS = ("mean", "p50", "p90", "p95", "p99", "max")


class FailureRateLimit(Strict):
    min: Percent | None = Field(default=None, description="percent, 0..100 (Rally's default 0)")
    max: Percent | None = Field(default=None, description="percent, 0..100 (Rally's default 100)")

    @model_validator(mode="after")
    def _one(self) -> FailureRateLimit:
        if self.min is None and self.max is None:
            raise ValueError("give min or max (percent of failed iterations)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is above max {self.max:g}")
        return self


class OutliersLimit(Strict):
    max: Annotated[NonNegativeInt, Le(1_000_000)] = 0
    min_iterations: Annotated[NonNegativeInt, Interval(ge=3, le=1_000_000)] = 3
    sigmas: Annotated[FiniteFloat, Gt(0), Le(100)] = 3.0


class DegradationLimit(Strict):
    max_degradation: Annotated[FiniteFloat, Ge(0), Le(1e9)] = Field(description="percent")


class CountLimit(Strict):
    max: Annotated[NonNegativeInt, Le(10**12)]


class PctLimit(Strict):
    min: Percent


class SampleLimit(Strict):
    mean: Seconds | None = None
    p50: Seconds | None = None
    p90: Seconds | None = None
    p95: Seconds | None = None
    p99: Seconds | None = None
    max: Seconds | None = None

    @model_validator(mode="after")
    def _one(self) -> SampleLimit:
        if not self.limits():
            raise ValueError(f"give at least one of {', '.join(STATS)} (seconds)")
        return self

    def limits(self) -> dict[str, float]:
        return {k: float(v) for k in STATS if (v := getattr(self, k)) is not None}


class Sla(Strict):
    """Every criterion (``juice sla --criteria``); each study's spec uses a subclass limited
    to what its runs measure."""

    KEYS: ClassVar[tuple[str, ...] | None] = None  # None: every key
    METRICS: ClassVar[tuple[str, ...] | None] = None  # percentiles' samples; None: any
    ATOMICS: ClassVar[bool] = True  # percentiles of atomic:<action> allowed

    failure_rate: FailureRateLimit | None = None
    max_seconds_per_iteration: PositiveSeconds | None = None
    max_avg_duration: PositiveSeconds | None = None
    max_avg_duration_per_atomic: dict[StrictStr, Annotated[FiniteFloat, Ge(0)]] | None = Field(
        default=None, min_length=1, max_length=1000)
    outliers: OutliersLimit | None = None
    performance_degradation: DegradationLimit | None = None
    success_pct: PctLimit | None = None
    lost: CountLimit | None = None
    duplicated: CountLimit | None = None
    percentiles: dict[StrictStr, SampleLimit] = Field(default_factory=dict, max_length=1000)
    confidence: Annotated[FiniteFloat, Interval(ge=0.5, le=0.999)] | None = Field(
        default=None, description="0.5..0.999: judge the interval's far end")

    @model_validator(mode="after")
    def _fits_the_study(self) -> Sla:
        keys = self.KEYS
        if keys is not None:
            for k in self.model_fields_set:
                if k not in keys and k != "confidence" and getattr(self, k) not in (None, {}):
                    raise ValueError(f"{k}: not a criterion of this study (its criteria: {', '.join(keys)})")
        for m in self.percentiles:
            ok = (self.METRICS is None or m in self.METRICS
                  or (self.ATOMICS and m.startswith("atomic:") and len(m) > 7))
            if not ok:
                allowed = [*(self.METRICS or ()), *(["atomic:<action>"] if self.ATOMICS else [])]
                raise ValueError(f"percentiles.{m}: not measured by this study (choose from "
                                 f"{', '.join(allowed)})")
        return self

    def rally_config(self) -> JSONObject:
        """The part Rally knows, in Rally's own config form (a workload's ``sla``)."""
        d = self.model_dump(mode="json", exclude_none=True)
        return {k: d[k] for k in RALLY_NAMES if k in d}

    def empty(self) -> bool:
        fields = type(self).model_fields
        return not any(getattr(self, k) not in (None, {}) for k in fields if k != "confidence")


RALLY_KEYS = ("failure_rate", "max_seconds_per_iteration", "max_avg_duration", "max_avg_duration_per_atomic",
              "outliers", "performance_degradation")


class IterationSla(Sla):
    """Studies whose runs are Rally iterations (Keystone)."""

    KEYS = (*RALLY_KEYS, "success_pct", "percentiles")
    METRICS = METRICS_ITER


class NovaSla(Sla):
    """The Nova study: Rally iterations (one boot each) plus Rally's and nova's boot times."""

    KEYS = (*RALLY_KEYS, "success_pct", "percentiles")
    METRICS = (*METRICS_ITER, "boot_s", "nova_boot_s")


class MessagingSla(Sla):
    KEYS = ("lost", "duplicated", "percentiles")
    METRICS = ("call_s", "oneway_s")
    ATOMICS = False


class SchedulerDbSla(Sla):
    KEYS = ("percentiles",)
    METRICS = ("read_s",)
    ATOMICS = False


SLA_FIELD_DOC = "pass/fail criteria judged after every run (juice.sla.criteria)"
