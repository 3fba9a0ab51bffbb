"""The nova study against an existing cloud (``target:``): boots from this machine, rate-capped,
everything the run made deleted after it.

Once per spec: the credentials are resolved and checked (a token), the catalog gives the
compute endpoint of the credentials' region (``target.endpoints`` names identity URLs only; a
``compute`` override is not needed for a real cloud), the flavor is looked up by name, and the
RTT to Keystone and nova is measured. Each run: one driver per region (light load: one), the
users context through Keystone, boots of ``image`` with ``network``; after it, whatever is named
with the run's prefix (servers, then users and projects) is deleted, also after Ctrl-C.

What Juice cannot see there is listed in the manifest (``not_measured``): nova's own boot time
(it comes from the services' logs in a lab), DB counters unless ``db_url_env``, resource profiles.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from juice.errors import JuiceError, UserError
from juice.load.drivers import LoopbackSites
from juice.openstack import cloud
from juice.openstack.keystone import KeystoneClient, KeystoneError
from juice.services.databases.counters import RemoteMySQLProbe, target_probe
from juice.spec.target import Credentials, resolve
from juice.studies.nova.points import NovaPoint
from juice.studies.nova.scenarios import NovaApi, NovaError, delete_by_prefix
from juice.studies.nova.spec import NovaSpec

if TYPE_CHECKING:
    from juice.contract import Run

Progress = Callable[[str], None]
NOT_MEASURED = {
    "nova_boot_time": "nova's own boot time (instance.create.end) comes from the services' logs, "
                      "which stay on the cloud: only Rally's polled boot time is measured",
    "db_counters": cloud.NOT_MEASURED["db_counters"],
    "resource_profile": cloud.NOT_MEASURED["resource_profile"],
    "server_logs": cloud.NOT_MEASURED["server_logs"],
}


@dataclass
class NovaTarget:
    spec: NovaSpec
    creds: Credentials
    identity_url: str
    compute_url: str
    flavor_id: str
    sites: LoopbackSites
    rtt: dict[str, object] = field(default_factory=dict)
    juice_lab: str | None = None
    probe: RemoteMySQLProbe | None = None  # with a read-only database URL

    def facts(self) -> dict[str, object]:
        t = self.spec.target
        assert t is not None
        missing = dict(NOT_MEASURED)
        if self.probe is not None:
            missing.pop("db_counters")
        if t.ssh:
            missing.pop("resource_profile")
        return {"target": t.label, "credentials": self.creds.public(), "identity_url": self.identity_url,
                "compute_url": self.compute_url, "flavor": self.spec.flavor.name, "flavor_id": self.flavor_id,
                "image": self.spec.image, "network": self.spec.network, "rtt": self.rtt,
                "juice_lab": self.juice_lab, "max_rps": t.max_rps, "not_measured": missing,
                "resource_profile": (", ".join(f"over SSH: {h.user}@{h.host}:{h.port}" for h in t.ssh)
                                     if t.ssh else None)}


def compute_url_of(token_body: dict[str, Any], region: str | None) -> str | None:
    """The public compute endpoint of ``region`` (else the first) in a token's catalog."""
    for svc in token_body.get("token", {}).get("catalog", []):
        if svc.get("type") != "compute":
            continue
        eps = [e for e in svc.get("endpoints", []) if e.get("interface") == "public"]
        for e in eps:
            if region is None or e.get("region") == region:
                return str(e["url"])
        if eps:
            return str(eps[0]["url"])
    return None


