"""The nova study on the study contract (seeds 002, 004): Rally-style boots against real nova 34.

    juice plan examples/nova-boot.yaml
    juice run examples/nova-boot.yaml        # → results/nova-boot/<run>/..., report.html

A lab per one-way delay; in it the whole nova stack (``services.nova_deploy``: the database,
RabbitMQ, Keystone, placement, glance (fake-glance when asked), neutron with ML2/OVN and
ovn-central (fake-neutron when asked), nova-api, conductor,
schedulers and the simulated compute hosts) per deployment key; inside it the running VMs
(``preload``) are booted once and topped up as the points ask for more; each run boots from
one driver in ``driver_site`` and deletes what it made.

A run directory holds: manifest.json (parameters, deployment facts, versions, running VMs,
%reads/%writes of the database over the window, the summary), iterations.jsonl and rally.json
(Rally task format 1.2: ``nova.boot_server`` / ``nova.delete_server`` atomics), boots.parquet
(one row per boot: Rally's and nova's boot time, API time, host, fault), summary.json, and
logs/ (what every service logged during the run: request ids at the level tracing needs; cut
where each service runs and fetched, so the same on hosts: ``juice.services.logslice``).

With a ``provider:`` section the sites are hosts (``juice.lab.open``); ``controllers_site``
and ``computes.sites`` say what runs where, and ``--dry-run`` prints it per host.
"""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from juice.contract import Data, Progress, ReportInput, Run, Study
from juice.errors import ServiceError
from juice.lab.open import open_lab, uniform_spec
from juice.lab.place import Lab
from juice.studies.nova.points import NovaPoint, expand
from juice.studies.nova.spec import NovaSpec, parse

if TYPE_CHECKING:
    import pandas as pd

    from juice.load.api import Scenario
    from juice.services.balancers.haproxy import HAProxy
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
    from juice.services.openstack.placement import Placement
    from juice.studies.nova.target import NovaTarget

WORKLOAD = "nova"
PRELOAD_PREFIX = "juice-preload"
PRELOAD_BATCH = 50
PRELOAD_API_S = 0.36               # per VM booted through the API (1,000 in 358 s here)
PRELOAD_ROWS_S = (150.0, 0.02)     # per level, per VM (10,000 + 10,000 took 222 + 369 s here)
ALPHABET = string.ascii_lowercase + string.digits


@dataclass
class Deployment:
    lab: Lab
    stack: NovaDeployment
    flavor_id: str
    running: int = 0           # preload VMs booted and ACTIVE
    preload_s: float = 0.0
    facts: dict[str, object] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # asked where the servers run


def _stack(spec: NovaSpec, p: NovaPoint) -> NovaStack:
    from dataclasses import replace

    from juice.services.openstack.nova_conf import ComputeOptions, NovaOptions, spread
    from juice.services.openstack.nova_deploy import NovaStack
    from juice.studies.nova.simulation import fake_simulation
    from juice.studies.nova.topology import stack_shape

    # the server options as the spec set them (unset: None, i.e. the service's own default)
    home, given = spec.controllers_site, p.server
    multi = p.db == "galera" and p.writers == "multi"
    stack = NovaStack(db=p.db, db_site=home, bus_sites=(home,), keystone_site=home, placement_site=home,
                      fakes_site=home,
                      placement_workers=given.placement_workers or NovaStack.placement_workers,
                      db_max_connections=given.max_connections,
                      fakes_simulation=fake_simulation(spec.fakes, spec.failures, spec.seed),
                      image_service=spec.image_service, image_download=spec.image_download,
                      network_service=spec.network_service,
                      neutron_workers=given.neutron_api_workers or NovaStack.neutron_workers,
                      neutron_rpc_workers=given.neutron_rpc_workers,
                      keystone_workers=given.keystone_workers or NovaStack.keystone_workers,
                      authtoken_memcached=bool(given.authtoken_memcached),
                      nova=NovaOptions(control_site=home, schedulers=p.schedulers,
                                       max_overflow=given.max_overflow,
                                       rpc_response_timeout=given.rpc_response_timeout,
                                       rpc_conn_pool_size=given.rpc_conn_pool_size,
                                       executor_thread_pool_size=given.executor_thread_pool_size,
                                       service_down_time=given.service_down_time,
                                       vif_plugging_timeout=given.vif_plugging_timeout,
                                       vif_plugging_is_fatal=given.vif_plugging_is_fatal,
                                       api_workers=given.api_workers or NovaOptions.api_workers,
                                       conductor_workers=(given.conductor_workers
                                                          or NovaOptions.conductor_workers),
                                       scheduler_workers=(given.scheduler_workers
                                                          or NovaOptions.scheduler_workers),
                                       host_subset_size=p.host_subset_size,
                                       concurrency_backend=p.backend, max_pool_size=p.max_pool_size,
                                       notifications_log=True, log_json=spec.log_format == "json",
                                       db_writers="local" if multi else "single",
                                       profiler=None if spec.profiler == "off" else spec.profiler),
                      computes=ComputeOptions(spec.computes, default_sites=tuple(spec.compute_sites()),
                                              spawn_failure=spec.failures.spawn, sim_seed=spec.seed))
    if spec.haproxy is not None or spec.topology.set():  # the production shape (docs/topology.md)
        stack = stack_shape(stack, spec.topology, spec.haproxy, p.schedulers, p.haproxy_maxconn)
    if multi and stack.nova.scheduler_sites is None:  # the seed's multi: schedulers over every site
        stack = replace(stack, nova=replace(stack.nova, scheduler_sites=spread(p.schedulers,
                                                                               range(1, spec.sites + 1))))
    if given.haproxy_timeout_server is not None:  # with haproxy on (the spec checked it)
        stack = replace(stack, haproxy_timeout_server_s=float(given.haproxy_timeout_server))
    return stack


