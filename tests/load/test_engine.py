"""The closed and open loops, with Fake scenarios (the engine is what is under test)."""

from __future__ import annotations

import asyncio
import statistics
from itertools import pairwise

import pytest

from juice.errors import UserError
from juice.load.api import DictEnv, LoadResult
from juice.load.openloop import intended_offsets_ns
from juice.load.runner import RunnerSpec, run_scenario
from tests.load.fakes import FakeNested, FakeSleep


def run(scenario: object, runner: RunnerSpec, site: int = 1) -> LoadResult:
    return asyncio.run(run_scenario(scenario, DictEnv(site), runner))  # type: ignore[arg-type]


def test_closed_loop_runs_exactly_times_with_bounded_concurrency() -> None:
    fake = FakeSleep(sleep_s=0.002)
    res = run(fake, RunnerSpec(times=23, concurrency=4))
    assert [r.index for r in res.records] == list(range(23))
    assert fake.calls == 23
    # all 4 workers start before the first sleep ends, and never more than 4 run at once
    assert fake.max_in_flight == 4
    assert fake.cleaned
    assert all(r.site == 1 and not r.failed and r.idle_duration == 0.0 for r in res.records)
    assert all(r.atomic_actions[0]["name"] == "fake.sleep" for r in res.records)
    assert res.finished_at >= res.started_at and res.cpu_s > 0.0  # 23 iterations of Python ran
    assert res.args["runner"]["concurrency"] == 4


def test_concurrency_above_times_starts_only_times() -> None:
    fake = FakeSleep(sleep_s=0.001)
    res = run(fake, RunnerSpec(times=3, concurrency=50))
    assert len(res.records) == 3 and fake.max_in_flight == 3


def test_failed_iterations_are_kept_with_type_message_traceback() -> None:
    res = run(FakeSleep(sleep_s=0, fail_every=3), RunnerSpec(times=7, concurrency=2))
    failed = [r for r in res.records if r.failed]
    assert [r.index for r in failed] == [0, 3, 6]
    etype, msg, tb = failed[1].error
    assert etype == "ValueError" and msg == "fake failure at iteration 3"
    assert "Traceback" in tb and "fake failure" in tb
    assert res.failed_count == 3 and len(res.records) == 7


def test_iteration_timeout_fails_the_iteration() -> None:
    res = run(FakeSleep(sleep_s=30), RunnerSpec(times=2, concurrency=2, timeout_s=0.05))
    assert [r.error[0] for r in res.records] == ["TimeoutError", "TimeoutError"]
    assert "timeout_s" in res.records[0].error[1]
    # the atomic action interrupted by the timeout is closed and marked failed
    assert res.records[0].atomic_actions[0]["failed"] is True


def test_a_requests_own_timeout_is_not_called_the_iterations() -> None:
    class RequestTimesOut(FakeSleep):
        async def run(self, it: object) -> None:
            raise TimeoutError  # as aiohttp's total timeout: no message

    res = run(RequestTimesOut(), RunnerSpec(times=1, concurrency=1, timeout_s=900))
    assert res.records[0].error[:2] == ["TimeoutError", "a request got no answer within the client's timeout"]


def test_nested_atomic_actions_and_idle_duration() -> None:
    res = run(FakeNested(idle_s=0.01), RunnerSpec(times=2))
    acts = res.records[0].atomic_actions
    assert [a["name"] for a in acts] == ["outer"]
    assert [c["name"] for c in acts[0]["children"]] == ["inner.a", "inner.b"]
    child = acts[0]["children"][0]
    assert acts[0]["started_at"] <= child["started_at"] <= child["finished_at"]
    assert isinstance(child["started_at"], float)
    rec = res.records[0]
    assert rec.idle_duration >= 0.01  # sleep_between is idle, not service time
    assert rec.to_rally()["idle_duration"] == rec.idle_duration


def test_open_loop_constant_arrivals_follow_the_schedule() -> None:
    rate = 2000.0
    res = run(FakeSleep(sleep_s=0), RunnerSpec(type="open", rate=rate, times=40))
    assert [r.index for r in res.records] == list(range(40))
    assert res.dropped.count == 0
    intended = [r.intended_at for r in res.records]
    assert all(t is not None for t in intended)
    gaps = [b - a for a, b in pairwise(intended)]  # type: ignore[operator]
    # computed from t0 + i/rate (no drift), not from wake-ups
    assert all(abs(g - 1 / rate) < 1e-6 for g in gaps)
    for r in res.records:
        assert r.dispatch_lag is not None and r.latency is not None
        assert r.dispatch_lag >= 0 and r.latency >= r.duration
        assert r.timestamp == pytest.approx(r.intended_at + r.dispatch_lag, abs=1e-6)


