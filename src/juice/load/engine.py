"""The closed loop (Rally's ``constant`` runner) and the one-iteration timer both loops share.

``run_once`` turns one ``await scenario.run(it)`` into an ``IterationRecord``: the actual
start (``timestamp``, epoch s) and the service time (``duration``, s, without the idle time the
scenario spent in ``it.sleep_between``) come from ``perf_counter_ns`` through the ``Clock``;
an exception (or the per-iteration timeout) fails the iteration and is kept as Rally's
``[type name, message, traceback]``. Cancellation is not an iteration failure: it propagates.

``closed_loop`` runs exactly ``times`` iterations with ``concurrency`` asyncio workers, each
starting its next iteration as soon as the previous one ends (no think time: Rally's
``constant`` runner; ``idle_duration`` is 0 unless the scenario sleeps between actions).
"""

from __future__ import annotations

import asyncio
import traceback
from dataclasses import dataclass

from juice.load.api import Clock, Context, Iteration, IterationRecord, Scenario


@dataclass
class Counters:
    """Live counts a progress reporter reads while a loop runs (single event loop: no lock)."""

    total: int = 0  # iterations planned (open loop with duration_s: the expected arrivals)
    done: int = 0
    errors: int = 0
    in_flight: int = 0
    dropped: int = 0
    window_started_ms: int = 0  # epoch ms when the measured window started (0: not yet)

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
    try:
        if timeout_s:
            async with asyncio.timeout(timeout_s):
                await scenario.run(it)
        else:
            await scenario.run(it)
    except TimeoutError as e:
        error = format_error(e, str(e) or f"iteration timed out after {timeout_s:g} s (timeout_s)")
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
        counters.done += 1
        counters.errors += bool(error)
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
        while next_index < limit and (until_ns is None or clock.ns() < until_ns):
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
