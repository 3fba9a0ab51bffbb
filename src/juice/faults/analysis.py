"""The effect of faults on a run: failures and latency per site before, during and after each
fault, and the recovery time.

    it = fault_iterations(df)                 # one row per iteration: run, site, start, end, failed, total_s
    table = fault_windows(it, events)         # one row per (fault, site, window)
    rec = recovery(it, events)                # one row per (fault, site): first success after the fault

``events`` are the rows of a run's ``events.jsonl`` (``juice.faults.runner.FaultEvent``):
``index``, ``description``, ``t_start`` and ``t_end`` in epoch seconds, the iterations' clock.
Windows of a fault lasting D = t_end - t_start: *before* = [t_start - D, t_start), *during* =
[t_start, t_end), *after* = [t_end, t_end + D), each clipped to the run; a fault never undone
(t_end missing) has *during* up to the end of the run and no *after*. An iteration belongs to
the window where it STARTED. λ = failed / iterations; latency = mean and p95 of the totals of
successful iterations. Recovery time = from t_end to the end of the first iteration of that site
that succeeded and ended at or after t_end (an iteration begun during the fault and unblocked by
the heal counts: that is service coming back); NaN when none did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from juice.analysis.stats import iteration_key

WINDOWS = ("before", "during", "after")


def fault_iterations(df: pd.DataFrame) -> pd.DataFrame:
    """One row per iteration of the tidy table ``df``: run, site, start (epoch s), end,
    failed, total_s (sum of top-level actions; NaN without any)."""
    top = df[df["depth"].to_numpy() == 0] if "depth" in df.columns else df
    keys = iteration_key(df)[df["depth"].to_numpy() == 0] if "depth" in df.columns else iteration_key(df)
    frame = pd.DataFrame({"key": keys, "run": top["run"].astype(str).to_numpy(),
                          "site": top["site"].to_numpy(), "start": top["timestamp"].to_numpy(dtype=float),
                          "failed": top["iteration_failed"].to_numpy(dtype=bool),
                          "dur": top["duration_s"].to_numpy(dtype=float),
                          "it_dur": top["iteration_duration_s"].to_numpy(dtype=float)})
    g = frame.groupby("key", sort=False)
    out = g.agg(run=("run", "first"), site=("site", "first"), start=("start", "first"),
                failed=("failed", "first"), total_s=("dur", lambda s: s.sum(min_count=1)),
                it_dur=("it_dur", "first")).reset_index(drop=True)
    span = out["it_dur"].where(out["it_dur"].notna(), out["total_s"]).fillna(0.0)
    out["end"] = out["start"] + span
    return out.drop(columns=["it_dur"])


def _windows(ev: Mapping[str, Any], t_min: float, t_max: float) -> dict[str, tuple[float, float]]:
    t0 = float(ev["t_start"])
    t1 = float(ev["t_end"]) if ev.get("t_end") is not None else None
    if t1 is None:
        span = t_max - t0
        return {"before": (max(t_min, t0 - span), t0), "during": (t0, t_max + 1e-9)}
    span = max(t1 - t0, 1e-9)
    return {"before": (max(t_min, t0 - span), t0), "during": (t0, t1),
            "after": (t1, min(t_max + 1e-9, t1 + span))}


def fault_windows(it: pd.DataFrame, events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per applied fault (``t_start`` set), per site, per window: iterations, failures, λ, mean
    and p95 latency of successful iterations (seconds), and the window's bounds relative to
    the fault's start."""
    rows: list[dict[str, Any]] = []
    if it.empty:
        return pd.DataFrame(rows)
    t_min, t_max = float(it["start"].min()), float(it["start"].max())
    for ev in events:
        if ev.get("t_start") is None:
            continue
        for name, (lo, hi) in _windows(ev, t_min, t_max).items():
            sel = it[(it["start"] >= lo) & (it["start"] < hi)]
            for site in sorted(it["site"].unique()):
                s = sel[sel["site"] == site]
                ok = s.loc[~s["failed"], "total_s"].dropna()
                n, f = len(s), int(s["failed"].sum())
                rows.append({"fault": int(ev["index"]), "description": ev.get("description", ""),
                             "site": int(site), "window": name,
                             "from_s": round(lo - float(ev["t_start"]), 3),
                             "to_s": round(hi - float(ev["t_start"]), 3), "iterations": n, "failures": f,
                             "lam": f / n if n else np.nan,
                             "mean_s": float(ok.mean()) if len(ok) else np.nan,
                             "p95_s": float(ok.quantile(0.95)) if len(ok) else np.nan})
    return pd.DataFrame(rows)


def recovery(it: pd.DataFrame, events: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per undone fault, per site: seconds from ``t_end`` to the end of the first successful
    iteration ending at or after it (NaN: none did), and failures during the fault."""
    rows: list[dict[str, Any]] = []
    for ev in events:
        if ev.get("t_start") is None or ev.get("t_end") is None:
            continue
        t0, t1 = float(ev["t_start"]), float(ev["t_end"])
        for site in sorted(it["site"].unique()) if not it.empty else []:
            s = it[it["site"] == site]
            ok_after = s[(~s["failed"]) & (s["end"] >= t1)]["end"]
            failed_during = int(s[(s["start"] >= t0) & (s["start"] < t1)]["failed"].sum())
            rows.append({"fault": int(ev["index"]), "description": ev.get("description", ""),
                         "site": int(site), "fault_s": round(t1 - t0, 3),
                         "failures_during": failed_during,
                         "recovery_s": float(ok_after.min() - t1) if len(ok_after) else np.nan})
    return pd.DataFrame(rows)
