"""The contract between the load engine, the scenarios and the results store.

A scenario is an object with three coroutines::

    class AuthenticateUserAndValidateToken:
        name = "KeystoneBasic.authenticate_user_and_validate_token"

        async def setup(self, env: Env) -> Context:        # Rally's contexts: before the window
            return {"users": [...]}
        async def run(self, it: Iteration) -> None:          # one iteration, timed by the engine
            with it.atomic("keystone_v3.fetch_token"):
                token = await client.fetch_token(...)
            with it.atomic("keystone_v3.validate_token"):
                await client.validate_token(token)
        async def cleanup(self, env: Env, ctx: Context) -> None:  # after the window

``it.atomic(name)`` is a plain ``with`` block: it spans ``await``s, nests (children), and
marks the action failed when an exception leaves it. An exception leaving ``run`` fails the
iteration; the engine keeps it, with the exception's type and message.

Records are Rally-shaped (task format 1.2, ``workloads[].data[]``) plus Juice's fields for the
open loop (``intended_at``, ``dispatch_lag``, ``service_time``) and the driver's ``site``.
Times: ``timestamp``/``started_at``/``finished_at`` are epoch seconds (float); durations are
seconds. They are measured with ``perf_counter_ns`` and anchored once to the wall clock, so
durations never jump with NTP.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, Required, TypedDict

# what a scenario's ``setup`` returns and its ``run``/``cleanup`` read back: the scenario's own
# objects (clients, drivers, users), opaque to the engine; each scenario knows what it put there
Context = dict[str, Any]


class RallyAction(TypedDict):
    """An atomic action as Rally stores it (``data[].atomic_actions[]``)."""

    name: str
    started_at: float
    finished_at: float
    failed: bool
    children: list[RallyAction]


class RallyIteration(TypedDict):
    """An iteration as Rally stores it (a workload's ``data[]`` entry)."""

    timestamp: float
    duration: float
    idle_duration: float
    error: list[str]
    output: dict[str, list[object]]
    atomic_actions: list[RallyAction]


class IterationDict(TypedDict, total=False):
    """``IterationRecord.to_dict()``: one line of ``iterations.jsonl`` (with ``scenario``)."""

    index: Required[int]
    site: Required[int]
    timestamp: Required[float]
    duration: Required[float]
    idle_duration: float
    error: list[str]
    atomic_actions: list[RallyAction]
    intended_at: float | None
    dispatch_lag: float | None
    latency: float | None
    warmup: bool
    scenario: str


class DroppedDict(TypedDict, total=False):
    count: int
    indexes: list[int]
    intended_at: list[float]


class Stopped(TypedDict):
    """Which limit of the runner's stop rule ended the window, at which iteration."""

    limit: str
    at_iteration: int
    done: int


class LoadResultDict(TypedDict, total=False):
    """``LoadResult.to_dict()``: what a driver process hands back (JSON)."""

    scenario: Required[str]
    site: Required[int]
    records: list[IterationDict]
    dropped: DroppedDict
    started_at: Required[float]
    finished_at: Required[float]
    setup_s: float
    cleanup_s: float
    cpu_s: float
    args: dict[str, dict[str, object]]
    failure: str | None
    warmup: list[IterationDict]
    stopped: Stopped | None


class Clock:
    """Monotonic nanoseconds mapped to epoch seconds with one anchor taken at creation: the
    tightest of ``ANCHOR_TRIES`` readings of ``time.time()`` between two monotonic ones (a process
    preempted between the two clocks' reads on a loaded machine would otherwise be off by the
    preemption: hundreds of microseconds were seen)."""

    ANCHOR_TRIES = 7

    def __init__(self) -> None:
        best: tuple[int, float, int] | None = None
        for _ in range(self.ANCHOR_TRIES):
            a = time.perf_counter_ns()
            wall = time.time()
            b = time.perf_counter_ns()
            if best is None or b - a < best[0]:
                best = (b - a, wall, (a + b) // 2)
        assert best is not None
        _, self._wall0, self._ns0 = best

    def ns(self) -> int:
        return time.perf_counter_ns()

    def epoch(self, ns: int) -> float:
        return self._wall0 + (ns - self._ns0) / 1e9


@dataclass
class AtomicAction:
    name: str
    started_ns: int
    finished_ns: int = 0
    failed: bool = False
    children: list[AtomicAction] = field(default_factory=list)

    def to_rally(self, clock: Clock) -> RallyAction:
        return {"name": self.name, "started_at": clock.epoch(self.started_ns),
                "finished_at": clock.epoch(self.finished_ns), "failed": self.failed,
                "children": [c.to_rally(clock) for c in self.children]}


class Iteration:
    """What a scenario's ``run`` receives: its number, its driver's site, the context made by
    ``setup`` (shared, read-only by convention), and the atomic-action timer."""

    def __init__(self, index: int, site: int, ctx: Context, clock: Clock) -> None:
        self.index = index
        self.site = site
        self.ctx = ctx
        self.clock = clock
        self.actions: list[AtomicAction] = []
        self.idle_duration = 0.0  # s spent in sleep_between (Rally's idle_duration)
        self._stack: list[AtomicAction] = []

    async def sleep_between(self, min_s: float, max_s: float | None = None) -> None:
        """Rally's ``sleep_between``: sleep a uniform time in [min_s, max_s) and count it as
        idle (excluded from the iteration's ``duration``, reported as ``idle_duration``)."""
        s = min_s if max_s is None else random.uniform(min_s, max_s)
        t0 = time.perf_counter()
        await asyncio.sleep(s)
        self.idle_duration += time.perf_counter() - t0

    @contextmanager
    def atomic(self, name: str) -> Iterator[AtomicAction]:
        action = AtomicAction(name=name, started_ns=self.clock.ns())
        (self._stack[-1].children if self._stack else self.actions).append(action)
        self._stack.append(action)
        try:
            yield action
        except BaseException:
            action.failed = True
            raise
        finally:
            action.finished_ns = self.clock.ns()
            self._stack.pop()


class DictEnv:
    """The plain ``Env``: a site number and a mapping (endpoints, credentials...)."""

    def __init__(self, site: int, values: Mapping[str, object] | None = None) -> None:
        self._site = site
        self.values = dict(values or {})

    @property
    def site(self) -> int:
        return self._site

    def get(self, key: str) -> Any:
        return self.values.get(key)


class Env(Protocol):
    """Where a scenario sends its requests: the service endpoints a driver in ``site`` uses,
    and credentials (never written into results)."""

    @property
    def site(self) -> int: ...

    def get(self, key: str) -> Any:  # an endpoint, credentials...: the study's env knows
        ...


class Scenario(Protocol):
    name: str

    async def setup(self, env: Env) -> Context: ...

    async def run(self, it: Iteration) -> None: ...

    async def cleanup(self, env: Env, ctx: Context) -> None: ...


@dataclass
class IterationRecord:
    """One iteration, as Rally's ``data[]`` entry plus Juice's open-loop and site fields."""

    index: int
    site: int
    timestamp: float  # epoch s at the actual start
    duration: float  # s, actual start -> end (the service time)
    idle_duration: float = 0.0
    error: list[str] = field(default_factory=list)  # [] or [type, message, traceback]
    atomic_actions: list[RallyAction] = field(default_factory=list)
    intended_at: float | None = None  # open loop: epoch s the request was due
    dispatch_lag: float | None = None  # open loop: actual start - intended start, s
    latency: float | None = None  # open loop: end - intended start, s (wrk2 "corrected")
    warmup: bool = False  # run before the measured window: stored, left out of statistics

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def to_rally(self) -> RallyIteration:
        out: RallyIteration = {"timestamp": self.timestamp, "duration": self.duration,
                               "idle_duration": self.idle_duration, "error": self.error,
                               "output": {"additive": [], "complete": []},
                               "atomic_actions": self.atomic_actions}
        return out

    def to_dict(self) -> IterationDict:
        """Every field, JSON-ready (Juice's own per-iteration format)."""
        out: IterationDict = {"index": self.index, "site": self.site, "timestamp": self.timestamp,
                "duration": self.duration, "idle_duration": self.idle_duration,
                "error": self.error, "atomic_actions": self.atomic_actions,
                "intended_at": self.intended_at, "dispatch_lag": self.dispatch_lag,
                "latency": self.latency}
        if self.warmup:
            out["warmup"] = True
        return out

    @classmethod
    def from_dict(cls, d: IterationDict) -> IterationRecord:
        return cls(index=int(d["index"]), site=int(d["site"]), timestamp=float(d["timestamp"]),
                   duration=float(d["duration"]), idle_duration=float(d.get("idle_duration", 0.0)),
                   error=[str(e) for e in d.get("error") or []],
                   atomic_actions=list(d.get("atomic_actions") or []),
                   intended_at=d.get("intended_at"), dispatch_lag=d.get("dispatch_lag"),
                   latency=d.get("latency"), warmup=bool(d.get("warmup", False)))


@dataclass
class Dropped:
    """Open-loop arrivals that could not start because ``max_in_flight`` was reached.

    Never silently lost: ``count`` of them, and each one's index and intended start (epoch s).
    """

    count: int = 0
    indexes: list[int] = field(default_factory=list)
    intended_at: list[float] = field(default_factory=list)

    def add(self, index: int, intended_at: float) -> None:
        self.count += 1
        self.indexes.append(index)
        self.intended_at.append(intended_at)

    def to_dict(self) -> DroppedDict:
        return {"count": self.count, "indexes": self.indexes, "intended_at": self.intended_at}

    @classmethod
    def from_dict(cls, d: DroppedDict) -> Dropped:
        return cls(count=int(d.get("count", 0)), indexes=[int(i) for i in d.get("indexes", [])],
                   intended_at=[float(t) for t in d.get("intended_at", [])])


@dataclass
class LoadResult:
    """One scenario run by one driver (one site): its iterations, failed ones included.

    ``started_at``/``finished_at`` (epoch s) bound the load window (setup and cleanup are
    outside it, timed as ``setup_s``/``cleanup_s``). ``cpu_s`` is the client process CPU time
    (user+system) used during the window. ``args`` holds the scenario args and the runner
    parameters (``{"scenario": {...}, "runner": {...}}``); ``failure`` is set when the
    driver itself failed (crash, timeout, setup error): its records may then be partial.
    ``achieved_rate`` is iterations started per second of window (open loop's real rate).
    ``warmup`` holds the iterations run before the window (``RunnerSpec.warmup_*``): stored,
    tagged, and never part of ``records`` or of any statistic.
    """

    scenario: str
    site: int
    records: list[IterationRecord]
    dropped: Dropped
    started_at: float
    finished_at: float
    setup_s: float
    cleanup_s: float
    cpu_s: float
    args: dict[str, dict[str, object]] = field(default_factory=dict)  # "scenario", "runner"
    failure: str | None = None
    warmup: list[IterationRecord] = field(default_factory=list)
    stopped: Stopped | None = None  # the runner's stop rule ended the window early

    @property
    def load_duration(self) -> float:
        return max(0.0, self.finished_at - self.started_at)

    @property
    def achieved_rate(self) -> float:
        return len(self.records) / self.load_duration if self.load_duration > 0 else 0.0

    @property
    def failed_count(self) -> int:
        return sum(1 for r in self.records if r.failed)

    def to_dict(self) -> LoadResultDict:
        return {"scenario": self.scenario, "site": self.site,
                "records": [r.to_dict() for r in self.records], "dropped": self.dropped.to_dict(),
                "started_at": self.started_at, "finished_at": self.finished_at,
                "setup_s": self.setup_s, "cleanup_s": self.cleanup_s, "cpu_s": self.cpu_s,
                "args": self.args, "failure": self.failure,
                "warmup": [r.to_dict() for r in self.warmup], "stopped": self.stopped}

    @classmethod
    def from_dict(cls, d: LoadResultDict) -> LoadResult:
        return cls(scenario=str(d["scenario"]), site=int(d["site"]),
                   records=[IterationRecord.from_dict(r) for r in d.get("records", [])],
                   dropped=Dropped.from_dict(d.get("dropped") or {}),
                   started_at=float(d["started_at"]), finished_at=float(d["finished_at"]),
                   setup_s=float(d.get("setup_s", 0.0)), cleanup_s=float(d.get("cleanup_s", 0.0)),
                   cpu_s=float(d.get("cpu_s", 0.0)), args=dict(d.get("args") or {}),
                   failure=d.get("failure"),
                   warmup=[IterationRecord.from_dict(r) for r in d.get("warmup", [])],
                   stopped=d.get("stopped"))
