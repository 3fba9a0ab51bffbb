"""Export ``LoadResult``s as Rally task results, so ``rally task import`` / ``rally task report``
(Rally 5.x) accept and render them.

``to_rally(results)`` → Rally's JSON exporter format 1.2 (``{"info": {...}, "tasks": [...]}``,
validated on import against ``rally.common.objects.task.TASK_SCHEMA``; every ``data[]`` entry
must pass ``Task.result_has_valid_schema``: float ``timestamp``/``duration``/``idle_duration``,
``output`` with ``additive``/``complete`` lists, atomic actions with float times and
``children``, ``error`` a list of strings). One task; one subtask per scenario; one workload
per ``LoadResult`` (= per driver / site, described as ``site N``), or per scenario with
``merge_sites=True``. The closed loop maps to Rally's ``constant`` runner, the open loop to
``rps`` (``max_concurrency`` = ``max_in_flight``; Juice drops where Rally would delay, and
the drops are named in the workload description). Like ``rally task start``, a
``failure_rate: {max: 0}`` SLA is evaluated. Juice's own per-iteration fields (site, intended
start, dispatch lag, latency) are not Rally's: they live in ``iterations.write_iterations``.

``to_rally_legacy(results)`` → the pre-1.0 list format (``[{"key", "sla", "hooks", "result",
"load_duration", "full_duration", "created_at"}]``; flat ``{action: seconds}`` atomics).

Revisions of this exporter: 1 — format 1.2 and legacy, statistics as Rally's MainStatsTable.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juice import __version__
from juice.load.api import LoadResult, RallyAction, RallyIteration
from juice.util import atomic

FORMAT_VERSION = "1.2"
STAT_COLS = ["Action", "Min (sec)", "Median (sec)", "90%ile (sec)", "95%ile (sec)", "Max (sec)",
             "Avg (sec)", "Success", "Count"]
_DEPTH = 2  # Rally's MainStatsTable merges nested atomic actions two levels deep


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).replace(tzinfo=None).isoformat()


# ---- statistics (the same numbers Rally's MainStatsTable computes) ------------------------
def _percentile(points: list[float], p: float) -> float:
    k = (len(points) - 1) * p
    f, c = math.floor(k), math.ceil(k)
    if f == c:
        return points[int(k)]
    return points[f] * (c - k) + points[c] * (k - f)


class _Node:
    def __init__(self, name: str, count: int) -> None:
        self.name, self.count_per_iteration = name, count
        self.points: list[float] = []
        self.ok = 0
        self.children: dict[str, _Node] = collections.OrderedDict()


@dataclass
class _Merged:
    """An iteration's actions of one name (at one level), merged: Rally's statistics tree."""

    duration: float = 0.0
    count: int = 0
    failed: bool = False
    actions: list[RallyAction] = field(default_factory=list)  # their children, to merge
    children: dict[str, _Merged] = field(default_factory=dict)


def _merge(actions: list[RallyAction], depth: int = 0) -> dict[str, _Merged]:
    out: dict[str, _Merged] = collections.OrderedDict()
    for a in actions:
        m = out.setdefault(a["name"], _Merged())
        m.duration += a["finished_at"] - a["started_at"]
        m.count += 1
        m.failed = m.failed or bool(a.get("failed"))
        if depth < _DEPTH:
            m.actions.extend(a.get("children") or [])
    for m in out.values():
        m.children = _merge(m.actions, depth + 1) if m.actions else {}
    return out


def _add(tree: dict[str, _Node], merged: dict[str, _Merged]) -> None:
    for name, m in merged.items():
        display = f"{name} (x{m.count})" if m.count > 1 else name
        node = tree.setdefault(display, _Node(name, m.count))
        node.points.append(m.duration)
        node.ok += 0 if m.failed else 1
        if m.children:
            _add(node.children, m.children)


def _row(display: str, node: _Node) -> dict[str, object]:
    pts = sorted(node.points)
    n = len(pts)

    def r(v: float) -> float | str:
        return round(v, 3) if n else "n/a"

    data = {"iteration_count": n, "min": r(pts[0] if n else 0.0),
            "median": r(_percentile(pts, 0.5) if n else 0.0),
            "90%ile": r(_percentile(pts, 0.9) if n else 0.0),
            "95%ile": r(_percentile(pts, 0.95) if n else 0.0),
            "max": r(pts[-1] if n else 0.0), "avg": r(sum(pts) / n if n else 0.0),
            "success": f"{100.0 * node.ok / n:.1f}%" if n else "n/a"}
    return {"data": data, "count_per_iteration": node.count_per_iteration, "name": node.name,
            "display_name": display,
            "children": [_row(k, v) for k, v in node.children.items()]}


def statistics(data: list[RallyIteration]) -> dict[str, object]:
    """Rally's ``statistics.durations`` ({"atomics": [...], "total": {...}}) for ``data``."""
    tree: dict[str, _Node] = collections.OrderedDict()
    for itr in data:
        merged = _merge(itr["atomic_actions"])
        if merged and itr["error"] and not merged[next(reversed(merged))].failed:
            merged["<no-name-action>"] = _Merged(0.0, 1, True)
        failed = bool(itr["error"])
        merged["total"] = _Merged(itr["duration"] + itr["idle_duration"], 1, failed, children={
            "duration": _Merged(itr["duration"], 1, failed),
            "idle_duration": _Merged(itr["idle_duration"], 1, failed)})
        _add(tree, merged)
    total = tree.pop("total", None) or _Node("total", 1)
    return {"durations": {"atomics": [_row(k, v) for k, v in tree.items()],
                          "total": _row("total", total)}}


