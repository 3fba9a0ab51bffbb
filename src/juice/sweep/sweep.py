"""Run the points of any study, resumably, with labs and deployments reused.

    before, ran, failed = sweep.run(study, spec, data, spec_text, study_dir, progress)

Loop structure: the points of ``study.expand(spec)`` not complete yet, in the spec's run order
(``runner.order``, ``juice.sweep.order``: a pure function of the spec and its seed); one lab
per run of adjacent points with equal ``lab_key``; in it one deployment per run of adjacent
points with equal ``deployment_key``; then each point into its own ``RunDir``. Groups whose
points are all complete open nothing. Before the first measured run of each deployment it
brings up, ``runner.warmup_runs`` discarded runs of the deployment's first point
(``juice.sweep.warmup``: stored as ``<run>.warmup``, never counted). A run that raises a
JuiceError is kept as ``.failed`` and the sweep goes on; so do the runs of a deployment that
fails to come up (a JuiceError from ``study.deployment``: each of its runs kept as ``.failed``
saying so, the next deployment tried) — but not a UserError (a spec or host the user must
fix: it stops the sweep with its one line); anything else (a bug, Ctrl-C) stops it, with the
lab removed by the context managers. Complete runs are recognised by ``study.key_of(manifest)``.

Every run is profiled (``juice.profile.sampler``; on SSH hosts ``juice.profile.hosts``, the
same table): a sampler runs around ``study.run_point``
and writes ``profile.parquet`` into the run (kept in ``.failed`` runs too), and the
manifest gets a ``profile`` entry (rate, metrics, processes, the sampler's own CPU). The
rate is the spec's optional ``profile`` (``interval_s`` or ``hz``) or ``JUICE_PROFILE_HZ``.

Each run's manifest records where it stood in that order: ``order_index`` (its place in the
whole spec's order) and ``order`` (mode, seed, ``position``: how many measured runs its
deployment ran before it in this sweep, 0 = the first measured run on a fresh deployment;
``warmup_runs``: how many discarded warm-up runs that deployment ran before its first measured
run; ``deployment``).
When the run had a lab, its manifest gets ``wan.check``: the RTT of every pair of its sites or
hosts (``lab.check()``), made at the start of the lab's first run on each WAN and reused by
the next runs on that WAN (``wan.check_made`` says which; :func:`wan_check`); and
``deviations``: every server setting of the deployment that differs from the shipped
defaults, with its reason and source (``juice.services.deviations``; runs of earlier versions
have none).

After each run, the spec's ``sla:`` criteria (any study whose spec has that field) are judged
on the run's files and stored in its manifest and rally.json (``juice.sla.store``);
:func:`sla_failures` lists the complete runs of a spec whose stored verdict failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Generic

from juice.contract import P, Point, Run, S, Study
from juice.errors import JuiceError, UserError
from juice.lab.place import Lab
from juice.load.progress import ProgressUI
from juice.profile import clocks, sampler
from juice.results.store import WARMUP_SUFFIX, RunDir, counted
from juice.services import deviations
from juice.sweep import order, warmup
from juice.util.jsontypes import JSONObject

Progress = Callable[[str], None]


def completed(study: Study[S, P], study_dir: Path) -> dict[str, Path]:
    """run key -> directory, for every complete run of ``study`` under ``study_dir`` (warm-up
    runs are never one: by their name or their manifest's ``warmup_run``)."""
    out: dict[str, Path] = {}
    if not study_dir.is_dir():
        return out
    for m in sorted(study_dir.glob("*/manifest.json")):
        d = m.parent
        if not counted(d.name):
            continue
        try:
            manifest = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(manifest, dict) or manifest.get("warmup_run"):
            continue
        key = study.key_of(manifest)
        if key:
            out.setdefault(key, d)
    return out


def _child_workloads(d: Path) -> list[JSONObject]:
    """The manifests of ``d``'s run directories (complete or failed: any child with one)."""
    out: list[JSONObject] = []
    if not d.is_dir():
        return out
    for m in sorted(d.glob("*/manifest.json")):
        try:
            data = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def _others(study: Study[S, P], manifests: Sequence[Mapping[str, object]]) -> set[str]:
    """The other studies whose runs ``manifests`` are (by their ``workload``)."""
    return {str(m["workload"]) for m in manifests if isinstance(m.get("workload"), str)
            and m["workload"] != study.name and study.key_of(m) is None}


def results_for(study: Study[S, P], root: Path) -> tuple[Path, str | None]:
    """Where ``--results ROOT`` puts ``study``'s runs, and a line saying so when it is not ROOT:
    ROOT itself when it holds this study's runs (every earlier layout) or no other study's
    (a fresh directory); ``ROOT/<study>/`` when that already holds them, or when ROOT holds
    another study's runs -- so two studies given one directory keep their runs and their
    ``report.html`` apart, and the runs already in ROOT stay where they are."""
    nested = root / study.name
    mans = _child_workloads(root)
    if any(study.key_of(m) is not None or m.get("workload") == study.name for m in mans):
        return root, None
    if any(study.key_of(m) is not None for m in _child_workloads(nested)):
        return nested, f"results: {root} holds other studies' runs; the {study.name} study's are in {nested}"
    others = _others(study, mans)
    if others:
        return nested, (f"results: {root} holds runs of the {', '.join(sorted(others))} study; the "
                        f"{study.name} study's go to {nested} (with their own report.html)")
    return root, None


def report_paths(study: Study[S, P], study_dir: Path) -> list[Path]:
    """What ``study``'s report in ``study_dir`` reads: ``study_dir``, or, when it also holds
    another study's results directory (``<study_dir>/<other>/``: :func:`results_for`), every
    entry of it but those."""
    if not study_dir.is_dir():
        return [study_dir]
    kids = sorted(c for c in study_dir.iterdir() if c.is_dir())
    theirs = [c for c in kids if not (c / "manifest.json").exists() and _others(study, _child_workloads(c))]
    return [c for c in kids if c not in theirs] if theirs else [study_dir]


@dataclass(frozen=True)
class Plan(Generic[P]):
    """The points of a spec, split into done and to do, with the time estimate (warm-up runs
    included: ``warmup_s`` of it)."""

    points: list[P]
    done: dict[str, Path]
    todo: list[P]
    estimate_s: float
    labs: int
    deployments: int
    warmup_runs: int = 0  # per deployment brought up (runner.warmup_runs)
    warmup_s: float = 0.0


def plan(study: Study[S, P], spec: S, study_dir: Path) -> Plan[P]:
    points = order.arrange(study.expand(spec), order.mode_of(spec), order.seed_of(spec))
    done = completed(study, study_dir)
    todo = [p for p in points if p.key not in done]
    k = warmup.runs_of(spec)
    warm = warmup.estimate_s(study, todo, k)
    est = sum(study.estimate_s(p) for p in todo) + study.overhead_s(todo) + warm
    labs = sum(1 for _ in groupby(todo, key=lambda p: p.lab_key))
    deps = len(warmup.firsts_of(todo))
    return Plan(points, done, todo, est, labs, deps, k, warm)


def run(study: Study[S, P], spec: S, spec_data: Mapping[str, object], spec_text: str, study_dir: Path,
        progress: Progress, ui: ProgressUI | None = None,
        task_args: Mapping[str, object] | None = None) -> tuple[int, int, int]:
    """Execute every point not done yet. Returns (done before, run now, failed now).
    ``task_args``: the ``--set`` overrides the spec was read with (stored in each manifest)."""
    pl = plan(study, spec, study_dir)
    conf = sampler.settings(spec)  # a bad rate is a UserError before any lab
    n = len(pl.points)
    warm = (f", after {pl.warmup_runs * pl.deployments} warm-up runs (not counted)"
            if pl.warmup_runs and pl.deployments else "")
    progress(f"{n} runs in the matrix: {n - len(pl.todo)} already complete, "
             f"{len(pl.todo)} to run{warm} → {study_dir}")
    ran = failed = 0
    position = n - len(pl.todo)
    index = {id(p): i for i, p in enumerate(pl.points)}
    mode, seed, k = order.mode_of(spec), order.seed_of(spec), pl.warmup_runs
    for _lab_key, by_lab in groupby(pl.todo, key=lambda p: p.lab_key):
        lab_points = list(by_lab)
        with study.lab(spec, lab_points, progress) as lab:
            checks: dict[str, tuple[JSONObject, str]] = {}  # this lab's WAN checks (wan_check)
            for _dep_key, by_dep in groupby(lab_points, key=lambda p: p.deployment_key):
                dep_points = list(by_dep)
                with ExitStack() as held:
                    try:
                        dep = held.enter_context(study.deployment(spec, lab, dep_points, progress))
                    except UserError:  # the user's to fix (a spec, a host not prepared): every
                        raise          # deployment would fail alike, one line and exit 2
                    except JuiceError as e:  # this deployment only: its runs fail, the sweep goes on
                        failed += deployment_failed(study_dir, dep_points, e, progress)
                        position += len(dep_points)
                        continue
                    first, dep_id = dep_points[0], order.deployment_id(dep_points[0])
                    for w in range(k):
                        progress(f"warm-up run{f' {w + 1}/{k}' if k > 1 else ''} of this deployment "
                                 f"(not counted): {first.label}")
                        marks = {"warmup_run": True,
                                 "order": {"mode": mode, "seed": seed, "deployment": dep_id,
                                           "warmup_runs": k, "warmup_index": w}}
                        try:
                            _one(study, spec, spec_data, spec_text, study_dir, first, lab, dep, conf,
                                 progress, ui, task_args, marks, warmup_run=True, checks=checks)
                        except JuiceError as e:
                            progress(f"warm-up run failed ({e}); kept as {WARMUP_SUFFIX}.failed, "
                                     "measuring anyway")
                    for in_dep, p in enumerate(dep_points):
                        position += 1
                        progress(f"[{position}/{n}] {p.label}")
                        where = {"order_index": index[id(p)],
                                 "order": {"mode": mode, "seed": seed, "position": in_dep,
                                           "warmup_runs": k, "deployment": dep_id},
                                 **({"repetition": rep}
                                    if isinstance(rep := getattr(p, "repetition", None), int) else {})}
                        try:
                            _one(study, spec, spec_data, spec_text, study_dir, p, lab, dep, conf,
                                 progress, ui, task_args, where, checks=checks)
                            ran += 1
                        except JuiceError as e:
                            failed += 1
                            progress(f"run failed ({e}); kept as .failed, continuing")
    return n - len(pl.todo), ran, failed


def deployment_failed(study_dir: Path, points: Sequence[Point], err: JuiceError,
                      progress: Progress) -> int:
    """The runs of a deployment that did not come up: each kept as ``<run>.failed`` whose
    error.txt says so (the report's failed-runs table shows it); their number."""
    progress(f"deployment failed ({err}): its {len(points)} run(s) kept as .failed, continuing")
    for p in points:
        RunDir.failed_before(study_dir, p.dirname, JuiceError(f"deployment failed before the run: {err}"))
    return len(points)


def _one(study: Study[S, P], spec: S, spec_data: Mapping[str, object], spec_text: str, study_dir: Path,
         p: P, lab: Lab | None, dep: object, conf: sampler.Settings, progress: Progress,
         ui: ProgressUI | None, task_args: Mapping[str, object] | None = None,
         where: Mapping[str, object] | None = None, warmup_run: bool = False,
         checks: dict[str, tuple[JSONObject, str]] | None = None) -> None:
    """One run of ``p`` into its ``RunDir`` (a warm-up run: ``<run>.warmup``, no SLA verdict),
    its manifest's ``wan.check`` from :func:`wan_check` (``checks``: the lab's so far)."""
    checks = {} if checks is None else checks
    with RunDir(study_dir, p.dirname, WARMUP_SUFFIX if warmup_run else "") as rd:
        wan_at = wan_key(lab)
        wan = wan_check(lab, checks, p.dirname, progress)  # at the run's start, before its profile
        prof = sampler.start(lab, lambda: study.profile_sources(dep), rd.partial, conf, progress)
        try:
            study.run_point(Run(study.name, spec, p, rd, spec_data, spec_text, progress, ui,
                                clocks=clocks.of_run(lab, prof)), dep)
        except BaseException as e:
            if prof is not None:  # a failed run keeps its profile; an interrupted one nothing
                prof.stop(keep=not isinstance(e, KeyboardInterrupt))
            raise
        summary = prof.stop() if prof is not None else None
        manifest = rd.partial / "manifest.json"
        if not manifest.exists():
            raise JuiceError(f"study {study.name!r} wrote no manifest for run {p.key} (a bug in the study)")
        if summary is not None:
            sampler.add_to_manifest(manifest, summary)
        if wan is not None:
            if wan_key(lab) != wan_at and not _has_check(manifest):  # the study changed the WAN
                wan = wan_check(lab, checks, p.dirname, progress,  # in its run: the one it ran on
                                "at this run's end (the study changed the WAN during it)") or wan
            _add_wan(manifest, wan)
        if where:
            _add_order(manifest, where)
        if lab is not None:  # servers Juice started: what they run with beyond the defaults
            deviations.add_to_manifest(manifest, deviations.of(study.profile_sources(dep)))
        _judge(None if warmup_run else spec, rd, progress, task_args)


def wan_key(lab: Lab | None) -> str | None:
    """The WAN the lab applies now (its spec, as JSON): a check stays valid while it is equal."""
    if lab is None:
        return None
    try:
        return json.dumps(lab.spec.model_dump(mode="json"), sort_keys=True)
    except Exception:  # a lab without a spec: checked every run
        return None


def wan_check(lab: Lab | None, checks: dict[str, tuple[JSONObject, str]], run: str,
              progress: Progress, made: str = "at this run's start") -> JSONObject | None:
    """What a run's manifest records as ``wan``: ``check``, the RTT of every pair of the lab's
    sites or hosts (``lab.check()``: ``CheckReport.to_dict()``, as ``juice lab check``), and
    ``check_made`` (when). One check per lab and WAN: the first run on a WAN checks it at its
    start, the next runs on the same lab and WAN reuse it (``check_made`` names that run), a
    changed WAN is checked again. None without a lab; a check that cannot be made is recorded
    as ``check_error``, never a failed run."""
    if lab is None:
        return None
    key = wan_key(lab)
    if key is not None and key in checks:
        rep, first = checks[key]
        return {"check": rep, "check_made": f"at the start of run {first} on this lab (same WAN since)"}
    try:
        r = lab.check(probes=10)
        rep = r.to_dict()
        if not r.ok:
            progress("warning: the WAN check found a pair out of tolerance (recorded in the manifest's "
                     "wan.check)")
    except Exception as e:  # the run goes on; the manifest says why there is no check
        return {"check_error": f"{type(e).__name__}: {e}"}
    if key is not None:
        checks[key] = (rep, run)
    return {"check": rep, "check_made": made}


def _has_check(manifest: Path) -> bool:
    wan = json.loads(manifest.read_text()).get("wan")
    return isinstance(wan, dict) and "check" in wan


def _add_wan(manifest: Path, wan: Mapping[str, object]) -> None:
    """``wan`` into the manifest's ``wan`` entry (atomically, mtime kept). A study's own
    ``wan.check`` (Keystone's ``check_wan``, made after it applied the point's WAN) stays."""
    import os

    from juice.util import atomic

    st = manifest.stat()
    data = json.loads(manifest.read_text())
    cur = data.get("wan")
    if cur is None:
        cur = {}
    if not isinstance(cur, dict) or "check" in cur:
        return
    data["wan"] = {**cur, **wan}
    atomic.write_json(manifest, data)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))


