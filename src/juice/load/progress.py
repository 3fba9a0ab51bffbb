"""What the parent shows while drivers run: ONE progress bar for all sites.

``run_drivers`` calls a ``ProgressUI``: ``update(site, snapshot)`` with a driver's latest
counters (total, done, errors, in_flight, dropped), ``site_failed(site, reason)`` when a
driver crashes or times out, ``close()`` at the end. ``RichProgress`` draws iterations
done/total, the aggregate rate, errors, drops and the failed sites on stderr; ``NullProgress``
draws nothing (tests, scripts).
"""

from __future__ import annotations

import time
from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class ProgressUI(Protocol):
    def update(self, site: int, snapshot: dict[str, int]) -> None: ...

    def site_failed(self, site: int, reason: str) -> None: ...

    def close(self) -> None: ...


class NullProgress:
    """Keeps the latest numbers (tests read them) and draws nothing."""

    def __init__(self) -> None:
        self.sites: dict[int, dict[str, int]] = {}
        self.failures: dict[int, str] = {}

    def update(self, site: int, snapshot: dict[str, int]) -> None:
        self.sites[site] = dict(snapshot)

    def site_failed(self, site: int, reason: str) -> None:
        self.failures[site] = reason

    def close(self) -> None:
        pass


class RichProgress(NullProgress):
    """One rich bar: ``load ━━━━ 1200/4500 · 310 it/s · errors 3 · dropped 0 · failed sites: 2``."""

    def __init__(self, console: Console | None = None, label: str = "load") -> None:
        super().__init__()
        self._t0 = time.monotonic()
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                                  TimeElapsedColumn(),
                                  console=console or Console(stderr=True), transient=False)
        self._task = self._progress.add_task(label, total=None, info="")
        self._progress.start()

    def _redraw(self) -> None:
        done = sum(s.get("done", 0) for s in self.sites.values())
        total = sum(s.get("total", 0) for s in self.sites.values()) or None
        errors = sum(s.get("errors", 0) for s in self.sites.values())
        dropped = sum(s.get("dropped", 0) for s in self.sites.values())
        in_flight = sum(s.get("in_flight", 0) for s in self.sites.values())
        rate = done / max(1e-9, time.monotonic() - self._t0)
        info = f"{rate:,.0f} it/s · in flight {in_flight} · errors {errors} · dropped {dropped}"
        if self.failures:
            info += f" · failed sites: {','.join(str(s) for s in sorted(self.failures))}"
        self._progress.update(self._task, completed=done, total=total, info=info)

    def update(self, site: int, snapshot: dict[str, int]) -> None:
        super().update(site, snapshot)
        self._redraw()

    def site_failed(self, site: int, reason: str) -> None:
        super().site_failed(site, reason)
        self._redraw()
        self._progress.console.print(f"[red]site {site}: {escape(reason)}[/red]", markup=True,
                                     highlight=False)

    def close(self) -> None:
        self._redraw()
        self._progress.stop()