def osprofiler_traces(run: Run[NovaSpec, NovaPoint], stack: NovaDeployment) -> None:
    """The run's OSProfiler traces (one per boot that sent its headers), read from the Redis
    into ``osprofiler.json`` (written atomically with the run)."""
    import pandas as pd

    from juice.services.tracing.osprofiler import read_traces

    boots = pd.read_parquet(run.rd.file("boots.parquet"))
    ids = [t for t in boots.get("trace_id", pd.Series(dtype=object)) if isinstance(t, str)]
    nova = stack.nova
    doc = read_traces(stack.lab.place(nova.site), nova.profiler_url, ids,
                      nova.state_root(nova.site) / "osprofiler")
    run.rd.write_json("osprofiler.json", doc)
    spans = sum(len(v) for v in doc["traces"].values())
    run.progress(f"osprofiler: {sum(1 for v in doc['traces'].values() if v)}/{len(ids)} boots traced, "
                 f"{spans} notifications")


VERSIONED = ("nova", "openstack-placement", "keystone", "glance", "oslo.messaging")


def versions(lab: Lab, spec: NovaSpec) -> dict[str, str]:
    """The OpenStack versions of the venv where the controllers run (asked there: on hosts,
    each host's own venv)."""
    from juice.services.openstack.keystone import venv_versions

    return venv_versions(lab.place(spec.controllers_site), list(VERSIONED))


def roles(spec: NovaSpec, p: NovaPoint) -> dict[int, list[str]]:
    """What runs in each site for point ``p`` (the ``--dry-run`` plan on hosts), with the memory
    each part needs there (``juice.studies.nova.sitemap``)."""
    from juice.studies.nova.sitemap import parts

    return {k: [f"{x.label} (~{_mb(x.mb)})" for x in v] for k, v in parts(spec, p, _stack(spec, p)).items()}


def _mb(mb: float) -> str:
    return f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def provider_plan(spec: NovaSpec, points: Sequence[NovaPoint]) -> list[str]:
    """``--dry-run`` on hosts: the provider, site -> host and what runs there per deployment,
    the WAN commands per delay. Nothing is reserved or contacted."""
    from juice.lab.open import plan

    lines = [f"{len(points)} runs on hosts (provider kind {spec.provider.kind}); nothing is reserved "
             "or contacted by this dry run"]
    seen: set[tuple[float, tuple[str | int, ...]]] = set()
    for p in points:
        if (p.delay_ms, p.deployment_key) in seen:
            continue
        seen.add((p.delay_ms, p.deployment_key))
        lines += ["", f"== {spec.sites} sites, {p.delay_ms:g} ms one-way; {p.db}"
                  + (f" ({p.writers} writers)" if p.db == "galera" else "")
                  + f", {p.schedulers} scheduler(s) =="]
        lines += plan(spec.provider, uniform_spec("plan", spec.sites, p.delay_ms), roles(spec, p))
    return lines


