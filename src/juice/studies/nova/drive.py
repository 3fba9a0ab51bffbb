"""One run of the nova study: the driver, then the boots joined with nova's notifications, the
summary, Rally JSON, the services' log slices and the manifest (lab and target runs alike)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juice.errors import JuiceError
from juice.lab.place import Place
from juice.services.logslice import copy_slices, log_sizes
from juice.studies.nova import metrics

if TYPE_CHECKING:
    from juice.contract import Run
    from juice.faults.runner import FaultRunner
    from juice.load.drivers import SiteLauncher
    from juice.services.buses import mqstats
    from juice.services.databases import counters, dbevents
    from juice.studies.nova.points import NovaPoint
    from juice.studies.nova.spec import NovaSpec

PRELOAD_METHODS = {"api": "booted through the API (multi-create batches of 50)",
                   "rows": "one booted through the API, the others cloned from it as database rows "
                           "and placement allocations (juice.services.openstack.nova_preload)"}


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} s"


def _write_parquet(path: Path, rows: list[dict[str, object]]) -> None:
    import pandas as pd

    tmp = path.with_name(path.name + ".tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, path)


def atomic_lines(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    import json

    from juice.util import atomic

    atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def execute(run: Run[NovaSpec, NovaPoint], launcher: SiteLauncher, env: dict[str, Any], *, site: int,
            at: Place, logs: Sequence[tuple[Place, Path]], probe: counters.Probe | None,
            running: int | None, facts: Mapping[str, Any], faults: FaultRunner | None = None,
            lab: Mapping[str, Any] | None = None, versions: Mapping[str, str] | None = None,
            db_events: dbevents.Probe | None = None, mq_sampler: mqstats.Sampler | None = None) -> None:
    """Drive ``run.point`` from ``site`` of ``launcher`` (a lab, or this machine) with ``env``
    (endpoints, credentials: never stored), then write the run (see the study's module doc).
    ``at`` is where the driver runs (it writes its boots under ``at.root``; fetched here);
    ``logs`` the services' logs at their places (the run's part of each is fetched into logs/);
    ``lab`` the lab's facts (where the sites ran) and ``versions`` the servers' versions;
    ``db_events`` the database's event counters (``services.dbevents``: deadlocks, certification
    failures, refused connections) read over the run's window; ``mq_sampler`` RabbitMQ's
    rates and depths sampled over it (``services.mqstats``: rabbitmq.parquet)."""
    from juice.load.drivers import DriverJob, run_drivers
    from juice.load.iterations import iteration_rows, write_iterations
    from juice.load.progress import RichProgress
    from juice.load.rally_json import write_rally
    from juice.load.runner import RunnerSpec

    spec, p = run.spec, run.point
    tag = uuid.uuid4().hex[:8]
    boots_at = at.root / f"boots-{site}-{tag}.jsonl"  # where the driver runs
    servers_at = at.root / f"servers-end-{site}-{tag}.jsonl"  # what the window left (invariants)
    env = {**env, "concurrency": p.concurrency, "boots_path": str(boots_at), "servers_path": str(servers_at),
           "poll_interval_s": spec.poll_interval_s, "boot_timeout_s": spec.boot_timeout_s}
    if p.rate is not None:
        runner = RunnerSpec(type="open", times=p.times, rate=p.rate, arrival=p.arrival,
                            max_in_flight=p.concurrency, timeout_s=spec.runner.timeout_s, seed=p.seed)
    else:
        runner = RunnerSpec(type="constant", times=p.times, concurrency=p.concurrency,
                            timeout_s=spec.runner.timeout_s, seed=p.seed)
    if spec.runner.stop_on_sla:
        from dataclasses import replace

        from juice.sla.stop import stop_rule
        runner = replace(runner, stop=stop_rule(spec.sla, p.times))
    job = DriverJob(site=site, scenario=p.scenario, runner=runner, args=dict(p.args), env=env,
                    contexts={"users": spec.users.model_dump()}, seed=p.seed,
                    timeout_s=spec.runner.timeout_s * 4 + 3600, study="nova")
    marks = log_sizes(logs)
    t0 = time.time()
    load = f"{p.rate:g}/s ({p.arrival})" if p.rate is not None else f"concurrency {p.concurrency}"
    run.progress(f"{p.times} boots, {load}" + (f", {running} VMs running" if running is not None else ""))
    bar = run.ui if run.ui is not None else RichProgress()
    with probe.window() if probe is not None else nullcontext() as w, \
            db_events.window() if db_events is not None else nullcontext() as ew, \
            mq_sampler or nullcontext(), faults or nullcontext():
        results = run_drivers(launcher, [job], faults.watch(bar) if faults is not None else bar)
    try:
        at.fetch(boots_at, run.rd.file(f"boots-{site}.jsonl"))
        at.fetch(servers_at, run.rd.file(f"servers-end-{site}.jsonl"))
    finally:
        at.remove(boots_at)
        at.remove(servers_at)
    events = [e.to_dict() for e in faults.events] if faults is not None else []
    if events:
        from juice.faults.runner import EVENTS

        atomic_lines(run.rd.file(EVENTS), events)
    copied: list[str] = []
    if logs:
        time.sleep(1.0)  # the last notifications reach the compute logs
        copied = copy_slices(logs, marks, run.rd.file("logs"))
    notes = metrics.notifications(list(run.rd.file("logs").glob("*.log")), since=t0 - 1) if copied else {}
    lines = metrics.read_boot_lines(sorted(run.rd.partial.glob("boots-*.jsonl")))
    rows = metrics.boots(list(iteration_rows(results)), lines, notes)
    _write_parquet(run.rd.file("boots.parquet"), rows)
    window = (max((r.finished_at for r in results), default=t0)
              - min((r.started_at for r in results), default=t0))
    summary = metrics.summarize(rows, window)
    run.rd.write_json("summary.json", summary)
    write_iterations(run.rd.file("iterations.jsonl"), results)
    where = (f"{p.db}, {p.schedulers} scheduler(s), {running} VMs running" if running is not None
             else f"existing cloud ({p.params().get('target')})")
    write_rally(run.rd.file("rally.json"), results, title=f"{p.study}: {p.scenario}", description=where,
                tags=["juice", p.study])
    rw = None
    if w is not None:
        c = w.result
        rw = {"reads": c.reads, "writes": c.writes, "pct_reads": round(c.pct_reads, 2),
              "pct_writes": round(c.pct_writes, 2), "per_command": c.per_command}
    extra: dict[str, Any] = {}
    from juice.sla.stop import stopped

    halt = stopped(results)
    if halt is not None:
        extra["sla_stopped"] = halt
        run.progress(f"stopped by sla: {halt['criterion']} could no longer pass after "
                     f"{halt['iterations_done']} boots")
    if mq_sampler is not None and len(mq := mq_sampler.frame()):  # optional, like the next
        mq.to_parquet(run.rd.file("rabbitmq.parquet"), index=False)
    if ew is not None:  # optional: runs made before it have none
        extra["server_events"] = {"database": dict(ew.result)}
    if running is not None:  # added to what is there (an SLA stop is kept on lab runs too)
        extra.update({"running_vms": running,
                      "preload_method": PRELOAD_METHODS[spec.preload_method],
                      "deployment": dict(facts), "versions": dict(versions or {}),
                      "lab": dict(lab or {})})
        from juice.studies.nova.points import sim_record

        if sim := sim_record(spec):
            extra["simulation"] = sim  # SIMULATED waits and failures (optional: older runs lack it)
    run.manifest(kind="nova-run", params=p.params(), spec=dict(run.spec_data), rwratio=rw, summary=summary,
                 faults=events,
                 logs=copied, drivers=[{"site": r.site, "failure": r.failure, "cpu_s": r.cpu_s,
                                        "setup_s": r.setup_s, "cleanup_s": r.cleanup_s} for r in results],
                 **extra)
    run.progress(f"{summary['active']}/{summary['boots']} ACTIVE; boot median "
                 f"{_s(summary['rally_median'])} (Rally's polling) / {_s(summary['nova_median'])} (nova)")
    if all(r.failure for r in results):
        raise JuiceError(f"the driver failed: {results[0].failure}")
