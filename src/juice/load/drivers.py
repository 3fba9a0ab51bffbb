"""Run load drivers in sites and gather their results: ``run_drivers(lab, jobs, ui)``.

Light load = one job (one driver in one site); high load = one job per site, all at once.
Each job becomes a process ``python -m juice.driver JOB_FILE`` started with
``lab.popen(site, ...)``, i.e. INSIDE the site's network namespace::

    from juice.load.drivers import DriverJob, run_drivers
    from juice.load.runner import RunnerSpec
    jobs = [DriverJob(site=s, scenario="KeystoneBasic.create_user", env={"auth_url": ...},
                      runner=RunnerSpec(times=100, concurrency=10)) for s in lab.sites]
    results = run_drivers(lab, jobs, RichProgress())   # one LoadResult per job, same order

The job file (with ``env``: credentials) is written 0600 into the lab's work dir and removed
when the driver has read it (and again, whatever happens, when ``run_drivers`` returns); it
never reaches the results. A driver that crashes, exits non-zero, outlives ``timeout_s`` or
stops making progress (its done/failed/dropped counts unchanged for ``stall_s``:
``juice.util.watchdog``) does not stop the run: its ``LoadResult`` carries ``failure`` (and
whatever records it wrote), and the UI shows the failed site. Ctrl-C (or any exception) in the
parent kills every driver's process group before it propagates: no orphan driver.

``lab=None`` runs every job in this process, on one event loop, against loopback (tests,
benchmarks). ``LoopbackSites(workdir)`` runs real driver processes without namespaces.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from juice.errors import UserError
from juice.load.api import DictEnv, Dropped, LoadResult, Scenario
from juice.load.engine import Counters
from juice.load.progress import NullProgress, ProgressUI
from juice.load.runner import RunnerSpec, run_scenario
from juice.util import atomic
from juice.util.watchdog import Stalled, Watchdog, stall_bound

# (name, args, contexts, seed, study) -> the scenario object: how jobs run in this process
# find their scenario (``juice.studies.resolve_scenario`` knows the studies' names)
Resolve = Callable[[str, dict[str, object], "dict[str, object] | None", "int | None", str], Scenario]
KILL_GRACE_S = 3.0
POLL_S = 0.1


class SiteLauncher(Protocol):
    """What ``run_drivers`` needs from a lab (``LocalLab`` has it)."""

    @property
    def workdir(self) -> Path: ...

    def popen(self, site: int, argv: Sequence[str], *, stdout: IO[bytes] | int | None = None,
              stderr: IO[bytes] | int | None = None, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen[bytes]: ...


class LoopbackSites:
    """Driver processes on this host, no namespace: every 'site' is the host's loopback."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir

    @property
    def workdir(self) -> Path:
        return self._workdir

    def popen(self, site: int, argv: Sequence[str], *, stdout: IO[bytes] | int | None = None,
              stderr: IO[bytes] | int | None = None, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(list(argv), stdout=stdout, stderr=stderr,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)


@dataclass
class DriverJob:
    """One driver: ``scenario`` (a registered name or ``"module:Class"``) with ``args``, in
    ``site``, with ``env`` (endpoints, credentials; never stored), driven by ``runner``.
    ``timeout_s`` bounds the whole driver (setup + window + cleanup). ``pythonpath`` is
    prepended to the driver's PYTHONPATH (so tests can name ``tests.load.fakes:...``).
    ``nice`` (e.g. -5, needs root) raises the driver's CPU priority so an open loop keeps its
    schedule on a host shared with the servers under test (see benchmarks/load.md)."""

    site: int
    scenario: str
    runner: RunnerSpec
    args: dict[str, object] = field(default_factory=dict)
    env: dict[str, object] = field(default_factory=dict)
    timeout_s: float = 3600.0
    # no-progress bound (s): a driver whose done/errors/dropped counts stop changing for this
    # long is stopped and fails saying so; None = watchdog.stall_bound(extra_s=the runner's
    # longest timeout (iteration, setup, cleanup) + 30 s) or JUICE_STALL_S
    stall_s: float | None = None
    pythonpath: list[str] = field(default_factory=list)
    nice: int = 0
    contexts: dict[str, object] = field(default_factory=dict)
    seed: int | None = None
    study: str = ""  # the study whose scenario this is (the driver imports only that one)


def _failed_result(job: DriverJob, reason: str) -> LoadResult:
    now = time.time()
    return LoadResult(scenario=job.scenario, site=job.site, records=[], dropped=Dropped(),
                      started_at=now, finished_at=now, setup_s=0.0, cleanup_s=0.0, cpu_s=0.0,
                      args={"scenario": job.args, "runner": job.runner.to_dict()},
                      failure=reason)


def import_scenario(name: str, args: Mapping[str, object], contexts: Mapping[str, object] | None = None,
                    seed: int | None = None, study: str = "") -> Scenario:
    """The scenario ``"package.module:Class"``: ``Class(**args)`` (tests' and benchmarks' Fake*
    scenarios). A study's registered names need the study registry: ``juice.studies.resolve_scenario``."""
    mod_name, sep, cls_name = name.partition(":")
    if not sep:
        raise UserError(f"scenario: {name!r} is not 'package.module:Class' (a study's scenario "
                        "name: pass resolve=juice.studies.resolve_scenario)")
    scenario: Scenario = getattr(importlib.import_module(mod_name), cls_name)(**args)
    return scenario


def run_drivers(lab: SiteLauncher | None, jobs: Sequence[DriverJob], progress_ui: ProgressUI | None = None,
                resolve: Resolve = import_scenario) -> list[LoadResult]:
    """Run ``jobs`` at once (one driver each); one ``LoadResult`` per job, in job order.
    ``resolve`` finds the scenarios of jobs run in this process (``lab`` None); a driver
    process resolves through the study registry (``juice.driver``)."""
    ui = progress_ui if progress_ui is not None else NullProgress()
    try:
        if lab is None:
            return asyncio.run(_in_process(jobs, ui, resolve))
        return _with_processes(lab, jobs, ui)
    finally:
        ui.close()


# ---- in process (lab=None) ---------------------------------------------------------------
async def _in_process(jobs: Sequence[DriverJob], ui: ProgressUI, resolve: Resolve) -> list[LoadResult]:
    counters = [Counters() for _ in jobs]

    async def one(job: DriverJob, c: Counters) -> LoadResult:
        try:
            async with asyncio.timeout(job.timeout_s):
                scenario = resolve(job.scenario, job.args, job.contexts, job.seed, job.study)
                return await run_scenario(scenario, DictEnv(job.site, job.env), job.runner,
                                          args=job.args, counters=c)
        except TimeoutError:
            reason = f"driver timed out after {job.timeout_s:g} s (timeout_s)"
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
        ui.site_failed(job.site, reason)
        return _failed_result(job, reason)

    async def report() -> None:
        while True:
            for job, c in zip(jobs, counters, strict=True):
                ui.update(job.site, c.snapshot())
            await asyncio.sleep(0.25)

    reporter = asyncio.create_task(report())
    try:
        return list(await asyncio.gather(*(one(j, c) for j, c in zip(jobs, counters, strict=True))))
    finally:
        reporter.cancel()
        for job, c in zip(jobs, counters, strict=True):
            ui.update(job.site, c.snapshot())


# ---- driver processes --------------------------------------------------------------------
@dataclass
class _Running:
    job: DriverJob
    job_file: Path
    result_file: Path
    log_file: Path
    proc: subprocess.Popen[bytes]
    deadline: float
    reader: threading.Thread
    timed_out: bool = False
    eof: bool = False
    exited_at: float | None = None
    fetch: Callable[[], None] | None = None  # brings the result file back from a remote host
    dog: Watchdog | None = None  # no progress for its bound: stopped (``stalled`` says why)
    stalled: str | None = None


def _read_lines(idx: int, stream: IO[bytes], q: queue.Queue[tuple[int, dict[str, object] | None]]
                ) -> None:
    for raw in stream:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if isinstance(msg, dict):
            q.put((idx, msg))
    q.put((idx, None))


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(runs: Sequence[_Running]) -> None:
    """TERM every live driver's process group, wait (bounded), then KILL; reap all."""
    live = [r for r in runs if r.proc.poll() is None]
    for r in live:
        _kill_group(r.proc, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    for r in live:
        try:
            r.proc.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for r in runs:
        _kill_group(r.proc, signal.SIGKILL)  # also reaches anything the driver forked
        try:
            r.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass


def _start(lab: SiteLauncher, idx: int, job: DriverJob,
           q: queue.Queue[tuple[int, dict[str, object] | None]]) -> _Running:
    tag = f"driver-{job.site}-{uuid.uuid4().hex[:8]}"
    wd = lab.workdir
    job_file, result_file, log_file = (wd / f"{tag}.job.json", wd / f"{tag}.result.json",
                                       wd / f"{tag}.log")
    # A lab on other hosts (juice.lab.remote) ships the job file there and fetches the result.
    ship = getattr(lab, "ship_file", None)
    remote_result = lab.remote_path(job.site, result_file) if ship is not None else str(result_file)  # type: ignore[attr-defined]
    payload = {"site": job.site, "scenario": job.scenario, "args": job.args, "env": job.env,
               "contexts": job.contexts, "seed": job.seed, "study": job.study,
               "runner": job.runner.to_dict(), "result_path": remote_result, "nice": job.nice}
    atomic.write_text(job_file, json.dumps(payload), mode=0o600)
    job_arg = ship(job.site, job_file) if ship is not None else str(job_file)
    env = dict(os.environ)
    paths = [*job.pythonpath, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    with open(log_file, "wb") as log:
        proc = lab.popen(job.site, [sys.executable, "-m", "juice.driver", job_arg],
                         stdout=subprocess.PIPE, stderr=log, env=env)
    assert proc.stdout is not None
    reader = threading.Thread(target=_read_lines, args=(idx, proc.stdout, q), daemon=True)
    reader.start()
    fetch = getattr(lab, "fetch_file", None)
    rs = job.runner
    longest = max(rs.timeout_s or 0.0, rs.setup_timeout_s, rs.cleanup_timeout_s)
    dog = Watchdog(job.stall_s if job.stall_s is not None else stall_bound(extra_s=longest + 30.0),
                   "iterations done/failed/dropped")
    return _Running(job, job_file, result_file, log_file, proc,
                    time.monotonic() + job.timeout_s, reader,
                    fetch=None if fetch is None else (lambda: fetch(job.site, remote_result, result_file)),
                    dog=dog)


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def _collect(r: _Running) -> LoadResult:
    rc = r.proc.returncode
    if r.fetch is not None:
        try:
            r.fetch()
        except Exception as e:  # no result file: the driver's failure below says why
            r.log_file.open("a").write(f"result not fetched: {e}\n")
    result: LoadResult | None = None
    try:
        result = LoadResult.from_dict(json.loads(r.result_file.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        result = None
    if r.stalled:
        reason = f"driver stopped: {r.stalled}"
    elif r.timed_out:
        reason = f"driver timed out after {r.job.timeout_s:g} s (timeout_s) and was killed"
    elif result is not None and result.failure:
        return result
    elif rc != 0 or result is None:
        why = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
        tail = _tail(r.log_file)
        reason = f"driver crashed ({why})" + (f": {tail}" if tail else "")
    else:
        return result
    if result is None:
        return _failed_result(r.job, reason)
    result.failure = reason
    return result


def _report_failed(runs: Sequence[_Running], reported: set[int], ui: ProgressUI) -> None:
    """Tell ``ui`` of each driver that timed out or exited non-zero, once."""
    for idx, r in enumerate(runs):
        if r.proc.poll() is not None and idx not in reported and (r.timed_out or r.proc.returncode != 0):
            reported.add(idx)
            ui.site_failed(r.job.site, "timed out" if r.timed_out
                           else f"driver exited with {r.proc.returncode}")


def _with_processes(lab: SiteLauncher, jobs: Sequence[DriverJob],
                    ui: ProgressUI) -> list[LoadResult]:
    q: queue.Queue[tuple[int, dict[str, object] | None]] = queue.Queue()
    runs: list[_Running] = []
    try:
        for idx, job in enumerate(jobs):
            runs.append(_start(lab, idx, job, q))
        reported: set[int] = set()
        while not all(r.eof and r.proc.poll() is not None for r in runs):
            try:
                idx, msg = q.get(timeout=POLL_S)
                if msg is None:
                    runs[idx].eof = True
                elif msg.get("event") == "progress":
                    ui.update(jobs[idx].site, {k: int(v) for k, v in msg.items()
                                               if k != "event" and isinstance(v, int)})
                    if (dog := runs[idx].dog) is not None:
                        dog.see(tuple(msg.get(k) for k in ("done", "errors", "dropped")))
            except queue.Empty:
                pass
            now = time.monotonic()
            for r in runs:
                if r.proc.poll() is None and now > r.deadline and not r.timed_out:
                    r.timed_out = True
                    _stop([r])
                if r.proc.poll() is None and not r.timed_out and r.dog is not None:
                    try:
                        r.dog.check(lambda r=r: f"the driver at site {r.job.site} ({r.job.scenario}, "  # type: ignore[misc]
                                                f"log {r.log_file.name})")
                    except Stalled as e:
                        r.timed_out, r.stalled = True, str(e)
                        _stop([r])
                if r.proc.poll() is not None and r.exited_at is None:
                    r.exited_at = now
                if r.exited_at is not None and not r.eof and now > r.exited_at + 5.0:
                    r.eof = True  # a grandchild holds the pipe: stop waiting for it
            _report_failed(runs, reported, ui)
        # once more: the loop can end on the pass that sees a driver's exit for the first time
        _report_failed(runs, reported, ui)
        return [_collect(r) for r in runs]
    finally:
        _stop(runs)
        for r in runs:
            for f in (r.job_file, r.result_file, r.log_file):
                f.unlink(missing_ok=True)
            if r.proc.stdout is not None:
                r.proc.stdout.close()
