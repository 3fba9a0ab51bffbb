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

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

Context = dict[str, Any]


class Clock:
    """Monotonic nanoseconds mapped to epoch seconds with one anchor taken at creation."""

    def __init__(self) -> None:
        self._wall0 = time.time()
        self._ns0 = time.perf_counter_ns()

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

    def to_rally(self, clock: Clock) -> dict[str, Any]:
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
        self._stack: list[AtomicAction] = []

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


class Env(Protocol):
    """Where a scenario sends its requests: the service endpoints a driver in ``site`` uses,
    and credentials (never written into results)."""

    @property
    def site(self) -> int: ...

    def get(self, key: str) -> Any: ...


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
    atomic_actions: list[dict[str, Any]] = field(default_factory=list)
    intended_at: float | None = None  # open loop: epoch s the request was due
    dispatch_lag: float | None = None  # open loop: actual start - intended start, s
    latency: float | None = None  # open loop: end - intended start, s (wrk2 "corrected")

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def to_rally(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timestamp": self.timestamp, "duration": self.duration,
                               "idle_duration": self.idle_duration, "error": self.error,
                               "output": {"additive": [], "complete": []},
                               "atomic_actions": self.atomic_actions}
        return out
