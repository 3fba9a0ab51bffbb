"""The Keystone study on the study contract: spec, points, labs, deployments, plan, report.

One lab per site count (``RunPoint.lab_key``), one deployment per (sites, rdbms, cache)
(``deployment_key``), WAN points applied to the running lab (``run.Deployment``). Runs made
before the study contract carry their key as ``params.run_id`` (no top-level ``workload``):
``key_of`` reads both, so they stay complete.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from juice.contract import Data, Progress, ReportInput, Run, Study
from juice.studies.keystone import estimate
from juice.studies.keystone import run as runs
from juice.studies.keystone.matrix import RunPoint, expand
from juice.studies.keystone.spec import Experiment, parse

if TYPE_CHECKING:
    import pandas as pd

    from juice.lab.place import Lab
    from juice.load.api import Scenario
    from juice.studies.keystone.target import TargetDeployment

WORKLOAD = "keystone"


class KeystoneStudy(Study[Experiment, RunPoint, "runs.Deployment | TargetDeployment"]):
    """Seed 000: Keystone on MariaDB/Galera/PostgreSQL/CockroachDB across sites and WANs."""

    name = WORKLOAD
    title = "Keystone (seed 000)"
    example = "examples/quickstart.yaml"

    def parse(self, data: Data, source: str) -> Experiment:
        return parse(dict(data), source)

    def expand(self, spec: Experiment) -> list[RunPoint]:
        return expand(spec)

    def results_dir(self, spec: Experiment) -> Path:
        return Path(spec.results or f"results/{spec.name}")

    def key_of(self, manifest: Data) -> str | None:
        key = super().key_of(manifest)
        if key or "workload" in manifest:
            return key
        params = manifest.get("params")  # a run made before the study contract
        if not isinstance(params, Mapping) or params.get("workload", WORKLOAD) != WORKLOAD:
            return None
        return str(params["run_id"]) if params.get("run_id") else None

    @contextmanager
    def lab(self, spec: Experiment, points: Sequence[RunPoint],
            progress: Progress) -> Iterator[Lab | None]:
        if spec.target is not None:  # an existing cloud: no lab
            yield None
            return
        with runs.lab(spec, points[0].sites, points[0].wan, progress) as lab:
            yield lab

    @contextmanager
    def deployment(self, spec: Experiment, lab: Lab | None, points: Sequence[RunPoint],
                   progress: Progress) -> Iterator[runs.Deployment | TargetDeployment]:
        if spec.target is not None:
            from juice.studies.keystone import target

            with target.deployment(spec.target, progress, any(p.load == "high" for p in points)) as tdep:
                yield tdep
            return
        assert lab is not None
        with runs.deployment(lab, points[0], spec, progress) as dep:
            yield dep

    def run_point(self, run: Run[Experiment, RunPoint],
                  deployment: runs.Deployment | TargetDeployment) -> None:
        if isinstance(deployment, runs.Deployment):
            runs.run_point(run, deployment)
            return
        from juice.studies.keystone import target

        target.run_point(run, deployment)

    def preflight(self, spec: Experiment, points: Sequence[RunPoint], assume_yes: bool) -> None:
        if spec.target is not None:
            from juice.studies.keystone import safety

            safety.preflight(spec, points, assume_yes)

    def dry_run(self, spec: Experiment, points: Sequence[RunPoint], progress: Progress) -> list[str] | None:
        if spec.target is None and spec.provider.kind != "local":
            return provider_plan(spec, points)
        from juice.studies.keystone import safety

        return safety.dry_run_lines(spec, points, progress)

    def cleanup(self, spec: Experiment, prefix: str | None, progress: Progress) -> list[str] | None:
        if spec.target is None:
            return None
        from juice.studies.keystone import safety

        return safety.cleanup_lines(spec, prefix, progress)

    def plan_columns(self, point: RunPoint) -> dict[str, object]:
        return {"scenario": point.scenario.split(".")[-1], "rdbms": point.rdbms, "sites": point.sites,
                "wan (one-way)": point.wan.label, "load": point.load,
                "cache": "-" if point.target else "on" if point.cache else "off",
                # set for every point of a spec or for none (an axis when given)
                **({"max_connections": point.server["max_connections"]}
                   if "max_connections" in point.server else {}),
                "rep": point.repetition}

    def estimate_s(self, point: RunPoint) -> float:
        return estimate.run_s(point)

    def overhead_s(self, points: Sequence[RunPoint]) -> float:
        return estimate.total_s(points) - sum(estimate.run_s(p) for p in points)

    profile_level = "load"  # the resource profile's load levels

    def report_sections(self, inputs: ReportInput) -> list[str]:
        from juice.studies.keystone import report

        return report.sections(inputs)

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Data,
                filter_q: float | None) -> pd.DataFrame | None:
        from juice.studies.keystone import report

        return report.describe_runs(paths, by, params, filter_q)

    def scenario(self, name: str, args: Data, contexts: Data | None,
                 seed: int | None) -> Scenario | None:
        from juice.studies.keystone import catalog

        if not catalog.known(name):
            return None
        return catalog.get(name, dict(args), contexts=dict(contexts) if contexts else None, seed=seed)


def provider_plan(spec: Experiment, points: Sequence[RunPoint]) -> list[str]:
    """What a run on hosts would reserve and apply, per lab (site count) and WAN point: the
    provider's plan (EnOSlib conf or host list, site -> host and what runs there, the WAN
    commands per site)."""
    from juice.lab.open import plan

    lines = [f"{len(points)} runs on hosts (provider kind {spec.provider.kind}); nothing is reserved "
             "or contacted by this dry run"]
    seen: set[tuple[int, str]] = set()
    for p in points:
        if (p.sites, p.wan.label) in seen:
            continue
        seen.add((p.sites, p.wan.label))
        ls = p.wan.lab_spec("plan", p.sites, spec.wan.jitter_ms, spec.wan.loss_pct)
        lines += ["", f"== {p.sites} sites, WAN {p.wan.label} one-way =="]
        lines += plan(spec.provider, ls, roles(spec, p.sites))
    return lines


def roles(spec: Experiment, sites: int) -> dict[int, list[str]]:
    """What runs in each site: the database (``mariadb``: site 1; else a node per site), a
    Keystone and its memcached per site, the load drivers (light load: site 1; high: all)."""
    out: dict[int, list[str]] = {}
    for k in range(1, sites + 1):
        db = sorted({r for r in spec.rdbms if r != "mariadb" or k == 1})
        here = [f"database ({' or '.join(db)})"] if db else []
        here += ["keystone"] + (["memcached"] if True in spec.keystone.cache else [])
        if "high" in spec.load or k == 1:
            here.append("load driver")
        out[k] = here
    return out
