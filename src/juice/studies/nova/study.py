"""The nova study on the study contract (seeds 002, 004): Rally-style boots against real nova 34.

    juice plan examples/nova-boot.yaml
    juice run examples/nova-boot.yaml        # → results/nova-boot/<run>/..., report.html

A lab per one-way delay; in it the whole nova stack (``services.nova_deploy``: the database,
RabbitMQ, Keystone, placement, fake-glance/fake-neutron stand-ins, nova-api, conductor,
schedulers and the simulated compute hosts) per deployment key; inside it the running VMs
(``preload``) are booted once and topped up as the points ask for more; each run boots from
one driver in ``driver_site`` and deletes what it made.

A run directory holds: manifest.json (parameters, deployment facts, versions, running VMs,
%reads/%writes of the database over the window, the summary), iterations.jsonl and rally.json
(Rally task format 1.2: ``nova.boot_server`` / ``nova.delete_server`` atomics), boots.parquet
(one row per boot: Rally's and nova's boot time, API time, host, fault), summary.json, and
logs/ (what every service logged during the run: request ids at the level tracing needs).
"""

from __future__ import annotations

import json
import os
import secrets
import string
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juice.errors import JuiceError, ServiceError
from juice.lab import LocalLab
from juice.lab.local import uniform_lab
from juice.studies.base import Progress, ReportInput, Run, Study
from juice.studies.nova import metrics
from juice.studies.nova.points import NovaPoint, expand
from juice.studies.nova.spec import NovaSpec, parse
from juice.util import atomic

if TYPE_CHECKING:
    import pandas as pd

    from juice.load.api import Scenario
    from juice.services.nova_deploy import NovaDeployment

WORKLOAD = "nova"
PRELOAD_PREFIX = "juice-preload"
PRELOAD_BATCH = 50
ALPHABET = string.ascii_lowercase + string.digits


@dataclass
class Deployment:
    lab: LocalLab
    stack: NovaDeployment
    flavor_id: str
    running: int = 0           # preload VMs booted and ACTIVE
    preload_s: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)


def _stack(spec: NovaSpec, p: NovaPoint) -> Any:
    from juice.services.nova_conf import ComputeOptions, NovaOptions, spread
    from juice.services.nova_deploy import NovaStack

    c = spec.computes
    return NovaStack(db=p.db, nova=NovaOptions(schedulers=p.schedulers, host_subset_size=p.host_subset_size,
                                               concurrency_backend=p.backend, max_pool_size=p.max_pool_size,
                                               notifications_log=True),
                     computes=ComputeOptions(sites=spread(c.processes, range(2, spec.sites + 1)),
                                             nodes_per_process=c.nodes_per_process, vcpus=c.vcpus,
                                             memory_mb=c.memory_mb, disk_gb=c.disk_gb,
                                             max_concurrent_builds=c.max_concurrent_builds))


def grow_preload(dep: Deployment, want: int, progress: Progress, timeout_s: float = 3600.0) -> None:
    """Boot VMs (the admin's, named ``juice-preload-*``, multi-create batches) until ``want``
    are ACTIVE. Booted through the API, not pre-seeded rows: each went through the scheduler."""
    from juice.services.fake_openstack import IMAGE_ID

    if want <= dep.running:
        return
    cli = dep.stack.client(1)
    t0 = time.monotonic()
    progress(f"preload: booting {want - dep.running} VMs ({dep.running} running)")
    while dep.running < want:
        n = min(PRELOAD_BATCH, want - dep.running)
        cli.boot(f"{PRELOAD_PREFIX}-{dep.running:06d}", dep.flavor_id, IMAGE_ID, count=n)
        deadline = time.monotonic() + max(300.0, 10.0 * n)
        while True:
            servers = cli.servers(name=PRELOAD_PREFIX)
            active = sum(1 for s in servers if s["status"] == "ACTIVE")
            bad = [s for s in servers if s["status"] == "ERROR"]
            if bad:
                raise ServiceError(f"preload: {len(bad)} VMs went to ERROR (e.g. {bad[0]['id']}); "
                                   "more computes or a smaller flavor")
            if active >= dep.running + n:
                break
            if time.monotonic() > deadline or time.monotonic() - t0 > timeout_s:
                raise ServiceError(f"preload: {active} of {dep.running + n} VMs ACTIVE in time")
            time.sleep(2.0)
        dep.running += n
    dep.preload_s += time.monotonic() - t0
    progress(f"preload: {dep.running} VMs running ({time.monotonic() - t0:.0f} s)")


