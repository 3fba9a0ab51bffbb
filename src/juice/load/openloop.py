"""The open loop: requests arrive at a target rate whether or not earlier ones have finished.

Arrival ``i`` is due at an INTENDED time computed from the start, never from the previous
wake-up, so the schedule does not drift: ``t0 + i / rate`` for ``constant`` arrivals, or
``t0`` plus the running sum of exponential gaps (mean ``1 / rate``, drawn from a RNG seeded
with ``seed``) for ``poisson`` arrivals. The dispatcher sleeps until the next intended time,
then starts the iteration as its own task; when it is late it starts the overdue arrivals back
to back (yielding to the event loop once per ``MAX_BATCH_NS``) instead of shifting the schedule.

Measured per iteration (wrk2 / YCSB "intended" mode): ``latency`` = end − intended start (what
a user arriving on schedule waits: queueing included), ``duration`` = end − actual start (the
service time), ``dispatch_lag`` = actual start − intended start (the generator's own lateness).

``max_in_flight`` bounds the concurrency: an arrival due while that many iterations are
running is DROPPED — counted, with its index and intended time, in the ``Dropped`` returned
with the records (never silently lost; Rally's ``rps`` runner's ``max_concurrency`` instead
delays arrivals, which hides the overload).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

from juice.load.api import Clock, Context, Dropped, Iteration, IterationRecord, Scenario
from juice.load.engine import Counters, run_once

MAX_BATCH_NS = 1_000_000  # when late, hold the event loop at most this long between yields


def intended_offsets_ns(rate: float, arrival: str, seed: int) -> Iterator[int]:
    """Offsets (ns from t0) of the arrivals, forever; the caller bounds it."""
    if arrival == "constant":
        i = 0
        while True:
            yield round(i * 1e9 / rate)
            i += 1
    elif arrival == "poisson":
        rng = random.Random(seed)
        t = 0.0
        while True:
            yield round(t)
            t += rng.expovariate(rate) * 1e9
    else:
        raise ValueError(f"arrival must be 'constant' or 'poisson', not {arrival!r}")


async def open_loop(scenario: Scenario, ctx: Context, *, site: int, rate: float, arrival: str,
                    times: int | None, duration_s: float | None, max_in_flight: int,
                    seed: int, timeout_s: float | None, clock: Clock,
                    counters: Counters | None = None, lead_s: float = 0.005
                    ) -> tuple[list[IterationRecord], Dropped]:
    """Run arrivals until ``times`` were due or ``duration_s`` elapsed (whichever comes first;
    at least one must be given), then wait for those in flight (bounded by ``timeout_s``).

    Records are sorted by index; indexes missing from them are in ``Dropped``."""
    if times is None and duration_s is None:
        raise ValueError("open loop needs times or duration_s")
    counters = counters if counters is not None else Counters()
    if times is not None:
        counters.total = times
    if duration_s is not None:
        expected = int(rate * duration_s)
        counters.total = expected if times is None else min(times, expected)
    records: list[IterationRecord] = []
    dropped = Dropped()
    running: dict[asyncio.Task[None], tuple[int, int]] = {}

    async def one(i: int, intended: int) -> None:
        records.append(await run_once(scenario, Iteration(i, site, ctx, clock), timeout_s,
                                      counters, intended_ns=intended))

    t0 = clock.ns() + int(lead_s * 1e9)  # a small lead so arrival 0 is not born late
    end_ns = t0 + int(duration_s * 1e9) if duration_s is not None else None
    yielded = clock.ns()
    try:
        for i, off in enumerate(intended_offsets_ns(rate, arrival, seed)):
            if (times is not None and i >= times) or counters.stop:
                break
            intended = t0 + off
            if end_ns is not None and intended >= end_ns:
                break
            now = clock.ns()
            if intended > now:
                await asyncio.sleep((intended - now) / 1e9)
                yielded = clock.ns()
            elif now - yielded > MAX_BATCH_NS:
                # Overdue: dispatch back to back (one yield per batch, not per arrival, or
                # the backlog feeds on itself: every yield runs all in-flight callbacks).
                await asyncio.sleep(0)
                yielded = clock.ns()
            if counters.stop:  # decided while this dispatcher slept
                break
            # in_flight counts started iterations; tasks created but not yet running too:
            if len(running) >= max_in_flight:
                dropped.add(i, clock.epoch(intended))
                counters.dropped += 1
                continue
            task = asyncio.get_running_loop().create_task(one(i, intended))
            running[task] = (i, intended)
            task.add_done_callback(lambda t: running.pop(t, None))
        if running:
            drain = (timeout_s or 600.0) + 5.0
            _, pending = await asyncio.wait(set(running), timeout=drain)
            for task in pending:  # only when a scenario ignores cancellation by its timeout
                i, intended = running[task]
                task.cancel()
                records.append(IterationRecord(
                    index=i, site=site, timestamp=clock.epoch(intended), duration=drain,
                    error=["CancelledError", f"still running {drain:g} s after the window", ""],
                    intended_at=clock.epoch(intended)))
            if pending:
                await asyncio.wait(pending, timeout=5.0)
    finally:
        for task in running:
            task.cancel()
    records.sort(key=lambda r: r.index)
    return records, dropped
