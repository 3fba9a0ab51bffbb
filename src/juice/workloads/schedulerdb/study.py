"""Run a scheduler–database study: ``plan(spec)`` lists the points, ``run(...)`` measures them.

Layout of the results (``<out_root>/<spec.name>/``)::

    index.json                 point key -> run directory (rewritten atomically after each point)
    <backend>-<track>-n<N>-s<S>-<upd|static>[-<client>]-<stamp>/   one run per point
        manifest.json          (juice.results.store.RunDir: complete or absent;
                               "<name>.failed" kept on error)
        reads.parquet          one row per read (tidy)
        updates.json           target/achieved update rate and count during the window

Resumable: a point is identified by ``point_key`` (a hash of its parameters and of what
else changes its meaning: stats per node, repetitions, lab, seed...), stored in its
manifest. The default ``client`` (pymysql) is left out of the key (and of the run name), so
points measured before the ``clients`` axis existed stay complete. A rerun skips points
whose complete run directory exists, never overwrites and never duplicates. One lab for the
study; each backend deployed once; each layout populated incrementally as N grows (only the
delta is inserted).

A point: start the updaters at N/60 per second (when updates are on), let them run
``warmup_s``, then ``repetitions`` times make every scheduler process issue the read at the
same moment and wait for all of them; then stop the updaters and count what they achieved.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from juice.errors import ServiceError
from juice.lab import LocalLab
from juice.lab import spec as labspec
from juice.lab.netns import exec_argv
from juice.results.store import RunDir, tool_version
from juice.util import atomic
from juice.workloads.schedulerdb.backends import BackendSession
from juice.workloads.schedulerdb.readers import family
from juice.workloads.schedulerdb.spec import DEFAULT_CLIENT, SchedulerDbSpec, reps_for
from juice.workloads.schedulerdb.worker import WorkerProc

Progress = Callable[[str], None]
INDEX = "index.json"
WORKLOAD = "scheduler-db"
# Rough cost model for ``plan`` (seconds per 1000 nodes per read, one scheduler, 2 cores).
# Bumped when a layout's data or read changes, so stored points of the old one are not reused.
LAYOUT_VERSION = {"historical": 1, "modern": 1, "kv": 2}
COST_PER_KNODE = {"historical-2013.1": 0.5, "historical-2013.2": 0.25, "modern": 0.02,
                  "modern-all": 0.2, "kv": 0.01}


def point_key(spec: SchedulerDbSpec, p: dict[str, Any]) -> str:
    """Stable identity of a point: its params plus the spec fields that change its meaning."""
    base = {k: v for k, v in p.items() if not (k == "client" and v == DEFAULT_CLIENT)}
    ident = {**base, "stats_per_node": spec.stats_per_node, "repetitions": reps_for(spec, p),
             "seed": spec.seed, "lab": spec.lab.model_dump(), "candidates": spec.candidates,
             "warmup_s": spec.warmup_s, "layout": LAYOUT_VERSION[family(str(p["track"]))]}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def run_name(p: dict[str, Any]) -> str:
    client = p.get("client", DEFAULT_CLIENT)
    return (f"{p['backend']}-{p['track']}-n{p['nodes']}-s{p['schedulers']}-"
            f"{'upd' if p['updates'] else 'static'}" + ("" if client == DEFAULT_CLIENT else f"-{client}"))


def estimate_s(p: dict[str, Any], reps: int, cores: int = 2) -> float:
    per_read = COST_PER_KNODE.get(str(p["track"]), 0.2) * int(p["nodes"]) / 1000
    contention = max(1.0, int(p["schedulers"]) / cores)
    upd = 1.3 if p["updates"] else 1.0
    return round(reps * per_read * contention * upd + 1.5, 1)


def plan(spec: SchedulerDbSpec) -> list[dict[str, Any]]:
    """One row per measured point, with its key and an estimated duration ``est_s``."""
    return [{**p, "key": point_key(spec, p), "est_s": estimate_s(p, reps_for(spec, p))}
            for p in spec.points()]


# ---- the index ---------------------------------------------------------------------------

def completed(root: Path) -> dict[str, str]:
    """key -> run dir name, for every COMPLETE run under ``root`` (index + manifests)."""
    done: dict[str, str] = {}
    try:
        idx = json.loads((root / INDEX).read_text())
        done.update({k: v for k, v in idx.get("points", {}).items() if (root / v / "manifest.json").exists()})
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    if root.is_dir():  # manifests are the truth: a run made after the index was last written
        for d in root.iterdir():
            if d.name.startswith(".") or d.name.endswith(".failed") or not d.is_dir():
                continue
            try:
                m = json.loads((d / "manifest.json").read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                continue
            if m.get("workload") == WORKLOAD and m.get("key"):
                done.setdefault(m["key"], d.name)
    return done


def write_index(root: Path, done: dict[str, str]) -> None:
    atomic.write_json(root / INDEX, {"workload": WORKLOAD, "points": done, "updated_at": time.time()})


# ---- running -----------------------------------------------------------------------------

def run(spec: SchedulerDbSpec, spec_path: Path, out_root: Path, progress: Progress,
        *, lab_name: str | None = None) -> Path:
    """Measure every point not yet complete; returns the study's results directory."""
    root = out_root / spec.name
    root.mkdir(parents=True, exist_ok=True)
    done = completed(root)
    write_index(root, done)
    todo = [p for p in spec.points() if point_key(spec, p) not in done]
    progress(f"{len(spec.points())} points, {len(spec.points()) - len(todo)} already complete, "
             f"{len(todo)} to measure")
    if not todo:
        return root
    spec_text = spec_path.read_text() if spec_path.exists() else ""
    name = lab_name or f"sdb{os.getpid() % 100000}"
    lab_spec = labspec.parse({"name": name, "sites": spec.lab.sites, "delay_ms": spec.lab.delay_ms})
    with LocalLab.up(lab_spec, ephemeral=True, progress=progress) as lab:
        for backend in spec.backends:
            mine = [p for p in todo if p["backend"] == backend]
            if not mine:
                continue
            with BackendSession(lab, backend, progress) as sess:
                _run_backend(spec, spec_text, sess, mine, root, done, progress)
    return root


