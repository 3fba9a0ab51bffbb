"""The Keystone study against an existing cloud (``target:`` in the spec): no lab, no deployment.

    juice run examples/existing-cloud.yaml --dry-run   # every call and creation, nothing sent
    juice run examples/existing-cloud.yaml --yes       # --yes: it creates users (not a Juice lab)
    juice cleanup --target examples/existing-cloud.yaml   # leftovers of an interrupted run

The drivers run on this machine (no namespace) against the cloud's identity endpoints: light
load = one driver (the credentials' region, else the first), high load = one driver per region
of the catalog's identity service (``target.endpoints`` overrides the URLs). Every request of a
run goes through a rate cap, ``target.max_rps`` shared by the drivers, which the run never
exceeds (contexts and cleanup included).

Once per spec (the "deployment"): the credentials are resolved (clouds.yaml, openrc, Rally env
or explicit fields; the password never reaches results), a token is issued (a wrong password
fails here, before any run), and the RTT to each endpoint is measured and recorded (TCP
connects and ``GET /v3``) in place of a WAN spec. What Juice cannot see there is listed in
each manifest's ``target.not_measured``.

Created resources carry a per-run prefix ``s_juice_<6 chars>`` (each driver adds 2 digits). After
every run, whatever happened (Ctrl-C included), Juice deletes what still carries the run's
prefix; ``juice cleanup --target`` removes leftovers of any Juice run (``s_juice_``).

With ``target.ssh`` (hosts Juice may log into with a key or the agent), the cloud's servers
are profiled around each run over SSH (``juice.profile.ssh``): ``profile.parquet`` and
the manifest's ``profile`` entry, as a lab run's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from juice.errors import JuiceError, UserError
from juice.load.drivers import LoopbackSites
from juice.openstack import cloud
from juice.openstack.cloud import (
    NOT_MEASURED,
    PREFIX,
    host_sites,
    juice_lab_of,
    ks_credentials,
    ms_summary,
    new_run_prefix,
    tcp_rtt,
)
from juice.openstack.keystone import KeystoneClient, KeystoneError
from juice.services.databases.counters import RemoteMySQLProbe, target_probe
from juice.spec.target import Credentials, Target, resolve

if TYPE_CHECKING:
    from juice.contract import Run
    from juice.studies.keystone.matrix import RunPoint
    from juice.studies.keystone.spec import Experiment

Progress = Callable[[str], None]
HTTP_PROBES = 5






@dataclass
class TargetDeployment:
    """The cloud as the runs see it: credentials (secret), identity URL per region, RTTs."""

    target: Target
    creds: Credentials
    regions: dict[str, str]
    home_region: str
    sites: LoopbackSites
    rtt: dict[str, object] = field(default_factory=dict)
    juice_lab: str | None = None
    probe: RemoteMySQLProbe | None = None  # when the user gave a read-only database URL

    def facts(self) -> dict[str, Any]:
        """What a manifest keeps (no password)."""
        missing = dict(NOT_MEASURED)
        if self.probe is not None:
            missing.pop("db_counters")
        if self.target.ssh:
            missing.pop("resource_profile")
        return {"target": self.target.label, "credentials": self.creds.public(),
                "regions": dict(self.regions), "home_region": self.home_region, "rtt": self.rtt,
                "juice_lab": self.juice_lab, "max_rps": self.target.max_rps,
                "db_counters": (f"SHOW GLOBAL STATUS of {self.probe.where} (every client of that "
                                "server, not only the run's)") if self.probe is not None else None,
                "resource_profile": ("over SSH: " + ", ".join(f"{h.user}@{h.host}:{h.port}"
                                                              for h in self.target.ssh)
                                     if self.target.ssh else None),
                "not_measured": missing}


async def catalog_regions(client: KeystoneClient, creds: Credentials) -> dict[str, str]:
    """region -> public identity URL, from a project-scoped token's catalog (one POST)."""
    _, data, _ = await client.call("POST", "/auth/tokens", body=ks_credentials(creds).auth_body())
    out: dict[str, str] = {}
    for svc in (data or {}).get("token", {}).get("catalog", []):
        if svc.get("type") == "identity":
            for ep in svc.get("endpoints", []):
                if ep.get("interface") == "public" and ep.get("region"):
                    out.setdefault(str(ep["region"]), str(ep["url"]))
    return out


