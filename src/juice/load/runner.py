"""Runner parameters and ``run_scenario``: setup → load window → cleanup → ``LoadResult``.

Two runner types::

    RunnerSpec(type="constant", times=100, concurrency=10)            # Rally's constant runner
    RunnerSpec(type="open", rate=200, arrival="poisson", duration_s=60, max_in_flight=500)

``timeout_s`` bounds every iteration (Rally's default, 600 s); ``setup_timeout_s`` and
``cleanup_timeout_s`` bound the scenario's ``setup``/``cleanup``.

``gc="freeze"`` (default) moves every object alive at the start of the window, and then every
``GC_FREEZE_EVERY_S``, into the GC's permanent generation, so a full collection never walks
the records already taken (a full collection over tens of thousands of records costs several
ms: late dispatches in the open loop). The objects are unfrozen and collected after the
window. ``gc="on"`` leaves Python's GC alone; ``gc="off"`` disables it during the window.

``stop`` (an ``engine.StopRule``) ends the window early once a limit is crossed (the
iterations so far are kept; ``LoadResult.stopped`` says which limit, at which iteration).

``cpu_s`` in the result is the client process CPU time used during the load window
(``time.process_time``): with one scenario per process (the drivers) it is that scenario's
client cost.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from juice.errors import UserError
from juice.load.api import Clock, Context, Dropped, Env, IterationRecord, LoadResult, Scenario
from juice.load.engine import Counters, StopRule, closed_loop
from juice.load.openloop import open_loop

RUNNER_TYPES = ("constant", "open")
ARRIVALS = ("constant", "poisson")
GC_MODES = ("freeze", "on", "off")
GC_FREEZE_EVERY_S = 1.0


@dataclass(frozen=True)
class RunnerSpec:
    """How to drive a scenario (see the module docstring)."""

    type: str = "constant"
    times: int | None = 1
    concurrency: int = 1
    timeout_s: float | None = 600.0
    rate: float | None = None
    arrival: str = "constant"
    duration_s: float | None = None
    max_in_flight: int = 1000
    seed: int = 0
    setup_timeout_s: float = 600.0
    cleanup_timeout_s: float = 600.0
    gc: str = "freeze"
    warmup_times: int = 0  # iterations run before the measured window (stored, tagged)
    warmup_s: float = 0.0  # or: seconds of load before the measured window
    stop: StopRule | None = None  # end the window once a limit is crossed (engine.StopRule)

    def __post_init__(self) -> None:
        where = "runner"
        if self.gc not in GC_MODES:
            raise UserError(f"{where}.gc: {self.gc!r} is not one of {', '.join(GC_MODES)}")
        if self.type not in RUNNER_TYPES:
            raise UserError(f"{where}.type: {self.type!r} is not one of {', '.join(RUNNER_TYPES)}")
        if self.times is not None and self.times < 0:
            raise UserError(f"{where}.times: must be >= 0 (got {self.times})")
        if self.warmup_times < 0 or not 0 <= self.warmup_s < float("inf"):
            raise UserError(f"{where}.warmup: must be >= 0 and finite")
        if self.warmup_times and self.warmup_s:
            raise UserError(f"{where}.warmup: give iterations or seconds, not both")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise UserError(f"{where}.timeout_s: must be > 0 or null (got {self.timeout_s})")
        if self.type == "constant":
            if self.times is None:
                raise UserError(f"{where}.times: the constant runner needs a number of iterations")
            if self.concurrency < 1:
                raise UserError(f"{where}.concurrency: must be >= 1 (got {self.concurrency})")
        else:
            if self.rate is None or self.rate <= 0:
                raise UserError(f"{where}.rate: the open loop needs a rate > 0 (requests/s)")
            if self.arrival not in ARRIVALS:
                raise UserError(f"{where}.arrival: {self.arrival!r} is not one of "
                                f"{', '.join(ARRIVALS)}")
            if self.times is None and self.duration_s is None:
                raise UserError(f"{where}: the open loop needs times or duration_s")
            if self.duration_s is not None and self.duration_s <= 0:
                raise UserError(f"{where}.duration_s: must be > 0 (got {self.duration_s})")
            if self.max_in_flight < 1:
                raise UserError(f"{where}.max_in_flight: must be >= 1 (got {self.max_in_flight})")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "runner") -> RunnerSpec:
        """From a spec's ``runner:`` (values as written: ``__post_init__`` checks them)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(known))}")
        given = dict(d)
        if isinstance(stop := given.get("stop"), dict):
            given["stop"] = StopRule.from_dict(stop)
        try:
            return cls(**given)
        except TypeError as e:
            raise UserError(f"{where}: {e}") from None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


T = TypeVar("T")