def _run_backend(spec: SchedulerDbSpec, spec_text: str, sess: BackendSession, points: list[dict[str, Any]],
                 root: Path, done: dict[str, str], progress: Progress) -> None:
    lab = sess.lab
    logs = open(lab.workdir / f"workers-{sess.backend}.log", "ab")  # noqa: SIM115 (closed below)
    readers: dict[str | None, list[WorkerProc]] = {}  # per client (None: not a MySQL backend)
    updaters: list[WorkerProc] = []
    try:
        fams = sorted({family(p["track"]) for p in points}, key=["historical", "modern", "kv"].index)
        for fam in fams:
            facts = sess.prepare(fam)
            ep_r = sess.endpoint(sess.reader_site, fam)
            for w in _all(readers) + updaters:
                w.close()
            readers = {}
            for client in dict.fromkeys(p.get("client") for p in points):
                ep_c = ep_r if client is None else {**ep_r, "client": client}
                rcfg = {"role": "reader", "endpoint": ep_c, "timeout_s": spec.read_timeout_s}
                readers[client] = [WorkerProc(exec_argv(lab.site_ns(sess.reader_site), []), rcfg, logs)
                                   for _ in range(max(p["schedulers"] for p in points))]
            updaters = [WorkerProc(exec_argv(lab.site_ns(s), []),
                                   {"role": "updater", "endpoint": sess.endpoint(s, fam)}, logs)
                        for s in sess.updater_sites] if any(p["updates"] for p in points) else []
            fam_points = [p for p in points if family(p["track"]) == fam]
            for n in sorted({p["nodes"] for p in fam_points}):
                pop_s = sess.grow(fam, n, spec.seed, spec.stats_per_node)
                for p in [q for q in fam_points if q["nodes"] == n]:
                    key = point_key(spec, p)
                    path = _measure(spec, spec_text, sess, p, key, facts, pop_s, readers[p.get("client")],
                                    updaters, root, progress)
                    done[key] = path.name
                    write_index(root, done)
                    pop_s = 0.0
    finally:
        for w in _all(readers) + updaters:
            w.close()
        logs.close()


def _all(readers: dict[str | None, list[WorkerProc]]) -> list[WorkerProc]:
    return [w for ws in readers.values() for w in ws]


