"""Run order in the Keystone report: the order effect where the design allows an estimate, and
the axes whose comparisons are confounded with run order (``juice.sweep.order``).

From the manifests alone: ``order.position`` (0 = the first run on a fresh deployment),
``order_index``, ``order.deployment`` (written by the sweep), ``params``. Runs stored before
the order was recorded have none and take no part.

- **Order effect.** A point (a run's parameters but its repetition and seed) run at two or
  more positions of its deployment: its runs split in early (the first half by position) and
  late (the rest); the difference of the mean iteration total (successful iterations) late
  minus early, with its 95 % bootstrap interval (runs resampled, then iterations:
  ``juice.report.findings.contrast``). With one run on a side that interval holds the
  iterations' variation only, while runs of one point on one deployment differ several times
  more (here: 6-9 % between runs against 1-2 % within one, benchmarks/order_cause): such a point
  gets no verdict of its own (``ONE_RUN``). Over several points, the mean relative difference
  (late / early - 1) with its bootstrap interval over the points: the points' differences carry
  the run-to-run variation, so that interval does.
- **Confounding.** An axis that varies inside a deployment (WAN point, load, scenario) is
  confounded with run order when, for every set of runs that differ only along it, its values
  ran in the same order and no point ran at two positions: every difference along it may be
  (partly) an order effect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import numpy as np
import pandas as pd

from juice.report.findings import Finding, contrast, estimate, with_ci
from juice.report.tables import table_html

# a point with one run early or late: its interval leaves out the run-to-run variation
ONE_RUN = "no verdict (one run a side)"
IDENTITY = ("repetition", "seed", "run_id")  # what differs between repetitions of a point
AXES = ("delay_ms", "wan", "zones", "matrix", "load", "scenario")  # axes inside a deployment


def runs_frame(manifests: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run with a recorded order: run, point, deployment, position, index, mode,
    and its parameters (``p:<name>``)."""
    rows = []
    for m in manifests:
        o, params = m.get("order"), m.get("params")
        if not isinstance(o, Mapping) or not isinstance(params, Mapping) or "position" not in o:
            continue
        ident = {k: v for k, v in params.items() if k not in IDENTITY}
        rows.append({"run": str(m.get("_dir")), "point": json.dumps(ident, sort_keys=True, default=str),
                     "deployment": str(o.get("deployment")), "position": int(o["position"]),
                     "index": int(m.get("order_index", -1)), "mode": str(o.get("mode")),
                     **{f"p:{k}": json.dumps(v, sort_keys=True, default=str) if isinstance(v, list | dict)
                        else v for k, v in ident.items()}})
    return pd.DataFrame(rows)


def _label(point: str) -> str:
    p = json.loads(point)
    keep = [str(p.get("scenario", "")).split(".")[-1], p.get("rdbms"), f"{p.get('sites')} sites",
            f"{p['delay_ms']:g} ms" if isinstance(p.get("delay_ms"), int | float) else p.get("wan"),
            p.get("load"), None if p.get("cache") in (True, None) else "no cache"]
    return " · ".join(str(k) for k in keep if k not in (None, "", "None sites"))


def _deployment(point: str) -> str:
    """The deployment a point ran on, for a reader: "galera, 3 sites"."""
    p = json.loads(point)
    return ", ".join(str(x) for x in (p.get("rdbms"), f"{p.get('sites')} sites",
                                      None if p.get("cache") in (True, None) else "no cache") if x)


