"""Apply a fault schedule (``juice.faults.spec``) during a run's measured window.

    target = ...                                   # a FaultTarget: the deployment's hands
    with FaultRunner(spec.faults, target, progress) as fr:
        results = run_drivers(lab, jobs, fr.watch(ui))   # the UI proxy feeds time 0 and counts
    fr.events                                      # what happened, with exact wall-clock times

Time 0 is the start of the first driver's measured window (after its Rally contexts and
warm-up), as reported by the drivers' progress snapshots (``window_started_ms``); iteration
counts are the drivers' finished iterations summed over sites. A thread checks every
``TICK_S`` which event is due (bounded work per tick) and applies it through the target; an
event's ``t_start`` is when its action took effect and ``t_end`` when it was undone
(partition healed, WAN restored, server restarted and healthy again). An action that fails is
recorded with its error and the run goes on. Leaving the block stops the thread, heals every
partition and restores the WAN whatever happened (Ctrl-C included); a killed server whose
restart is still pending stays down (the deployment's teardown removes it) and says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Protocol

from juice.faults.spec import Fault, WanChange
from juice.load.progress import ProgressUI

Progress = Callable[[str], None]
TICK_S = 0.05
EVENTS = "events.jsonl"  # a run's applied faults, one JSON object (FaultEvent) per line


class FaultTarget(Protocol):
    """What a deployment offers a fault schedule (every call bounded in time)."""

    def partition(self, site: int) -> None: ...

    def heal(self, site: int) -> None: ...

    def set_wan(self, change: WanChange | None) -> None:
        """Apply ``change`` on top of the run's WAN; None restores the run's WAN."""
        ...

    def kill(self, kind: str, site: int) -> dict[str, object]:
        """SIGKILL the ``kind`` server in ``site``; returns facts (e.g. its pid)."""
        ...

    def restart(self, kind: str, site: int) -> dict[str, object]:
        """Start it again and wait until it serves (e.g. a Galera node synced)."""
        ...


@dataclass
class FaultEvent:
    """One applied fault: times are wall-clock epoch seconds (the iterations' clock)."""

    index: int
    action: str
    description: str
    site: int | None
    kind: str | None = None
    t_start: float | None = None
    t_end: float | None = None
    detail: dict[str, object] = field(default_factory=dict)
    error: str | None = None
    undo_error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class _Pending:
    fault: Fault
    event: FaultEvent
    undo_at: float | None = None  # wall-clock time the action is undone


class _Watch:
    """A ProgressUI proxy: forwards to ``inner`` and tells the runner time 0 and counts."""

    def __init__(self, runner: FaultRunner, inner: ProgressUI) -> None:
        self.runner, self.inner = runner, inner

    def update(self, site: int, snapshot: dict[str, int]) -> None:
        self.runner.observe(site, snapshot)
        self.inner.update(site, snapshot)

    def site_failed(self, site: int, reason: str) -> None:
        self.inner.site_failed(site, reason)

    def close(self) -> None:
        self.inner.close()


class FaultRunner:
    """Runs ``faults`` against ``target`` in a thread (see the module doc)."""

    def __init__(self, faults: Sequence[Fault], target: FaultTarget, progress: Progress,
                 clock: Callable[[], float] = time.time) -> None:
        self.faults = list(faults)
        self.target = target
        self.progress = progress
        self.clock = clock
        self.t0: float | None = None
        self._done: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waiting = list(enumerate(self.faults))
        self._active: list[_Pending] = []
        self.events: list[FaultEvent] = []

    # ---- inputs ------------------------------------------------------------------------------

    def watch(self, ui: ProgressUI) -> ProgressUI:
        return _Watch(self, ui)

    def observe(self, site: int, snapshot: dict[str, int]) -> None:
        with self._lock:
            started = snapshot.get("window_started_ms", 0)
            if started:
                t = started / 1000.0
                self.t0 = t if self.t0 is None else min(self.t0, t)
            self._done[site] = snapshot.get("done", 0)

    @property
    def iterations(self) -> int:
        with self._lock:
            return sum(self._done.values())

    # ---- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> FaultRunner:
        if self.faults:
            self._thread = threading.Thread(target=self._loop, name="juice-faults", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=600)
        self._finish(interrupted=et is not None)

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            self.tick()

    def tick(self) -> None:
        """Apply what is due now (also called directly by tests)."""
        now = self.clock()
        with self._lock:
            t0, count = self.t0, sum(self._done.values())
        due = [(i, f) for i, f in self._waiting
               if (f.at_s is not None and t0 is not None and now >= t0 + f.at_s)
               or (f.at_iteration is not None and count >= f.at_iteration)]
        for i, f in due:
            self._waiting.remove((i, f))
            self._apply(i, f)
        for p in [p for p in self._active if p.undo_at is not None and now >= p.undo_at]:
            self._undo(p)

    # ---- actions -----------------------------------------------------------------------------

    def _apply(self, i: int, f: Fault) -> None:
        ev = FaultEvent(index=i, action=f.action, description=f.describe(),
                        site=f.partition if f.partition is not None else f.site, kind=f.kill)
        self.events.append(ev)
        self.progress(f"fault {i}: {f.describe()}")
        try:
            if f.partition is not None:
                self.target.partition(f.partition)
            elif f.kill is not None and f.site is not None:
                ev.detail = self.target.kill(f.kill, f.site)
            else:
                self.target.set_wan(f.wan)
        except Exception as e:  # a fault that could not be applied is data too
            ev.error = f"{type(e).__name__}: {e}"
            self.progress(f"fault {i} could not be applied: {ev.error}")
            return
        ev.t_start = self.clock()
        after = f.restart_after_s if f.kill is not None else f.duration_s
        p = _Pending(f, ev, None if after is None else ev.t_start + after)
        self._active.append(p)

    def _undo(self, p: _Pending) -> None:
        self._active.remove(p)
        f, ev = p.fault, p.event
        try:
            if f.partition is not None:
                self.target.heal(f.partition)
            elif f.kill is not None and f.site is not None:
                self.progress(f"fault {ev.index}: restarting {f.kill} in site {f.site}")
                ev.detail = {**ev.detail, "restart": self.target.restart(f.kill, f.site)}
            else:
                self.target.set_wan(None)
            ev.t_end = self.clock()
        except Exception as e:
            ev.undo_error = f"{type(e).__name__}: {e}"
            self.progress(f"fault {ev.index}: undoing it failed: {ev.undo_error}")

    def _finish(self, interrupted: bool) -> None:
        """Heal partitions and restore the WAN that are still in effect; leave pending
        restarts to the teardown. Bounded: one call per active fault."""
        for p in list(self._active):
            if p.fault.kill is not None:
                self._active.remove(p)
                p.event.detail = {**p.event.detail, "not_restarted": "the run ended first"}
                continue
            self._undo(p)
        for i, f in self._waiting:
            self.events.append(FaultEvent(index=i, action=f.action, description=f.describe(),
                                          site=f.partition if f.partition is not None else f.site,
                                          kind=f.kill, error="never due: the run ended first"
                                          + (" (interrupted)" if interrupted else "")))
        self._waiting = []
        self.events.sort(key=lambda e: e.index)
