"""What one run measured, in a shape every judge and comparison reads: Rally-like iterations
and named samples, whatever the study that made the run.

    for unit in samples.units([Path("results/quickstart"), Path("task.json")]):
        unit.name, unit.iterations, unit.samples["iteration"], unit.counts

A *unit* is one run directory of Juice, or one workload of a Rally JSON file. What it holds
depends on the files it has (never on the study's name):

==========================  ================================================================
file                        what it gives
==========================  ================================================================
``iterations.jsonl``        ``iterations``: Rally ``data[]`` entries (``timestamp``,
                            ``duration``, ``error``, ``atomic_actions``), warm-up left out,
                            in start order (the order of a Rally export); samples
                            ``iteration`` (durations of successful iterations) and
                            ``atomic:<name>`` (top-level atomic actions of successful
                            iterations); count ``success_pct``
``messages.parquet``        samples ``call_s`` (RPC call round trips) and ``oneway_s`` (send
                            to first delivery), warm-up left out; counts ``lost`` and
                            ``duplicated`` (``summary.json``)
``boots.parquet``           samples ``boot_s`` (Rally's ``nova.boot_server`` of a successful
                            boot) and ``nova_boot_s`` (nova's own: POST to its end
                            notification); count ``boot_success_pct``
``reads.parquet``           sample ``read_s`` (successful scheduler reads at the run's N)
==========================  ================================================================

Metadata (``params``, ``versions``, ``host``, ``spec``, ``started_at``) comes from the manifest
(Rally files: the runner and the scenario) so comparisons can say what differs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from juice.errors import UserError
from juice.results.store import WARMUP_SUFFIX, counted
from juice.util.jsontypes import JSONObject, JSONValue, as_object, as_objects, to_float

F64 = npt.NDArray[np.float64]
MAX_DEPTH = 4  # results root -> study -> ... -> run directory


@dataclass
class Unit:
    """One run (or one Rally workload): what a judge or a comparison reads."""

    name: str
    path: Path  # the run directory, or the Rally file
    kind: str  # "juice" | "rally"
    iterations: list[JSONObject] | None = None  # Rally data[] entries, start order
    samples: dict[str, F64] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=dict)
    meta: JSONObject = field(default_factory=dict)  # params, versions, host, spec, started_at
    rally_sla: JSONObject | None = None  # a Rally workload's own `sla` config
    rally_results: list[JSONObject] | None = None  # ... and Rally's verdicts on it

    @property
    def workload(self) -> str:
        return str(self.meta.get("workload") or "rally")


def _arr(values: Iterable[object]) -> F64:
    a: F64 = np.asarray([to_float(v) for v in values if v is not None], dtype=np.float64)
    out: F64 = a[np.isfinite(a)]
    return out


def from_iterations(unit: Unit, iterations: list[JSONObject]) -> Unit:
    """Fill ``unit``'s iterations, their samples and ``success_pct``."""
    its = sorted(iterations, key=lambda d: to_float(d.get("timestamp") or 0.0))
    unit.iterations = its
    ok = [d for d in its if not d.get("error")]
    unit.samples["iteration"] = _arr(d.get("duration") for d in ok)
    atomics: dict[str, list[float]] = {}
    for d in ok:
        acts = d.get("atomic_actions") or []
        if isinstance(acts, Mapping):  # legacy {name: seconds}
            for name, s in acts.items():
                atomics.setdefault(str(name), []).append(to_float(s))
            continue
        for a in acts if isinstance(acts, list) else []:
            if isinstance(a, Mapping) and a.get("finished_at") is not None:
                atomics.setdefault(str(a.get("name")), []).append(
                    to_float(a["finished_at"]) - to_float(a.get("started_at") or 0.0))
    for name, vals in atomics.items():
        unit.samples[f"atomic:{name}"] = _arr(vals)
    if its:
        unit.counts["success_pct"] = 100.0 * len(ok) / len(its)
    return unit


def _read_jsonl(path: Path) -> list[JSONObject]:
    out: list[JSONObject] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as e:
            raise UserError(f"{path}:{n}: not JSON ({e}); the run is damaged: re-run it") from None
        if isinstance(d, dict) and not d.get("warmup"):
            out.append(d)
    return out


def run_unit(run_dir: Path) -> Unit:
    """The unit of one Juice run directory (any study)."""
    import pandas as pd

    try:
        man = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{run_dir / 'manifest.json'}: unreadable ({e}): not a complete run") from None
    if not isinstance(man, dict):
        raise UserError(f"{run_dir / 'manifest.json'}: not a JSON object")
    meta = {k: man.get(k) for k in ("workload", "params", "versions", "host", "spec", "started_at",
                                    "run_key", "juice", "deployment", "task_args")}
    meta["workload"] = man.get("workload") or "keystone"
    unit = Unit(run_dir.name, run_dir, "juice", meta=meta)
    if (run_dir / "iterations.jsonl").exists():
        from_iterations(unit, _read_jsonl(run_dir / "iterations.jsonl"))
    if (run_dir / "messages.parquet").exists():
        m = pd.read_parquet(run_dir / "messages.parquet")
        if "warmup" in m:
            m = m[~m["warmup"].astype(bool)]
        if "rtt_s" in m:
            unit.samples["call_s"] = _arr(m["rtt_s"].dropna())
        if "oneway_s" in m:
            unit.samples["oneway_s"] = _arr(m["oneway_s"].dropna())
        summ = read_object(run_dir / "summary.json")
        for src, dst in (("lost", "lost"), ("duplicates", "duplicated")):
            if isinstance(n := summ.get(src), int | float):
                unit.counts[dst] = float(n)
    if (run_dir / "boots.parquet").exists():
        b = pd.read_parquet(run_dir / "boots.parquet")
        ok = b[b["ok"].astype(bool)] if "ok" in b else b
        for col, name in (("rally_boot_s", "boot_s"), ("nova_boot_s", "nova_boot_s")):
            if col in ok:
                unit.samples[name] = _arr(ok[col].dropna())
        if len(b):
            unit.counts["boot_success_pct"] = 100.0 * len(ok) / len(b)
    if (run_dir / "reads.parquet").exists():
        r = pd.read_parquet(run_dir / "reads.parquet")
        ok = r[r["ok"].astype(bool)] if "ok" in r else r
        unit.samples["read_s"] = _arr(ok["seconds"]) if "seconds" in ok else _arr([])
    return unit


