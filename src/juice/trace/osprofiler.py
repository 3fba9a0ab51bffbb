"""The same boots traced by OSProfiler and by Juice's logs: per-phase agreement (issue 26).

    spans = spans_of(doc["traces"][trace_id])      # OSProfiler's notifications → spans
    ms = milestones(spans)                          # the flow's milestones (juice.trace.flow.PATH)
    rows = agreement(pairs)                         # pairs: (run, request id, OSProfiler ms, Juice ms)
    table = compare_run(run_dir, traced)            # a Juice run with osprofiler.json, vs `juice trace`

OSProfiler (in nova 34, ``[profiler] enabled``) records a span per WSGI request, per RPC call
made through nova's traced rpcapi clients and per RPC handled by a traced manager. Its spans
give these milestones of ``flow.PATH`` (the first attempt's; a rescheduled boot's last build
gives ``retry_in``):

================  ======================================================================
received          ``wsgi`` start of ``POST …/servers`` (nova-api)
cond_call         ``SchedulerAPI.select_destinations`` call starts (conductor)
sched_in          the scheduler's span of that call starts (nova-scheduler)
sched_out         … and stops
cond_back         the conductor's ``select_destinations`` call returns
dispatched        ``ComputeAPI.build_and_run_instance`` cast starts (conductor)
compute_in        ``ComputeManager.build_and_run_instance`` starts (nova-compute)
done              nova-compute's ``SchedulerAPI.update_instance_info`` starts: sent right
                  before ``instance.create.end`` (``_build_and_run_instance``)
================  ======================================================================

There is no span for the claim and the spawn (the build runs in a thread of the compute, its
methods are private). Phases are compared only between milestones BOTH tracers have: each
side's milestones are restricted to the common ones and cut by ``flow.segments``, so a phase
of the comparison has the same two ends on both sides (``claim+spawn+finish`` where Juice has
three phases and OSProfiler one). Per phase: boots matched, Juice's median time, the median
of (OSProfiler − Juice) and the 95th percentile of its absolute value, each with a 95 %
bootstrap interval (``juice.analysis.bootstrap``; runs are clusters).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from juice.analysis.bootstrap import group_rng, interval, replicates
from juice.trace import flow
from juice.util.jsontypes import JSONObject, as_object, as_objects

FILE = "osprofiler.json"
COLUMNS = ("phase", "from", "to", "boots", "juice_median_s", "diff_median_s", "diff_median_lo_s",
           "diff_median_hi_s", "absdiff_p95_s", "absdiff_p95_lo_s", "absdiff_p95_hi_s")


@dataclass(frozen=True)
class Span:
    id: str
    parent: str
    kind: str          # wsgi, rpc, compute_api…
    service: str       # osapi_compute, nova-conductor, nova-scheduler, nova-compute
    what: str          # the called function, or "<METHOD> <path>"
    start: float       # epoch seconds (UTC, the sending service's clock)
    stop: float | None
    trace: str = ""    # the trace (base id) it was stored under
    text: str = ""     # the call's arguments as OSProfiler recorded them (instance uuids are in it)


def _epoch(ts: str) -> float:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def spans_of(notifications: Iterable[Mapping[str, object]], trace: str = "") -> list[Span]:
    """The spans of one trace (a start and its stop share a ``trace_id``), by start time."""
    starts: dict[str, Mapping[str, object]] = {}
    stops: dict[str, float] = {}
    for n in notifications:
        name = str(n.get("name", ""))
        if name.endswith("-start"):
            starts[str(n["trace_id"])] = n
        elif name.endswith("-stop"):
            stops[str(n["trace_id"])] = _epoch(str(n["timestamp"]))
    out = []
    for tid, n in starts.items():
        info = as_object(n.get("info"))
        fn, req = as_object(info.get("function")), as_object(info.get("request"))
        what = str(fn.get("name") or (f"{req.get('method', '')} {req.get('path', '')}" if req else ""))
        out.append(Span(tid, str(n.get("parent_id", "")), str(n["name"])[:-len("-start")],
                        str(n.get("service", "")), what, _epoch(str(n["timestamp"])), stops.get(tid),
                        trace, f"{fn.get('args', '')} {fn.get('kwargs', '')}"))
    return sorted(out, key=lambda s: s.start)


def _first(spans: Sequence[Span], service: str, what: str, after: float = float("-inf")) -> Span | None:
    return next((s for s in spans if s.service == service and s.what.endswith(what) and s.start >= after),
                None)


def all_spans(doc: Mapping[str, object]) -> list[Span]:
    """Every span of a run's ``osprofiler.json``, whatever trace it was stored under."""
    out = [s for tid, ns in as_object(doc.get("traces")).items() for s in spans_of(as_objects(ns), tid)]
    return sorted(out, key=lambda s: s.start)


