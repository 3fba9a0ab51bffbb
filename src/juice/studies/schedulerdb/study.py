"""The scheduler–database study on the study contract (``STUDY``; ``juice run`` drives it).

Layout of the results (``results/<spec.name>/`` unless ``--results`` says otherwise)::

    index.json                 (written by versions before the study contract; no longer read)
    <backend>-<track>-n<N>-s<S>-<upd|static>[-<client>]-<stamp>/   one run per point
        manifest.json          (juice.results.store.RunDir: complete or absent;
                               "<name>.failed" kept on error)
        reads.parquet          one row per read (tidy)
        updates.json           target/achieved update rate and count during the window

Resumable: a point is identified by ``point_key`` (a hash of its parameters and of what
else changes its meaning: stats per node, repetitions, lab, seed...), stored in its
manifest (``run_key``; ``key`` in runs made before the study contract). The default ``client``
(pymysql) is left out of the key (and of the run name), so points measured before the
``clients`` axis existed stay complete. A rerun skips points whose complete run directory
exists, never overwrites and never duplicates. One lab for the study (``lab_key`` is
constant); each backend deployed once (``deployment_key`` = backend); inside it the
:class:`Deployment` prepares each layout once, starts the reader and updater processes, and
populates incrementally as N grows (only the delta is inserted).

A point: start the updaters at N/60 per second (when updates are on), let them run
``warmup_s``, then ``repetitions`` times make every scheduler process issue the read at the
same moment and wait for all of them; then stop the updaters and count what they achieved.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from juice.contract import Data, ReportInput, Run, Study
from juice.errors import ServiceError
from juice.lab.open import open_lab, uniform_spec
from juice.lab.place import Lab
from juice.results.store import tool_version
from juice.studies.schedulerdb import spec as sdb_spec
from juice.studies.schedulerdb.backends import BackendSession
from juice.studies.schedulerdb.readers import family
from juice.studies.schedulerdb.spec import DEFAULT_CLIENT, SchedulerDbSpec, SdbParams, reps_for
from juice.studies.schedulerdb.worker import WorkerProc

if TYPE_CHECKING:
    import pandas as pd

Progress = Callable[[str], None]
WORKLOAD = "scheduler-db"
# Rough cost model for ``plan`` (seconds per 1000 nodes per read, one scheduler, 2 cores).
# Bumped when a layout's data or read changes, so stored points of the old one are not reused.
LAYOUT_VERSION = {"historical": 1, "modern": 1, "kv": 2}
COST_PER_KNODE = {"historical-2013.1": 0.5, "historical-2013.2": 0.25, "modern": 0.02,
                  "modern-all": 0.2, "kv": 0.01}


def point_key(spec: SchedulerDbSpec, p: SdbParams) -> str:
    """Stable identity of a point: its params plus the spec fields that change its meaning."""
    base = {k: v for k, v in p.items() if not (k == "client" and v == DEFAULT_CLIENT)}
    ident = {**base, "stats_per_node": spec.stats_per_node, "repetitions": reps_for(spec, p),
             "seed": spec.seed, "lab": spec.lab.model_dump(), "candidates": spec.candidates,
             "warmup_s": spec.warmup_s, "layout": LAYOUT_VERSION[family(p["track"])]}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def run_name(p: SdbParams) -> str:
    client = p.get("client", DEFAULT_CLIENT)
    return (f"{p['backend']}-{p['track']}-n{p['nodes']}-s{p['schedulers']}-"
            f"{'upd' if p['updates'] else 'static'}" + ("" if client == DEFAULT_CLIENT else f"-{client}"))


def estimate_s(p: SdbParams, reps: int, cores: int = 2) -> float:
    per_read = COST_PER_KNODE.get(p["track"], 0.2) * p["nodes"] / 1000
    contention = max(1.0, p["schedulers"] / cores)
    upd = 1.3 if p["updates"] else 1.0
    return round(reps * per_read * contention * upd + 1.5, 1)


@dataclass(frozen=True)
class SdbPoint:
    """One measured point: its parameters (backend, track, nodes, schedulers, updates[, client]),
    its key and its number of reads per scheduler."""

    params: SdbParams = field(hash=False, compare=False)
    key: str
    reps: int

    @property
    def dirname(self) -> str:
        return run_name(self.params)

    @property
    def label(self) -> str:
        return run_name(self.params)

    @property
    def lab_key(self) -> str:
        return "lab"  # one lab for the whole study

    @property
    def deployment_key(self) -> str:
        return self.params["backend"]

    @property
    def family(self) -> str:
        return family(self.params["track"])


def expand(spec: SchedulerDbSpec) -> list[SdbPoint]:
    """Every point in execution order: backend (as listed), layout family, N ascending, then
    the spec's order (so each family is prepared once and each N populated once)."""
    order = {"historical": 0, "modern": 1, "kv": 2}
    backends = list(spec.backends)
    pts = [SdbPoint(p, point_key(spec, p), reps_for(spec, p)) for p in spec.points()]
    return sorted(pts, key=lambda q: (backends.index(q.params["backend"]), order[q.family],
                                      q.params["nodes"]))  # stable: spec order within