def _haproxy_stats(run: Run[NovaSpec, NovaPoint], lb: HAProxy, sampled: dict[str, object]) -> None:
    """``haproxy-stats.json``: ``show info`` and ``show stat`` after the run (counters cleared
    before it) and ``sampled`` (``ConnSampler``: CurrConns vs Maxconn during it); a stats socket
    that does not answer is noted, not raised."""
    data: dict[str, object] = {"maxconn": lb.maxconn, "sampled": sampled}
    try:
        data.update(info=lb.info(), stats=lb.stats())
    except ServiceError as e:
        data["error"] = str(e)
    run.rd.write_json("haproxy-stats.json", data)


def _placement_capacity(run: Run[NovaSpec, NovaPoint], placement: Placement) -> None:
    """``placement.json`` after the run: what placement held per node (inventories with their
    allocation ratios, usages), for a handful of nodes; a placement that does not answer is
    noted, not raised."""
    try:
        data = placement.capacity()
    except ServiceError as e:
        data = {"error": str(e)}
    run.rd.write_json("placement.json", data)


def grow_preload(dep: Deployment, want: int, progress: Progress, method: str = "api",
                 timeout_s: float = 3600.0) -> None:
    """VMs (the admin's, named ``juice-preload-*``) until ``want`` are ACTIVE. ``api``: each
    booted through the API in multi-create batches (each went through the scheduler); ``rows``:
    the first booted so, the others cloned from it (``juice.services.openstack.nova_preload``)."""
    if want <= dep.running:
        return
    t0 = time.monotonic()
    progress(f"preload: {want - dep.running} VMs to add ({dep.running} running; {method})")
    if method == "rows":
        from juice.services.openstack.nova_preload import Preloader

        if dep.running == 0:
            _boot_batch(dep, 1, t0, timeout_s)
        (template,) = [s["id"] for s in dep.stack.client(1).servers(name=f"^{PRELOAD_PREFIX}-000000$")]
        st = dep.stack
        names = [f"{PRELOAD_PREFIX}-{i:06d}" for i in range(dep.running, want)]
        Preloader(dep.lab, st.db, st.placement.url(), st.placement.site, st.ks.admin_credentials(),
                  progress).clone(template, names)
        dep.running = want
    while dep.running < want:
        _boot_batch(dep, min(PRELOAD_BATCH, want - dep.running), t0, timeout_s)
    dep.preload_s += time.monotonic() - t0
    progress(f"preload: {dep.running} VMs running ({time.monotonic() - t0:.0f} s)")


def _boot_batch(dep: Deployment, n: int, t0: float, timeout_s: float) -> None:
    """Boot ``n`` preload VMs in one multi-create request and wait until they are ACTIVE (only
    this batch is listed: a name prefix, so that 20,000 running do not slow the poll)."""
    cli = dep.stack.client(1)
    name = f"{PRELOAD_PREFIX}-{dep.running:06d}"
    cli.boot(name, dep.flavor_id, dep.stack.image_id, count=n, network=dep.stack.network_id)
    deadline = time.monotonic() + max(300.0, 10.0 * n)
    while True:
        servers = cli.servers(name=f"^{name}")
        active = sum(1 for s in servers if s["status"] == "ACTIVE")
        bad = [s for s in servers if s["status"] == "ERROR"]
        if bad:
            raise ServiceError(f"preload: {len(bad)} VMs went to ERROR (e.g. {bad[0]['id']}); "
                               "more computes or a smaller flavor")
        if active >= n:
            break
        if time.monotonic() > deadline or time.monotonic() - t0 > timeout_s:
            raise ServiceError(f"preload: {active} of {n} VMs of {name} ACTIVE in time")
        time.sleep(2.0)
    dep.running += n