def milestones(own: Sequence[Span], every: Sequence[Span] | None = None,
               uuid: str | None = None) -> dict[str, float]:
    """The flow's milestones of one boot (see the module doc): ``received`` from its own trace
    ``own`` (the POST that carried the headers); the others from the spans of ``every`` trace
    whose arguments name the instance ``uuid`` — OSProfiler can store a boot's calls under an
    earlier boot's trace id (``misfiled``, seen with nova's threading backend). Without a uuid:
    ``own`` only."""
    ms: dict[str, float] = {}
    post = next((s for s in own if s.kind == "wsgi" and s.what.startswith("POST ")
                 and s.what.rstrip("/").endswith("/servers")), None)
    if post is not None:
        ms["received"] = post.start
    spans = [s for s in (every or own) if uuid in s.text] if uuid else list(own)
    sel = _first(spans, "nova-conductor", "SchedulerAPI.select_destinations")
    if sel is not None:
        ms["cond_call"] = sel.start
        if sel.stop is not None:
            ms["cond_back"] = sel.stop
        sched = next((s for s in spans if s.parent == sel.id and s.service == "nova-scheduler"
                      and s.start >= sel.start), None)
        if sched is not None:
            ms["sched_in"] = sched.start
            if sched.stop is not None:
                ms["sched_out"] = sched.stop
    cast = _first(spans, "nova-conductor", "ComputeAPI.build_and_run_instance")
    if cast is not None:
        ms["dispatched"] = cast.start
    builds = [s for s in spans if s.service == "nova-compute"
              and s.what.endswith("ComputeManager.build_and_run_instance")]
    if builds:
        ms["compute_in"] = builds[0].start
        if len(builds) > 1:
            ms["retry_in"] = builds[-1].start
        done = _first(spans, "nova-compute", "SchedulerAPI.update_instance_info", builds[-1].start)
        if done is not None:
            ms["done"] = done.start
    return ms


def _covered(a: str, b: str) -> str:
    """The flow's phases between milestones ``a`` and ``b``, joined with ``+``."""
    names = [m for m, _ in flow.PATH]
    # the optional milestones (a rescheduled boot's retry, a node's image fetch) only at an end
    return "+".join(ph for m, ph in flow.PATH[names.index(a) + 1:names.index(b) + 1]
                    if m not in flow.OPTIONAL or b == m)


def common_phases(osp: Mapping[str, float], juice: Mapping[str, float]
                  ) -> dict[tuple[str, str], tuple[float, float]]:
    """(from, to) → (OSProfiler seconds, Juice seconds), cut at the milestones both have."""
    both = set(osp) & set(juice)
    a = flow.segments({k: v for k, v in osp.items() if k in both})
    b = flow.segments({k: v for k, v in juice.items() if k in both})
    bs = {(f, t): end - start for _, f, t, start, end in b}
    return {(f, t): (end - start, bs[(f, t)]) for _, f, t, start, end in a if (f, t) in bs}


def agreement(pairs: Sequence[tuple[str, str, Mapping[str, float], Mapping[str, float]]]) -> pd.DataFrame:
    """The per-phase table (``COLUMNS``) of (run, request id, OSProfiler milestones, Juice's)."""
    rows = []
    for run, rid, osp, juice in pairs:
        for (f, t), (o, j) in common_phases(osp, juice).items():
            rows.append({"run": run, "request_id": rid, "from": f, "to": t, "osp_s": o, "juice_s": j})
    if not rows:
        return pd.DataFrame(columns=list(COLUMNS))
    df = pd.DataFrame(rows)
    df["diff_s"] = df["osp_s"] - df["juice_s"]
    order = {m: i for i, (m, _) in enumerate(flow.PATH)}
    out = []
    for (f, t), g in sorted(df.groupby(["from", "to"]), key=lambda kv: order[kv[0][0]]):
        d = g["diff_s"].to_numpy(dtype=float)
        runs = pd.factorize(g["run"])[0]
        med = replicates(d, None, runs, (0.5,), group_rng("osprofiler", f, t, "median"))
        p95 = replicates(np.abs(d), None, runs, (0.95,), group_rng("osprofiler", f, t, "p95"))
        (mlo, mhi), (plo, phi) = interval(med.quantiles[0]), interval(p95.quantiles[0])
        out.append({"phase": _covered(f, t), "from": f, "to": t, "boots": len(g),
                    "juice_median_s": float(np.median(g["juice_s"])), "diff_median_s": float(np.median(d)),
                    "diff_median_lo_s": mlo, "diff_median_hi_s": mhi,
                    "absdiff_p95_s": float(np.quantile(np.abs(d), 0.95)), "absdiff_p95_lo_s": plo,
                    "absdiff_p95_hi_s": phi})
    return pd.DataFrame(out, columns=list(COLUMNS))


