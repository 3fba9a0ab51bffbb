"""Fake results (no server involved: the analysis is what is under test).

``write_fake_run`` writes a run directory shaped like the runner's (``manifest.json`` with
``params`` and ``rwratio``, ``iterations.jsonl``, ``rally.json``); the durations it drew are
returned so tests can compute expected figures independently, with numpy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

OPS = ("keystone_v3.create_user", "keystone_v3.update_user")


@dataclass
class FakeRun:
    path: Path
    params: dict[str, Any]
    # per op: the durations of the actions that did not fail, in iteration order
    durations: dict[str, list[float]] = field(default_factory=dict)
    # per op: its durations in successful iterations only (what describe's stats cover)
    ok_durations: dict[str, list[float]] = field(default_factory=dict)
    totals: list[float] = field(default_factory=list)  # per successful iteration: sum of ops
    failed_iterations: int = 0
    iterations: int = 0


def fake_params(**over: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"study": "t", "workload": "keystone",
                         "scenario": "KeystoneBasic.create_user_update_password", "rdbms": "galera",
                         "sites": 3, "delay_ms": 50.0, "zones": None, "load": "light", "cache": True,
                         "times": 20, "concurrency": 2, "rate": None, "repetition": 0, "seed": 1,
                         "run_id": "r"}
    p.update(over)
    return p


def write_fake_run(root: Path, name: str, params: dict[str, Any], *, n: int = 40,
                   ops: tuple[str, ...] = OPS, fail_every: int = 0, fail_before_actions: bool = False,
                   scale: float = 0.05, seed: int = 0, child: bool = False,
                   rwratio: dict[str, float] | None = None, sites: int = 1) -> FakeRun:
    """A complete run directory ``root/name`` with ``n`` iterations of ``ops``.

    Every ``fail_every``-th iteration fails: in its last action, or before any action when
    ``fail_before_actions``. ``child`` nests one child action under the first op.
    """
    rng = np.random.default_rng(seed)
    run = FakeRun(path=root / name, params=params, durations={op: [] for op in ops},
                  ok_durations={op: [] for op in ops})
    run.path.mkdir(parents=True)
    lines = []
    t = 1_700_000_000.0
    for i in range(n):
        failed = bool(fail_every) and i % fail_every == fail_every - 1
        actions = []
        start = t
        total = 0.0
        for k, op in enumerate(ops):
            if failed and fail_before_actions:
                break
            d = float(rng.gamma(4.0, scale / 4.0))
            act_failed = failed and k == len(ops) - 1
            a: dict[str, Any] = {"name": op, "started_at": start, "finished_at": start + d,
                                 "failed": act_failed, "children": []}
            if child and k == 0:
                a["children"].append({"name": "db.query", "started_at": start,
                                      "finished_at": start + d / 2, "failed": False, "children": []})
            actions.append(a)
            if not act_failed:
                run.durations[op].append(d)
            total += d
            start += d
        err = ["ConflictError", f"iteration {i} failed", "Traceback..."] if failed else []
        if failed:
            run.failed_iterations += 1
        else:
            run.totals.append(total)
            for a in actions:
                run.ok_durations[a["name"]].append(a["finished_at"] - a["started_at"])
        run.iterations += 1
        lines.append({"scenario": params.get("scenario"), "site": 1 + i % sites, "index": i,
                      "timestamp": t, "duration": total + 0.001, "idle_duration": 0.0,
                      "error": err, "atomic_actions": actions, "intended_at": None,
                      "dispatch_lag": None, "latency": None})
        t += total + 0.01
    (run.path / "iterations.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    manifest: dict[str, Any] = {"version": 1, "run": name, "juice": "0.1.0", "started_at": 1.7e9,
                                "host": {"hostname": "h", "kernel": "6.1", "cpus": 2},
                                "versions": {"keystone": "30.0.0", "mariadbd": "10.11"},
                                "wan": {"backend": "userspace"}, "params": params}
    if rwratio is not None:
        manifest["rwratio"] = rwratio
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    (run.path / "rally.json").write_text(json.dumps(rally_doc(params, lines)))
    return run


def rally_doc(params: dict[str, Any], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The same iterations as a Rally task format 1.2 document."""
    data = [{k: x[k] for k in ("timestamp", "duration", "idle_duration", "error", "atomic_actions")}
            | {"output": {"additive": [], "complete": []}} for x in lines]
    wl = {"uuid": "w1", "description": "", "runner": {"constant": {"times": len(lines), "concurrency": 2}},
          "hooks": [], "scenario": {params["scenario"]: {}}, "data": data, "contexts": {},
          "failed_iteration_count": sum(1 for x in lines if x["error"]),
          "total_iteration_count": len(lines)}
    return {"info": {"format_version": "1.2", "rally_version": "fake"},
            "tasks": [{"uuid": "t1", "title": "", "subtasks": [{"uuid": "s1", "title": "x",
                                                                  "workloads": [wl]}]}]}
