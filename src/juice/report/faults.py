"""The faults section of a report: for every run with an ``events.jsonl`` (a fault schedule,
``juice.faults.runner``; read back by ``juice.faults.report.read_events``), what was done and
when, λ and latency per site before / during / after each fault, the recovery time, and a
timeline of every iteration (latency per site, failed ones marked) with the fault windows
shaded.

    html = section(run_dirs, df)     # df: the tidy table of those runs; [] without events
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice.faults.analysis import fault_iterations, fault_windows, recovery
from juice.faults.report import read_events
from juice.profile.frames import load_profile
from juice.report.figures import PALETTE, figure_html, new_figure
from juice.report.tables import table_html


def events_table(events: list[dict[str, Any]], t0: float | None = None) -> str:
    """What was done and when: seconds after ``t0`` (the first iteration's start), or after the
    first fault's start without one."""
    starts = [float(e["t_start"]) for e in events if e.get("t_start") is not None]
    base = t0 if t0 is not None else min(starts, default=0.0)
    return table_html(pd.DataFrame([{
        "fault": e["index"], "what": e.get("description", ""),
        "start (s)": None if e.get("t_start") is None else round(e["t_start"] - base, 2),
        "end (s)": None if e.get("t_end") is None else round(e["t_end"] - base, 2),
        "error": e.get("error") or e.get("undo_error") or "",
        "detail": json.dumps(e.get("detail") or {}, sort_keys=True)} for e in events]))


def section(run_dirs: list[Path], df: pd.DataFrame) -> list[str]:
    """Per run of ``run_dirs`` with events and rows in ``df`` (the tidy table of the runs):
    the events, λ and latency per window, recovery, cluster membership and the timeline."""
    out: list[str] = []
    for d in run_dirs:
        events = read_events(d)
        if not events:
            continue
        mine = df[df["run"].astype(str) == d.name]
        if mine.empty:
            continue
        it = fault_iterations(mine)
        t0 = float(it["start"].min())
        out.append(f"<h3>Faults in {escape(d.name)}</h3>")
        out.append(events_table(events, t0))
        w = fault_windows(it, events)
        if not w.empty:
            out.append("<p class=note>λ per site and window (an iteration counts in the window where "
                       "it started; before/after last as long as the fault).</p>")
            lam = w.pivot_table(index=["fault", "site"], columns="window", values="lam", observed=True)
            mean = w.pivot_table(index=["fault", "site"], columns="window", values="mean_s", observed=True)
            table = lam.add_prefix("λ ").join(mean.add_prefix("mean s ")).reset_index()
            out.append(table_html(table, digits=3))
        rec = recovery(it, events)
        if not rec.empty:
            out.append("<p class=note>Recovery: seconds from the end of the fault (heal, restore, "
                       "restart done) to the end of the site's first successful iteration after it.</p>")
            out.append(table_html(rec, digits=3))
        sizes = _cluster_sizes(d)
        if not sizes.empty:
            out.append("<p class=note>Database cluster membership (Galera <code>wsrep_cluster_size</code> "
                       "as each node sees it, sampled by the resource profile): when every node saw the "
                       "full cluster again after each fault.</p>")
            out.append(table_html(rejoin_table(sizes, events, t0), digits=2))
        out.append(figure_html(_timeline(it, events, t0, d.name, sizes)))
    return out


def _cluster_sizes(run_dir: Path) -> pd.DataFrame:
    """time, site, value of the ``cluster_size`` gauge of a run's profile (empty without)."""
    prof = load_profile([run_dir])
    if prof.empty:
        return pd.DataFrame(columns=["time", "site", "value"])
    sel = prof[prof["metric"].astype(str) == "cluster_size"]
    return sel[["time", "site", "value"]].sort_values("time").reset_index(drop=True)


def rejoin_table(sizes: pd.DataFrame, events: list[dict[str, Any]], t0: float) -> pd.DataFrame:
    """Per fault: the full size (largest seen before it), the smallest seen during it, and
    when (s after the first iteration, and after the fault's end) every node saw the full size again."""
    rows = []
    for e in events:
        if e.get("t_start") is None:
            continue
        before = sizes[sizes["time"] < e["t_start"]]
        full = float(before["value"].max()) if len(before) else float(sizes["value"].max())
        end = e["t_end"] if e.get("t_end") is not None else e["t_start"]
        during = sizes[(sizes["time"] >= e["t_start"]) & (sizes["time"] <= end)]
        back = None
        for t, g in sizes[sizes["time"] >= end].groupby("time", sort=True):
            if (g["value"] == full).all() and g["site"].nunique() == sizes["site"].nunique():
                back = float(t)
                break
        rows.append({"fault": e["index"], "full size": full,
                     "lowest during": float(during["value"].min()) if len(during) else np.nan,
                     "all back at (s)": None if back is None else round(back - t0, 2),
                     "after the fault's end (s)": None if back is None else round(back - end, 2)})
    return pd.DataFrame(rows)


def _timeline(it: pd.DataFrame, events: list[dict[str, Any]], t0: float, title: str,
              sizes: pd.DataFrame) -> Any:
    sites = sorted(int(s) for s in it["site"].unique())
    rows = len(sites) + (1 if not sizes.empty else 0)
    fig = new_figure(9.0, 1.2 + 1.3 * rows)
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    if not sizes.empty:
        ax = axes[-1]
        for i, (site, g) in enumerate(sizes.groupby("site", sort=True)):
            ax.step(g["time"] - t0, g["value"], where="post", color=PALETTE[i % len(PALETTE)],
                    label=f"node in site {site}")
        ax.set_ylabel("cluster size")
        ax.legend(loc="lower right", fontsize=7)
        _shade(ax, events, t0, float(it["end"].max()))
    for ax, site in zip(axes, sites, strict=False):
        s = it[it["site"] == site]
        ok, bad = s[~s["failed"]], s[s["failed"]]
        ax.plot(ok["start"] - t0, ok["total_s"], ".", ms=3, color=PALETTE[0], label="success")
        top = float(np.nanmax(ok["total_s"])) if len(ok) else 1.0
        ax.plot(bad["start"] - t0, np.full(len(bad), top), "x", ms=4, color=PALETTE[2], label="failed")
        _shade(ax, events, t0, float(it["end"].max()))
        ax.set_ylabel(f"site {site}\ntotal (s)")
    axes[0].set_title(f"{title}: iterations over time, fault windows shaded")
    axes[0].legend(loc="upper right", fontsize=7)
    axes[-1].set_xlabel("seconds since the first iteration started")
    return fig


def _shade(ax: Any, events: list[dict[str, Any]], t0: float, t_max: float) -> None:
    for e in events:
        if e.get("t_start") is not None:
            end = e["t_end"] if e.get("t_end") is not None else t_max
            ax.axvspan(e["t_start"] - t0, end - t0, color=PALETTE[1], alpha=0.2, lw=0)
