"""Run a Keystone study: the matrix of ``juice.spec.matrix``, resumable, labs reused.

    juice run examples/quickstart.yaml      # → results/quickstart/<run>/..., report.html

Loop structure (see ``matrix``): one ephemeral lab per site count; in it one deployment
(database + a Keystone per site) per (rdbms, cache); for each WAN point the running lab's
WAN is changed and checked; then every (load, scenario, repetition) run. Groups whose runs
are all complete are skipped without deploying anything.

Each run is a directory written atomically (``RunDir``): manifest.json (spec, params,
versions, WAN backend and check, deployment facts, host facts, seed, %reads/%writes),
iterations.jsonl (Juice's records), rally.json (Rally task format 1.2) and actions.parquet
(the tidy table). A crash or Ctrl-C leaves complete runs and no half-written one; the next
``juice run`` of the same spec skips the completed runs (by key, from their manifests).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import groupby
from pathlib import Path
from typing import Any

from juice.errors import JuiceError
from juice.lab import LocalLab
from juice.lab.check import check
from juice.results.store import RunDir, tool_version
from juice.services.base import Service
from juice.spec.experiment import Experiment
from juice.spec.matrix import RunPoint, WanPoint, expand

Progress = Callable[[str], None]


def completed(study_dir: Path) -> dict[str, Path]:
    """run key → directory, for every complete run under ``study_dir``."""
    out: dict[str, Path] = {}
    if not study_dir.is_dir():
        return out
    for m in sorted(study_dir.glob("*/manifest.json")):
        d = m.parent
        if d.name.startswith(".") or d.name.endswith(".failed"):
            continue
        try:
            key = json.loads(m.read_text())["params"]["run_id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.setdefault(key, d)
    return out


def study_dir_of(exp: Experiment, results: Path | None = None) -> Path:
    return results if results is not None else Path(exp.results or f"results/{exp.name}")


def run(exp: Experiment, spec_data: dict[str, Any], study_dir: Path, progress: Progress,
        ui: Any = None) -> tuple[int, int, int]:
    """Execute every run not done yet. Returns (done before, run now, failed now)."""
    points = expand(exp)
    done = completed(study_dir)
    todo = [p for p in points if p.key not in done]
    progress(f"{len(points)} runs in the matrix: {len(points) - len(todo)} already complete, "
             f"{len(todo)} to run → {study_dir}")
    ran = failed = 0
    position = len(points) - len(todo)
    for sites, by_sites in groupby(todo, key=lambda p: p.sites):
        group = list(by_sites)
        with _lab(exp, sites, group[0].wan, progress) as lab:
            for _dep, by_dep in groupby(group, key=lambda p: p.deployment):
                dep_points = list(by_dep)
                with _deployment(lab, dep_points[0], exp, progress) as (db, ks):
                    current_wan: str | None = None
                    wan_report: dict[str, Any] = {}
                    for p in dep_points:
                        if p.wan.label != current_wan:
                            wan_report = _apply_wan(lab, exp, p.wan, progress)
                            current_wan = p.wan.label
                        position += 1
                        progress(f"[{position}/{len(points)}] {p.scenario.split('.')[-1]} · {p.rdbms} · "
                                 f"{p.sites} sites · {p.wan.label} · {p.load} load")
                        try:
                            _one_run(study_dir, exp, spec_data, p, lab, db, ks, wan_report, progress, ui)
                            ran += 1
                        except JuiceError as e:
                            failed += 1
                            progress(f"run failed ({e}); kept as .failed, continuing")
    return len(points) - len(todo), ran, failed


@contextmanager
def _lab(exp: Experiment, sites: int, wan: WanPoint, progress: Progress) -> Iterator[LocalLab]:
    name = "run" + secrets.token_hex(3)
    lab_spec = wan.lab_spec(name, sites, exp.wan.jitter_ms, exp.wan.loss_pct)
    progress(f"lab {name}: {sites} sites")
    with LocalLab.up(lab_spec, ephemeral=True, progress=progress) as lab:
        yield lab


@contextmanager
def _deployment(lab: LocalLab, p: RunPoint, exp: Experiment,
                progress: Progress) -> Iterator[tuple[Service, Service]]:
    from juice.services import registry
    from juice.services.keystone import Keystone, KeystoneOptions

    progress(f"deploying {p.rdbms} for {p.sites} sites")
    t0 = time.monotonic()
    # bounded waits that grow with the deployment (45 sites on 2 cores take minutes)
    db = registry.deploy(lab, p.rdbms, progress, timeout=max(180.0, 60.0 + 10.0 * p.sites))
    try:
        progress(f"{p.rdbms} healthy in {time.monotonic() - t0:.1f} s; starting a Keystone in every site "
                 f"(cache {'on' if p.cache else 'off'})")
        opts = KeystoneOptions(cache=p.cache, workers=exp.keystone.workers,
                               password_hash_rounds=exp.keystone.password_hash_rounds)
        ks = Keystone(lab, db, progress, opts)
        ks.up(timeout=max(300.0, 60.0 + 8.0 * p.sites))
        try:
            yield db, ks
        finally:
            ks.stop()
    finally:
        db.stop()


def _apply_wan(lab: LocalLab, exp: Experiment, wan: WanPoint, progress: Progress) -> dict[str, Any]:
    new = wan.lab_spec(lab.state.name, len(lab.sites), exp.wan.jitter_ms, exp.wan.loss_pct)
    if new.model_dump() != lab.spec.model_dump():
        progress(f"WAN → {wan.label}")
        lab.set_wan(new)
    out: dict[str, Any] = {"backend": lab.state.backend, "point": wan.label,
                           "spec": new.model_dump(mode="json")}
    if exp.check_wan:
        rep = check(lab, probes=10)
        out["check"] = rep.to_dict()
        if not rep.ok:
            progress("warning: the WAN check found a pair out of tolerance (recorded in the manifest)")
    return out


def _one_run(study_dir: Path, exp: Experiment, spec_data: dict[str, Any], p: RunPoint, lab: LocalLab,
             db: Service, ks: Any, wan_report: dict[str, Any], progress: Progress, ui: Any) -> None:
    from juice.runner import drive

    with RunDir(study_dir, p.dirname) as rd:
        outcome = drive.execute(rd, p, lab, db, ks, progress, ui)
        rd.manifest(kind="keystone-run", params=p.params(), spec=spec_data,
                    scenario_args=p.scenario_args, contexts=p.contexts, runner=p.runner, seed=p.seed,
                    versions=versions(ks), deployment={"rdbms": p.rdbms, **ks.facts()},
                    wan=wan_report, **outcome)
        drive.finish(rd)
    if rd.path.name.endswith(".failed"):
        raise JuiceError(f"see {rd.path / 'error.txt'}")


def versions(ks: Any) -> dict[str, str]:
    v = {"mariadbd": tool_version(["mariadbd", "--version"]),
         "postgres": tool_version(["/usr/lib/postgresql/15/bin/postgres", "--version"]),
         "kernel": tool_version(["uname", "-r"])}
    facts = ks.facts() if hasattr(ks, "facts") else {}
    for k in ("keystone", "gunicorn", "memcached"):
        if f"{k}_version" in facts:
            v[k] = str(facts[f"{k}_version"])
    return v