def _log_offsets(files: Sequence[Path]) -> dict[Path, int]:
    return {f: (f.stat().st_size if f.exists() else 0) for f in files}


def _copy_slices(offsets: Mapping[Path, int], dest: Path) -> list[str]:
    """What each log gained since ``offsets`` (the run's lines only), into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for f, start in offsets.items():
        if not f.exists():
            continue
        with f.open("rb") as src:
            src.seek(start)
            data = src.read()
        if data:
            (dest / f.name).write_bytes(data)
            out.append(f.name)
    return out


class NovaStudy(Study[NovaSpec, NovaPoint]):
    name = WORKLOAD
    title = "nova boots (seeds 002, 004)"
    example = "examples/nova-boot.yaml"

    def parse(self, data: Mapping[str, Any], source: str) -> NovaSpec:
        return parse(dict(data), source)

    def expand(self, spec: NovaSpec) -> list[NovaPoint]:
        return expand(spec)

    def results_dir(self, spec: NovaSpec) -> Path:
        return Path(spec.results or f"results/{spec.name}")

    @contextmanager
    def lab(self, spec: NovaSpec, points: Sequence[NovaPoint], progress: Progress) -> Iterator[LocalLab]:
        with uniform_lab("nova", spec.sites, points[0].delay_ms, progress) as lab:
            yield lab

    @contextmanager
    def deployment(self, spec: NovaSpec, lab: LocalLab, points: Sequence[NovaPoint],
                   progress: Progress) -> Iterator[Deployment]:
        from juice.services.nova_deploy import NovaDeployment

        p = points[0]
        stack = NovaDeployment(lab, progress, _stack(spec, p))
        stack.up(timeout=1800.0)
        try:
            f = spec.flavor
            flavor = stack.client(1).ensure_flavor(f.name, vcpus=f.vcpus, ram_mb=f.ram_mb, disk_gb=f.disk_gb)
            yield Deployment(lab, stack, flavor, facts=stack.facts())
        finally:
            stack.stop()

    def run_point(self, run: Run[NovaSpec, NovaPoint], dep: Deployment) -> None:
        from juice.load.drivers import DriverJob, run_drivers
        from juice.load.iterations import iteration_rows, write_iterations
        from juice.load.progress import RichProgress
        from juice.load.rally_json import write_rally
        from juice.load.runner import RunnerSpec
        from juice.services import counters
        from juice.services.fake_openstack import IMAGE_ID

        spec, p = run.spec, run.point
        grow_preload(dep, p.preload, run.progress)
        ks, site = dep.stack.ks, spec.driver_site
        creds = ks.admin_credentials()
        name_run = "".join(secrets.choice(ALPHABET) for _ in range(6))
        env = {"auth_url": ks.auth_url(site), "username": creds.username, "password": creds.password,
               "project_name": creds.project_name, "nova_url": dep.stack.nova.api_url(),
               "image_id": IMAGE_ID, "flavor_id": dep.flavor_id, "concurrency": p.concurrency,
               "boots_path": str(run.rd.file(f"boots-{site}.jsonl")), "name_run": name_run,
               "poll_interval_s": spec.poll_interval_s, "boot_timeout_s": spec.boot_timeout_s}
        if p.rate is not None:
            runner = RunnerSpec(type="open", times=p.times, rate=p.rate, arrival=p.arrival,
                                max_in_flight=p.concurrency, timeout_s=spec.runner.timeout_s, seed=p.seed)
        else:
            runner = RunnerSpec(type="constant", times=p.times, concurrency=p.concurrency,
                                timeout_s=spec.runner.timeout_s, seed=p.seed)
        job = DriverJob(site=site, scenario=p.scenario, runner=runner, args=dict(p.args), env=env,
                        contexts={"users": spec.users.model_dump()}, seed=p.seed,
                        timeout_s=spec.runner.timeout_s * 4 + 3600)
        svcs = (dep.stack.nova, dep.stack.computes, dep.stack.placement)
        logs = [f for svc in svcs for f in svc.log_files()]
        offsets = _log_offsets(logs)
        try:
            probe: counters.Probe | None = counters.probe_for(dep.stack.db)
        except (ServiceError, TypeError):
            probe = None
        t0 = time.time()
        load = f"{p.rate:g}/s ({p.arrival})" if p.rate is not None else f"concurrency {p.concurrency}"
        run.progress(f"{p.times} boots, {load}, {dep.running} VMs running")
        with probe.window() if probe is not None else nullcontext() as w:
            results = run_drivers(dep.lab, [job], run.ui if run.ui is not None else RichProgress())
        time.sleep(1.0)  # the last notifications reach the compute logs
        copied = _copy_slices(offsets, run.rd.file("logs"))
        notes = metrics.notifications(list(run.rd.file("logs").glob("*.log")), since=t0 - 1)
        lines = metrics.read_boot_lines(sorted(run.rd.partial.glob("boots-*.jsonl")))
        rows = metrics.boots(list(iteration_rows(results)), lines, notes)
        _write_parquet(run.rd.file("boots.parquet"), rows)
        window = max((r.finished_at for r in results), default=t0) - min((r.started_at for r in results),
                                                                          default=t0)
        summary = metrics.summarize(rows, window)
        run.rd.write_json("summary.json", summary)
        write_iterations(run.rd.file("iterations.jsonl"), results)
        write_rally(run.rd.file("rally.json"), results, title=f"{p.study}: {p.scenario}",
                    description=f"{p.db}, {p.schedulers} scheduler(s), {dep.running} VMs running",
                    tags=["juice", p.study])
        rw = None
        if w is not None:
            c = w.result
            rw = {"reads": c.reads, "writes": c.writes, "pct_reads": round(c.pct_reads, 2),
                  "pct_writes": round(c.pct_writes, 2), "per_command": c.per_command}
        run.manifest(kind="nova-run", params=p.params(), spec=dict(run.spec_data), running_vms=dep.running,
                     preload_method="booted through the API (multi-create batches of 50)",
                     deployment=dep.facts, versions=_versions(), rwratio=rw, summary=summary, logs=copied,
                     drivers=[{"site": r.site, "failure": r.failure, "cpu_s": r.cpu_s,
                               "setup_s": r.setup_s, "cleanup_s": r.cleanup_s} for r in results])
        run.progress(f"{summary['active']}/{summary['boots']} ACTIVE; boot median "
                     f"{_s(summary['rally_median'])} (Rally's polling) / {_s(summary['nova_median'])} (nova)")
        if all(r.failure for r in results):
            raise JuiceError(f"the driver failed: {results[0].failure}")

    def plan_columns(self, point: NovaPoint) -> dict[str, Any]:
        return {"scenario": point.scenario.split(".")[-1], "db": point.db, "schedulers": point.schedulers,
                "subset": point.host_subset_size, "backend": point.backend, "pool": point.max_pool_size,
                "running": point.preload, "load": (f"{point.rate:g}/s" if point.rate is not None
                                                   else f"conc. {point.concurrency}"), "boots": point.times,
                "delay": f"{point.delay_ms:g} ms", "rep": point.repetition}

    def estimate_s(self, point: NovaPoint) -> float:
        per_boot = 1.5 + 0.02 * point.schedulers  # measured order of magnitude on 2 cores
        if point.rate is not None:
            return 20.0 + point.times / point.rate + 30.0
        return 20.0 + point.times * per_boot / min(point.concurrency, 10) + 2.0 * point.times / 10

    def overhead_s(self, points: Sequence[NovaPoint]) -> float:
        deps = {(p.lab_key, p.deployment_key) for p in points}
        nodes = points[0].params()["nodes"] if points else 0
        return len(deps) * (120.0 + 0.15 * nodes) + sum(max(p.preload for p in points) * 0.5 for _ in deps)

    def report_sections(self, inputs: ReportInput) -> list[str]:
        from juice.studies.nova import report

        return report.sections(inputs.paths)

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Mapping[str, Any],
                filter_q: float | None) -> pd.DataFrame | None:
        from juice.studies.nova import report

        return report.table(paths, by)

    def scenario(self, name: str, args: Mapping[str, Any], contexts: Mapping[str, Any] | None,
                 seed: int | None) -> Scenario | None:
        from juice.studies.nova import scenarios

        if name not in scenarios.SCENARIOS:
            return None
        found: Scenario = scenarios.get(name, dict(args), dict(contexts) if contexts else None, seed)
        return found


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} s"


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pandas as pd

    tmp = path.with_name(path.name + ".tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _versions() -> dict[str, str]:
    from juice.services.keystone import dist_version

    return {k: dist_version(k) for k in ("nova", "openstack-placement", "keystone", "oslo.messaging")}


def write_json(path: Path, data: Any) -> None:
    atomic.write_text(path, json.dumps(data, indent=2) + "\n")
