"""Seed 002's question: does boot time grow with the VMs already running? A point per boot.

Each boot of a ``boot_server`` run (boots stay running) is a point: x = the VMs running when its
POST left (the run's preloaded VMs + the run's boots that were ACTIVE by then: POST time + nova's
boot time, one clock), y = nova's own boot time (POST → ``instance.create.end``). A long run
climbs the x axis by itself, so one run already has a slope; runs at several preload levels
extend it (seed 002 went to 75,000 VMs on 350 computes). Per configuration × concurrency: the
least-squares slope (seconds per 1,000 VMs) with a 95 % cluster-bootstrap interval (runs
resampled, then boots within them; deterministic), drawn over the points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from juice.analysis.bootstrap import group_rng, interval
from juice.report.figures import PALETTE, figure_html, new_figure

RESAMPLES = 400
MIN_SPAN = 20  # VMs: below this range of x, a slope says nothing


def points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per successful boot of the boot_server runs in ``df`` (``report.load``'s frame):
    run, running (VMs at its POST), boot_s (nova's), and the run's parameters."""
    rows = []
    for _, r in df.iterrows():
        if "delete" in str(r.get("scenario", "")):
            continue  # boot-and-delete leaves nothing running
        f = Path(str(r["dir"])) / "boots.parquet"
        if not f.is_file():
            continue
        b = pd.read_parquet(f, columns=["ok", "t_post", "nova_boot_s"])
        b = b[b["ok"].astype(bool)].dropna(subset=["t_post", "nova_boot_s"])
        if b.empty:
            continue
        active_at = np.sort((b["t_post"] + b["nova_boot_s"]).to_numpy(dtype=float))
        before = np.searchsorted(active_at, b["t_post"].to_numpy(dtype=float), side="left")
        pre = r.get("running_vms")
        base = int(pre) if isinstance(pre, int | float) and pre == pre else 0
        rows.append(pd.DataFrame({"run": r["run"], "level": base, "running": base + before,
                                  "boot_s": b["nova_boot_s"].to_numpy(dtype=float)}))
    if not rows:
        return pd.DataFrame(columns=["run", "level", "running", "boot_s"])
    return pd.concat(rows, ignore_index=True)


def across_runs(p: pd.DataFrame) -> bool:
    """Whether every preload level has several runs: only then can resampling runs say how much
    runs at one level differ (with one run per level, a resample of runs drops whole levels and
    the slope's interval measures which levels were drawn, not noise)."""
    return bool(p.groupby("level")["run"].nunique().min() >= 2)


def fit(p: pd.DataFrame, key: tuple[object, ...]) -> tuple[float, float, float, float]:
    """(slope, intercept, lo, hi) of boot_s on running. The interval: runs, then boots within
    them, resampled — or, with one run per preload level, boots within each run only (the runs
    kept: the run-to-run variation is then not in the interval; the table says so)."""
    x, y = p["running"].to_numpy(dtype=float), p["boot_s"].to_numpy(dtype=float)
    slope, icpt = np.polyfit(x, y, 1)
    runs = [g.index.to_numpy() for _, g in p.groupby("run")]
    rng = group_rng("nova-slope", *key)
    reps: list[float] = []
    clusters = across_runs(p)
    for _ in range(RESAMPLES):
        picked = [runs[i] for i in rng.integers(0, len(runs), len(runs))] if clusters else runs
        idx: npt.NDArray[np.int64] = np.concatenate([rng.choice(g, len(g)) for g in picked])
        xs = p.loc[idx, "running"].to_numpy(dtype=float)
        if np.ptp(xs) > 0:
            reps.append(float(np.polyfit(xs, p.loc[idx, "boot_s"].to_numpy(dtype=float), 1)[0]))
    lo, hi = interval(np.array(reps)) if len(reps) > 1 else (float("nan"), float("nan"))
    return float(slope), float(icpt), lo, hi


def g_of(df: pd.DataFrame, keys: list[str], k: tuple[object, ...]) -> pd.DataFrame:
    """The runs of ``df`` in the group ``k`` of ``keys``."""
    if not keys:
        return df
    mask = pd.Series(True, index=df.index)
    for c, v in zip(keys, k, strict=True):
        mask &= df[c].astype(str) == str(v)
    return df[mask]


def _failed(g: pd.DataFrame) -> int:
    """Boots that failed in the group's boot_server runs: a failed boot has no boot time, so
    when failures grow with the VMs running the slope of the successes understates the growth."""
    if "failed" not in g.columns:
        return 0
    if "scenario" in g.columns:
        g = g[~g["scenario"].astype(str).str.contains("delete")]
    return int(pd.to_numeric(g["failed"], errors="coerce").fillna(0).sum())


def figure(df: pd.DataFrame, keys: list[str]) -> tuple[str, pd.DataFrame]:
    """The figure and the slope table ("" and an empty frame when no group spans MIN_SPAN VMs)."""
    keys = [k for k in keys if k in df.columns]
    groups = []
    for k, g in df.groupby(keys, dropna=False) if keys else [((), df)]:
        p = points(g)
        if len(p) >= 3 and np.ptp(p["running"].to_numpy(dtype=float)) >= MIN_SPAN:
            groups.append((k if isinstance(k, tuple) else (k,), p))
    if not groups:
        return "", pd.DataFrame()
    fig = new_figure(6.0, 3.4)
    ax = fig.subplots()
    rows = []
    varying = [c for c in keys if df[c].nunique(dropna=False) > 1]
    for i, (k, p) in enumerate(groups):
        slope, icpt, lo, hi = fit(p, k)
        label = ", ".join(f"{c}={v}" for c, v in zip(keys, k, strict=False) if c in varying) or "all runs"
        color = PALETTE[i % len(PALETTE)]
        ax.plot(p["running"], p["boot_s"], ".", color=color, markersize=3, alpha=0.6, label=label)
        xs = np.linspace(p["running"].min(), p["running"].max(), 20)
        ax.plot(xs, slope * xs + icpt, color=color, linewidth=1.0)
        rows.append({**dict(zip(keys, k, strict=False)), "runs": p["run"].nunique(), "boots": len(p),
                     "VMs running": f"{int(p['running'].min())}..{int(p['running'].max())}",
                     "slope (s per 1,000 VMs)": round(slope * 1000, 4),
                     "95 % interval": f"[{lo * 1000:.4f}, {hi * 1000:.4f}]",
                     "intercept (s)": round(icpt, 3),
                     "interval over": "runs, then boots" if across_runs(p) else
                     "boots within each run (one run per level: run-to-run variation not included)",
                     "failed boots (not points)": _failed(g_of(df, keys, k)),
                     "verdict": "grows" if lo > 0 else "shrinks" if hi < 0 else "no trend within noise"})
    ax.set_xlabel("VMs running at the boot's POST")
    ax.set_ylabel("nova's boot time (s)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle("Boot time vs VMs running, a point per boot (seed 002)")
    return figure_html(fig, "nova's boot time of every boot against the VMs running when it was sent, "
                            "with a least-squares line per group"), pd.DataFrame(rows)