def load(run_dir: Path) -> JSONObject | None:
    """A run's ``osprofiler.json`` (None when the run had OSProfiler off)."""
    p = run_dir / FILE
    if not p.is_file():
        return None
    doc: JSONObject = json.loads(p.read_text())
    return doc


FLOW_CALLS = ("schedule_and_build_instances", "select_destinations", "build_and_run_instance")


def misfiled(tid: str, every: Sequence[Span], uuid: str) -> int:
    """The boot's flow calls (``FLOW_CALLS``, naming instance ``uuid``) that OSProfiler stored
    under another trace than the boot's own ``tid``."""
    return sum(1 for s in every if uuid in s.text and s.trace != tid and s.what.endswith(FLOW_CALLS))


def run_pairs(run: str, run_dir: Path, juice: Mapping[str, Mapping[str, float]]
              ) -> tuple[list[tuple[str, str, dict[str, float], Mapping[str, float]]], dict[str, int]]:
    """A run's boots seen both ways: (run, request id, OSProfiler milestones, Juice's), matched
    through boots.parquet (request id ↔ trace id, instance uuid); ``juice``: request id → Juice's
    milestones. Also the counts: boots sent with a trace id, traced by OSProfiler (spans under
    their own id), with spans misfiled under another boot's id, matched to the logs."""
    doc = load(run_dir)
    counts = {"boots": 0, "osprofiler_traced": 0, "misfiled": 0, "matched": 0}
    if doc is None or not (run_dir / "boots.parquet").is_file():
        return [], counts
    traces = as_object(doc.get("traces"))
    every = all_spans(doc)
    boots = pd.read_parquet(run_dir / "boots.parquet")
    out = []
    none = pd.Series([None] * len(boots), dtype=object)
    for rid, tid, uuid in zip(boots["request_id"], boots.get("trace_id", none), boots.get("id", none),
                              strict=True):
        if not isinstance(tid, str):
            continue
        counts["boots"] += 1
        u = uuid if isinstance(uuid, str) else None
        osp = milestones(spans_of(as_objects(traces.get(tid)), tid), every, u)
        if traces.get(tid):
            counts["osprofiler_traced"] += 1
        if u and misfiled(tid, every, u):
            counts["misfiled"] += 1
        if osp and isinstance(rid, str) and rid in juice:
            counts["matched"] += 1
            out.append((run, rid, osp, juice[rid]))
    return out, counts


def compare(runs: Sequence[tuple[str, Path]], traces: Iterable[tuple[str, flow.Trace]]
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the per-phase table, the per-run counts) of the runs that have OSProfiler traces;
    ``traces``: (run, Juice's boot trace) as ``juice trace`` made them (clock-corrected)."""
    by_run: dict[str, dict[str, Mapping[str, float]]] = {}
    for run, tr in traces:
        by_run.setdefault(run, {})[tr.rid] = tr.milestones
    pairs: list[tuple[str, str, dict[str, float], Mapping[str, float]]] = []
    counts = []
    for name, d in runs:
        if load(d) is None:
            continue
        p, c = run_pairs(name, d, by_run.get(name, {}))
        pairs += p
        counts.append({"run": name, **c})
    return agreement(pairs), pd.DataFrame(counts)


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The table for a terminal: milliseconds, intervals in brackets."""
    def ms(v: float, sign: str = "+") -> str:
        return "n/a" if v != v else f"{1000 * v:{sign}.1f}"

    rows = []
    for r in table.to_dict("records"):
        v = {str(k): float(x) for k, x in r.items() if str(k).endswith("_s")}
        rows.append({"phase": r["phase"], "boots": r["boots"],
                     "juice median": f"{1000 * v['juice_median_s']:.1f}",
                     "median diff": f"{ms(v['diff_median_s'])} [{ms(v['diff_median_lo_s'])}, "
                                    f"{ms(v['diff_median_hi_s'])}]",
                     "p95 |diff|": f"{ms(v['absdiff_p95_s'], '')} [{ms(v['absdiff_p95_lo_s'], '')}, "
                                   f"{ms(v['absdiff_p95_hi_s'], '')}]"})
    return pd.DataFrame(rows)