def _add_order(manifest: Path, where: Mapping[str, object]) -> None:
    """The run's place in the run order into its manifest (atomically; mtime kept, as the
    profile entry: no parameter of the run changes)."""
    import os

    from juice.util import atomic

    st = manifest.stat()
    data = json.loads(manifest.read_text())
    data.update(where)
    atomic.write_json(manifest, data)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))


def _judge(spec: object, rd: RunDir, progress: Progress, task_args: Mapping[str, object] | None) -> None:
    """The spec's ``sla:`` criteria on the run just made (``juice.sla.store``; none for a
    ``spec`` None: a warm-up run), and the ``--set`` task arguments, into its manifest (and
    rally.json)."""
    from juice.sla.criteria import Sla
    from juice.sla.store import add_task_args, record

    if task_args:
        add_task_args(rd.partial, task_args)
    crit = getattr(spec, "sla", None)
    if isinstance(crit, Sla) and not crit.empty():
        v = record(rd.partial, crit)
        bad = [r["criterion"] for r in v.results if not r["success"]]
        progress(f"SLA: {'passed' if v.passed else 'FAILED (' + ', '.join(bad) + ')'} "
                 f"({len(v.results)} criteria)")


def sla_failures(study: Study[S, P], spec: S, study_dir: Path) -> list[Path]:
    """Complete runs of ``spec`` under ``study_dir`` whose stored SLA verdict failed."""
    from juice.sla.store import stored

    done = plan(study, spec, study_dir).done
    return [d for d in done.values() if (v := stored(d)) is not None and v.get("pass") is False]


def plan_rows(study: Study[S, P], points: Sequence[P]) -> list[dict[str, object]]:
    """The plan table's study columns, one dict per point."""
    return [study.plan_columns(p) for p in points]