@dataclass
class Deployment:
    """One backend deployed in the study's lab, plus the reader/updater processes of its
    current layout family and how far that layout is populated."""

    sess: BackendSession
    points: list[SdbPoint]
    logs: IO[bytes]
    fam: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    nodes: int = 0
    pop_s: float = 0.0
    readers: dict[str | None, list[WorkerProc]] = field(default_factory=dict)
    updaters: list[WorkerProc] = field(default_factory=list)

    def ready(self, spec: SchedulerDbSpec, p: SdbPoint) -> float:
        """Prepare ``p``'s family (once) and populate up to its N; returns the seconds spent
        populating for this point (0 when nothing was added)."""
        if p.family != self.fam:
            self.close_workers()
            self.facts = self.sess.prepare(p.family)
            self.fam = p.family
            self._start_workers(spec)
        grown = 0.0
        if p.params["nodes"] != self.nodes:
            grown = self.sess.grow(p.family, p.params["nodes"], spec.seed, spec.stats_per_node)
            self.nodes = p.params["nodes"]
        return grown

    def _start_workers(self, spec: SchedulerDbSpec) -> None:
        sess, fam = self.sess, str(self.fam)
        mine = [q for q in self.points if q.family == fam]
        ep_r = sess.endpoint(sess.reader_site, fam)
        for client in dict.fromkeys(q.params.get("client") for q in mine):
            ep_c = ep_r if client is None else {**ep_r, "client": client}
            rcfg = {"role": "reader", "endpoint": ep_c, "timeout_s": spec.read_timeout_s}
            self.readers[client] = [WorkerProc(sess.lab, sess.reader_site, rcfg, self.logs)
                                    for _ in range(max(q.params["schedulers"] for q in mine))]
        if any(q.params["updates"] for q in mine):
            self.updaters = [WorkerProc(sess.lab, s,
                                        {"role": "updater", "endpoint": sess.endpoint(s, fam)}, self.logs)
                             for s in sess.updater_sites]

    def close_workers(self) -> None:
        for w in [w for ws in self.readers.values() for w in ws] + self.updaters:
            w.close()
        self.readers, self.updaters = {}, []


