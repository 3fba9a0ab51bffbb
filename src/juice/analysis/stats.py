"""Per-iteration figures from a tidy table: totals, stacked means, λ, σ, percentiles, CDFs.

All functions are pure, vectorised (no per-row Python) and take the DataFrame made by
``juice.results.tidy.load``. Conventions, after the seed study (000):

- an iteration's **total** is the sum of its depth-0 atomic actions (the seed's ``Total``);
- **λ** (failure rate) = failed iterations / iterations of the group;
- **σ** = standard deviation (ddof 1) of the totals of the group's successful iterations;
- means, percentiles and CDFs are over successful iterations (the seed kept
  ``data[len(@.error) is 0]``); failures are counted, never silently dropped.

    it = iteration_totals(df)
    group_summary(it, ["scenario", "rdbms", "sites"])   # iterations, failures, lam, mean, sigma, p50..
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from juice.results.tidy import ITERATION_KEY, param_columns

PERCENTILES: tuple[float, ...] = (0.5, 0.95, 0.99)
CDF_POINTS = 1000


def iteration_key(df: pd.DataFrame) -> np.ndarray[Any, np.dtype[np.int64]]:
    """One int64 per row identifying its iteration (run, site, iteration number)."""
    run = df["run"]
    codes = (run.cat.codes if isinstance(run.dtype, pd.CategoricalDtype)
             else pd.Series(pd.factorize(run)[0], index=df.index))
    site = df["site"].fillna(0).astype(np.int64).to_numpy()
    it = df["iteration"].astype(np.int64).to_numpy()
    key: np.ndarray[Any, np.dtype[np.int64]] = (
        (codes.to_numpy().astype(np.int64) << 42) | ((site & 0xFFFF) << 26) | (it & 0x3FFFFFF))
    return key


def iteration_totals(df: pd.DataFrame) -> pd.DataFrame:
    """One row per iteration: its run parameters, ``run``, ``site``, ``iteration``,
    ``failed``, ``total_s`` (sum of depth-0 actions; NaN when it has none),
    ``iteration_duration_s``, ``latency_s``, ``dispatch_lag_s``, ``key``."""
    d0 = df[df["depth"] == 0]
    key = iteration_key(d0)
    first = ~pd.Series(key).duplicated().to_numpy()
    cols = [*param_columns(df), *ITERATION_KEY, "iteration_failed", "iteration_duration_s",
            "latency_s", "dispatch_lag_s"]
    out = d0.loc[first, cols].reset_index(drop=True).rename(columns={"iteration_failed": "failed"})
    totals = d0["duration_s"].groupby(key, sort=False).sum(min_count=1)
    out["total_s"] = totals.to_numpy()
    out["key"] = key[first]
    return out


def _group(df: pd.DataFrame, by: Sequence[str]) -> Any:
    return df.groupby(list(by), observed=True, dropna=False, sort=True)


def group_summary(totals: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group of ``by`` (columns of ``iteration_totals``): ``iterations``, ``failures``,
    ``lam`` (λ), ``mean`` and ``sigma`` (σ) of successful totals, ``p50``, ``p95``, ``p99``."""
    by = list(by)
    base = totals[[*by, "failed"]].copy()
    base["ok_total"] = totals["total_s"].where(~totals["failed"])
    if not by:
        base["_all"] = 0
        by = ["_all"]
    g = _group(base, by)
    out = pd.DataFrame({"iterations": g["failed"].size(), "failures": g["failed"].sum(),
                        "mean": g["ok_total"].mean(), "sigma": g["ok_total"].std()})
    out["failures"] = out["failures"].astype(np.int64)
    out["lam"] = out["failures"] / out["iterations"]
    q = g["ok_total"].quantile(list(PERCENTILES)).unstack()
    for p in PERCENTILES:
        out[f"p{round(p * 100)}"] = q[p] if p in q.columns else np.nan
    out = out.reset_index()
    return out.drop(columns=["_all"]) if "_all" in out.columns else out


def operation_order(df: pd.DataFrame) -> list[str]:
    """Depth-0 operations in the order they first appear (the scenario's order)."""
    ops = df.loc[df["depth"] == 0, "operation"].dropna()
    return [str(o) for o in pd.unique(ops)]


def stacked_means(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean time per depth-0 operation per successful iteration, one row per group of ``by``
    and one column per operation: a row's sum is the group's mean total (the stacked bar)."""
    ok = df[(df["depth"] == 0) & ~df["iteration_failed"]]
    by = list(by)
    if not by:
        ok = ok.assign(_all=0)
        by = ["_all"]
    n_iter = (pd.Series(iteration_key(ok), index=ok.index)
              .groupby([ok[c] for c in by], observed=True, dropna=False).nunique())
    acts = ok[ok["operation"].notna()]
    sums = _group(acts, [*by, "operation"])["duration_s"].sum().unstack("operation")
    means = sums.div(n_iter.reindex(sums.index), axis=0).fillna(0.0)
    order = [o for o in operation_order(df) if o in means.columns]
    out: pd.DataFrame = means[order]
    out.columns = pd.Index([str(c) for c in out.columns], name="operation")
    return out


def cdf(values: np.ndarray[Any, Any] | pd.Series[float], points: int = CDF_POINTS) -> tuple[
        np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """Empirical CDF of ``values`` (NaN ignored) as (x, P[X <= x]), at most ``points`` points
    (evenly spaced in rank, always keeping the minimum and the maximum)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return np.empty(0), np.empty(0)
    idx = np.unique(np.linspace(0, n - 1, min(n, max(points, 2))).round().astype(np.int64))
    y: np.ndarray[Any, np.dtype[np.float64]] = ((idx + 1) / n).astype(np.float64)
    return v[idx], y


def cdfs(totals: pd.DataFrame, by: Sequence[str], points: int = CDF_POINTS) -> list[tuple[
        tuple[Any, ...], np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]]:
    """CDF of successful iterations' totals per group of ``by``: ``[(key, x, y), ...]``."""
    ok = totals[~totals["failed"]]
    if not by:
        x, y = cdf(ok["total_s"].to_numpy(), points)
        return [((), x, y)]
    out = []
    for key, grp in _group(ok, by)["total_s"]:
        x, y = cdf(grp.to_numpy(), points)
        if len(x):
            out.append((key if isinstance(key, tuple) else (key,), x, y))
    return out


def runs_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run with its parameters (``run`` first)."""
    cols = ["run", *param_columns(df)]
    return df.drop_duplicates("run")[cols].reset_index(drop=True)


def varying(df: pd.DataFrame, among: Sequence[str] | None = None) -> list[str]:
    """Parameter columns (or ``among``) taking more than one value over the runs."""
    runs = runs_table(df)
    cols = list(among) if among is not None else param_columns(df)
    return [c for c in cols if c in runs.columns and runs[c].astype(str).nunique(dropna=False) > 1]
