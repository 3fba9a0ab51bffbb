"""The run matrix of a Keystone study: the product of its axes, in execution order.

Order = how labs and deployments are reused: one lab per site count; inside it one
deployment (database + Keystone) per (rdbms, cache); inside that the WAN points are applied
to the running lab (``set_wan``, then checked); then load × scenario × repetition. A run is
identified by ``key`` (a hash of its parameters), stored in its manifest, so a resumed sweep
skips exactly the runs that completed, whatever the directory names say.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from juice.lab import spec as labspec
from juice.spec.experiment import Experiment


@dataclass(frozen=True)
class WanPoint:
    """One point of the WAN axis. ``delay_ms`` is the uniform ONE-WAY delay (None for zones
    and matrices); ``label`` names the point (run keys, directory names); the ``wan`` param
    is its kind (uniform, zones, matrixN) so a delay sweep varies ``delay_ms`` only."""

    label: str
    delay_ms: float | None = None
    zones: tuple[int, float, float] | None = None  # (count, intra_ms, inter_ms)
    matrix: tuple[tuple[float, ...], ...] | None = None

    def lab_spec(self, name: str, sites: int, jitter_ms: float, loss_pct: float) -> labspec.LabSpec:
        data: dict[str, Any] = {"name": name, "sites": sites, "jitter_ms": jitter_ms, "loss_pct": loss_pct}
        if self.delay_ms is not None:
            data["delay_ms"] = self.delay_ms
        elif self.zones is not None:
            count, intra, inter = self.zones
            data.update(zones=labspec.even_zones(sites, count), intra_zone_delay_ms=intra,
                        inter_zone_delay_ms=inter)
        elif self.matrix is not None:
            data["matrix"] = [list(r) for r in self.matrix]
        return labspec.parse(data, "wan")

    def params(self) -> dict[str, Any]:
        zones = None
        if self.zones is not None:
            zones = f"{self.zones[0]} zones, {self.zones[1]:g}/{self.zones[2]:g} ms"
        kind = "uniform" if self.delay_ms is not None else "zones" if self.zones else self.label
        return {"delay_ms": self.delay_ms, "wan": kind, "zones": zones}


@dataclass(frozen=True)
class RunPoint:
    study: str
    scenario: str
    scenario_args: dict[str, Any] = field(hash=False, compare=False)
    contexts: dict[str, Any] = field(hash=False, compare=False)
    rdbms: str
    sites: int
    wan: WanPoint
    load: str
    cache: bool
    repetition: int
    seed: int
    runner: dict[str, Any] = field(hash=False, compare=False)

    def params(self) -> dict[str, Any]:
        """The run's parameters as stored in its manifest (and as analysis columns)."""
        return {"study": self.study, "workload": "keystone", "scenario": self.scenario,
                "rdbms": self.rdbms, "sites": self.sites, **self.wan.params(), "load": self.load,
                "cache": self.cache, "times": self.runner["times"],
                "concurrency": self.runner["concurrency"], "rate": self.runner.get("rate"),
                "repetition": self.repetition, "seed": self.seed, "run_id": self.key}

    @property
    def key(self) -> str:
        ident = {"study": self.study, "scenario": self.scenario, "args": self.scenario_args,
                 **({"contexts": self.contexts} if self.contexts else {}),
                 "rdbms": self.rdbms, "sites": self.sites, "wan": self.wan.label, "load": self.load,
                 "cache": self.cache, "repetition": self.repetition, "runner": self.runner}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dirname(self) -> str:
        """Human-readable; never parsed back (the manifest holds the parameters)."""
        short = self.scenario.split(".")[-1]
        wan = self.wan.label.replace(" ", "").replace("/", "-")
        return (f"{short}-{self.rdbms}-{self.sites}s-{wan}-{self.load}-"
                f"{'cache' if self.cache else 'nocache'}-r{self.repetition}-{self.key}")

    @property
    def deployment(self) -> tuple[int, str, bool]:
        return (self.sites, self.rdbms, self.cache)


def wan_points(exp: Experiment) -> list[WanPoint]:
    pts = [WanPoint(label=f"{d:g}ms", delay_ms=d) for d in exp.wan.delay_ms]
    pts += [WanPoint(label=f"zones{z.count}-{z.intra_ms:g}-{z.inter_ms:g}ms",
                     zones=(z.count, z.intra_ms, z.inter_ms)) for z in exp.wan.zones]
    pts += [WanPoint(label=f"matrix{i + 1}", matrix=tuple(tuple(r) for r in m))
            for i, m in enumerate(exp.wan.matrices)]
    return pts


def expand(exp: Experiment) -> list[RunPoint]:
    """Every run of the study, in execution order (see the module doc)."""
    from juice.workloads import registry

    runner = exp.runner.model_dump(mode="json")
    scenarios = [(registry.canonical(s.name), s.args, s.contexts) for s in exp.scenarios]
    out: list[RunPoint] = []
    for sites in exp.sites:
        for rdbms in exp.rdbms:
            for cache in exp.keystone.cache:
                for wan in wan_points(exp):
                    for load in exp.load:
                        for name, args, contexts in scenarios:
                            for rep in range(exp.repetitions):
                                out.append(RunPoint(
                                    study=exp.name, scenario=name, scenario_args=dict(args),
                                    contexts=dict(contexts),
                                    rdbms=rdbms, sites=sites, wan=wan, load=load, cache=cache,
                                    repetition=rep, seed=exp.seed + rep, runner=runner))
    return out
