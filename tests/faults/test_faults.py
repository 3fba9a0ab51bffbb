"""Fault schedules: the spec section's validation, the runner's timing (with a recording
target standing in for a deployment: the schedule is under test, not the servers), and the
before/during/after analysis of iterations."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from juice.faults.analysis import fault_iterations, fault_windows, recovery
from juice.faults.runner import FaultRunner
from juice.faults.spec import Fault, WanChange, check_sites


class RecordingTarget:
    """Records what the schedule asked for, at which (fake) time."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.calls: list[tuple[float, str, Any]] = []

    def partition(self, site: int) -> None:
        self.calls.append((self.clock[0], "partition", site))

    def heal(self, site: int) -> None:
        self.calls.append((self.clock[0], "heal", site))

    def set_wan(self, change: WanChange | None) -> None:
        self.calls.append((self.clock[0], "wan", None if change is None else change.delay_ms))

    def kill(self, kind: str, site: int) -> dict[str, Any]:
        self.calls.append((self.clock[0], "kill", (kind, site)))
        return {"pid": 1234}

    def restart(self, kind: str, site: int) -> dict[str, Any]:
        self.calls.append((self.clock[0], "restart", (kind, site)))
        if kind == "broken":
            raise RuntimeError("would not start")
        return {"pid": 4321}


@pytest.mark.parametrize(("data", "msg"), [
    ({"partition": 3, "duration_s": 5}, "exactly one of at_s and at_iteration"),
    ({"at_s": 1, "at_iteration": 3, "partition": 1, "duration_s": 5}, "exactly one of at_s"),
    ({"at_s": 1, "duration_s": 5}, "exactly one action"),
    ({"at_s": 1, "partition": 2, "kill": "galera", "site": 2}, "exactly one action"),
    ({"at_s": 1, "partition": 2}, "give duration_s"),
    ({"at_s": 1, "kill": "galera"}, "site: N"),
    ({"at_s": 1, "kill": "galera", "site": 2, "duration_s": 3}, "restart_after_s"),
    ({"at_s": 1, "wan": {}, "duration_s": 3}, "delay_ms, jitter_ms and/or loss_pct"),
    ({"at_s": float("nan"), "partition": 2, "duration_s": 3}, "finite"),
    ({"at_s": 1, "wan": {"delay_ms": 1e9}, "duration_s": 3}, "less than or equal"),
    ({"at_s": 1, "partition": 2, "duration_s": 3, "colour": 1}, "Extra inputs"),
])
def test_bad_events_are_refused(data: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValidationError, match=msg):
        Fault.model_validate(data)


def test_sites_are_checked_against_the_lab() -> None:
    f = [Fault.model_validate({"at_s": 1, "partition": 4, "duration_s": 2})]
    with pytest.raises(ValueError, match=r"faults\.0: site 4 does not exist \(the lab has 3 sites\)"):
        check_sites(f, 3)
    check_sites(f, 4)


