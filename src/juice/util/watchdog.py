"""A bounded no-progress watchdog for loops that wait on other processes (agents, drivers).

    dog = Watchdog(stall_bound(expected_interval_s=1 / rate, floor_s=60), "messages sent")
    while waiting:
        dog.see(count_so_far())                   # any change of the count is progress
        dog.check(lambda: "cli-p1 (site 3, host h3): 12 records")   # Stalled if none for the bound

``Stalled`` is a ``ServiceError`` (a JuiceError): the runner keeps the run as ``.failed`` with
its message (what did not advance, for how long, what it waited on) and the sweep goes on.

The bound: ``JUICE_STALL_S`` (seconds) when set, else ``max(floor_s, 10 x the expected interval
between progress events, extra_s)`` (``extra_s``: a silence the caller knows is normal, e.g.
a request's timeout).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from juice.errors import ServiceError, UserError

ENV = "JUICE_STALL_S"
FLOOR_S = 60.0
INTERVALS = 10.0


class Stalled(ServiceError):
    """Nothing advanced for longer than the watchdog's bound."""


def stall_bound(expected_interval_s: float | None = None, floor_s: float = FLOOR_S,
                extra_s: float = 0.0) -> float:
    """The no-progress bound in seconds (see the module doc)."""
    env = os.environ.get(ENV)
    if env:
        try:
            v = float(env)
        except ValueError:
            raise UserError(f"{ENV}: expected seconds, got {env!r}") from None
        if v <= 0:
            raise UserError(f"{ENV}: must be > 0 seconds, got {env!r}")
        return v
    return max(floor_s, INTERVALS * (expected_interval_s or 0.0), extra_s)


class Watchdog:
    """Raises :class:`Stalled` when the watched count has not changed for ``bound_s``."""

    def __init__(self, bound_s: float, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.bound_s, self.what, self.clock = bound_s, what, clock
        self.value: object = None
        self.since = clock()

    def see(self, value: object) -> bool:
        """Note the current count; True when it changed (progress)."""
        if value != self.value:
            self.value, self.since = value, self.clock()
            return True
        return False

    def idle_s(self) -> float:
        return self.clock() - self.since

    def check(self, waiting_on: Callable[[], str]) -> None:
        """Stalled (naming what it waits on) when idle for longer than the bound."""
        idle = self.idle_s()
        if idle > self.bound_s:
            raise Stalled(f"no progress for {idle:.0f} s (bound {self.bound_s:g} s, {ENV}): {self.what} "
                          f"stuck at {self.value}; waiting on {waiting_on()}")
