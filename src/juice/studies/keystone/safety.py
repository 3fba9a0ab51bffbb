"""Safety of runs against an existing cloud: the dry run, the ``--yes`` gate and the cleanup.

    juice run SPEC --dry-run        # every API call and creation of every run; nothing is sent
    juice run SPEC --yes            # needed when the target is not a Juice lab and runs create things
    juice cleanup --target SPEC     # delete what Juice runs left there (names s_juice_*)

``simulate(spec, points)`` executes the runs' own code against the recording simulator
(``dryrun.SimulatedKeystone``): the connection check and RTT probes once, each run's drivers
(open loops as closed loops of the same iterations: the calls are the same), and the cleanup
after each run. See ``dryrun`` for where a real run can differ.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from juice import studies
from juice.errors import UserError
from juice.load.drivers import run_drivers
from juice.load.runner import RunnerSpec
from juice.openstack import cloud
from juice.spec.target import Credentials, resolve
from juice.studies.keystone import drive, dryrun, target
from juice.studies.keystone.matrix import RunPoint
from juice.studies.keystone.spec import Experiment

Progress = Callable[[str], None]
PLACEHOLDER = "(dry run: no password needed)"


def credentials(spec: Experiment, need_password: bool = True) -> Credentials:
    assert spec.target is not None
    if need_password:
        return resolve(spec.target)
    env = {**os.environ, spec.target.password_env: PLACEHOLDER}
    return resolve(spec.target, env)


def simulate(spec: Experiment, points: Sequence[RunPoint]) -> dryrun.Recorder:
    """The calls of ``points`` against the simulator, by phase (``connect``, ``run <i>``,
    ``cleanup <i>``)."""
    t = spec.target
    if t is None:
        raise UserError("--dry-run: only for a spec with a target (a lab run touches nothing of yours)")
    creds = credentials(spec, need_password=False)
    rec = dryrun.Recorder(phase="connect")
    dryrun.RECORDER = rec
    try:
        regions, home, _ = asyncio.run(target._probe(t, creds, True, any(p.load == "high" for p in points)))
        for i, p in enumerate(points, 1):
            rec.phase = f"run {i}"
            dep_regions = target.driver_regions(p.load, regions, home)
            r = p.runner
            closed = RunnerSpec(type="constant", times=r.times, concurrency=1,
                                warmup_times=r.warmup or 0, seed=p.seed)
            jobs = [drive.job(p, k, closed, {**_env(creds, regions[reg], reg, k), "simulated": True})
                    for k, reg in enumerate(dep_regions, 1)]
            results = run_drivers(None, jobs, resolve=studies.resolve_scenario)
            bad = [x.failure for x in results if x.failure]
            if bad:
                raise UserError(f"--dry-run: run {i} ({p.label}) failed in the simulator: {bad[0]}")
            rec.phase = f"cleanup {i}"
            target.cleanup_now(creds, regions[home], t.max_rps, cloud.PREFIX + "dryrun", lambda _: None,
                               simulated=True)
    finally:
        dryrun.RECORDER = dryrun.Recorder()
    return rec


def _env(creds: Credentials, url: str, region: str, index: int) -> dict[str, object]:
    c = replace(creds, password=PLACEHOLDER)
    return {"site": index, "auth_url": url, "region": region, "username": c.username, "password": c.password,
            "project_name": c.project_name, "user_domain_name": c.user_domain_name,
            "project_domain_name": c.project_domain_name, "concurrency": 1,
            "name_run": f"dryrun{index:02d}"}


def _created(rec: dryrun.Recorder, phase: str | None = None) -> str:
    c = rec.created(phase)
    return ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in sorted(c.items())) or "nothing"


def dry_run_lines(spec: Experiment, points: Sequence[RunPoint], progress: Progress) -> list[str]:
    """What ``juice run --dry-run`` prints."""
    rec = simulate(spec, points)
    assert spec.target is not None
    total = len(rec.calls)
    lines = [f"dry run against {spec.target.label}: nothing was sent. {len(points)} runs, {total} API calls "
             f"(at most {spec.target.max_rps:g}/s: at least {total / spec.target.max_rps:.0f} s); "
             f"creates {_created(rec)} (each run deletes what it created)"]
    phases = ["connect"] + [x for i in range(1, len(points) + 1) for x in (f"run {i}", f"cleanup {i}")]
    for ph in phases:
        counts = rec.counts(ph)
        if not counts:
            continue
        if ph == "connect":
            head = "once, before the runs (credentials check, identity regions, RTT probes)"
        elif ph.startswith("run"):
            p = points[int(ph.split()[1]) - 1]
            head = f"{ph}: {p.label}; creates {_created(rec, ph)}"
        else:
            head = f"{ph}: after the run, delete what is left with its prefix"
        lines.append(f"{head} — {sum(counts.values())} calls")
        lines += [f"    {n:>7}  {call}" for call, n in dryrun.table(counts)]
    lines.append("where a real run can differ: failed requests end iterations early; an open loop drops "
                 "arrivals beyond max_in_flight; warmup_s is time-bound; high load runs one driver per "
                 "region of the catalog (the simulator's catalog has one); a Keystone answering 200 to "
                 "GET /v3/domains/Default skips the GET /v3/domains?name=Default that follows it here")
    return lines


def preflight(spec: Experiment, points: Sequence[RunPoint], assume_yes: bool) -> None:
    """Refuse writes into a cloud that is not a Juice lab unless ``--yes``; check credentials."""
    assert spec.target is not None
    creds = credentials(spec)
    if assume_yes or cloud.juice_lab_of(creds) is not None or not points:
        return
    rec = simulate(spec, points)
    made = _created(rec)
    if made != "nothing":
        raise UserError(f"--yes: {spec.target.label} is not a Juice lab and these runs create {made} there "
                        f"(deleted at the end of each run; `juice run --dry-run` lists every call): "
                        f"pass --yes to run them")


def cleanup_lines(spec: Experiment, prefix: str | None, progress: Progress) -> list[str]:
    assert spec.target is not None
    creds = credentials(spec)
    pre = prefix or cloud.PREFIX
    counts = target.cleanup_now(creds, creds.auth_url, spec.target.max_rps, pre, progress)
    found = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "nothing"
    return [f"{spec.target.label}: deleted {found} named {pre}*"]
