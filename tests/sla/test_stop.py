"""``runner: {stop_on_sla: true}``: the load stops once a monotonic criterion can no longer
pass, every iteration so far kept; a run that would pass is never stopped."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from juice.load.api import DictEnv, LoadResult
from juice.load.drivers import LoopbackSites, run_drivers
from juice.load.engine import StopRule
from juice.load.progress import NullProgress
from juice.load.runner import RunnerSpec, run_scenario
from juice.sla import rally
from juice.sla.criteria import IterationSla
from juice.sla.stop import CRITERION, stop_rule, stopped
from juice.studies.keystone.spec import Runner
from tests.load.fakes import FakeSleep
from tests.load.test_drivers import job

TIMES, EVERY, MAX_PCT = 100, 5, 3.0  # FakeSleep fails indexes 0, 5, 10...


def _run(runner: RunnerSpec, **args: float) -> LoadResult:
    return asyncio.run(run_scenario(FakeSleep(sleep_s=0.0005, fail_every=int(args.get("every", EVERY))),
                                    DictEnv(1, {}), runner))


def _first_failing_to_exceed() -> int:
    """Index of the iteration whose failure puts failures × 100 / TIMES above MAX_PCT."""
    k = math.floor(MAX_PCT * TIMES / 100) + 1  # failures needed
    return (k - 1) * EVERY


def test_failure_rate_stops_the_closed_loop_at_the_deciding_iteration() -> None:
    rule = StopRule(planned=TIMES, max_error_pct=MAX_PCT)
    res = _run(RunnerSpec(times=TIMES, concurrency=1, stop=rule))
    at = _first_failing_to_exceed()
    assert res.stopped == {"limit": "max_error_pct", "at_iteration": at, "done": at + 1}
    assert [r.index for r in res.records] == list(range(at + 1))  # every iteration so far
    # the criterion fails on what was kept, as it would have on the full run
    verdict = rally.results({"failure_rate": {"max": MAX_PCT}}, [r.to_dict() for r in res.records])
    assert [v["success"] for v in verdict] == [False]


def test_a_run_that_passes_is_never_stopped() -> None:
    every = TIMES // 2  # 2 failures in TIMES: 2 % <= MAX_PCT
    res = _run(RunnerSpec(times=TIMES, concurrency=4, stop=StopRule(planned=TIMES, max_error_pct=MAX_PCT)),
               every=every)
    assert res.stopped is None and len(res.records) == TIMES
    verdict = rally.results({"failure_rate": {"max": MAX_PCT}}, [r.to_dict() for r in res.records])
    assert [v["success"] for v in verdict] == [True]


def test_longest_iteration_stops_the_open_loop() -> None:
    rule = StopRule(planned=TIMES, max_duration_s=0.0001)  # below FakeSleep's own sleep
    res = _run(RunnerSpec(type="open", rate=200, times=TIMES, max_in_flight=1, stop=rule), every=0)
    assert res.stopped is not None and res.stopped["limit"] == "max_duration_s"
    assert 0 < len(res.records) < TIMES
    assert any(r.duration > 0.0001 for r in res.records)


def test_the_rule_crosses_into_driver_processes(tmp_path: Path) -> None:
    rule = StopRule(planned=TIMES, max_error_pct=MAX_PCT)
    (res,) = run_drivers(LoopbackSites(tmp_path), [job(1, args={"sleep_s": 0.0005, "fail_every": EVERY},
                                                       runner=RunnerSpec(times=TIMES, concurrency=1,
                                                                         stop=rule))], NullProgress())
    assert res.failure is None and res.stopped is not None
    assert res.stopped["at_iteration"] == _first_failing_to_exceed()
    assert len(res.records) == res.stopped["done"]
    man = stopped([res])
    assert man is not None and man["criterion"] == "failure_rate" and man["site"] == 1


def test_only_monotonic_criteria_make_a_rule() -> None:
    sla = IterationSla.model_validate({"failure_rate": {"max": 2}, "success_pct": {"min": 90},
                                       "max_seconds_per_iteration": 1.5, "max_avg_duration": 0.1})
    rule = stop_rule(sla, 40)
    assert rule == StopRule(planned=40, max_error_pct=2.0, min_success_pct=90.0, max_duration_s=1.5)
    assert set(CRITERION) == {k for k, v in rule.to_dict().items() if k != "planned" and v is not None}
    assert stop_rule(IterationSla.model_validate({"max_avg_duration": 0.1,
                                                  "failure_rate": {"min": 1}}), 40) is None
    assert RunnerSpec.from_dict(RunnerSpec(stop=rule).to_dict()).stop == rule


def test_stop_on_sla_leaves_existing_run_keys_alone() -> None:
    assert "stop_on_sla" not in Runner().key_dump()
    assert Runner(stop_on_sla=True).key_dump()["stop_on_sla"] is True
