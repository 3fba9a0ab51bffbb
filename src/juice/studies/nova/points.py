"""The run matrix of the nova study, in execution order.

One lab per one-way delay (``lab_key``); in it one nova deployment per (db, schedulers,
host_subset_size, backend, pool size) (``deployment_key``: changing any of them restarts
nova); inside a deployment the points go by growing ``preload`` (the running VMs are kept
between points and topped up), then scenario, concurrency and repetition. ``key`` hashes every
parameter that changes what is measured (stored in the manifest, never read back from a name).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from itertools import product
from typing import Any, Literal

from juice.services.openstack.nova_conf import Computes
from juice.studies.nova.simulation import record
from juice.studies.nova.spec import SCENARIO_ARGS, Configuration, NovaSpec, ServerOptions

TARGET_DB = "existing"  # the db column of a run against an existing cloud


@dataclass(frozen=True)
class NovaPoint:
    study: str
    sites: int
    delay_ms: float
    db: str
    schedulers: int
    host_subset_size: int
    backend: str
    max_pool_size: int
    preload: int
    scenario: str
    concurrency: int
    times: int
    repetition: int
    seed: int
    writers: str = "single"    # Galera: single | multi (see the spec)
    rate: float | None = None  # open loop: boots per second (concurrency is then the in-flight bound)
    arrival: str = "poisson"
    configuration: str = ""    # a named set of server options (spec.configurations), "" when none
    haproxy_maxconn: int | None = None  # haproxy's global maxconn (with haproxy on; None: its default)
    args: dict[str, object] = field(hash=False, compare=False, default_factory=dict)
    # what the key hashes besides the axes (computes, flavor...: the spec's values as stored)
    fixed: dict[str, object] = field(hash=False, compare=False, default_factory=dict)
    # the same values typed, as the deployment takes them: the spec's computes (None against an
    # existing cloud), the server options (the spec's ``server`` with the configuration's on top)
    computes: Computes | None = field(hash=False, compare=False, default=None)
    server: ServerOptions = field(hash=False, compare=False, default_factory=ServerOptions)
    preload_method: Literal["api", "rows"] = "api"
    # the SIMULATED waits a boot meets (simwait distributions, seeded: the manifest's
    # ``simulation`` stages'), for the estimate
    waits: tuple[dict[str, Any], ...] = field(hash=False, compare=False, default=())

    @property
    def nodes(self) -> int:
        """Simulated nodes (0 against an existing cloud)."""
        return self.computes.processes * self.computes.nodes_per_process if self.computes else 0

    def params(self) -> dict[str, object]:
        return {"study": self.study, "workload": "nova", "scenario": self.scenario, "sites": self.sites,
                "delay_ms": self.delay_ms, "db": self.db, "schedulers": self.schedulers,
                "host_subset_size": self.host_subset_size, "concurrency_backend": self.backend,
                "max_pool_size": self.max_pool_size, "preload": self.preload,
                "concurrency": self.concurrency, "times": self.times, "repetition": self.repetition,
                "seed": self.seed, "nodes": self.nodes,
                "compute_processes": self.computes.processes if self.computes else 0,
                **({"compute_isolation": "fork"}
                   if self.computes and self.computes.isolation == "fork" else {}),
                **({"preload_method": "rows"} if self.preload_method == "rows" else {}),
                **({"rate": self.rate, "arrival": self.arrival} if self.rate is not None else {}),
                **({"galera_writers": self.writers} if self.writers != "single" else {}),
                **({"configuration": self.configuration} if self.configuration else {}),
                **({"haproxy_maxconn": self.haproxy_maxconn} if self.haproxy_maxconn is not None else {}),
                **({"target": self.fixed["target"], "max_rps": self.fixed["max_rps"]}
                   if "target" in self.fixed else {})}

    @property
    def key(self) -> str:
        ident = {**self.params(), "args": self.args, "fixed": self.fixed}
        ident.pop("study")
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dirname(self) -> str:
        load = f"r{self.rate:g}" if self.rate is not None else f"c{self.concurrency}"
        conf = f"{self.configuration}-" if self.configuration else ""
        return (f"{conf}{self.scenario.split('.')[-1]}-{self.db}-s{self.schedulers}-{load}-"
                f"pre{self.preload}-{self.delay_ms:g}ms-r{self.repetition}-{self.key}")

    @property
    def label(self) -> str:
        return ((f"{self.configuration} · " if self.configuration else "")
                + f"{self.scenario.split('.')[-1]} · {self.db} · {self.schedulers} scheduler(s) · "
                + (f"{self.rate:g} boots/s" if self.rate is not None else f"concurrency {self.concurrency}")
                + f" · {self.preload} running · {self.delay_ms:g} ms")

    @property
    def lab_key(self) -> tuple[int, float]:
        return (self.sites, self.delay_ms)

    @property
    def deployment_key(self) -> tuple[str | int, ...]:
        base: tuple[str | int, ...] = (self.db, self.writers, self.schedulers, self.host_subset_size,
                                 self.backend, self.max_pool_size)
        # haproxy's maxconn only with haproxy on, the configuration only when named: earlier
        # specs keep their keys (and run orders)
        if self.configuration:
            base = (*base, self.configuration)
        return (*base, self.haproxy_maxconn or 0) if "haproxy" in self.fixed else base


def sim_record(spec: NovaSpec) -> dict[str, Any]:
    """The SIMULATED waits and failures of ``spec`` ({} when none: the manifest's ``simulation``)."""
    return record(spec.computes.spawn_time, spec.fakes, spec.failures, spec.seed)


def sim_waits(sim: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The waits of a ``simulation`` record, stage by stage (those with one)."""
    return tuple(v["wait_s"] for v in sim.get("stages", {}).values() if v.get("wait_s"))


def computes_key(c: Computes) -> dict[str, object]:
    """What run keys hash of ``computes``: its fields, those added later left out while at their
    default (earlier runs keep their keys)."""
    return {k: v for k, v in c.model_dump().items()
            if not (k == "failing_nodes" and v == 0) and not (k in ("sites", "spawn_time") and v is None)
            and not (k == "isolation" and v == "shared")}


def expand(spec: NovaSpec) -> list[NovaPoint]:
    fixed: dict[str, object] = {"computes": computes_key(spec.computes), "flavor": spec.flavor.model_dump(),
             "users": spec.users.model_dump(), "driver_site": spec.driver_site,
             "boot_timeout_s": spec.boot_timeout_s, "poll_interval_s": spec.poll_interval_s,
             **({"log_format": spec.log_format} if spec.log_format != "text" else {}),
             **({"controllers_site": spec.controllers_site} if spec.controllers_site != 1 else {}),
             **({"preload_method": spec.preload_method} if spec.preload_method != "api" else {}),
             **({"faults": [f.model_dump(mode="json") for f in spec.faults]} if spec.faults else {}),
             **({"server": spec.server.set()} if spec.server.set() else {}),
             **({"haproxy": {"site": spec.haproxy.site}} if spec.haproxy is not None else {}),
             **({"topology": spec.topology.set()} if spec.topology.set() else {}),
             **({"simulation": sim} if (sim := sim_record(spec)) else {}),
             # the real glance (the default since issue 40) in the key; the stand-in left out: runs
             # made before it existed used fake-glance and keep their keys
             **({"image_service": spec.image_service, "image_download": spec.image_download}
                if spec.image_service != "fake-glance" else {}),
             # the real neutron in the key; the stand-in left out (earlier runs used it)
             **({"network_service": spec.network_service}
                if spec.network_service != "fake-neutron" else {})}
    out: list[NovaPoint] = []
    if spec.target is not None:  # an existing cloud: none of the lab's axes
        fixed = {"target": spec.target.label, "max_rps": spec.target.max_rps, "image": spec.image,
                 "network": spec.network, "flavor": spec.flavor.name, "users": spec.users.model_dump(),
                 "boot_timeout_s": spec.boot_timeout_s, "poll_interval_s": spec.poll_interval_s,
                 "computes": {"processes": 0, "nodes_per_process": 0}}
        return [NovaPoint(study=spec.name, sites=1, delay_ms=0.0, db=TARGET_DB, schedulers=0,
                          host_subset_size=0, backend="-", max_pool_size=0, preload=0, scenario=sc.name,
                          concurrency=conc, times=spec.runner.times, repetition=rep, seed=spec.seed + rep,
                          rate=rate, arrival=spec.runner.arrival, args={**SCENARIO_ARGS[sc.name], **sc.args},
                          fixed=fixed, preload_method=spec.preload_method)
                for sc in spec.scenarios for conc, rate in spec.runner.loads()
                for rep in range(spec.repetitions)]
    # with configurations: each repetition runs every configuration in turn (before, after,
    # before, after...), each on its own deployment; without: one pass, "" for the name
    confs = list(spec.configurations or {}) or [""]
    reps = ([[r] for r in range(spec.repetitions)] if spec.configurations
            else [list(range(spec.repetitions))])
    base = {k: v for k, v in fixed.items() if k != "server"}
    for delay in spec.delay_ms:
        for rep_group in reps:
            for conf in confs:
                c = spec.configurations[conf] if spec.configurations and conf else None
                server = spec.server.model_copy(update=c.server()) if c else spec.server
                fx = {**base, **({"server": server.set()} if server.set() else {})}
                out += _lab_points(spec, delay, rep_group, conf, fx, server, c)
    return out


def _lab_points(spec: NovaSpec, delay: float, reps: list[int], conf: str, fixed: dict[str, object],
                server: ServerOptions, c: Configuration | None) -> list[NovaPoint]:
    """The points of one lab (one delay) for these repetitions and configuration (``c``: the
    deployment axes it fixes), deployment by deployment (equal ``deployment_key``s adjacent)."""
    writers: list[str] = ([c.galera_writers] if c and c.galera_writers is not None
                          else list(spec.galera_writers))
    dbs = [(d, w) for d in spec.db for w in (writers if d == "galera" else ["single"])]
    subsets = [c.host_subset_size] if c and c.host_subset_size is not None else spec.host_subset_size
    pools = [c.max_pool_size] if c and c.max_pool_size is not None else spec.max_pool_size
    maxconns: list[int | None] = list(spec.haproxy.axis()) if spec.haproxy is not None else [None]
    waits = sim_waits(sim_record(spec))
    return [NovaPoint(study=spec.name, sites=spec.sites, delay_ms=delay, db=db, schedulers=sched,
                      host_subset_size=hss, backend=backend, max_pool_size=pool, preload=pre,
                      scenario=sc.name, concurrency=conc, times=spec.runner.times, repetition=rep,
                      seed=spec.seed + rep, rate=rate, writers=writers, arrival=spec.runner.arrival,
                      configuration=conf, haproxy_maxconn=maxconn,
                      args={**SCENARIO_ARGS[sc.name], **sc.args}, fixed=fixed,
                      computes=spec.computes, server=server, preload_method=spec.preload_method,
                      waits=waits)
            for (db, writers), sched, hss, backend, pool, maxconn in product(
                dbs, spec.schedulers, subsets, spec.concurrency_backend, pools, maxconns)
            for pre in sorted(spec.preload) for sc in spec.scenarios for conc, rate in spec.runner.loads()
            for rep in reps]