# ---- format 1.2 ---------------------------------------------------------------------------
def _runner(res: LoadResult, times: int) -> tuple[str, dict[str, object]]:
    r = res.args.get("runner") or {}
    timeout = r.get("timeout_s") or 600
    if r.get("type") == "open":
        return "rps", {"times": times, "rps": r.get("rate"), "timeout": timeout,
                       "max_concurrency": r.get("max_in_flight")}
    return "constant", {"times": times, "concurrency": r.get("concurrency", 1),
                        "timeout": timeout}


def _merge_results(results: Sequence[LoadResult]) -> LoadResult:
    first = results[0]
    merged = LoadResult.from_dict(first.to_dict())
    for other in results[1:]:
        merged.records.extend(other.records)
        merged.dropped.count += other.dropped.count
        merged.started_at = min(merged.started_at, other.started_at)
        merged.finished_at = max(merged.finished_at, other.finished_at)
        merged.setup_s = max(merged.setup_s, other.setup_s)
        merged.cleanup_s = max(merged.cleanup_s, other.cleanup_s)
        merged.cpu_s += other.cpu_s
        merged.failure = "; ".join(f for f in (merged.failure, other.failure) if f) or None
    merged.site = 0
    return merged


def _workload(res: LoadResult, position: int, sites: str) -> dict[str, Any]:
    data = sorted((r.to_rally() for r in res.records), key=lambda d: d["timestamp"])
    durations = [d["duration"] for d in data]
    failed = sum(1 for d in data if d["error"])
    runner_type, runner = _runner(res, len(data) + res.dropped.count)
    desc = [sites]
    if res.dropped.count:
        desc.append(f"{res.dropped.count} arrivals dropped (max_in_flight reached)")
    if res.failure:
        desc.append(f"driver failure: {res.failure}")
    rate = 100.0 * failed / len(data) if data else 0.0
    ok = rate <= 0.0
    sla_results = [{"criterion": "failure_rate", "success": ok,
                    "detail": f"Failure rate criteria 0.00% <= {rate:.2f}% <= 0.00% - "
                              f"{'Passed' if ok else 'Failed'}"}]
    return collections.OrderedDict([
        ("uuid", str(uuid.uuid4())), ("description", "; ".join(desc)),
        ("runner", {runner_type: runner}), ("runner_type", runner_type), ("hooks", []),
        ("scenario", {res.scenario: res.args.get("scenario") or {}}),
        ("min_duration", min(durations) if durations else None),
        ("max_duration", max(durations) if durations else None),
        ("start_time", data[0]["timestamp"] if data else None),
        ("load_duration", res.load_duration),
        ("full_duration", res.setup_s + res.load_duration + res.cleanup_s),
        ("statistics", statistics(data)), ("data", data),
        ("failed_iteration_count", failed), ("total_iteration_count", len(data)),
        ("created_at", _iso(res.started_at - res.setup_s)),
        ("updated_at", _iso(res.finished_at + res.cleanup_s)),
        ("contexts", {}), ("contexts_results", []), ("position", position),
        ("pass_sla", ok), ("sla_results", {"sla": sla_results}),
        ("sla", {"failure_rate": {"max": 0}})])