async def _bounded(what: str, aw: Awaitable[T], timeout_s: float) -> T:
    try:
        async with asyncio.timeout(timeout_s):
            return await aw
    except TimeoutError:
        raise TimeoutError(f"{what} took longer than {timeout_s:g} s") from None


@asynccontextmanager
async def gc_policy(mode: str) -> AsyncIterator[None]:
    """Apply ``mode`` (see the module docstring) for the duration of the block."""
    if mode == "on":
        yield
        return
    was_enabled = gc.isenabled()

    async def refreeze() -> None:
        while True:
            await asyncio.sleep(GC_FREEZE_EVERY_S)
            gc.freeze()

    task: asyncio.Task[None] | None = None
    if mode == "off":
        gc.disable()
    else:
        gc.freeze()
        task = asyncio.create_task(refreeze())
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


async def _window(scenario: Scenario, ctx: Context, site: int, runner: RunnerSpec, clock: Clock,
                  counters: Counters) -> tuple[list[IterationRecord], Dropped]:
    if runner.type == "constant":
        assert runner.times is not None
        records = await closed_loop(scenario, ctx, site=site, times=runner.times,
                                    concurrency=runner.concurrency, timeout_s=runner.timeout_s,
                                    clock=clock, counters=counters)
        return records, Dropped()
    assert runner.rate is not None
    return await open_loop(scenario, ctx, site=site, rate=runner.rate, arrival=runner.arrival,
                           times=runner.times, duration_s=runner.duration_s,
                           max_in_flight=runner.max_in_flight, seed=runner.seed,
                           timeout_s=runner.timeout_s, clock=clock, counters=counters)


async def _warmup(scenario: Scenario, ctx: Context, site: int, runner: RunnerSpec, clock: Clock,
                  counters: Counters) -> list[IterationRecord]:
    """The warm-up: the window's own loop, for ``warmup_times`` iterations or ``warmup_s``
    seconds; its records are tagged and its counts reset before the window."""
    if not (runner.warmup_times or runner.warmup_s):
        return []
    if runner.type == "constant":
        records = await closed_loop(scenario, ctx, site=site, times=runner.warmup_times or None,
                                    concurrency=runner.concurrency, timeout_s=runner.timeout_s,
                                    clock=clock, counters=counters,
                                    until_ns=(clock.ns() + int(runner.warmup_s * 1e9)
                                              if runner.warmup_s else None))
    else:
        assert runner.rate is not None
        records, _ = await open_loop(scenario, ctx, site=site, rate=runner.rate, arrival=runner.arrival,
                                     times=runner.warmup_times or None,
                                     duration_s=runner.warmup_s or None,
                                     max_in_flight=runner.max_in_flight, seed=runner.seed + 7919,
                                     timeout_s=runner.timeout_s, clock=clock, counters=counters)
    for r in records:
        r.warmup = True
    counters.total = counters.done = counters.errors = counters.dropped = 0
    return records


async def run_scenario(scenario: Scenario, env: Env, runner: RunnerSpec, *,
                       args: Mapping[str, object] | None = None,
                       counters: Counters | None = None) -> LoadResult:
    """Set up, run the load window, clean up (even when the window failed). A setup error
    propagates (there is nothing to measure); a cleanup error is recorded in ``failure``."""
    clock = Clock()
    counters = counters if counters is not None else Counters()
    t = time.perf_counter()
    ctx = await _bounded("setup", scenario.setup(env), runner.setup_timeout_s)
    setup_s = time.perf_counter() - t
    failure: str | None = None
    warm: list[IterationRecord] = []
    try:
        async with gc_policy(runner.gc):
            warm = await _warmup(scenario, ctx, env.site, runner, clock, counters)
    except BaseException:
        await _bounded("cleanup", scenario.cleanup(env, ctx), runner.cleanup_timeout_s)
        raise
    cpu0 = time.process_time()
    started = clock.epoch(clock.ns())
    counters.window_started_ms = int(started * 1000)
    counters.rule = runner.stop
    try:
        async with gc_policy(runner.gc):
            records, dropped = await _window(scenario, ctx, env.site, runner, clock, counters)
    finally:
        finished = clock.epoch(clock.ns())
        cpu_s = time.process_time() - cpu0
        t = time.perf_counter()
        try:
            await _bounded("cleanup", scenario.cleanup(env, ctx), runner.cleanup_timeout_s)
        except Exception as e:
            failure = f"cleanup failed: {type(e).__name__}: {e}"
        cleanup_s = time.perf_counter() - t
    return LoadResult(scenario=scenario.name, site=env.site, records=records, dropped=dropped,
                      started_at=started, finished_at=finished, setup_s=setup_s,
                      cleanup_s=cleanup_s, cpu_s=cpu_s,
                      args={"scenario": dict(args or {}), "runner": runner.to_dict()},
                      failure=failure, warmup=warm, stopped=counters.stopped)