async def _connect(spec: NovaSpec, creds: Credentials) -> tuple[str, str, dict[str, Any]]:
    t = spec.target
    assert t is not None
    ks = KeystoneClient(creds.auth_url, max_rps=t.max_rps)
    try:
        _, body, headers = await ks.call("POST", "/auth/tokens", body=cloud.ks_credentials(creds).auth_body())
    except KeystoneError as e:
        raise UserError(f"target: {creds.source}: Keystone refused the credentials "
                        f"({e.status}: {e.message})") from None
    finally:
        await ks.close()
    url = spec.compute_url or compute_url_of(body or {}, creds.region_name)
    if not url:
        raise UserError(f"target: {t.label}: the catalog has no compute endpoint")
    nova = NovaApi(url, 1, max_rps=t.max_rps)
    token = headers["X-Subject-Token"]
    try:
        t0 = time.perf_counter()
        _, flavors, _ = await nova.call("GET", "/flavors", token)
        http_s = time.perf_counter() - t0
    except (TimeoutError, NovaError, OSError) as e:
        raise UserError(f"target: nova at {url}: {e}") from None
    finally:
        await nova.close()
    found = [f["id"] for f in flavors["flavors"] if f["name"] == spec.flavor.name]
    if not found:
        names = ", ".join(sorted(f["name"] for f in flavors["flavors"]))[:300]
        raise UserError(f"flavor.name: {spec.flavor.name!r} is not a flavor of {t.label} (it has: {names})")
    return url, str(found[0]), {"nova GET /flavors (ms)": round(http_s * 1e3, 3)}


@contextmanager
def deployment(spec: NovaSpec, progress: Progress) -> Iterator[NovaTarget]:
    t = spec.target
    assert t is not None
    creds = resolve(t)
    progress(f"target {t.label}: {creds.auth_url} as {creds.username} ({creds.source})")
    url, flavor, rtt = asyncio.run(_connect(spec, creds))
    for name, u in (("keystone", creds.auth_url), ("nova", url)):
        tcp = cloud.tcp_rtt(u, gap_s=1 / t.max_rps)
        rtt[f"{name} TCP connect median (ms)"] = cloud.ms_summary(tcp)["median_ms"]
    progress(f"nova at {url}; flavor {spec.flavor.name} = {flavor}; RTT {rtt}")
    if t.ssh:
        from juice.profile import ssh as ssh_profile

        ssh_profile.check(t.ssh)
    with cloud.host_sites(progress) as sites:
        yield NovaTarget(spec, creds, creds.auth_url, url, flavor, sites, rtt, cloud.juice_lab_of(creds),
                         target_probe(t))


def cleanup_now(dep_creds: Credentials, identity_url: str, compute_url: str, max_rps: float, prefix: str,
                progress: Progress, timeout_s: float = 600.0) -> dict[str, int]:
    """Delete the servers named ``prefix``* (every project), then users/projects/roles/services."""
    async def servers() -> int:
        ks = KeystoneClient(identity_url, max_rps=max_rps)
        nova = NovaApi(compute_url, 10, max_rps=max_rps)
        try:
            tok = (await ks.issue_token(cloud.ks_credentials(dep_creds))).id
            _, data, _ = await nova.call("GET", f"/servers?all_tenants=1&name=^{prefix}", tok)
            n = sum(1 for s in data["servers"] if s["name"].startswith(prefix))
            left = await delete_by_prefix(nova, tok, prefix, timeout_s)
            if left:
                raise JuiceError(f"{left} servers named {prefix}* still there after {timeout_s:.0f} s")
            return n
        finally:
            await ks.close()
            await nova.close()

    try:
        n = asyncio.run(servers())
    except (TimeoutError, NovaError, KeystoneError, OSError) as e:
        raise JuiceError(f"cleanup of servers {prefix}* failed ({e}); "
                         "run `juice cleanup --target SPEC`") from None
    counts = {"servers": n, **cloud.cleanup_now(dep_creds, identity_url, max_rps, prefix, progress)}
    return counts


