"""Resource profiles of runs (``profile.parquet``, written by ``juice.profile.sampler``) as
pandas tables: load them, turn cumulative counters into rates, sum them per component.

    df = load_profile([Path("results/quickstart")])   # run, time, site, component, pid, metric, value
    u = utilisation(df)        # cpu_pct, rss_bytes, net_in_Bps, db_statements_s, fc_paused_frac...
    c = per_component(u)       # summed over each component's processes (and sites)

The stored table has one row per (tick, process or site link or database server, metric):
``time`` in epoch seconds (the iterations' clock), ``site`` (0 = the core namespace),
``component``, ``pid`` (0 for a site's link), ``metric`` and ``value``. Counters are stored
cumulative (``CUMULATIVE``); :func:`utilisation` divides the difference of consecutive
samples of the same series by the time between them, stamped at the later sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

PROFILE_TABLE = "profile.parquet"
COLUMNS = ("run", "time", "site", "component", "pid", "metric", "value")
SERIES = ["run", "site", "component", "pid", "metric"]
# cumulative counter -> (rate metric, factor)
RATES: dict[str, tuple[str, float]] = {
    "cpu_user_s": ("cpu_user_pct", 100.0), "cpu_system_s": ("cpu_system_pct", 100.0),
    "net_in_bytes": ("net_in_Bps", 1.0), "net_out_bytes": ("net_out_Bps", 1.0),
    "net_in_packets": ("net_in_pps", 1.0), "net_out_packets": ("net_out_pps", 1.0),
    "db_reads": ("db_reads_s", 1.0), "db_writes": ("db_writes_s", 1.0),
    "fc_paused_s": ("fc_paused_frac", 1.0),
}
# derived sums of two rates of the same series
SUMS = {"cpu_pct": ("cpu_user_pct", "cpu_system_pct"), "db_statements_s": ("db_reads_s", "db_writes_s")}
# fractions: averaged, not summed, over processes / servers
AVERAGED = ("fc_paused_frac", "fc_paused", "cluster_size")


def profile_runs(paths: Sequence[Path]) -> list[Path]:
    """The complete runs under ``paths`` that hold a resource profile."""
    from juice.results import tidy

    return [r for r in tidy.discover(paths).runs if (r / PROFILE_TABLE).is_file()]


def _read(run_dir: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    df: pd.DataFrame = pq.read_table(run_dir / PROFILE_TABLE).to_pandas()
    df.insert(0, "run", run_dir.name)
    return df


def load_profile(paths: Sequence[Path]) -> pd.DataFrame:
    """One table over every run under ``paths`` (run dirs or results roots) that has a
    ``profile.parquet``: columns ``COLUMNS``, text columns categorical. Empty (with the
    columns) when none has one; ``df.attrs["runs"]`` counts the runs read."""
    runs = profile_runs(paths)
    parts = [_read(r) for r in runs]
    if not parts:
        df = pd.DataFrame({c: pd.Series(dtype=float if c in ("time", "value") else object)
                           for c in COLUMNS})
    else:
        df = pd.concat(parts, ignore_index=True)
    for c in ("run", "component", "metric"):
        df[c] = df[c].astype(str).astype("category")
    df.attrs["runs"] = len(parts)
    return df


def utilisation(df: pd.DataFrame) -> pd.DataFrame:
    """Rates from a profile table (same columns): ``cpu_pct`` (% of one core, user + system;
    above 100 for several busy threads), ``cpu_user_pct``, ``cpu_system_pct``, ``net_in_Bps``
    / ``net_out_Bps`` (bytes/s, in = towards the site), ``*_pps``, ``db_reads_s``,
    ``db_writes_s``, ``db_statements_s``, ``fc_paused_frac`` (share of each interval paused by
    Galera flow control); gauges (``rss_bytes``, ``threads``, ``fds``, ``fc_paused``) as they
    are. A series' first sample has no rate; a counter that went backwards gives none. A
    table without ``run`` (one ``profile.parquet`` read directly) gets ``run`` = ""."""
    if df.empty:
        return df.copy()
    if "run" not in df.columns:  # one run's table read directly
        df = df.assign(run="")
    cum = df["metric"].astype(str).isin(list(RATES))
    gauges = df.loc[~cum]
    c = df.loc[cum].sort_values([*SERIES, "time"], kind="stable")
    keys = [c[k].astype(str) if k in ("run", "component", "metric") else c[k] for k in SERIES]
    g = c.groupby(keys, sort=False, observed=True)
    dv = g["value"].diff().to_numpy()
    dt = g["time"].diff().to_numpy()
    ok = np.isfinite(dv) & (dt > 0) & (dv >= 0)
    r = c.loc[ok].copy()
    metric = r["metric"].astype(str)
    factor = metric.map({k: f for k, (_, f) in RATES.items()}).to_numpy(dtype=float)
    r["value"] = dv[ok] / dt[ok] * factor
    r["metric"] = metric.map({k: m for k, (m, _) in RATES.items()})
    parts = [gauges.assign(metric=gauges["metric"].astype(str)), r]
    for name, (a, b) in SUMS.items():
        both = r[r["metric"].isin([a, b])]
        if len(both):
            s = (both.groupby(["run", "time", "site", "component", "pid"], observed=True, sort=False)
                 ["value"].sum().reset_index())
            parts.append(s.assign(metric=name))
    out: pd.DataFrame = pd.concat(parts, ignore_index=True).loc[:, list(COLUMNS)]
    for k in ("run", "component", "metric"):
        out[k] = out[k].astype(str).astype("category")
    return out


def per_component(u: pd.DataFrame, by_site: bool = False) -> pd.DataFrame:
    """``utilisation`` summed over each component's processes per tick (and over its sites
    unless ``by_site``); fractions (``AVERAGED``) are averaged. Columns: run, time,
    [site,] component, metric, value."""
    keys = ["run", "time", *(["site"] if by_site else []), "component", "metric"]
    if u.empty:
        return pd.DataFrame({k: [] for k in [*keys, "value"]})
    avg = u["metric"].astype(str).isin(AVERAGED)
    parts = []
    for sub, how in ((u.loc[~avg], "sum"), (u.loc[avg], "mean")):
        if len(sub):
            parts.append(sub.groupby(keys, observed=True, sort=True)["value"].agg(how).reset_index())
    out: pd.DataFrame = pd.concat(parts, ignore_index=True)
    return out
