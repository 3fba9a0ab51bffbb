"""What the servers did early and late in a deployment, next to the timing (issue 27: the
cause of the run-order effect), from the manifests' ``server_counters``
(``juice.services.servercounters``) and the iterations alone.

- **Early vs late.** Per deployment, its runs split by ``order.position`` into early (the first
  half) and late (the rest): the mean of each counter (cache hit rate, buffer-pool misses,
  history list length, table sizes...) on each side.
- **What moves with the timing.** Runs of different points differ in their timing and in their
  counters for reasons that are not order (the scenario's own cache use). So each run's mean
  iteration total is taken relative to its point's mean (``time/point - 1``), and each counter
  as its difference to its point's mean; the correlation of the two across the deployment's
  runs is the repeated-measures correlation (rmcorr: runs of one point are not independent of
  its mean, so the degrees of freedom are runs - points - 1), with its 95 % Fisher interval.
  ``position`` is one of the rows: a counter that only grows with position (rows of a table)
  correlates as much as position does, and then the data cannot tell the two apart.

Runs without ``server_counters`` (made before it) take no part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from juice.report.findings import Finding, num
from juice.report.tables import table_html
from juice.studies.keystone.runorder import _deployment, runs_frame

MIN_RUNS = 4  # runs of a deployment (with repeated points) for a correlation
# the counters a reader compares, in this order (derived names of servercounters.derived)
SHOWN = {"cache_hit_rate": "cache hit rate (window)", "memcached.get_misses": "cache misses (window)",
         "memcached.curr_items": "cache items (start)",
         "buffer_pool_miss_rate": "buffer-pool miss rate (window)",
         "innodb.buffer_pool_reads": "buffer-pool reads from disk (window)",
         "pg.blks_read": "shared-buffer reads from disk (window)",
         "innodb.history_list_length": "InnoDB history list length (start)",
         "galera.cert_index_size": "Galera cert index size (start)",
         "galera.cert_failures": "Galera cert failures (window)",
         "galera.flow_control_paused_ns": "Galera flow-control paused ns (window)",
         "rows.user": "rows: user (start)", "rows.password": "rows: password (start)",
         "rows.project": "rows: project (start)", "rows.assignment": "rows: assignment (start)",
         "rows.revocation_event": "rows: revocation_event (start)",
         "keystone.full_gcs": "Keystone workers' full garbage collections (window)",
         "keystone.full_gc_ms": "their pauses, ms (window)",
         "host_cpu_busy": "this machine's CPU busy (window)", "host.load1_x100": "load average x100 (start)"}


def frame(manifests: Sequence[Mapping[str, Any]], it: pd.DataFrame) -> pd.DataFrame:
    """One row per run with an order and server counters: deployment, point, position, the
    run's mean iteration total (``time``), and its derived counters."""
    runs = runs_frame(manifests)
    if runs.empty:
        return pd.DataFrame()
    derived = {str(m.get("_dir")): m["server_counters"].get("derived", {}) for m in manifests
               if isinstance(m.get("server_counters"), Mapping)}
    runs = runs[runs["run"].isin(list(derived))]
    if runs.empty:
        return pd.DataFrame()
    ok = it[~it["failed"].astype(bool)].dropna(subset=["total_s"])
    times = ok.assign(run=ok["run"].astype(str)).groupby("run")["total_s"].mean()
    rows = []
    for r in runs.to_dict("records"):
        run, point = str(r["run"]), str(r["point"])
        if run not in times.index:
            continue
        rows.append({"run": run, "deployment": _deployment(point), "point": point,
                     "position": float(r["position"]), "time": float(times[run]),
                     **{k: float(v) for k, v in derived[run].items() if isinstance(v, int | float)}})
    return pd.DataFrame(rows)


def early_late(df: pd.DataFrame) -> pd.DataFrame:
    """Per deployment and counter: the mean on its early and late runs (split by position)."""
    rows = []
    for dep, g in df.groupby("deployment", sort=False):
        g = g.sort_values("position")
        half = len(g) // 2
        if half == 0:
            continue
        early, late = g.iloc[:half], g.iloc[half:]
        rows.append({"deployment": dep, "counter": "mean iteration total (s)",
                     "early": num(float(early["time"].mean())), "late": num(float(late["time"].mean()))})
        for k, label in SHOWN.items():
            if k in g.columns and g[k].notna().any():
                rows.append({"deployment": dep, "counter": label,
                             "early": num(float(early[k].mean())), "late": num(float(late[k].mean()))})
    return pd.DataFrame(rows)


