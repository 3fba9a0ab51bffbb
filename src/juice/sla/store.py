"""A run's SLA verdict, stored: in ``manifest.json`` (``"sla"``) and in ``rally.json`` in
Rally's own form (each workload's ``sla`` config, ``sla_results: {"sla": [...]}``,
``pass_sla``; the task's ``pass_sla``), so ``rally task import`` + ``rally task report`` show it.

    verdict = store.record(run_dir, spec.sla)      # after the run's files are written

The manifest holds the run's verdict: every iteration of the run together (all drivers).
rally.json holds one verdict per workload (per driver site, as Rally judges a workload): Rally's
criteria and ``success_pct`` on that workload's iterations, the others (samples of the whole
run: boots, messages, reads) as in the manifest. Rally's ``sla`` config lists Rally's criteria
only (Rally validates it); Juice's own appear in the results, under their names.

Both files are rewritten atomically; the manifest keeps its mtime (the tidy cache compares
mtimes and a verdict changes no measurement).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from juice.compare.calibration import Store, host_of
from juice.results.samples import Unit, from_iterations, run_unit
from juice.sla.criteria import Sla
from juice.sla.judge import Verdict, judge
from juice.util import atomic
from juice.util.jsontypes import JSONObject, as_objects

_ITERATION_METRICS = ("iteration",)


def record(run_dir: Path, sla: Sla, extra: Mapping[str, object] | None = None) -> Verdict:
    """Judge the run in ``run_dir`` (complete or partial) and store the verdict."""
    unit = run_unit(run_dir)
    verdict = judge(unit, sla, host_calibration([unit]) if sla.confidence is not None else None)
    manifest = run_dir / "manifest.json"
    st = manifest.stat()
    data = json.loads(manifest.read_text())
    data["sla"] = {"criteria": sla.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
                   **verdict.to_dict(), **(extra or {})}
    atomic.write_json(manifest, data)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
    rally_file = run_dir / "rally.json"
    if rally_file.exists():
        write_rally_sla(rally_file, sla, unit)
    return verdict


def host_calibration(units: list[Unit]) -> Store | None:
    """This host's calibration for the runs' host (None when it has no entry)."""
    store = Store.load(host_of(units))
    return store if store.entries else None


def _dicts(v: object) -> list[dict[str, object]]:
    """The JSON objects of the array ``v``, to update in place ([] when ``v`` is not one)."""
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _workload_unit(w: Mapping[str, object], run: Unit, name: str) -> Unit:
    u = Unit(name, run.path, "juice", meta=run.meta)
    from_iterations(u, as_objects(w.get("data")))
    for k, v in run.samples.items():  # the run's non-iteration samples (boots, messages...)
        if k != "iteration" and not k.startswith("atomic:"):
            u.samples.setdefault(k, v)
    u.counts = {**run.counts, **u.counts}
    return u


def write_rally_sla(path: Path, sla: Sla, run: Unit) -> None:
    """Put each workload's verdict into the Rally task file at ``path`` (format 1.x)."""
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list):
        return
    config = sla.rally_config()
    for ti, task in enumerate(_dicts(doc["tasks"])):
        passed = True
        for si, sub in enumerate(_dicts(task.get("subtasks"))):
            for wi, w in enumerate(_dicts(sub.get("workloads"))):
                v = judge(_workload_unit(w, run, f"{run.name}#{ti}.{si}.{wi}"), sla)
                w["sla"] = config
                w["sla_results"] = {"sla": v.rally()}
                w["pass_sla"] = v.passed
                passed = passed and v.passed
        task["pass_sla"] = passed
    atomic.write_text(path, json.dumps(doc, indent=2) + "\n")


def stored(run_dir: Path) -> JSONObject | None:
    """The verdict stored in a run's manifest (None: the run was not judged)."""
    try:
        data = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    v = data.get("sla") if isinstance(data, dict) else None
    return v if isinstance(v, dict) else None


def add_task_args(run_dir: Path, task_args: Mapping[str, object]) -> None:
    """Record the ``--set`` overrides (Rally's ``--task-args``) as the manifest's ``task_args``."""
    manifest = run_dir / "manifest.json"
    st = manifest.stat()
    data = json.loads(manifest.read_text())
    data["task_args"] = dict(task_args)
    atomic.write_json(manifest, data)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