def to_rally(results: Sequence[LoadResult], *, title: str = "Juice load",
             description: str = "", tags: Sequence[str] = (), env_name: str = "juice",
             env_uuid: str = "n/a", merge_sites: bool = False) -> dict[str, object]:
    """Rally task results, format 1.2 (see the module docstring)."""
    by_scenario: dict[str, list[LoadResult]] = collections.OrderedDict()
    for res in results:
        by_scenario.setdefault(res.scenario, []).append(res)
    subtasks = []
    position = 0
    for name, group in by_scenario.items():
        if merge_sites:
            sites = "sites " + ",".join(str(r.site) for r in group)
            units = [(_merge_results(group), sites)]
        else:
            units = [(r, f"site {r.site}") for r in group]
        workloads = []
        for res, sites in units:
            workloads.append(_workload(res, position, sites))
            position += 1
        subtasks.append(collections.OrderedDict([
            ("uuid", str(uuid.uuid4())), ("title", name), ("description", ""),
            ("status", "finished"), ("created_at", min(w["created_at"] for w in workloads)),
            ("updated_at", max(w["updated_at"] for w in workloads)), ("sla", {}),
            ("workloads", workloads)]))
    all_w = [w for s in subtasks for w in s["workloads"]]
    now = _iso(dt.datetime.now(dt.UTC).timestamp())
    task = collections.OrderedDict([
        ("uuid", str(uuid.uuid4())), ("title", title), ("description", description),
        ("status", "finished"), ("tags", list(tags)), ("env_uuid", env_uuid),
        ("env_name", env_name),
        ("created_at", min((w["created_at"] for w in all_w), default=now)),
        ("updated_at", max((w["updated_at"] for w in all_w), default=now)),
        ("pass_sla", all(w["pass_sla"] for w in all_w)), ("subtasks", subtasks)])
    return {"info": {"rally_version": f"juice {__version__}",
                     "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S"),
                     "format_version": FORMAT_VERSION},
            "tasks": [task]}


# ---- legacy (pre format 1.0) --------------------------------------------------------------
def to_rally_legacy(results: Sequence[LoadResult]) -> list[dict[str, object]]:
    """Rally's old ``task results`` list; nested atomic actions are flattened to the top
    level's ``{name: seconds}`` (the old format had no children)."""
    out = []
    for pos, res in enumerate(results):
        runner_type, runner = _runner(res, len(res.records) + res.dropped.count)
        result: list[dict[str, object]] = []
        for rec in sorted(res.records, key=lambda r: r.timestamp):
            flat: dict[str, float] = {}
            for a in rec.atomic_actions:
                flat[a["name"]] = flat.get(a["name"], 0.0) + a["finished_at"] - a["started_at"]
            result.append({**rec.to_rally(), "atomic_actions": flat})
        failed = sum(1 for r in res.records if r.failed)
        out.append({
            "key": {"name": res.scenario, "pos": pos, "description": f"site {res.site}",
                    "kw": {"args": res.args.get("scenario") or {},
                           "runner": {"type": runner_type, **runner}, "context": {},
                           "sla": {"failure_rate": {"max": 0}}, "hooks": []}},
            "sla": [{"criterion": "failure_rate", "success": failed == 0,
                     "detail": f"{failed} failed iterations"}],
            "hooks": [], "result": result, "load_duration": res.load_duration,
            "full_duration": res.setup_s + res.load_duration + res.cleanup_s,
            # Rally's loader parses this with "%Y-%d-%mT%H:%M:%S" (day before month)
            "created_at": dt.datetime.fromtimestamp(res.started_at, dt.UTC)
            .strftime("%Y-%d-%mT%H:%M:%S")})
    return out


def write_rally(path: Path, results: Sequence[LoadResult], *, title: str = "Juice load",
                description: str = "", tags: Sequence[str] = (), env_name: str = "juice",
                env_uuid: str = "n/a", merge_sites: bool = False) -> None:
    """Atomically write ``to_rally(results, ...)`` to ``path``."""
    doc = to_rally(results, title=title, description=description, tags=tags, env_name=env_name,
                   env_uuid=env_uuid, merge_sites=merge_sites)
    atomic.write_text(path, json.dumps(doc, indent=2) + "\n")