def effect(manifests: Sequence[Mapping[str, Any]], it: pd.DataFrame) -> tuple[pd.DataFrame, list[Finding]]:
    """The per-point early/late table and the findings (pooled effect, confounded axes)."""
    runs = runs_frame(manifests)
    if runs.empty:
        return pd.DataFrame(), []
    ok = it[~it["failed"].astype(bool)].dropna(subset=["total_s"])
    ok = ok.assign(run=ok["run"].astype(str))
    rows: list[dict[str, Any]] = []
    rel: dict[str, list[float]] = {}  # per deployment: warming and ageing can go opposite ways
    for point, g in runs.groupby("point", sort=True):
        g = g.sort_values(["position", "index"])
        if g["position"].nunique() < 2:
            continue
        half = len(g) // 2
        early, late = g["run"].iloc[:half].tolist(), g["run"].iloc[half:].tolist()
        a, b = ok[ok["run"].isin(early)], ok[ok["run"].isin(late)]
        if a.empty or b.empty:
            continue
        c = contrast(a["total_s"].to_numpy(float), b["total_s"].to_numpy(float), a["run"], b["run"],
                     key=("order", point), stat="mean")
        rel.setdefault(_deployment(str(point)), []).append(c.b.value / c.a.value - 1 if c.a.value else np.nan)
        rows.append({"point": _label(str(point)),
                     "early positions": ", ".join(str(x) for x in g["position"].iloc[:half]),
                     "late positions": ", ".join(str(x) for x in g["position"].iloc[half:]),
                     "early mean (s)": with_ci(c.a, ""), "late mean (s)": with_ci(c.b, ""),
                     "late - early (s)": with_ci(c.diff, ""),
                     "verdict": c.verdict if min(len(early), len(late)) >= 2 else ONE_RUN})
    out: list[Finding] = []
    for dep, values in rel.items():
        if len(values) >= 2:
            e, _ = estimate(np.asarray(values, float) * 100, key=("order", "pooled", dep))
            verdict = ("real" if e.lo > 0 or e.hi < 0 else "within noise") if e.has_interval() else None
            out.append(Finding(f"Order effect on the {dep} deployment: a point run late takes "
                               f"{with_ci(e, '%')} more than the same point run early, over {len(values)} "
                               "points run at several positions", verdict))
    if rows and not out:
        r = rows[0]
        out.append(Finding(f"Order effect ({r['point']}): run late {r['late mean (s)']} s against "
                           f"{r['early mean (s)']} s run early (late - early {r['late - early (s)']} s)",
                           None if r["verdict"] == ONE_RUN else str(r["verdict"])))
    out += [Finding(s) for s in confounded(runs)]
    return pd.DataFrame(rows), out


def confounded(runs: pd.DataFrame) -> list[str]:
    """Sentences for the axes confounded with run order (see the module doc)."""
    if runs.empty:
        return []
    params = [c for c in runs.columns if c.startswith("p:")]
    out = []
    for axis in (f"p:{a}" for a in AXES):
        if axis not in runs.columns:
            continue
        inside = runs.groupby("deployment")[axis].nunique(dropna=False)
        if not (inside > 1).any():
            continue
        others = [c for c in params if c != axis]
        seqs: set[tuple[str, ...]] = set()
        repeated = False
        frame = runs.astype({c: str for c in params})
        groups = frame.groupby(others, sort=False) if others else [((), frame)]
        for _k, g in groups:
            if g[axis].nunique() < 2:
                continue
            if g.groupby(axis)["position"].nunique().max() > 1:
                repeated = True
                break
            seqs.add(tuple(str(v) for v in g.sort_values("index")[axis].drop_duplicates()))
        if repeated or len(seqs) != 1:
            continue
        (seq,) = seqs
        name = axis.removeprefix("p:")
        shown = [(f"{float(v):g} ms" if name == "delay_ms" else str(v).split(".")[-1]) for v in seq]
        out.append(f"{name} is confounded with run order: wherever runs differ only in {name}, "
                   f"{' ran before '.join(shown)}, and no point ran twice; its differences may be "
                   "order effects (runner.order: interleaved with repetitions: 2 or more separates them)")
    return out


def section(manifests: Sequence[Mapping[str, Any]], it: pd.DataFrame) -> tuple[list[str], list[Finding]]:
    """The report's order block (HTML parts) and its findings."""
    table, found = effect(manifests, it)
    runs = runs_frame(manifests)
    if runs.empty:
        return [], []
    modes = ", ".join(sorted(runs["mode"].unique()))
    parts = ["<h2>Run order</h2>",
             f"<p class=note>Run order: {modes} (runner.order). Position 0 is the first run on a fresh "
             "deployment.</p>"]
    if not table.empty:
        parts += ["<h3>Order effect</h3>", "<p class=note>The same point run early and late in its "
                  "deployment: mean iteration total (successful iterations) with 95 % bootstrap intervals "
                  "(runs, then iterations, resampled).</p>", table_html(table)]
        if (table["verdict"] == ONE_RUN).any():
            parts.append("<p class=note>A point with one run early or late gets no verdict of its own: its "
                         "interval holds the variation between iterations only, and runs of one point on one "
                         "deployment differ several times more (on a 2-core machine, 6-9 % between runs "
                         "against 1-2 % within one: benchmarks/order_cause). Read the pooled estimate over "
                         "points, or run more repetitions.</p>")
    else:
        parts.append("<p class=note>No point ran at two positions: the order effect cannot be "
                     "estimated (repetitions: 2 or more with runner.order interleaved allow it).</p>")
    parts += [f"<p class=note>{escape(f.text)}.</p>" for f in found if f.verdict is None]
    return parts, found