def test_open_loop_duration_bound() -> None:
    res = run(FakeSleep(sleep_s=0), RunnerSpec(type="open", rate=1000, times=None,
                                                duration_s=0.05))
    # arrivals due at 0, 1, ... 49 ms, i.e. < duration
    assert len(res.records) + res.dropped.count == 50


def test_poisson_arrivals_are_seeded_and_monotonic() -> None:
    def take(seed: int, n: int) -> list[int]:
        gen = intended_offsets_ns(100.0, "poisson", seed)
        return [next(gen) for _ in range(n)]

    a, b, c = take(7, 5000), take(7, 5000), take(8, 5000)
    assert a == b and a != c
    assert all(y > x for x, y in pairwise(a))
    mean_gap_s = statistics.fmean(y - x for x, y in pairwise(a)) / 1e9
    assert mean_gap_s == pytest.approx(0.01, rel=0.05)  # seeded: a fixed number, near 1/rate
    res = run(FakeSleep(sleep_s=0), RunnerSpec(type="open", rate=5000, arrival="poisson",
                                                times=30, seed=7))
    assert [r.index for r in res.records] == list(range(30))
    intended = [r.intended_at or 0.0 for r in res.records]
    assert intended == sorted(intended)


def test_open_loop_counts_drops_when_max_in_flight_is_reached() -> None:
    fake = FakeSleep(sleep_s=0.5)
    res = run(fake, RunnerSpec(type="open", rate=1000, times=20, max_in_flight=2))
    started = {r.index for r in res.records}
    dropped = set(res.dropped.indexes)
    assert started | dropped == set(range(20)) and not started & dropped
    assert res.dropped.count == len(dropped) == 20 - len(res.records) >= 1
    assert fake.max_in_flight <= 2
    assert res.dropped.intended_at == sorted(res.dropped.intended_at)
    assert len(res.dropped.intended_at) == res.dropped.count


@pytest.mark.parametrize("bad,field", [
    ({"type": "closed"}, "runner.type"),
    ({"concurrency": 0}, "runner.concurrency"),
    ({"type": "open", "times": 5}, "runner.rate"),
    ({"type": "open", "rate": 5, "arrival": "uniform"}, "runner.arrival"),
    ({"type": "open", "rate": 5, "max_in_flight": 0}, "runner.max_in_flight"),
    ({"tims": 5}, "unknown key(s) tims"),
])
def test_runner_spec_rejects_bad_input_naming_the_field(bad: dict[str, object],
                                                        field: str) -> None:
    with pytest.raises(UserError, match=field.replace("(", r"\(").replace(")", r"\)")):
        RunnerSpec.from_dict(bad)


def test_load_result_round_trips_through_dict() -> None:
    res = run(FakeSleep(sleep_s=0, fail_every=2), RunnerSpec(times=3))
    again = LoadResult.from_dict(res.to_dict())
    assert again == res


def test_warmup_iterations_run_first_are_tagged_and_kept_apart() -> None:
    s = FakeSleep(sleep_s=0.001)
    res = run(s, RunnerSpec(times=5, concurrency=2, warmup_times=3))
    assert [r.index for r in res.records] == [0, 1, 2, 3, 4]
    assert len(res.warmup) == 3 and all(r.warmup for r in res.warmup)
    assert not any(r.warmup for r in res.records)
    assert s.calls == 8
    assert max(r.timestamp for r in res.warmup) <= res.started_at <= min(r.timestamp for r in res.records)
    back = type(res).from_dict(res.to_dict())
    assert len(back.warmup) == 3 and back.warmup[0].warmup


def test_warmup_in_seconds_and_in_the_open_loop() -> None:
    res = run(FakeSleep(sleep_s=0.01), RunnerSpec(times=3, concurrency=1, warmup_s=0.1))
    assert len(res.warmup) >= 1 and len(res.records) == 3
    res = run(FakeSleep(sleep_s=0.001), RunnerSpec(type="open", rate=200, times=4, warmup_times=6))
    assert len(res.warmup) == 6 and len(res.records) == 4


@pytest.mark.parametrize("bad", [{"warmup_times": -1}, {"warmup_s": float("nan")},
                                 {"warmup_times": 2, "warmup_s": 1.0}])
def test_warmup_bad_input(bad: dict[str, object]) -> None:
    with pytest.raises(UserError, match="runner.warmup"):
        RunnerSpec(times=1, **bad)  # type: ignore[arg-type]
