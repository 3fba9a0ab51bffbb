"""One run of a Keystone study: drivers in their sites, counters around them, files out.

Light load = one driver in site 1; high load = one driver in every site at once (the seed's
modes), each against its own site's Keystone. The database statement counters (the seed's
%reads/%writes method) frame the whole driver window, Rally contexts included, as in the seed.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING

from juice.errors import JuiceError, ServiceError
from juice.faults.runner import EVENTS, FaultRunner, FaultTarget
from juice.lab.place import Lab
from juice.load.api import LoadResult
from juice.load.drivers import DriverJob, SiteLauncher, run_drivers
from juice.load.iterations import summary, write_iterations
from juice.load.progress import ProgressUI, RichProgress
from juice.load.rally_json import write_rally
from juice.load.runner import RunnerSpec
from juice.results.store import RunDir
from juice.services import servercounters
from juice.services.base import Progress, Service
from juice.services.databases import attribution, counters
from juice.services.logslice import Logs, Marks, copy_slices, log_sizes
from juice.sla.criteria import Sla
from juice.sla.stop import stop_rule, stopped
from juice.studies.keystone.matrix import RunPoint
from juice.util import atomic

if TYPE_CHECKING:
    from juice.services.openstack.keystone import Keystone


SERVER_ERRORS = "server-errors.json"  # the servers' WARNING/ERROR lines by template


def runner_spec(p: RunPoint, sla: Sla | None = None, drivers: int = 1) -> RunnerSpec:
    """The point's runner; with ``runner.stop_on_sla`` and ``sla``, the engine's stop rule over
    the run's planned iterations (``times`` × ``drivers``)."""
    spec = _runner_spec(p)
    rule = stop_rule(sla, spec.times * drivers) if sla is not None and p.runner.stop_on_sla \
        and spec.times else None
    return replace(spec, stop=rule) if rule is not None else spec


def _runner_spec(p: RunPoint) -> RunnerSpec:
    r = p.runner
    warm_n, warm_s = r.warmup or 0, r.warmup_s or 0.0
    if r.rate:
        return RunnerSpec(type="open", times=r.times, rate=r.rate, arrival=r.arrival,
                          max_in_flight=r.max_in_flight, timeout_s=r.timeout_s, seed=p.seed,
                          warmup_times=warm_n, warmup_s=warm_s)
    return RunnerSpec(type="constant", times=r.times, concurrency=r.concurrency, timeout_s=r.timeout_s,
                      seed=p.seed, warmup_times=warm_n, warmup_s=warm_s)


def driver_sites(p: RunPoint, lab: Lab) -> list[int]:
    return [1] if p.load == "light" else list(lab.sites)


def keystone_env(ks: Keystone, site: int, concurrency: int) -> dict[str, object]:
    """What a Keystone scenario needs in ``site`` (credentials: never stored)."""
    c = ks.admin_credentials()
    return {"site": site, "auth_url": ks.auth_url(site), "region": ks.region(site),
            "username": c.username, "password": c.password, "project_name": c.project_name,
            "user_domain_name": c.user_domain_name, "project_domain_name": c.project_domain_name,
            "concurrency": concurrency}


def execute(rd: RunDir, p: RunPoint, lab: Lab, db: Service, ks: Keystone, progress: Progress,
            ui: ProgressUI | None = None, target: FaultTarget | None = None,
            sla: Sla | None = None) -> dict[str, object]:
    """Run the drivers of ``p`` (with its fault schedule applied through ``target``); write
    iterations.jsonl, rally.json and events.jsonl (when there were faults) into ``rd``; return
    the manifest fields describing what happened (per-site outcome, %reads/%writes, faults,
    ``sla_stopped`` when ``runner.stop_on_sla`` ended the load early)."""
    sites = driver_sites(p, lab)
    spec = runner_spec(p, sla, len(sites))
    jobs = [job(p, s, spec, keystone_env(ks, s, pool_size(spec))) for s in sites]
    try:
        probe: counters.Probe | None = counters.probe_for(db)
    except (ServiceError, TypeError) as e:
        progress(f"no statement counters for {p.rdbms} ({e}); %reads/%writes not measured")
        probe = None
    faults = FaultRunner(p.faults, target, progress) if p.faults and target is not None else None
    from juice.services.openstack.keystone import DB_NAME

    attr = None
    if p.write_attribution:
        attr = attribution.probe_for(db, DB_NAME)
        if attr is None:
            progress(f"no statement attribution for {p.rdbms}; writes by table not measured")
    sc = servercounters.ServerCounters.for_deployment(db, getattr(ks, "memcached", None), DB_NAME,
                                                      keystone=ks if hasattr(ks, "gc_counters") else None)
    logs = ks.logs() if hasattr(ks, "logs") else []  # Keystone's servers (not an existing cloud)
    try:
        marks = log_sizes(logs) if logs else None
    except ServiceError as e:
        progress(f"server logs not kept: {e}")
        marks = None
    try:
        return drive_jobs(rd, p, lab, jobs, probe, progress, ui, faults, attr, sc)
    finally:  # a failed run keeps what the servers said too
        if marks is not None:
            server_errors(rd, logs, marks, progress)


