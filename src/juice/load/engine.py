"""The closed loop (Rally's ``constant`` runner) and the one-iteration timer both loops share.

``run_once`` turns one ``await scenario.run(it)`` into an ``IterationRecord``: the actual
start (``timestamp``, epoch s) and the service time (``duration``, s, without the idle time the
scenario spent in ``it.sleep_between``) come from ``perf_counter_ns`` through the ``Clock``;
an exception (or the per-iteration timeout) fails the iteration and is kept as Rally's
``[type name, message, traceback]``. Cancellation is not an iteration failure: it propagates.

``StopRule`` (``RunnerSpec.stop``) ends the window early once its outcome is decided: no new
iteration starts after the one that crossed a limit (those in flight finish and are kept); the
crossing is recorded in ``Counters.stopped`` (``{"limit", "at_iteration", "done"}``). The
rule is plain data (it crosses into driver processes); what the limits stand for (e.g. Rally's
SLA criteria) is the caller's business.

``closed_loop`` runs exactly ``times`` iterations with ``concurrency`` asyncio workers, each
starting its next iteration as soon as the previous one ends (no think time: Rally's
``constant`` runner; ``idle_duration`` is 0 unless the scenario sleeps between actions).
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from juice.load.api import Clock, Context, Iteration, IterationRecord, Scenario, Stopped


@dataclass(frozen=True)
class StopRule:
    """Limits that, once crossed, can no longer be undone by the iterations still to come.

    ``max_error_pct``: failed iterations × 100 / ``planned`` above it (``planned``: the
    iterations of the whole run, every driver: more failures than this in one driver already
    put the run's failure rate above the limit); ``min_success_pct``: 100 − that below it;
    ``max_duration_s``: one iteration (failed ones included) longer than it."""

    planned: int = 0
    max_error_pct: float | None = None
    min_success_pct: float | None = None
    max_duration_s: float | None = None

    def crossed(self, errors: int, rec: IterationRecord) -> str | None:
        """The limit ``rec`` (with ``errors`` failed iterations so far) crosses, or None."""
        if self.max_duration_s is not None and rec.duration > self.max_duration_s:
            return "max_duration_s"
        if self.planned > 0 and errors:
            pct = errors * 100.0 / self.planned
            if self.max_error_pct is not None and pct > self.max_error_pct:
                return "max_error_pct"
            if self.min_success_pct is not None and 100.0 - pct < self.min_success_pct:
                return "min_success_pct"
        return None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StopRule:
        """From a spec's ``stop:`` (values as written: the fields are not checked here)."""
        return cls(**{k: d[k] for k in ("planned", "max_error_pct", "min_success_pct",
                                        "max_duration_s") if k in d})


@dataclass
class Counters:
    """Live counts a progress reporter reads while a loop runs (single event loop: no lock)."""

    total: int = 0  # iterations planned (open loop with duration_s: the expected arrivals)
    done: int = 0
    errors: int = 0
    in_flight: int = 0
    dropped: int = 0
    window_started_ms: int = 0  # epoch ms when the measured window started (0: not yet)
    rule: StopRule | None = None  # set for the measured window only
    stopped: Stopped | None = None  # the limit crossed, at which iteration

    def record(self, rec: IterationRecord) -> None:
        self.done += 1
        self.errors += bool(rec.error)
        if self.rule is not None and self.stopped is None:
            limit = self.rule.crossed(self.errors, rec)
            if limit is not None:
                self.stopped = {"limit": limit, "at_iteration": rec.index, "done": self.done}

    @property
    def stop(self) -> bool:
        return self.stopped is not None

    def snapshot(self) -> dict[str, int]:
        return {"total": self.total, "done": self.done, "errors": self.errors,
                "in_flight": self.in_flight, "dropped": self.dropped,
                "window_started_ms": self.window_started_ms}


def format_error(exc: BaseException, message: str | None = None) -> list[str]:
    """Rally's ``format_exc``: [type name, message, formatted traceback]."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return [type(exc).__name__, str(exc) if message is None else message, tb]


async def run_once(scenario: Scenario, it: Iteration, timeout_s: float | None,
                   counters: Counters | None = None, intended_ns: int | None = None
                   ) -> IterationRecord:
    """Run one iteration and record it. ``intended_ns`` (open loop) adds the intended start,
    the dispatch lag (actual − intended start) and the latency (end − intended start)."""
    clock = it.clock
    if counters is not None:
        counters.in_flight += 1
    error: list[str] = []
    t0 = clock.ns()
    bound: asyncio.Timeout | None = None
    try:
        if timeout_s:
            async with asyncio.timeout(timeout_s) as bound:
                await scenario.run(it)
        else:
            await scenario.run(it)
    except TimeoutError as e:
        # an empty TimeoutError is this bound's only when it expired; else a request's own
        # (e.g. aiohttp's total timeout: the server never answered)
        if str(e):
            error = format_error(e)
        elif bound is not None and bound.expired():
            error = format_error(e, f"iteration timed out after {timeout_s:g} s (timeout_s)")
        else:
            error = format_error(e, "a request got no answer within the client's timeout")
    except Exception as e:  # the scenario's failure is data, not a crash of the engine
        error = format_error(e)
    finally:
        t1 = clock.ns()
        if counters is not None:
            counters.in_flight -= 1
    rec = IterationRecord(index=it.index, site=it.site, timestamp=clock.epoch(t0),
                          duration=max(0.0, (t1 - t0) / 1e9 - it.idle_duration),
                          idle_duration=float(it.idle_duration), error=error,
                          atomic_actions=[a.to_rally(clock) for a in it.actions])
    if intended_ns is not None:
        rec.intended_at = clock.epoch(intended_ns)
        rec.dispatch_lag = (t0 - intended_ns) / 1e9
        rec.latency = (t1 - intended_ns) / 1e9
    if counters is not None:
        counters.record(rec)
    return rec


async def closed_loop(scenario: Scenario, ctx: Context, *, site: int, times: int | None,
                      concurrency: int, timeout_s: float | None, clock: Clock,
                      counters: Counters | None = None,
                      until_ns: int | None = None) -> list[IterationRecord]:
    """Exactly ``times`` iterations, never more than ``concurrency`` at once; records sorted by
    index (= start order). With ``until_ns`` (a ``clock.ns()`` deadline) instead of ``times``,
    no iteration starts after the deadline (used for a warm-up in seconds)."""
    if times is None and until_ns is None:
        raise ValueError("closed_loop needs times or until_ns")
    records: list[IterationRecord] = []
    next_index = 0
    limit = times if times is not None else 10_000_000  # bounded even by a deadline

    async def worker() -> None:
        nonlocal next_index
        while next_index < limit and (until_ns is None or clock.ns() < until_ns) and \
                not (counters is not None and counters.stop):
            i = next_index
            next_index += 1
            records.append(await run_once(scenario, Iteration(i, site, ctx, clock), timeout_s,
                                          counters))

    if counters is not None:
        counters.total = times or 0
    async with asyncio.TaskGroup() as tg:
        for _ in range(min(concurrency, limit)):
            tg.create_task(worker())
    records.sort(key=lambda r: r.index)
    return records
