"""The statement-counter window when the database refuses the probe (juice.services.databases.counters):
a server at its max_connections is part of what a run may measure, so the window is left
unmeasured with the reason, and the block it wraps (the load) still runs. Pure: the snapshots
are scripted; the real servers are read by the Keystone study's runs."""

from __future__ import annotations

from juice.errors import ServiceError
from juice.services.databases.counters import Probe


class Scripted(Probe):
    reads, writes = ("Com_select",), ("Com_insert",)

    def __init__(self, snaps: list[dict[str, int] | str]) -> None:
        self.snaps = snaps

    def snapshot(self) -> tuple[dict[str, int], int]:
        s = self.snaps.pop(0)
        if isinstance(s, str):
            raise ServiceError(s)
        return s, 0


REFUSED = 'site 1: SQL "SHOW GLOBAL STATUS" failed: 1040 - Too many connections\nmore'


def test_a_window_counts_the_difference() -> None:
    p = Scripted([{"Com_select": 5, "Com_insert": 1}, {"Com_select": 9, "Com_insert": 3}])
    with p.window() as w:
        pass
    assert (w.result.reads, w.result.writes, w.error) == (4, 2, None)


def test_a_refused_start_leaves_the_window_unmeasured_and_the_block_runs() -> None:
    ran = []
    with Scripted([REFUSED]).window() as w:
        ran.append(True)
    assert ran == [True] and w.error == REFUSED.splitlines()[0]
    assert (w.result.reads, w.result.writes) == (0, 0)


def test_a_refused_end_leaves_the_window_unmeasured() -> None:
    with Scripted([{"Com_select": 5}, REFUSED]).window() as w:
        pass
    assert w.error is not None and "Too many connections" in w.error