def correlation(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64],
                clusters: Sequence[str]) -> tuple[float, float, float]:
    """The repeated-measures correlation (Bakdash & Marusich 2017, "rmcorr") of ``x`` and
    ``y``, already centred on their cluster's (point's) mean, with its 95 % Fisher interval on
    df = values - clusters - 1; NaN bounds when df < 3 (too few to say)."""
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan"), float("nan"), float("nan")
    r = float(np.clip(np.corrcoef(x, y)[0, 1], -0.999999, 0.999999))
    df = len(x) - len(set(clusters)) - 1
    if df < 3:
        return r, float("nan"), float("nan")
    z, half = float(np.arctanh(r)), 1.959964 / float(np.sqrt(df - 1))
    return r, float(np.tanh(z - half)), float(np.tanh(z + half))


def moves(df: pd.DataFrame) -> pd.DataFrame:
    """Per deployment and counter (and position): the correlation, across the deployment's runs,
    of the run's time relative to its point with the counter's difference to its point's mean."""
    rows = []
    for dep, g in df.groupby("deployment", sort=False):
        g = g[g.groupby("point")["run"].transform("count") >= 2]  # points run at least twice
        if len(g) < MIN_RUNS:
            continue
        rel = (g["time"] / g.groupby("point")["time"].transform("mean") - 1).to_numpy(float)
        for k in ("position", *SHOWN):
            if k not in g.columns or g[k].isna().any():
                continue
            x = (g[k] - g.groupby("point")[k].transform("mean")).to_numpy(float)
            r, lo, hi = correlation(x, rel, g["point"].tolist())
            if not np.isfinite(r):
                continue
            verdict = ("real" if lo > 0 or hi < 0 else "within noise") if np.isfinite(lo) else "no interval"
            rows.append({"deployment": dep, "counter": SHOWN.get(k, k), "runs": len(g), "r": r,
                         "lo": lo, "hi": hi, "verdict": verdict})
    return pd.DataFrame(rows)


def _r(row: Any) -> str:
    """"r = -0.85 [-0.97, -0.45]" of a row of ``moves``."""
    ci = f" [{row['lo']:.2f}, {row['hi']:.2f}]" if np.isfinite(row["lo"]) else ""
    return f"r = {row['r']:.2f}{ci}"


def findings(mv: pd.DataFrame) -> list[Finding]:
    """Per deployment: the counter that moves most with the timing (largest |r| whose interval
    excludes 0), and where position stands; or that none does."""
    out = []
    for dep, g in mv.groupby("deployment", sort=False):
        pos = g[g["counter"] == "position"]
        real = g[(g["verdict"] == "real") & (g["counter"] != "position")]
        where = (f" (position itself: {_r(pos.iloc[0])})" if not pos.empty else "")
        if real.empty:
            out.append(Finding(f"On the {dep} deployment no server counter moves with the run's time "
                               f"relative to its point over {int(g['runs'].iloc[0])} runs{where}",
                               "within noise"))
            continue
        best = real.loc[real["r"].abs().idxmax()]
        out.append(Finding(f"On the {dep} deployment the run's time relative to its point moves with "
                           f"{best['counter']}: {_r(best)} over {int(best['runs'])} runs{where}", "real"))
    return out


def section(manifests: Sequence[Mapping[str, Any]], it: pd.DataFrame) -> tuple[list[str], list[Finding]]:
    """The report's "What the servers did" block (HTML parts) and its findings; nothing when no
    run carries server counters."""
    df = frame(manifests, it)
    if df.empty:
        return [], []
    parts = ["<h3>What the servers did, early vs late</h3>",
             "<p class=note>The servers' own counters around each run (juice.services.servercounters): "
             "memcached stats of Keystone's cache, the database's buffer pool and undo history, the rows "
             "of the Keystone tables that grow. Early = the first half of a deployment's runs by "
             "position. Means over runs.</p>", table_html(early_late(df))]
    mv = moves(df)
    found = findings(mv) if not mv.empty else []
    if not mv.empty:
        shown = mv.assign(r=[_r(row) for row in mv.to_dict("records")]).drop(columns=["lo", "hi"])
        parts += ["<p class=note>Which counter moves with the timing: the repeated-measures "
                  "correlation r (rmcorr), across the deployment's runs of points run twice or more, "
                  "between the run's mean iteration total relative to its point's (time/point - 1) and "
                  "the counter's difference to its point's mean; 95 % Fisher interval on runs - points "
                  "- 1 degrees of freedom. A counter that only grows with position cannot be told apart "
                  "from position.</p>", table_html(shown)]
    return parts, found