def test_schedule_applies_and_undoes_at_the_right_times() -> None:
    now = [1000.0]
    target = RecordingTarget(now)
    faults = [Fault.model_validate(d) for d in (
        {"at_s": 2, "partition": 3, "duration_s": 5},
        {"at_iteration": 10, "kill": "galera", "site": 2, "restart_after_s": 1},
        {"at_s": 4, "wan": {"delay_ms": 100}, "duration_s": 2},
        {"at_s": 50, "partition": 1, "duration_s": 1},  # never due
        {"at_iteration": 12, "kill": "broken", "site": 1, "restart_after_s": 0.5},
    )]
    fr = FaultRunner(faults, target, lambda _: None, clock=lambda: now[0])
    with fr:
        fr._stop.set()  # drive the ticks by hand (no thread timing in a unit test)
        fr.observe(1, {"window_started_ms": 1_000_500, "done": 0})
        for step in range(100):  # 0.1 s steps from t = 1000.0 to 1010.0
            now[0] = 1000.0 + step * 0.1
            fr.observe(1, {"window_started_ms": 1_000_500, "done": step // 2})
            fr.tick()
    kinds = [(round(t - 1000.5, 1), k, a) for t, k, a in target.calls]
    # iteration 10 at step 20 (t0 + 1.5 s), 12 at step 24 (t0 + 1.9 s); the others by the clock
    assert kinds == [(1.5, "kill", ("galera", 2)), (1.9, "kill", ("broken", 1)), (2.0, "partition", 3),
                     (2.4, "restart", ("broken", 1)), (2.5, "restart", ("galera", 2)), (4.0, "wan", 100.0),
                     (6.0, "wan", None), (7.0, "heal", 3)]
    ev = {e.index: e for e in fr.events}
    assert ev[0].t_start == pytest.approx(1002.5) and ev[0].t_end == pytest.approx(1007.5)
    assert ev[1].detail == {"pid": 1234, "restart": {"pid": 4321}}
    assert ev[3].t_start is None and "never due" in str(ev[3].error)
    assert ev[4].undo_error == "RuntimeError: would not start" and ev[4].t_end is None


def test_leaving_early_heals_and_restores_but_leaves_restarts_to_teardown() -> None:
    now = [0.0]
    target = RecordingTarget(now)
    faults = [Fault.model_validate(d) for d in (
        {"at_iteration": 0, "partition": 2, "duration_s": 100},
        {"at_iteration": 0, "wan": {"loss_pct": 5}, "duration_s": 100},
        {"at_iteration": 0, "kill": "keystone", "site": 1, "restart_after_s": 100},
    )]
    fr = FaultRunner(faults, target, lambda _: None, clock=lambda: now[0])
    with pytest.raises(KeyboardInterrupt), fr:
        fr._stop.set()
        fr.tick()
        raise KeyboardInterrupt
    assert [k for _, k, _ in target.calls] == ["partition", "wan", "kill", "heal", "wan"]
    assert fr.events[2].detail["not_restarted"] == "the run ended first"


def tidy(rows: list[tuple[int, float, bool, float]]) -> pd.DataFrame:
    """A tidy table: one top-level action per iteration (site, start, failed, duration)."""
    return pd.DataFrame({"run": pd.Categorical(["r"] * len(rows)), "site": [r[0] for r in rows],
                         "iteration": list(range(len(rows))), "depth": 0,
                         "timestamp": [r[1] for r in rows], "iteration_failed": [r[2] for r in rows],
                         "duration_s": [np.nan if r[2] else r[3] for r in rows],
                         "iteration_duration_s": [r[3] for r in rows]})


def test_windows_and_recovery_per_site() -> None:
    rows = []
    for t in np.arange(0, 30, 1.0):  # site 1 fine throughout; site 3 fails during [10, 20)
        rows.append((1, float(t), False, 0.1))
        rows.append((3, float(t), 10 <= t < 20, 0.2 if t < 10 else 0.4))
    it = fault_iterations(tidy(rows))
    ev = [{"index": 0, "description": "partition site 3", "t_start": 10.0, "t_end": 20.0}]
    w = fault_windows(it, ev).set_index(["site", "window"])
    assert w.loc[(3, "during"), "failures"] == 10 and w.loc[(3, "during"), "lam"] == 1.0
    assert w.loc[(3, "before"), "lam"] == 0.0 and w.loc[(3, "after"), "lam"] == 0.0
    assert w.loc[(3, "before"), "mean_s"] == pytest.approx(0.2)
    assert w.loc[(3, "after"), "mean_s"] == pytest.approx(0.4)
    assert w.loc[(1, "during"), "failures"] == 0 and w.loc[(1, "during"), "iterations"] == 10
    r = recovery(it, ev).set_index("site")
    assert r.loc[3, "recovery_s"] == pytest.approx(0.4)  # the first success: started at 20, took 0.4 s
    assert r.loc[1, "recovery_s"] == pytest.approx(0.1)
    assert r.loc[3, "failures_during"] == 10


def test_report_section_shows_events_windows_recovery_and_timeline(tmp_path: Any) -> None:
    import json

    from juice.report.faults import section

    rows = [(s, float(t), s == 3 and 10 <= t < 20, 0.2) for t in range(30) for s in (1, 3)]
    df = tidy(rows)
    run = tmp_path / "r"
    run.mkdir()
    (run / "events.jsonl").write_text(json.dumps({"index": 0, "description": "at 10 s: partition site 3",
                                                  "t_start": 10.0, "t_end": 20.0, "detail": {}}) + "\n")
    html = "".join(section([run, tmp_path / "no-events"], df))
    assert html.count("<h3>Faults in r</h3>") == 1
    assert "at 10 s: partition site 3" in html and "λ during" in html and "recovery_s" in html
    assert html.count("<figure>") == 1
