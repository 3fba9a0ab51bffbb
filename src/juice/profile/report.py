"""Resource profiles of runs read for a report (seed 004, section 3.5): the profiles of some runs
read once (``read``), the peak-consumption table across runs (its Table 2) and the mean and
peak inside the drivers' windows. The report's section (tables, figures) is
``juice.report.profiles``.

    data = read(run_dirs)                              # None when no run has a profile
    table = peak_table(per_component(data.u), {"run-1": "light", "run-2": "high"})

Rows of the peak table: per component CPU (% of one core, summed over its processes and
sites), RSS (MiB), threads, open fds; per database component statements/s and the Galera
flow-control paused fraction; the sites' links summed (MB/s in and out). Columns: "idle
(min)" = the lowest value over every sample of every run (the seed's idle column), then one
"<level> (peak)" column per load level (the highest value over the runs of that level).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice.profile.frames import load_profile, utilisation

LINK = "link"
MIB = 1024.0 * 1024.0
# metric -> (label, unit divisor), in table order
ITEMS: tuple[tuple[str, str, float], ...] = (
    ("cpu_pct", "CPU (% of a core)", 1.0),
    ("rss_bytes", "memory RSS (MiB)", MIB),
    ("threads", "threads", 1.0),
    ("fds", "open fds", 1.0),
    ("db_statements_s", "statements/s", 1.0),
    ("db_reads_s", "reads/s", 1.0),
    ("db_writes_s", "writes/s", 1.0),
    ("fc_paused_frac", "flow control paused (fraction)", 1.0),
    ("net_in_Bps", "network in, all sites (MB/s)", 1e6),
    ("net_out_Bps", "network out, all sites (MB/s)", 1e6),
)
LEVEL_ORDER = ("idle", "light", "high")


def _levels(values: Sequence[str]) -> list[str]:
    known = [v for v in LEVEL_ORDER if v in values]
    return known + sorted(v for v in set(values) if v not in LEVEL_ORDER)


def peak_table(c: pd.DataFrame, level_of: Mapping[str, str]) -> pd.DataFrame:
    """Seed 004's Table 2 over the runs of ``c`` (``per_component`` of their utilisation):
    item, idle (min), then "<level> (peak)" per load level of ``level_of`` (run -> level)."""
    if c.empty:
        return pd.DataFrame(columns=["item", "idle (min)"])
    c = c.assign(level=c["run"].astype(str).map(lambda r: level_of.get(r, "all runs")))
    levels = _levels(c["level"].unique().tolist())
    rows = []
    comps = sorted(c["component"].astype(str).unique(), key=lambda x: (x == LINK, x))
    for comp in comps:
        sub = c[c["component"].astype(str) == comp]
        for metric, label, div in ITEMS:
            m = sub[sub["metric"].astype(str) == metric]
            if m.empty:
                continue
            row: dict[str, Any] = {"item": f"{comp} {label}" if comp != LINK else label,
                                   "idle (min)": float(m["value"].min()) / div}
            for lv in levels:
                vals = m.loc[m["level"] == lv, "value"]
                row[f"{lv} (peak)"] = float(vals.max()) / div if len(vals) else np.nan
            rows.append(row)
    return pd.DataFrame(rows, columns=["item", "idle (min)", *[f"{lv} (peak)" for lv in levels]])


def window_mean_peak(u: pd.DataFrame, metric: str, windows: Mapping[str, tuple[float, float]]
                     ) -> pd.DataFrame:
    """Per (run, site, component): mean and peak of ``metric`` summed over processes per tick,
    inside the run's window when ``windows`` has it (else over the whole run)."""
    m = u[u["metric"].astype(str) == metric]
    if m.empty:
        return pd.DataFrame(columns=["run", "site", "component", "mean", "peak"])
    s = m.groupby(["run", "site", "component", "time"], observed=True)["value"].sum().reset_index()
    s["run"] = s["run"].astype(str)
    lo = s["run"].map(lambda r: windows.get(r, (-np.inf, np.inf))[0]).to_numpy(dtype=float)
    hi = s["run"].map(lambda r: windows.get(r, (-np.inf, np.inf))[1]).to_numpy(dtype=float)
    t = s["time"].to_numpy(dtype=float)
    s = s[(t >= lo) & (t <= hi)]
    return (s.groupby(["run", "site", "component"], observed=True)["value"]
            .agg(mean="mean", peak="max").reset_index())


@dataclass
class Profiles:
    """The profiles of some runs, read once: ``u`` = their utilisation, ``manifests`` and
    ``params`` per run name."""

    runs: list[str]
    u: pd.DataFrame
    manifests: dict[str, Mapping[str, Any]]

    def params(self, run: str) -> Mapping[str, Any]:
        p = self.manifests.get(run, {}).get("params")
        return p if isinstance(p, Mapping) else {}


def read(run_dirs: Sequence[Path]) -> Profiles | None:
    """The profiles of ``run_dirs`` (None when none of them has one)."""
    from juice.results import tidy

    df = load_profile(list(run_dirs))
    if df.empty:
        return None
    runs = sorted(df["run"].astype(str).unique())
    dirs = {d.name: d for d in run_dirs}
    manifests: dict[str, Mapping[str, Any]] = {}
    for r in runs:
        try:
            manifests[r] = tidy.read_manifest(dirs[r])
        except Exception:  # provenance only
            manifests[r] = {}
    return Profiles(runs, utilisation(df), manifests)