async def http_rtt(client: KeystoneClient, max_rps: float, n: int = HTTP_PROBES) -> list[float]:
    """Seconds of ``n`` sequential ``GET /v3`` (the smallest request, no token), ``1/max_rps``
    apart (the pause is not timed; ``client`` has no cap of its own)."""
    out: list[float] = []
    for i in range(n):
        if i:
            await asyncio.sleep(1.0 / max_rps)
        t0 = time.perf_counter()
        await client.discover()
        out.append(time.perf_counter() - t0)
    return out


async def connect(client: KeystoneClient, creds: Credentials,
                  t: Target) -> tuple[dict[str, str], str, dict[str, str]]:
    """Issue a token (fails early on bad credentials) and read the identity regions:
    (region -> URL the drivers use, the home region, the catalog as read)."""
    try:
        catalog = await catalog_regions(client, creds)
    except KeystoneError as e:
        raise UserError(f"target: {creds.source}: Keystone refused the credentials ({e.status}: "
                        f"{e.message})") from None
    explicit = dict(t.endpoints or creds.endpoints or {})
    regions = explicit or dict(catalog)
    home = creds.region_name if creds.region_name else next(iter(regions), "default")
    if home not in explicit:  # the credentials' own URL serves their region
        regions[home] = creds.auth_url
    return regions, home, catalog


@contextmanager
def deployment(t: Target, progress: Progress, every_region: bool) -> Iterator[TargetDeployment]:
    """Resolve, check and measure the target once (see the module doc)."""
    creds = resolve(t)
    progress(f"target {t.label}: {creds.auth_url} as {creds.username} ({creds.source})")
    with host_sites(progress) as sites:
        regions, home, rtt = asyncio.run(_probe(t, creds, False, every_region))
        if t.ssh:
            from juice.profile import ssh as ssh_profile

            ssh_profile.check(t.ssh)
        dep = TargetDeployment(t, creds, regions, home, sites, rtt, juice_lab_of(creds), target_probe(t))
        for region, r in rtt.items():
            if region == "catalog":
                continue
            progress(f"RTT to {region} ({regions[region]}): TCP median {r['tcp']['median_ms']} ms, "
                     f"GET /v3 median {r['http']['median_ms']} ms")
        yield dep


def _client(url: str, max_rps: float | None, simulated: bool) -> KeystoneClient:
    from juice.studies.keystone.dryrun import SimulatedKeystone

    return SimulatedKeystone(url) if simulated else KeystoneClient(url, max_rps=max_rps)


async def _probe(t: Target, creds: Credentials, simulated: bool,
                 every_region: bool) -> tuple[dict[str, str], str, dict[str, Any]]:
    """Connect, then measure the RTT to the endpoints the runs use: the home region's, and
    with ``every_region`` (a high-load run) every region's. No other URL is contacted."""
    first = _client(creds.auth_url, t.max_rps, simulated)
    try:
        regions, home, catalog = await connect(first, creds, t)
    finally:
        await first.close()
    rtt: dict[str, Any] = {"catalog": catalog}
    for region, url in regions.items():
        if region != home and not every_region:
            continue
        c = _client(url, None, simulated)
        try:
            http = await http_rtt(c, t.max_rps)
        except (TimeoutError, KeystoneError, OSError) as e:
            raise UserError(f"target: region {region}: GET {url} failed ({e})") from None
        finally:
            await c.close()
        tcp = [0.0] if simulated else tcp_rtt(url, gap_s=1.0 / t.max_rps)
        rtt[region] = {"url": url, "tcp": ms_summary(tcp), "http": ms_summary(http)}
    return regions, home, rtt


