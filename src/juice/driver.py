"""One load driver process: ``python -m juice.driver JOB_FILE``, started by
``juice.load.drivers.run_drivers`` inside a site's network namespace (so its sockets are the
site's) or on a host. It sits above the studies: it resolves a scenario's name through the study
registry, so the load engine below never imports a study.

The job file (JSON, mode 0600, deleted as soon as it is read because ``env`` may hold
credentials)::

    {"site": 2, "scenario": "KeystoneBasic.authenticate_user_and_validate_token",
     "args": {...}, "contexts": {...}, "seed": 1,
     "env": {"auth_url": ..., "password": ...}, "runner": {RunnerSpec fields},
     "result_path": "/.../driver-2.result.json", "progress_interval_s": 0.25, "nice": 0}

``scenario`` is resolved by ``juice.studies.resolve_scenario``: a registered name goes to the
job's ``study``, else to the study that knows it; ``"package.module:Class"`` imports the class
and calls ``Class(**args)`` (``juice.load.drivers.import_scenario``: tests and benchmarks use
this for their Fake* scenarios).

Protocol: one JSON object per line on stdout — ``{"event": "started", "pid": ...}``, then
``{"event": "progress", "total", "done", "errors", "in_flight", "dropped"}`` every
``progress_interval_s``, then ``{"event": "finished", ...}``. The scenario's own prints go to
stderr (fd 1 is pointed at fd 2 so they cannot corrupt the protocol). The ``LoadResult`` (its
``to_dict``) is written atomically to ``result_path``; on a setup or window error the file
still appears, with ``failure`` set, and the exit code is 1. SIGTERM cancels the window and
runs the scenario's cleanup (exit code 143, no result file). The driver dies with its parent
(PR_SET_PDEATHSIG), so a killed parent leaves no orphan load.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from juice import studies
from juice.load.api import DictEnv, Dropped, LoadResult
from juice.load.engine import Counters
from juice.load.runner import RunnerSpec, run_scenario
from juice.util import atomic

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _emit(proto: IO[str], event: str, **fields: Any) -> None:
    proto.write(json.dumps({"event": event, **fields}) + "\n")
    proto.flush()


async def _drive(job: dict[str, Any], proto: IO[str]) -> LoadResult:
    site = int(job["site"])
    args = dict(job.get("args") or {})
    runner = RunnerSpec.from_dict(dict(job.get("runner") or {}))
    counters = Counters()
    interval = float(job.get("progress_interval_s", 0.25))

    async def report() -> None:
        while True:
            await asyncio.sleep(interval)
            _emit(proto, "progress", **counters.snapshot())

    scenario = studies.resolve_scenario(str(job["scenario"]), args, job.get("contexts"), job.get("seed"),
                                str(job.get("study") or ""))
    me = asyncio.current_task()
    if me is not None:  # SIGTERM (run_drivers stopping us): cancel, so cleanup still runs
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, me.cancel)
    reporter = asyncio.create_task(report())
    try:
        return await run_scenario(scenario, DictEnv(site, job.get("env") or {}), runner,
                                  args=args, counters=counters)
    finally:
        reporter.cancel()
        _emit(proto, "progress", **counters.snapshot())


def main(argv: list[str]) -> int:
    _die_with_parent()
    if len(argv) != 1:
        print("usage: python -m juice.driver JOB_FILE", file=sys.stderr)
        return 2
    job_path = Path(argv[0])
    job = json.loads(job_path.read_text())
    job_path.unlink(missing_ok=True)  # it may hold credentials
    if job.get("nice"):
        os.nice(int(job["nice"]))
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the scenario's prints go to stderr
    _emit(proto, "started", pid=os.getpid(), site=job.get("site"))
    now = time.time()
    try:
        result = asyncio.run(_drive(job, proto))
        code = 0
    except asyncio.CancelledError:
        print("driver: terminated (SIGTERM); scenario cleanup ran", file=sys.stderr)
        return 143
    except Exception as e:
        import traceback
        traceback.print_exc()
        result = LoadResult(scenario=str(job.get("scenario")), site=int(job.get("site", 0)),
                            records=[], dropped=Dropped(), started_at=now,
                            finished_at=time.time(), setup_s=0.0, cleanup_s=0.0, cpu_s=0.0,
                            args={"scenario": job.get("args") or {},
                                  "runner": job.get("runner") or {}},
                            failure=f"{type(e).__name__}: {e}")
        code = 1
    out = Path(job["result_path"])
    atomic.write_text(out, json.dumps(result.to_dict()) + "\n", mode=0o600)
    _emit(proto, "finished", done=len(result.records), errors=result.failed_count,
          dropped=result.dropped.count, failure=result.failure)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