def server_errors(rd: RunDir, logs: Logs, marks: Marks, progress: Progress) -> None:
    """The run's slice of each server log into ``logs/`` and their WARNING/ERROR lines by
    message template into ``server-errors.json`` (``juice.trace.logerrors``; never raises: a
    log that cannot be fetched is said, not fatal)."""
    from juice.trace.logerrors import error_rows

    try:
        names = copy_slices(logs, marks, rd.file("logs"))
    except ServiceError as e:
        progress(f"server logs not kept: {e}")
        return
    try:
        rows = error_rows([rd.file("logs") / n for n in names])
    except (OSError, ValueError) as e:
        progress(f"server errors not counted: {e}")
        return
    atomic.write_json(rd.file(SERVER_ERRORS), {"logs": sorted(names), "errors": rows})
    errs = sum(r["count"] for r in rows if r["level"] != "WARNING")
    if errs:
        progress(f"servers logged {errs} ERROR/CRITICAL line(s) ({len(rows)} templates): {SERVER_ERRORS}")


def pool_size(spec: RunnerSpec) -> int:
    """The client's connection pool: the closed loop's workers, or the open loop's in-flight bound."""
    return spec.concurrency if spec.type == "constant" else spec.max_in_flight


def job(p: RunPoint, site: int, spec: RunnerSpec, env: dict[str, object]) -> DriverJob:
    """The driver of ``p`` in ``site`` (``env``: where and as whom; never stored)."""
    return DriverJob(site=site, scenario=p.scenario, args=dict(p.scenario_args), runner=spec,
                     contexts=dict(p.contexts), seed=p.seed + 1000 * site, env=env,
                     timeout_s=_driver_timeout(spec), study="keystone")


def drive_jobs(rd: RunDir, p: RunPoint, launcher: SiteLauncher | None, jobs: list[DriverJob],
               probe: counters.Probe | None, progress: Progress, ui: ProgressUI | None = None,
               faults: FaultRunner | None = None, attr: attribution.Probe | None = None,
               servers: servercounters.ServerCounters | None = None) -> dict[str, object]:
    """Run ``jobs`` at once (statement counters around them when ``probe``, statements by kind
    and table when ``attr``, the servers' own counters — cache, buffer pool, table sizes — when
    ``servers``: read outside the statement window), write the run's iterations.jsonl,
    rally.json and events.jsonl; the manifest fields of the outcome."""
    bar = ui if ui is not None else RichProgress()
    sc0 = servers.snapshot() if servers is not None else None
    with attr.window() if attr is not None else nullcontext() as aw, \
            probe.window() if probe is not None else nullcontext() as w, faults or nullcontext():
        results = run_drivers(launcher, jobs, faults.watch(bar) if faults is not None else bar)
    sc = servercounters.record(sc0, servers.snapshot()) if servers is not None and sc0 is not None else None
    rw: dict[str, object] | None = None
    rw_error = w.error if w is not None else None
    if rw_error:
        progress(f"%reads/%writes not measured: {rw_error}")
    if w is not None and not rw_error:
        c = w.result
        rw = {"reads": c.reads, "writes": c.writes, "pct_reads": round(c.pct_reads, 2),
              "pct_writes": round(c.pct_writes, 2), "exact": c.exact, "per_command": c.per_command,
              "window": "drivers incl. Rally-like contexts (setup/cleanup)"}
    by_table = aw.summary(attr.source) if aw is not None and attr is not None else None
    events = [e.to_dict() for e in faults.events] if faults is not None else []
    if events:
        atomic.write_text(rd.file(EVENTS), "".join(json.dumps(e) + "\n" for e in events))
    n = write_iterations(rd.file("iterations.jsonl"), results)
    where = (f"{p.rdbms}, {p.sites} sites, {p.wan.label} one-way" if p.target is None
             else f"existing cloud ({p.target})")
    write_rally(rd.file("rally.json"), results, title=f"{p.study}: {p.scenario}",
                description=f"{where}, {p.load} load", tags=["juice", p.study])
    per_site = [summary(r) for r in results]
    _say(progress, results)
    if all(r.failure for r in results):
        raise JuiceError(f"every driver failed: {results[0].failure}")
    halt = stopped(results)
    if halt is not None:
        progress(f"stopped by sla: {halt['criterion']} could no longer pass after "
                 f"{halt['iterations_done']} iterations (site {halt['site']})")
    return {**({"sla_stopped": halt} if halt is not None else {}),
            **({"write_attribution": by_table} if by_table is not None else {}),
            **({"server_counters": sc} if sc is not None else {}),
            **({"rwratio_error": rw_error} if rw_error else {}),
            "rwratio": rw, "drivers": per_site, "iterations": n, "faults": events,
            "warmup_iterations": sum(len(r.warmup) for r in results),
            "failed_iterations": sum(r.failed_count for r in results),
            "driver_failures": {str(r.site): r.failure for r in results if r.failure}}


def finish(rd: RunDir) -> None:
    """Build the tidy table (actions.parquet) from the run's files, inside the partial run."""
    from juice.results import tidy

    tidy.build_run_table(rd.partial)


def _driver_timeout(spec: RunnerSpec) -> float:
    per_iter = spec.timeout_s or 600.0
    return spec.setup_timeout_s + spec.cleanup_timeout_s + per_iter * 4 + 3600.0


def _say(progress: Progress, results: list[LoadResult]) -> None:
    total = sum(len(r.records) for r in results)
    failed = sum(r.failed_count for r in results)
    secs = [rec.duration for r in results for rec in r.records if not rec.error]
    mean = f", mean {sum(secs) / len(secs):.3f} s" if secs else ""
    msg = f"{total} iterations, {failed} failed{mean}"
    bad = [f"site {r.site}: {r.failure}" for r in results if r.failure]
    progress(msg + (f"; driver failures: {'; '.join(bad)}" if bad else ""))
