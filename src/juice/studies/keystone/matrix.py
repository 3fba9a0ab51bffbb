"""The run matrix of a Keystone study: the product of its axes, in execution order.

Order (``runner.order: as-written``; the sweep arranges the other orders from this one,
``juice.sweep.order``) = how labs and deployments are reused: one lab per site count; inside it one
deployment (database + Keystone) per (rdbms, cache); inside that the WAN points are applied
to the running lab (``set_wan``, then checked); then load × scenario × repetition. A run is
identified by ``key`` (a hash of its parameters), stored in its manifest, so a resumed sweep
skips exactly the runs that completed, whatever the directory names say.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from juice.faults.spec import Fault
from juice.spec.wan import WanPoint, wan_points
from juice.studies.keystone.spec import Experiment, Runner

TARGET_RDBMS = "existing"  # the rdbms column of a run against an existing cloud
TARGET_WAN = WanPoint(label="measured")  # no WAN spec: the RTT to each endpoint is recorded


@dataclass(frozen=True)
class RunPoint:
    study: str
    scenario: str
    scenario_args: dict[str, object] = field(hash=False, compare=False)
    contexts: dict[str, object] = field(hash=False, compare=False)
    rdbms: str
    sites: int
    wan: WanPoint
    load: str
    cache: bool
    repetition: int
    seed: int
    runner: Runner = field(hash=False, compare=False)  # the spec's, as validated
    faults: tuple[Fault, ...] = field(default=(), hash=False, compare=False)
    target: str | None = None      # an existing cloud (its label): no lab, no deployment
    max_rps: float | None = None   # the target's rate cap (requests/s, the whole run)
    write_attribution: bool = False  # statements by kind and table (performance_schema ON)
    # server options the spec set under their upstream names (max_connections, max_pool_size,
    # max_overflow); unset ones are absent, so runs made before them keep their keys
    server: dict[str, int] = field(default_factory=dict, hash=False, compare=False)

    def params(self) -> dict[str, object]:
        """The run's parameters as stored in its manifest (and as analysis columns)."""
        out: dict[str, object] = {
            "study": self.study, "workload": "keystone", "scenario": self.scenario,
            "rdbms": self.rdbms, "sites": self.sites, **self.wan.params(), "load": self.load,
            "cache": self.cache, "times": self.runner.times,
            "concurrency": self.runner.concurrency, "rate": self.runner.rate,
            "repetition": self.repetition, "seed": self.seed, "run_id": self.key,
            **({"faults": len(self.faults)} if self.faults else {}),
            **({"target": self.target, "max_rps": self.max_rps} if self.target else {}),
            **({"write_attribution": True} if self.write_attribution else {}),
            **({"warmup": self.runner.warmup} if self.runner.warmup else {}),
            **({"warmup_s": self.runner.warmup_s} if self.runner.warmup_s else {}),
            **self.server}
        if self.target is not None:  # the cloud's cache is the cloud's business: unknown here
            out["cache"] = None
        return out

    @property
    def key(self) -> str:
        ident = {"study": self.study, "scenario": self.scenario, "args": self.scenario_args,
                 **({"contexts": self.contexts} if self.contexts else {}),
                 "rdbms": self.rdbms, "sites": self.sites, "wan": self.wan.label, "load": self.load,
                 "cache": self.cache, "repetition": self.repetition, "runner": self.runner.key_dump(),
                 **({"faults": [f.model_dump(mode="json") for f in self.faults]} if self.faults else {}),
                 **({"target": self.target, "max_rps": self.max_rps} if self.target else {}),
                 # a deviation from the server's defaults (performance_schema ON): other runs
                 **({"write_attribution": True} if self.write_attribution else {}),
                 **({"server": self.server} if self.server else {})}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dirname(self) -> str:
        """Human-readable; never parsed back (the manifest holds the parameters)."""
        short = self.scenario.split(".")[-1]
        if self.target is not None:
            return f"{short}-target-{self.load}-r{self.repetition}-{self.key}"
        wan = self.wan.label.replace(" ", "").replace("/", "-")
        conns = f"-mc{self.server['max_connections']}" if "max_connections" in self.server else ""
        return (f"{short}-{self.rdbms}-{self.sites}s-{wan}-{self.load}-"
                f"{'cache' if self.cache else 'nocache'}{conns}-r{self.repetition}-{self.key}")

    @property
    def deployment(self) -> tuple[int, str, bool, tuple[tuple[str, int], ...]]:
        return (self.sites, self.rdbms, self.cache, tuple(sorted(self.server.items())))

    @property
    def point_key(self) -> str:
        """The run key without the repetition: the same point at another repetition."""
        return f"{self.study}:{self.deployment_key}:{self.wan.label}:{self.load}:{self.scenario}:" + (
            json.dumps([self.scenario_args, self.contexts], sort_keys=True))

    @property
    def block_key(self) -> str:
        """Runs that share a WAN point: ``juice.sweep.order`` keeps them together (a WAN change
        and check costs seconds)."""
        return self.wan.label

    @property
    def lab_key(self) -> int:
        """One lab per site count (its WAN changes between points)."""
        return self.sites

    @property
    def deployment_key(self) -> tuple[int, str, bool, tuple[tuple[str, int], ...]]:
        return self.deployment

    @property
    def label(self) -> str:
        if self.target is not None:
            return f"{self.scenario.split('.')[-1]} · {self.target} · {self.load} load"
        return (f"{self.scenario.split('.')[-1]} · {self.rdbms} · {self.sites} sites · {self.wan.label} · "
                f"{self.load} load")


def expand(exp: Experiment) -> list[RunPoint]:
    """Every run of the study, in execution order (see the module doc)."""
    from juice.studies.keystone import catalog as registry

    runner = exp.runner
    scenarios = [(registry.canonical(s.name), s.args, s.contexts) for s in exp.scenarios]
    out: list[RunPoint] = []
    if exp.target is not None:  # one "site" (this machine), the cloud's own database and WAN
        t = exp.target
        return [RunPoint(study=exp.name, scenario=name, scenario_args=dict(args), contexts=dict(contexts),
                         rdbms=TARGET_RDBMS, sites=1, wan=TARGET_WAN, load=load, cache=True,
                         repetition=rep, seed=exp.seed + rep, runner=runner, target=t.label,
                         max_rps=t.max_rps)
                for load in exp.load for name, args, contexts in scenarios for rep in range(exp.repetitions)]
    conns: list[int | None] = [*exp.database.max_connections] if exp.database.max_connections else [None]
    for sites in exp.sites:
        for rdbms in exp.rdbms:
            for cache in exp.keystone.cache:
                for mc in conns:
                    server = {**({"max_connections": mc} if mc is not None else {}),
                              **exp.keystone.server()}
                    for wan in wan_points(exp.wan):
                        for load in exp.load:
                            for name, args, contexts in scenarios:
                                for rep in range(exp.repetitions):
                                    out.append(RunPoint(
                                        study=exp.name, scenario=name, scenario_args=dict(args),
                                        contexts=dict(contexts),
                                        rdbms=rdbms, sites=sites, wan=wan, load=load, cache=cache,
                                        repetition=rep, seed=exp.seed + rep, runner=runner,
                                        faults=tuple(exp.faults), server=server,
                                        write_attribution=exp.keystone.write_attribution))
    return out
