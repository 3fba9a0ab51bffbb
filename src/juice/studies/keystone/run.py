"""Labs, deployments and runs of the Keystone study (the pieces its ``Study`` hands the runner).

    juice run examples/quickstart.yaml      # → results/quickstart/<run>/..., report.html

One ephemeral lab per site count; in it one deployment (database + a Keystone per site) per
(rdbms, cache); for each WAN point the running lab's WAN is changed and checked (the
deployment remembers the current point); then every (load, scenario, repetition) run.

Each run is a directory written atomically (``RunDir``): manifest.json (spec, params,
versions, WAN backend and check, deployment facts, host facts, seed, %reads/%writes),
iterations.jsonl (Juice's records), rally.json (Rally task format 1.2) and actions.parquet
(the tidy table).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from juice.contract import Run
from juice.lab.open import open_lab
from juice.lab.place import Lab
from juice.results.store import tool_version
from juice.services.base import Service
from juice.spec.wan import WanPoint
from juice.studies.keystone.faults import KeystoneFaults
from juice.studies.keystone.matrix import RunPoint
from juice.studies.keystone.spec import Experiment

if TYPE_CHECKING:
    from juice.services.openstack.keystone import Keystone


Progress = Callable[[str], None]


@contextmanager
def lab(exp: Experiment, sites: int, wan: WanPoint, progress: Progress) -> Iterator[Lab]:
    """A local lab, or the provider's hosts (``RemoteLab``) when ``provider.kind`` is enoslib."""
    name = "run" + secrets.token_hex(3)
    with open_lab(exp.provider, wan.lab_spec(name, sites, exp.wan.jitter_ms, exp.wan.loss_pct),
                  progress) as the_lab:
        yield the_lab


@dataclass
class Deployment:
    """A database and a Keystone per site in ``lab``; ``wan`` is the WAN point applied last."""

    lab: Lab
    db: Service
    ks: Keystone
    wan: str | None = None
    wan_report: dict[str, Any] = field(default_factory=dict)


@contextmanager
def deployment(lab: Lab, p: RunPoint, exp: Experiment, progress: Progress) -> Iterator[Deployment]:
    """The database and a Keystone in every site, in a local lab or on the provider's hosts
    alike (the services run at the lab's places)."""
    from juice.services import kinds
    from juice.services.openstack.keystone import Keystone, KeystoneOptions

    progress(f"deploying {p.rdbms} for {p.sites} sites")
    t0 = time.monotonic()
    # bounded waits that grow with the deployment (45 sites on 2 cores take minutes)
    pfs = {"performance_schema": True} if p.write_attribution and p.rdbms in ("mariadb", "galera") else {}
    conns = {"max_connections": p.server["max_connections"]} if "max_connections" in p.server else {}
    db = kinds.deploy(lab, p.rdbms, progress, timeout=max(180.0, 60.0 + 10.0 * p.sites), **pfs, **conns)
    try:
        progress(f"{p.rdbms} healthy in {time.monotonic() - t0:.1f} s; starting a Keystone in every site "
                 f"(cache {'on' if p.cache else 'off'})")
        opts = KeystoneOptions(cache=p.cache, workers=exp.keystone.workers,
                               password_hash_rounds=exp.keystone.password_hash_rounds,
                               max_pool_size=p.server.get("max_pool_size"),
                               max_overflow=p.server.get("max_overflow"),
                               prewarm=exp.keystone.prewarm,
                               # the sites that serve load: site 1 alone when every load is light
                               prewarm_sites=(1,) if set(exp.load) <= {"light"} else None)
        ks = Keystone(lab, db, progress, opts)
        ks.up(timeout=max(300.0, 60.0 + 8.0 * p.sites))
        try:
            yield Deployment(lab, db, ks)
        finally:
            ks.stop()
    finally:
        db.stop()


def _apply_wan(lab: Lab, exp: Experiment, wan: WanPoint, progress: Progress) -> dict[str, Any]:
    new = wan.lab_spec(lab.name, len(lab.sites), exp.wan.jitter_ms, exp.wan.loss_pct)
    if new.model_dump() != lab.spec.model_dump():
        progress(f"WAN → {wan.label}")
        lab.set_wan(new, progress)
    out: dict[str, Any] = {"backend": lab.backend, "point": wan.label, "spec": new.model_dump(mode="json")}
    facts = lab.facts()
    if facts.get("provider") != "local":
        out["provider"] = facts  # the hosts (results made before kept this key for hosts only)
    if exp.check_wan:
        rep = lab.check(probes=10)
        out["check"] = rep.to_dict()
        if not rep.ok:
            progress("warning: the WAN check found a pair out of tolerance (recorded in the manifest)")
    return out


def run_point(run: Run[Experiment, RunPoint], dep: Deployment) -> None:
    """Apply the point's WAN when it differs from the running one, drive the load, write the run."""
    from juice.studies.keystone import drive

    exp, p = run.spec, run.point
    if p.wan.label != dep.wan:
        dep.wan_report = _apply_wan(dep.lab, exp, p.wan, run.progress)
        dep.wan = p.wan.label
    target = KeystoneFaults(dep.lab, dep.db, dep.ks, p.wan, exp.wan.jitter_ms, exp.wan.loss_pct)
    outcome = drive.execute(run.rd, p, dep.lab, dep.db, dep.ks, run.progress, run.ui, target, sla=exp.sla)
    deviations = ({"performance_schema": "ON (keystone.write_attribution; MariaDB's default is OFF)"}
                  if p.write_attribution and p.rdbms in ("mariadb", "galera") else {})
    run.manifest(kind="keystone-run", params=p.params(), spec=dict(run.spec_data),
                 scenario_args=p.scenario_args, contexts=p.contexts, runner=p.runner.key_dump(), seed=p.seed,
                 versions=versions(dep.ks), deployment={"rdbms": p.rdbms, **dep.ks.facts(),
                                                        **({"deviations": deviations} if deviations else {})},
                 wan=dep.wan_report, **outcome)
    drive.finish(run.rd)


def versions(ks: Keystone) -> dict[str, str]:
    v = {"mariadbd": tool_version(["mariadbd", "--version"]),
         "postgres": tool_version(["/usr/lib/postgresql/15/bin/postgres", "--version"]),
         "kernel": tool_version(["uname", "-r"])}
    facts = ks.facts() if hasattr(ks, "facts") else {}
    for k in ("keystone", "gunicorn", "memcached"):
        if f"{k}_version" in facts:
            v[k] = str(facts[f"{k}_version"])
    return v