def _measure(spec: SchedulerDbSpec, spec_text: str, sess: BackendSession, p: dict[str, Any], key: str,
             facts: dict[str, Any], pop_s: float, readers: list[WorkerProc], updaters: list[WorkerProc],
             root: Path, progress: Progress) -> Path:
    import pandas as pd

    fam = family(p["track"])
    rate = p["nodes"] / 60.0 if p["updates"] else 0.0
    t_point = time.monotonic()
    with RunDir(root, run_name(p)) as rd:
        rd.manifest(workload=WORKLOAD, key=key, params=p, repetitions=reps_for(spec, p),
                    spec=spec.model_dump(mode="json"),
                    spec_text=spec_text, versions={**sess.versions(),
                                                   "pymysql": _pkg_version("pymysql"),
                                                   "mysqlclient": _pkg_version("mysqlclient"),
                                                   "psycopg": _pkg_version("psycopg"),
                                                   "pymemcache": _pkg_version("pymemcache"),
                                                   "redis-py": _pkg_version("redis"),
                                                   "iproute2": tool_version(["ip", "-V"])},
                    lab={"sites": spec.lab.sites, "delay_ms_one_way": spec.lab.delay_ms,
                         "wan_backend": sess.lab.state.backend, "reader_site": sess.reader_site,
                         "updater_sites": sess.updater_sites if p["updates"] else []},
                    layout=facts, populate_s=round(pop_s, 2), cpu_count=os.cpu_count(),
                    load_avg_before=list(os.getloadavg()))
        if rate > 0:
            for part, u in enumerate(updaters):
                u.send({"cmd": "start", "family": fam, "nodes": p["nodes"], "rate": rate, "seed": spec.seed,
                        "k": spec.stats_per_node, "workers": spec.update_workers, "part": part,
                        "parts": len(updaters)})
            for u in updaters:
                ans = u.recv(60)
                if not ans.get("ok"):
                    raise ServiceError(f"updater failed to start: {ans.get('error')}")
            time.sleep(spec.warmup_s)
        rows: list[dict[str, Any]] = []
        t_win = time.monotonic()
        try:
            for rep in range(reps_for(spec, p)):
                active = readers[:p["schedulers"]]
                for sid, w in enumerate(active):
                    w.send({"cmd": "read", "track": p["track"], "nodes": p["nodes"],
                            "candidates": spec.candidates, "seed": spec.seed + sid, "rep": rep})
                for sid, w in enumerate(active):
                    a = w.recv(spec.read_timeout_s + 30)
                    rows.append({**p, "scheduler_id": sid, "repetition": rep, "seconds": a["seconds"],
                                 "fetch_s": a["fetch_s"], "hydrate_s": a["hydrate_s"],
                                 "rows_returned": a["rows"], "objects": a["objects"], "ok": bool(a["ok"]),
                                 "error": a["error"], "t_start": a["t_start"]})
        finally:
            window = time.monotonic() - t_win
            upd: dict[str, Any] = {"target_rate": rate, "window_s": round(window, 3), "count": 0,
                                   "achieved_rate": 0.0, "parts": []}
            if rate > 0:
                for u in updaters:
                    u.send({"cmd": "stop"})
                for u in updaters:
                    upd["parts"].append(u.recv(120))
                upd["count"] = sum(int(x.get("count", 0)) for x in upd["parts"])
                upd["elapsed_s"] = max(float(x.get("elapsed_s", 0)) for x in upd["parts"])
                upd["achieved_rate"] = round(upd["count"] / upd["elapsed_s"], 2) if upd["elapsed_s"] else 0.0
                upd["shortfall_pct"] = round(100 * (1 - upd["achieved_rate"] / rate), 2)
                upd["errors"] = sum(sum(x.get("errors", {}).values()) for x in upd["parts"])
        df = pd.DataFrame(rows)
        df.to_parquet(rd.file("reads.parquet"), index=False)
        rd.write_json("updates.json", upd)
    ok = [r["seconds"] for r in rows if r["ok"]]
    med = sorted(ok)[len(ok) // 2] if ok else float("nan")
    extra = (f", updates {upd['achieved_rate']}/{rate:.1f} per s" if rate else "")
    progress(f"{run_name(p)}: median {med:.3f} s over {len(ok)}/{len(rows)} reads{extra} "
             f"({time.monotonic() - t_point:.1f} s)")
    return rd.path


def _pkg_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"
