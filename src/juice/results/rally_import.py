"""Import results made by Rally itself into Juice's tidy tables.

Two formats are read:

- task format 1.2 (``rally task report --json``; also 1.0/1.1):
  ``{"info": {...}, "tasks": [{"subtasks": [{"workloads": [{"scenario": {name: args},
  "runner": {type: cfg}, "data": [iteration...]}]}]}]}``, where an iteration's
  ``atomic_actions`` is a list of ``{name, started_at, finished_at, failed, children}``;
- the legacy ``rally task results`` list: ``[{"key": {"name", "pos", "kw": {"runner",...}},
  "result": [{"timestamp", "duration", "error", "atomic_actions": {name: seconds}}]}]``.
  Dict-shaped atomic actions get start times rebuilt the way Rally's own importer does
  (one after the other from the iteration's timestamp).

Each workload becomes one "run" (named ``<file stem>#<task>.<subtask>.<workload>``; its
iterations have ``site`` 0: Rally does not say where its driver ran). Its parameters:
``scenario`` (from the file), ``times`` and ``concurrency`` when the runner says so,
``source`` (the file) and ``task``; anything the
file cannot tell (``rdbms``, ``sites``, ``delay_ms``...) is NULL unless the caller passes it
(``juice analyze f.json --param rdbms=galera --param sites=9``).

Atomic-action names of newer rally-openstack (``keystone.create_user``) are mapped to the
legacy ones Juice's scenarios use (``keystone_v3.create_user``) by :func:`legacy_name`; a child
whose mapped name equals its parent's (newer Rally nests ``keystone_v3.x`` under
``keystone.x``) is folded into the parent so operations are not counted twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]  # (no stubs: its types are unchecked)

from juice.errors import UserError
from juice.results.tidy_table import assemble, iterations_table, split_params
from juice.util.jsontypes import JSONObject, JSONValue, as_object, as_objects

NEW_PREFIX = "keystone."
LEGACY_PREFIX = "keystone_v3."


def legacy_name(name: str) -> str:
    """``keystone.create_user`` -> ``keystone_v3.create_user``; other names unchanged."""
    return LEGACY_PREFIX + name[len(NEW_PREFIX):] if name.startswith(NEW_PREFIX) else name


def _map_actions(actions: object, parent: str | None = None, depth: int = 0) -> list[JSONObject]:
    """Legacy names, same-name children folded; bounded by the input's nesting (<= 32)."""
    if not isinstance(actions, list) or depth > 32:
        return []
    out: list[JSONObject] = []
    for a in actions:
        if not isinstance(a, dict):
            continue
        name = legacy_name(str(a.get("name")))
        kids = _map_actions(a.get("children") or [], name, depth + 1)
        if name == parent:  # folded: its children move up to the parent
            out.extend(kids)
            continue
        out.append({**a, "name": name, "children": list[JSONValue](kids)})
    return out


def _legacy_actions(actions: JSONValue, started_at: float) -> list[JSONValue]:
    """``{name: seconds}`` (old Rally) -> the list form, back to back from ``started_at``."""
    if isinstance(actions, list):
        return actions
    out: list[JSONValue] = []
    t = started_at
    for name, dur in as_object(actions).items():
        d = float(dur) if isinstance(dur, int | float) else 0.0
        out.append({"name": name, "started_at": t, "finished_at": t + d, "failed": False,
                    "children": []})
        t += d
    return out


def _runner_params(runner_type: JSONValue, runner: Mapping[str, JSONValue]) -> JSONObject:
    out: JSONObject = {"runner": runner_type}
    for key in ("times", "concurrency", "rps"):
        if isinstance(v := runner.get(key), int | float):
            out["rate" if key == "rps" else key] = v
    return out