def cleanup_now(creds: Credentials, url: str, max_rps: float, prefix: str, progress: Progress,
                simulated: bool = False) -> dict[str, int]:
    """``cloud.cleanup_now`` with the dry run's simulated Keystone when ``simulated``."""
    return cloud.cleanup_now(creds, url, max_rps, prefix, progress,
                             client=lambda u, r: _client(u, r, simulated))


def driver_regions(load: str, regions: dict[str, str], home: str) -> list[str]:
    """Light load: one driver (the home region); high load: one per region."""
    return [home] if load == "light" else list(regions)


def run_point(run: Run[Experiment, RunPoint], dep: TargetDeployment) -> None:
    """One run against the target (``_run_point``), its servers profiled over SSH around it
    when ``target.ssh`` is given (the generic runner's sampler sees only a lab)."""
    if not dep.target.ssh:
        _run_point(run, dep)
        return
    from juice.profile import sampler
    from juice.profile import ssh as ssh_profile

    with ssh_profile.around(dep.target.ssh, run.rd.partial, sampler.settings(run.spec), run.progress):
        _run_point(run, dep)


def _run_point(run: Run[Experiment, RunPoint], dep: TargetDeployment) -> None:
    """One run against the target: drivers on this machine, the run's leftovers deleted after
    them (whatever happened), the manifest with what was and was not measured."""
    from juice.studies.keystone import drive

    p = run.point
    regions = driver_regions(p.load, dep.regions, dep.home_region)
    spec = drive.runner_spec(p, run.spec.sla, len(regions))
    share = dep.target.max_rps / len(regions)
    prefix = new_run_prefix()
    jobs = []
    for i, region in enumerate(regions, 1):
        env = target_env(dep, region, i, drive.pool_size(spec), share, prefix)
        jobs.append(drive.job(p, i, spec, env))
    run.progress(f"{len(jobs)} driver(s) on this machine → {', '.join(regions)}; at most "
                 f"{dep.target.max_rps:g} requests/s in all; created names start {prefix}")
    run.manifest(kind="keystone-run", params=p.params(), spec=dict(run.spec_data), target=dep.facts(),
                 created_prefix=prefix, state="running")  # a crash leaves the prefix on record
    cleaned: dict[str, int] | str = "not run"
    try:
        outcome = drive.drive_jobs(run.rd, p, dep.sites, jobs, dep.probe, run.progress, run.ui)
    finally:
        try:
            cleaned = cleanup_now(dep.creds, dep.regions[dep.home_region], dep.target.max_rps, prefix,
                                  run.progress)
        except JuiceError as e:
            run.progress(str(e))
            cleaned = str(e)
    run.manifest(kind="keystone-run", params=p.params(), spec=dict(run.spec_data),
                 scenario_args=p.scenario_args, contexts=p.contexts, runner=p.runner.key_dump(), seed=p.seed,
                 versions={}, deployment={"rdbms": p.rdbms, "target": dep.target.label},
                 target=dep.facts(), created_prefix=prefix, leftovers_deleted=cleaned,
                 drivers_in={str(i): r for i, r in enumerate(regions, 1)}, **outcome)
    from juice.studies.keystone.drive import finish

    finish(run.rd)


def target_env(dep: TargetDeployment, region: str, index: int, pool: int, max_rps: float,
               prefix: str) -> dict[str, object]:
    """A driver's env (credentials: never stored)."""
    c = dep.creds
    return {"site": index, "auth_url": dep.regions[region], "region": region, "username": c.username,
            "password": c.password, "project_name": c.project_name,
            "user_domain_name": c.user_domain_name, "project_domain_name": c.project_domain_name,
            "concurrency": pool, "max_rps": max_rps, "name_run": f"{prefix.removeprefix(PREFIX)}{index:02d}"}