class SchedulerDbStudy(Study[SchedulerDbSpec, SdbPoint, Deployment]):
    """Seed 001: the scheduler's read of every compute node's state as N grows."""

    name = WORKLOAD
    title = "Scheduler–database (seed 001)"
    example = "examples/scheduler-db.yaml"

    def parse(self, data: Data, source: str) -> SchedulerDbSpec:
        return sdb_spec.parse(dict(data), source)

    def expand(self, spec: SchedulerDbSpec) -> list[SdbPoint]:
        return expand(spec)

    def key_of(self, manifest: Data) -> str | None:
        # runs made before the study contract stored their key as ``key``
        key = super().key_of(manifest) or (manifest.get("key") if manifest.get("workload") == WORKLOAD
                                           else None)
        return str(key) if key else None

    @contextmanager
    def lab(self, spec: SchedulerDbSpec, points: Sequence[SdbPoint],
            progress: Progress) -> Iterator[Lab]:
        with open_lab(spec.provider, uniform_spec("sdb", spec.lab.sites, spec.lab.delay_ms), progress) as lab:
            yield lab

    @contextmanager
    def deployment(self, spec: SchedulerDbSpec, lab: Lab | None, points: Sequence[SdbPoint],
                   progress: Progress) -> Iterator[Deployment]:
        assert lab is not None  # lab() always makes one
        backend = points[0].params["backend"]
        readers = sum(max(q.params["schedulers"] for q in points if q.params.get("client") == c)
                      for c in dict.fromkeys(q.params.get("client") for q in points))
        with BackendSession(lab, backend, progress, readers=readers,
                            update_workers=spec.update_workers) as sess, \
                open(lab.workdir / f"workers-{backend}.log", "ab") as logs:
            dep = Deployment(sess, list(points), logs)
            try:
                yield dep
            finally:
                dep.close_workers()

    def run_point(self, run: Run[SchedulerDbSpec, SdbPoint], dep: Deployment) -> None:
        pop_s = dep.ready(run.spec, run.point)
        _measure(run, dep, pop_s)

    def dry_run(self, spec: SchedulerDbSpec, points: Sequence[SdbPoint],
                progress: Progress) -> list[str] | None:
        """On hosts: the provider, what runs on each host (servers, schedulers, updaters), the WAN."""
        if spec.provider.kind == "local":
            return None
        from juice.lab.open import plan

        sites = spec.lab.sites
        roles: dict[int, list[str]] = {k: [] for k in range(1, sites + 1)}
        most = max((p.params["schedulers"] for p in points), default=0)
        for b in dict.fromkeys(p.params["backend"] for p in points):
            roles[1].append(f"{b} server" + (" (node 1)" if b == "galera" else ""))
            if b == "galera":
                for k in range(2, sites + 1):
                    roles[k] += ["galera node", "updater (when updates)"]
            else:
                roles[1].append(f"updater for {b} (when updates)")
        roles[1].append(f"up to {most} schedulers (readers)")
        return [f"{len(points)} runs on hosts (provider kind {spec.provider.kind}); nothing is reserved "
                "or contacted by this dry run", "",
                *plan(spec.provider, uniform_spec("plan", sites, spec.lab.delay_ms), roles)]

    def plan_columns(self, point: SdbPoint) -> dict[str, object]:
        p = point.params
        return {"backend": p["backend"], "track": p["track"], "client": p.get("client", ""),
                "nodes": p["nodes"], "schedulers": p["schedulers"], "updates": p["updates"],
                "reads": point.reps}

    def estimate_s(self, point: SdbPoint) -> float:
        return estimate_s(point.params, point.reps)

    def summary_lines(self, study_dir: Path) -> list[str]:
        from juice.studies.schedulerdb import report

        return report.summary_lines(report.summary([study_dir]))

    profile_level = "schedulers"  # the resource profile's load levels: the scheduler count

    def report_sections(self, inputs: ReportInput) -> list[str]:
        from juice.studies.schedulerdb import report

        html = report.section(inputs.paths)
        return [html] if html else []

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Data,
                filter_q: float | None) -> pd.DataFrame | None:
        from juice.studies.schedulerdb import report

        return report.describe_reads(list(paths), by)



def _measure(run: Run[SchedulerDbSpec, SdbPoint], dep: Deployment, pop_s: float) -> None:
    """Updaters at N/60 per second (when on), then every scheduler's read at once, per repetition."""
    import pandas as pd

    spec, p, rd, progress = run.spec, run.point.params, run.rd, run.progress
    sess, facts, readers, updaters = dep.sess, dep.facts, dep.readers[p.get("client")], dep.updaters
    fam = run.point.family
    rate = p["nodes"] / 60.0 if p["updates"] else 0.0
    t_point = time.monotonic()
    run.manifest(params=p, repetitions=reps_for(spec, p),
                spec=spec.model_dump(mode="json"),
                spec_text=run.spec_text, versions={**sess.versions(),
                                               "pymysql": _pkg_version("pymysql"),
                                               "mysqlclient": _pkg_version("mysqlclient"),
                                               "psycopg": _pkg_version("psycopg"),
                                               "pymemcache": _pkg_version("pymemcache"),
                                               "redis-py": _pkg_version("redis"),
                                               "iproute2": tool_version(["ip", "-V"])},
                lab={"sites": spec.lab.sites, "delay_ms_one_way": spec.lab.delay_ms,
                     "wan_backend": sess.lab.backend, "reader_site": sess.reader_site,
                     "updater_sites": sess.updater_sites if p["updates"] else [],
                     "provider": sess.lab.facts()},  # where the sites ran (hosts: each host's facts)
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


def _pkg_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"
