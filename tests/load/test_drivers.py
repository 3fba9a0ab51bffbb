"""Driver processes: one per site, in the site's namespace; crashes and Ctrl-C handled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from juice.lab import LocalLab, spec
from juice.load.drivers import DriverJob, LoopbackSites, run_drivers
from juice.load.progress import NullProgress
from juice.load.runner import RunnerSpec
from juice.util import proc
from tests.conftest import lab_capable

REPO = str(Path(__file__).resolve().parents[2])
SLEEP = "tests.load.fakes:FakeSleep"


def job(site: int, scenario: str = SLEEP, **kw: object) -> DriverJob:
    runner = kw.pop("runner", RunnerSpec(times=10, concurrency=3))
    return DriverJob(site=site, scenario=scenario, runner=runner,  # type: ignore[arg-type]
                     pythonpath=[REPO], **kw)  # type: ignore[arg-type]


def test_in_process_drivers_one_result_per_site() -> None:
    ui = NullProgress()
    res = run_drivers(None, [job(1, args={"sleep_s": 0.001}), job(2, args={"sleep_s": 0.001})],
                      ui)
    assert [r.site for r in res] == [1, 2]
    assert [len(r.records) for r in res] == [10, 10]
    assert {r.site for r in res[1].records} == {2}
    assert ui.sites[1]["done"] == 10 and not ui.failures


def test_driver_processes_and_a_crash_is_reported_per_site(tmp_path: Path) -> None:
    ui = NullProgress()
    jobs = [job(1, args={"sleep_s": 0.001, "fail_every": 5}, env={"password": "s3cret"}),
            job(2, "tests.load.fakes:FakeCrash")]
    res = run_drivers(LoopbackSites(tmp_path), jobs, ui)
    ok, crashed = res
    assert ok.failure is None and len(ok.records) == 10 and ok.failed_count == 2
    assert ok.records[0].error[0] == "ValueError"
    assert crashed.failure is not None and "exit code 3" in crashed.failure
    assert "about to die" in crashed.failure  # the tail of the driver's stderr
    assert crashed.records == [] and 2 in ui.failures and 1 not in ui.failures
    assert ui.sites[1]["done"] == 10
    assert "s3cret" not in json.dumps([r.to_dict() for r in res])
    assert list(tmp_path.iterdir()) == []  # job files (credentials), logs, results removed


def test_driver_timeout_is_a_site_failure(tmp_path: Path) -> None:
    jobs = [job(1, args={"sleep_s": 60}, runner=RunnerSpec(times=1), timeout_s=1.0)]
    (res,) = run_drivers(LoopbackSites(tmp_path), jobs, NullProgress())
    assert res.failure is not None and "timed out" in res.failure


def test_setup_error_is_a_site_failure_in_process() -> None:
    (res,) = run_drivers(None, [job(1, "tests.load.fakes:NoSuchFake")])
    assert res.failure is not None and "NoSuchFake" in res.failure


def test_ctrl_c_leaves_no_driver_process(tmp_path: Path) -> None:
    pid_file, cleaned = tmp_path / "driver.pid", tmp_path / "cleaned"
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {REPO!r})
        from juice.load.drivers import DriverJob, LoopbackSites, run_drivers
        from juice.load.runner import RunnerSpec
        j = DriverJob(site=1, scenario={SLEEP!r}, runner=RunnerSpec(times=1),
                      args={{"sleep_s": 300, "pid_file": {str(pid_file)!r},
                            "cleanup_file": {str(cleaned)!r}}}, pythonpath=[{REPO!r}])
        try:
            run_drivers(LoopbackSites(Path({str(tmp_path)!r})), [j])
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.05)
        assert pid_file.exists(), "the driver never started"
        driver = int(pid_file.read_text())
        assert proc.alive(driver)
        parent.send_signal(signal.SIGINT)
        out, _ = parent.communicate(timeout=30)
        assert parent.returncode == 130 and "interrupted" in out
        assert not proc.alive(driver)
        # the driver got SIGTERM first: it cancelled its window and ran the scenario's cleanup
        assert cleaned.read_text() == "cleaned"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cleaned", "driver.pid"]
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)


@pytest.mark.skipif(lab_capable() is not None, reason=str(lab_capable()))
def test_each_driver_runs_in_its_site_namespace(lab_name: str, tmp_path: Path) -> None:
    out = tmp_path / "where"
    out.mkdir()
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2}), ephemeral=True) as lab:
        jobs = [job(s, "tests.load.fakes:FakeWhereAmI", args={"out_dir": str(out)},
                    env={"bind_ip": lab.site_ip(s)}, runner=RunnerSpec(times=3))
                for s in lab.sites]
        res = run_drivers(lab, jobs, NullProgress())
        assert [r.failure for r in res] == [None, None]
        assert [len(r.records) for r in res] == [3, 3]
        for s in lab.sites:
            seen = json.loads((out / f"site-{s}.json").read_text())
            expected = lab.run(s, ["readlink", "/proc/self/ns/net"]).stdout.strip()
            assert seen["netns"] == expected
            assert seen["bound"] == lab.site_ip(s)
        assert seen["netns"] != os.readlink("/proc/self/ns/net")
        assert not [p for p in lab.workdir.iterdir() if p.name.startswith("driver-")]


def test_a_driver_without_progress_is_stopped_saying_so(tmp_path: Path) -> None:
    """The stalled fake: one iteration that sleeps far longer than the no-progress bound."""
    jobs = [job(2, args={"sleep_s": 60}, runner=RunnerSpec(times=1), timeout_s=60.0, stall_s=1.5)]
    t0 = time.monotonic()
    (res,) = run_drivers(LoopbackSites(tmp_path), jobs, NullProgress())
    assert time.monotonic() - t0 < 30
    assert res.failure is not None and res.failure.startswith("driver stopped: no progress for ")
    assert "iterations done/failed/dropped stuck at (0, 0, 0)" in res.failure
    assert "waiting on the driver at site 2 (tests.load.fakes:FakeSleep" in res.failure