class NovaStudy(Study[NovaSpec, NovaPoint, "Deployment | NovaTarget"]):
    name = WORKLOAD
    title = "nova boots (seeds 002, 004)"
    example = "examples/nova-boot.yaml"

    def parse(self, data: Data, source: str) -> NovaSpec:
        return parse(dict(data), source)

    def expand(self, spec: NovaSpec) -> list[NovaPoint]:
        return expand(spec)

    def results_dir(self, spec: NovaSpec) -> Path:
        return Path(spec.results or f"results/{spec.name}")

    @contextmanager
    def lab(self, spec: NovaSpec, points: Sequence[NovaPoint],
            progress: Progress) -> Iterator[Lab | None]:
        if spec.target is not None:  # an existing cloud: no lab
            yield None
            return
        with open_lab(spec.provider, uniform_spec("nova", spec.sites, points[0].delay_ms), progress) as lab:
            # the memory plan, per machine, before anything is deployed (juice.studies.nova.sitemap)
            from juice.studies.nova.sitemap import check, parts

            keys = {p.deployment_key: p for p in points}
            for line in check(lab, [parts(spec, p, _stack(spec, p)) for p in keys.values()]):
                progress(line)
            yield lab

    @contextmanager
    def deployment(self, spec: NovaSpec, lab: Lab | None, points: Sequence[NovaPoint],
                   progress: Progress) -> Iterator[Deployment | NovaTarget]:
        from juice.services.openstack.nova_deploy import NovaDeployment

        if spec.target is not None:
            from juice.studies.nova import target

            with target.deployment(spec, progress) as tdep:
                yield tdep
            return
        assert lab is not None

        p = points[0]
        stack = NovaDeployment(lab, progress, _stack(spec, p))
        stack.up(timeout=1800.0)
        try:
            f = spec.flavor
            flavor = stack.client(1).ensure_flavor(f.name, vcpus=f.vcpus, ram_mb=f.ram_mb, disk_gb=f.disk_gb)
            yield Deployment(lab, stack, flavor, facts=stack.facts(), versions=versions(lab, spec))
        finally:
            stack.stop()

    def run_point(self, run: Run[NovaSpec, NovaPoint], dep: Deployment | NovaTarget) -> None:
        from juice.lab.place import ThisHost
        from juice.studies.nova import drive

        spec, p = run.spec, run.point
        if not isinstance(dep, Deployment):  # an existing cloud
            from juice.studies.nova import target

            remote_probe = dep.probe
            target.run_point(run, dep, lambda sites, env: drive.execute(
                run, sites, env, site=1, at=ThisHost(sites.workdir), logs=[], probe=remote_probe,
                running=None, facts={}))
            return
        from juice.services.buses import mqstats
        from juice.services.databases import counters, dbevents

        grow_preload(dep, p.preload, run.progress, spec.preload_method)
        ks, site = dep.stack.ks, spec.driver_site
        creds = ks.admin_credentials()
        env = {"auth_url": ks.auth_url(site), "username": creds.username, "password": creds.password,
               "project_name": creds.project_name, "nova_url": dep.stack.nova.api_url(),
               "image_id": dep.stack.image_id, "flavor_id": dep.flavor_id,
               "network": dep.stack.network_id or "none", "placement_url": dep.stack.placement.url(),
               "name_run": "".join(secrets.choice(ALPHABET) for _ in range(6))}
        if dep.stack.redis is not None:  # OSProfiler on: the driver signs a trace per boot
            env["profiler_key"] = dep.stack.nova.profiler_key
        # Keystone's logs too: its errors (a 500, a database refusal) explain failed boots
        svcs = (dep.stack.nova, dep.stack.computes, dep.stack.placements, dep.stack.ks,
                *([dep.stack.glance] if dep.stack.glance is not None else []),
                *([dep.stack.neutron] if dep.stack.neutron is not None else []),
                *([dep.stack.ovn] if dep.stack.ovn is not None else []))  # glance-api's access log
        try:
            probe: counters.Probe | None = counters.probe_for(dep.stack.db)
        except (ServiceError, TypeError):
            probe = None
        db_events = dbevents.probe_for(dep.stack.db)
        mq_sampler = mqstats.Sampler([(dep.lab.place(s), url) for s, url in dep.stack.mq.metrics_urls()])
        faults = None
        if spec.faults:
            from juice.faults.runner import FaultRunner
            from juice.studies.nova.faults import NovaFaults

            faults = FaultRunner(spec.faults, NovaFaults(dep.lab, dep.stack, p.delay_ms), run.progress)
        lb = dep.stack.lb
        sampler = None
        if lb is not None:
            from juice.services.balancers.haproxy import ConnSampler

            lb.command("clear counters all")  # the run's own maxima and totals (haproxy-stats.json)
            sampler = ConnSampler(lb).__enter__()  # the global maxconn: CurrConns every second
        try:
            drive.execute(run, dep.lab, env, site=site, at=dep.lab.place(site),
                          logs=[f for svc in (*svcs, *([lb] if lb else [])) for f in svc.logs()],
                          probe=probe, running=dep.running, facts=dep.facts, faults=faults,
                          lab=dep.lab.facts(), versions=dep.versions, db_events=db_events,
                          mq_sampler=mq_sampler)
        finally:  # a failed run keeps haproxy's counters too: they may say why it failed
            if lb is not None and sampler is not None:
                sampler.__exit__()
                _haproxy_stats(run, lb, sampler.result())
            _placement_capacity(run, dep.stack.placement)
        if dep.stack.redis is not None:
            osprofiler_traces(run, dep.stack)

    def preflight(self, spec: NovaSpec, points: Sequence[NovaPoint], assume_yes: bool) -> None:
        if spec.target is not None:
            from juice.studies.nova import target

            target.preflight(spec, points, assume_yes)

    def dry_run(self, spec: NovaSpec, points: Sequence[NovaPoint], progress: Progress) -> list[str] | None:
        if spec.target is None:
            return provider_plan(spec, points) if spec.provider.kind != "local" else None
        from juice.studies.nova import target

        return target.dry_run_lines(spec, points)

    def cleanup(self, spec: NovaSpec, prefix: str | None, progress: Progress) -> list[str] | None:
        if spec.target is None:
            return None
        from juice.studies.nova import target

        return target.cleanup_lines(spec, prefix, progress)

    def plan_columns(self, point: NovaPoint) -> dict[str, object]:
        conf = {"configuration": point.configuration} if point.configuration else {}
        return {**conf, "scenario": point.scenario.split(".")[-1], "db": point.db,
                "writers": point.writers, "schedulers": point.schedulers,
                "subset": point.host_subset_size, "backend": point.backend, "pool": point.max_pool_size,
                "running": point.preload, "load": (f"{point.rate:g}/s" if point.rate is not None
                                                   else f"conc. {point.concurrency}"), "boots": point.times,
                "delay": f"{point.delay_ms:g} ms", "rep": point.repetition,
                **({"maxconn": point.haproxy_maxconn} if point.haproxy_maxconn is not None else {})}

    def estimate_s(self, point: NovaPoint) -> float:
        from juice.services.openstack import simwait

        per_boot = 1.5 + 0.02 * point.schedulers  # measured order of magnitude on 2 cores
        # SIMULATED waits hold a boot (and its build slot) for their mean: spawn on the node,
        # image fetch and port creation in the stand-ins
        held = sum(simwait.mean(w) for w in point.waits)
        if point.rate is not None:
            return 20.0 + point.times / point.rate + 30.0 + held
        c = point.computes  # build slots: max_concurrent_builds per nova service
        if not held or c is None:
            slots = min(point.concurrency, 10)
        else:
            services = c.processes * (c.nodes_per_process if c.isolation == "fork" else 1)
            slots = min(point.concurrency, services * c.max_concurrent_builds)
        return 20.0 + point.times * (per_boot + held) / slots + 2.0 * point.times / 10

    def overhead_s(self, points: Sequence[NovaPoint]) -> float:
        deps = {(p.lab_key, p.deployment_key) for p in points}
        nodes = points[0].nodes if points else 0
        most = max((p.preload for p in points), default=0)
        if points and points[0].preload_method == "rows":  # a level: clone, then the
            levels = len({p.preload for p in points if p.preload})     # trackers' periodic update
            preload = PRELOAD_ROWS_S[0] * levels + PRELOAD_ROWS_S[1] * most
        else:
            preload = PRELOAD_API_S * most
        return len(deps) * (120.0 + 0.15 * nodes + preload)

    profile_level = "concurrency"  # the resource profile's load levels

    def report_sections(self, inputs: ReportInput) -> list[str]:
        from juice.studies.nova import report

        return report.sections(inputs.paths)

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Data,
                filter_q: float | None) -> pd.DataFrame | None:
        from juice.studies.nova import report

        return report.table(paths, by)

    def scenario(self, name: str, args: Data, contexts: Data | None,
                 seed: int | None) -> Scenario | None:
        from juice.studies.nova import scenarios

        if name not in scenarios.SCENARIOS:
            return None
        found: Scenario = scenarios.get(name, dict(args), dict(contexts) if contexts else None, seed)
        return found