def run_point(run: Run[NovaSpec, NovaPoint], dep: NovaTarget,
              execute: Callable[[LoopbackSites, dict[str, Any]], None]) -> None:
    """``execute(sites, env)`` runs the driver and writes the run; here: the env, the run's prefix
    recorded first, and the cleanup after it whatever happens."""
    t = dep.spec.target
    assert t is not None
    prefix = cloud.new_run_prefix()
    c = dep.creds
    env = {"auth_url": dep.identity_url, "username": c.username, "password": c.password,
           "project_name": c.project_name, "user_domain_name": c.user_domain_name,
           "project_domain_name": c.project_domain_name, "nova_url": dep.compute_url,
           "image_id": dep.spec.image, "network": dep.spec.network, "flavor_id": dep.flavor_id,
           "max_rps": t.max_rps, "name_run": f"{prefix.removeprefix(cloud.PREFIX)}01"}
    run.manifest(kind="nova-run", params=run.point.params(), spec=dict(run.spec_data), target=dep.facts(),
                 created_prefix=prefix, state="running")
    run.progress(f"driver on this machine → {dep.compute_url}; at most {t.max_rps:g} requests/s; created "
                 f"names start {prefix}")
    cleaned: dict[str, int] | str = "not run"
    try:
        if t.ssh:  # the cloud's servers profiled around the run (the generic sampler sees only a lab)
            from juice.profile import sampler
            from juice.profile import ssh as ssh_profile

            with ssh_profile.around(t.ssh, run.rd.partial, sampler.settings(run.spec), run.progress):
                execute(dep.sites, env)
        else:
            execute(dep.sites, env)
    finally:
        try:
            cleaned = cleanup_now(dep.creds, dep.identity_url, dep.compute_url, t.max_rps, prefix,
                                  run.progress)
        except JuiceError as e:
            run.progress(str(e))
            cleaned = str(e)
    path = run.rd.file("manifest.json")
    import json

    from juice.util import atomic

    man = json.loads(path.read_text())
    man.update(target=dep.facts(), created_prefix=prefix, leftovers_deleted=cleaned)
    man.pop("state", None)
    atomic.write_json(path, man)


def preflight(spec: NovaSpec, points: Sequence[NovaPoint], assume_yes: bool) -> None:
    t = spec.target
    assert t is not None
    creds = resolve(t)
    if assume_yes or cloud.juice_lab_of(creds) is not None or not points:
        return
    boots = sum(p.times for p in points)
    users = spec.users.tenants * spec.users.users_per_tenant
    raise UserError(f"--yes: {t.label} is not a Juice lab and these runs boot {boots} servers and create "
                    f"{spec.users.tenants} project(s) and {users} user(s) per run there (deleted after "
                    "each run; `juice run --dry-run` lists the calls): pass --yes to run them")


def dry_run_lines(spec: NovaSpec, points: Sequence[NovaPoint]) -> list[str]:
    """The calls of each run, per iteration (polls depend on how long nova takes: bounds given)."""
    t = spec.target
    assert t is not None
    poll, timeout = spec.poll_interval_s, spec.boot_timeout_s
    most = int(max(0.0, timeout - 1.0) // poll) + 1
    users = spec.users.tenants * spec.users.users_per_tenant
    lines = [f"dry run against {t.label}: nothing was sent. {len(points)} runs; every request at most "
             f"{t.max_rps:g}/s in all",
             "once: POST /v3/auth/tokens (credentials, catalog), GET /v2.1/flavors (the flavor's id)"]
    for i, p in enumerate(points, 1):
        delete = "delete" in p.scenario
        lines += [f"run {i}: {p.label}",
                  f"    context: {spec.users.tenants} x POST /v3/projects, {users} x POST /v3/users "
                  "(+ the Rally users context's domain/role lookups and grants), "
                  f"{users} x POST /v3/auth/tokens",
                  f"    {p.times} x POST /v2.1/servers (creates {p.times} servers named s_juice_<run>...)",
                  f"    {p.times} x (1..{most}) GET /v2.1/servers/{{id}} (a poll every {poll:g} s until "
                  "ACTIVE, after 1 s)"]
        if delete:
            lines.append(f"    {p.times} x DELETE /v2.1/servers/{{id}}, then a GET every {poll:g} s "
                         "until 404")
        lines.append("    after: GET /v2.1/servers?all_tenants=1&name=^<prefix> (+ DELETE of any left), "
                     f"{users} x DELETE /v3/users/{{id}}, {spec.users.tenants} x DELETE /v3/projects/{{id}}, "
                     "then the Keystone prefix sweep (GET users, projects, services, roles)")
    return lines


def cleanup_lines(spec: NovaSpec, prefix: str | None, progress: Progress) -> list[str]:
    t = spec.target
    assert t is not None
    creds = resolve(t)
    url, _, _ = asyncio.run(_connect(spec, creds))
    pre = prefix or cloud.PREFIX
    counts = cleanup_now(creds, creds.auth_url, url, t.max_rps, pre, progress)
    found = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "nothing"
    return [f"{t.label}: deleted {found} named {pre}*"]