def _records(data: JSONValue) -> list[JSONObject]:
    recs: list[JSONObject] = []
    for i, it in enumerate(data if isinstance(data, list) else []):
        if not isinstance(it, dict):
            continue
        ts = it.get("timestamp")
        t0 = float(ts) if isinstance(ts, int | float) else 0.0
        actions = _map_actions(_legacy_actions(it.get("atomic_actions"), t0))
        recs.append({**it, "index": i, "site": 0, "atomic_actions": list[JSONValue](actions)})
    return recs


def runner_of(w: Mapping[str, JSONValue]) -> tuple[JSONValue, JSONObject]:
    """(runner type, runner config) of a task-format workload: ``runner: {type: cfg}`` (Rally
    1.x) or ``runner: {type: ..., ...}`` with ``runner_type``."""
    runner = as_object(w.get("runner"))
    if "type" not in runner and runner:
        rtype, rcfg = next(iter(runner.items()))
        return rtype, as_object(rcfg)
    return w.get("runner_type") or runner.get("type"), runner


def workloads(doc: JSONValue, source: Path) -> list[tuple[str, JSONObject, list[JSONObject]]]:
    """``(run name, params, iteration records)`` per workload of a parsed Rally document."""
    out: list[tuple[str, JSONObject, list[JSONObject]]] = []
    if isinstance(doc, dict) and isinstance(doc.get("tasks"), list):
        for ti, task in enumerate(as_objects(doc["tasks"])):
            for si, sub in enumerate(as_objects(task.get("subtasks"))):
                for wi, w in enumerate(as_objects(sub.get("workloads"))):
                    scen = w.get("scenario")
                    name = (next(iter(scen)) if isinstance(scen, dict) and scen else w.get("name"))
                    rtype, rcfg = runner_of(w)
                    params: JSONObject = {"scenario": name, **_runner_params(rtype, rcfg),
                              "task": task.get("uuid"), "source": str(source)}
                    run = f"{source.stem}#{ti}.{si}.{wi}"
                    out.append((run, params, _records(w.get("data"))))
        return out
    if isinstance(doc, list):
        for pos, entry in enumerate(doc):
            if not isinstance(entry, dict) or "key" not in entry or "result" not in entry:
                raise UserError(f"{source}: entry {pos} is not a Rally result (needs 'key' and "
                                "'result'): give `rally task results` or `rally task report --json` output")
            key = as_object(entry["key"])
            kw = as_object(key.get("kw"))
            runner = dict(as_object(kw.get("runner")))
            params = {"scenario": key.get("name"), **_runner_params(runner.pop("type", None), runner),
                      "task": None, "source": str(source)}
            out.append((f"{source.stem}#{key.get('pos', pos)}", params, _records(entry["result"])))
        return out
    raise UserError(f"{source}: neither Rally task format 1.x (an object with 'tasks') nor the "
                    "legacy results list: export with `rally task report --json`")


def read(path: Path) -> JSONValue:
    """Parse a Rally JSON file (UserError naming it when it is not JSON)."""
    try:
        doc: JSONValue = json.loads(path.read_text())
        return doc
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})") from None
    except ValueError as e:
        raise UserError(f"{path}: not JSON ({e}): give a Rally results file") from None


def tables(path: Path, params: Mapping[str, object]) -> list[pa.Table]:
    """One tidy ``pyarrow.Table`` per workload of the Rally file at ``path``.

    ``params`` (user-given) override or complete what the file says; the parameters Juice
    runs always have are present as NULL otherwise, so imported rows group with Juice's.
    """
    out = []
    for run, wparams, recs in workloads(read(path), path):
        merged = {"rdbms": None, "sites": None, "delay_ms": None, **wparams, **params}
        out.append(iterations_table(run, merged, recs))
    return out


def load(path: Path, params: Mapping[str, object] | None = None) -> pd.DataFrame:
    """The tidy DataFrame of one Rally file (see ``juice.results.tidy.load`` for many)."""
    return assemble([split_params(t) for t in tables(path, params or {})])