def read_object(path: Path) -> JSONObject:
    """The JSON object in ``path``; {} when it is missing, unreadable or not an object."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def json_object(path: Path) -> dict[str, Any]:
    """``read_object`` for callers that read fields without narrowing them (the studies'
    readers of their own files, whose shape they wrote): the fields untyped."""
    return read_object(path)


def _rally_params(scenario: JSONValue, runner: Mapping[str, JSONValue], runner_type: JSONValue) -> JSONObject:
    out: JSONObject = {"scenario": scenario, "runner": runner_type}
    for k, v in runner.items():
        if k != "type" and isinstance(v, int | float | str):
            out[f"runner.{k}"] = v
    return out


def rally_units(path: Path) -> list[Unit]:
    """One unit per workload of a Rally JSON file (task format 1.x or the legacy list), its
    iterations as the file has them (names unchanged: Rally's criteria name Rally's actions)."""
    from juice.results import rally_import

    doc = rally_import.read(path)
    found: list[tuple[str, JSONObject, JSONValue, JSONValue, JSONValue, JSONValue]] = []
    if isinstance(doc, dict) and isinstance(doc.get("tasks"), list):
        for ti, task in enumerate(as_objects(doc["tasks"])):
            for si, sub in enumerate(as_objects(task.get("subtasks"))):
                for wi, w in enumerate(as_objects(sub.get("workloads"))):
                    scen = w.get("scenario")
                    name = next(iter(scen)) if isinstance(scen, dict) and scen else w.get("name")
                    rtype, rcfg = rally_import.runner_of(w)
                    res = as_object(w.get("sla_results")).get("sla")
                    found.append((f"{path.stem}#{ti}.{si}.{wi}", _rally_params(name, rcfg, rtype),
                                  w.get("data"), w.get("sla"), res,
                                  w.get("created_at") or task.get("created_at")))
    elif isinstance(doc, list):
        for pos, e in enumerate(doc):
            if not isinstance(e, dict) or "key" not in e or "result" not in e:
                raise UserError(f"{path}: entry {pos} is not a Rally result (needs 'key' and 'result')")
            key = as_object(e["key"])
            kw = as_object(key.get("kw"))
            runner = as_object(kw.get("runner"))
            found.append((f"{path.stem}#{key.get('pos', pos)}",
                          _rally_params(key.get("name"), runner, runner.get("type")),
                          e["result"], kw.get("sla"), e.get("sla"), e.get("created_at")))
    else:
        raise UserError(f"{path}: neither Rally task format 1.x (an object with 'tasks') nor the "
                        "legacy results list: export with `rally task report --json`")
    out = []
    for run, params, data, sla, results, created in found:
        raw = [dict(d) for d in (data if isinstance(data, list) else []) if isinstance(d, Mapping)]
        unit = Unit(run, path, "rally", meta={"workload": "rally", "params": params,
                                              "created_at": created},
                    rally_sla=sla if isinstance(sla, dict) else None,
                    rally_results=as_objects(results) if isinstance(results, list) else None)
        out.append(from_iterations(unit, raw))
    return out


def _is_run(d: Path, given: bool = False) -> bool:
    """A complete run that counts (``juice.results.store.counted``); a warm-up run only when
    ``given`` by its own path (read for inspection, never found by a search)."""
    name = d.name.removesuffix(WARMUP_SUFFIX) if given else d.name
    return (d / "manifest.json").is_file() and counted(name)


def runs_under(root: Path, depth: int = 0) -> list[Path]:
    """The complete runs that count under ``root`` (searched; failed, partial and warm-up runs
    skipped), or ``root`` itself when it is a run."""
    if _is_run(root, given=depth == 0):
        return [root]
    if depth >= MAX_DEPTH or not root.is_dir():
        return []
    out: list[Path] = []
    for d in sorted(root.iterdir()):
        if d.is_dir() and counted(d.name):
            out.extend(runs_under(d, depth + 1))
    return out


def units(paths: Sequence[Path]) -> list[Unit]:
    """Every unit under ``paths``: run directories, results directories (searched), Rally JSON
    files. UserError naming a path that holds none."""
    out: list[Unit] = []
    for p in paths:
        if p.is_file():
            out.extend(rally_units(p))
            continue
        if not p.exists():
            raise UserError(f"{p}: no such file or directory (give results directories, runs or "
                            "Rally JSON files)")
        found = runs_under(p)
        if not found:
            raise UserError(f"{p}: no complete Juice run under it (a run has a manifest.json)")
        out.extend(run_unit(d) for d in found)
    return out
