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

from collections.abc import Hashable, Sequence
from typing import Literal, TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd
from pandas.core.groupby.generic import DataFrameGroupBy

from juice.results.tidy import ITERATION_KEY, param_columns

PERCENTILES: tuple[float, ...] = (0.5, 0.95, 0.99)
CDF_POINTS = 1000
# a grouping column (run parameters, operations, runs): its values are text, numbers or flags
KeyColumn: TypeAlias = "pd.Series[str] | pd.Series[int] | pd.Series[float] | pd.Series[bool]"


def iteration_key(df: pd.DataFrame) -> npt.NDArray[np.int64]:
    """One int64 per row identifying its iteration (run, site, iteration number)."""
    run = df["run"]
    codes = (run.cat.codes if isinstance(run.dtype, pd.CategoricalDtype)
             else pd.Series(pd.factorize(run)[0], index=df.index))
    site = df["site"].fillna(0).astype(np.int64).to_numpy()
    it = df["iteration"].astype(np.int64).to_numpy()
    key: npt.NDArray[np.int64] = (
        (codes.to_numpy().astype(np.int64) << 42) | ((site & 0xFFFF) << 26) | (it & 0x3FFFFFF))
    return key


def iteration_totals(df: pd.DataFrame) -> pd.DataFrame:
    """One row per iteration: its run parameters, ``run``, ``site``, ``iteration``,
    ``failed``, ``total_s`` (sum of depth-0 actions; NaN when it has none),
    ``iteration_duration_s``, ``latency_s``, ``dispatch_lag_s``, ``key``.

    Vectorised: one factorisation of the iteration key, ``bincount`` sums, and a column-wise
    ``take`` of the first row of each iteration (no copy of the whole frame)."""
    sel = np.flatnonzero(df["depth"].to_numpy() == 0)
    key = iteration_key(df)[sel]
    codes, _ = pd.factorize(key, sort=False)  # groups numbered in order of first appearance
    n = int(codes.max()) + 1 if len(codes) else 0
    dur = df["duration_s"].to_numpy(dtype=np.float64)[sel]
    has = ~np.isnan(dur)
    sums = np.bincount(codes, weights=np.where(has, dur, 0.0), minlength=n)
    counts = np.bincount(codes, weights=has.astype(np.float64), minlength=n)
    # codes number groups by first appearance: a group starts where the running max grows
    grows = np.diff(np.maximum.accumulate(codes), prepend=-1) > 0
    first = np.flatnonzero(grows)
    rows = sel[first]
    cols = [*param_columns(df), *ITERATION_KEY, "iteration_failed", "iteration_duration_s",
            "latency_s", "dispatch_lag_s"]
    data: dict[str, pd.Series[float]] = {c: df[c].iloc[rows].reset_index(drop=True) for c in cols}
    out = pd.DataFrame(data, copy=False).rename(columns={"iteration_failed": "failed"})
    out["total_s"] = np.where(counts > 0, sums, np.nan)
    out["key"] = key[first]
    return out


def _group(df: pd.DataFrame, by: Sequence[str]) -> DataFrameGroupBy[tuple[Hashable, ...], Literal[True]]:
    return df.groupby(list(by), observed=True, dropna=False, sort=True)


def grouped_stats(values: pd.Series[float], keys: Sequence[KeyColumn],
                  quantiles: dict[str, float], extremes: bool = True) -> pd.DataFrame:
    """count, mean, std (ddof 1), min, max and the named quantiles (linear interpolation, as
    numpy and pandas) of ``values`` per group of ``keys``; NaN values are left out but their
    groups are kept (count 0). One sort for all groups: much faster than groupby.quantile.
    Without quantiles and ``extremes`` false, there is no sort at all (min/max are NaN)."""
    keys = list(keys) or [pd.Series(0, index=values.index, name="_all")]
    g = values.groupby(keys, observed=True, dropna=False, sort=True)
    index = g.size().index
    codes = g.ngroup().to_numpy()
    ng = len(index)
    v = values.to_numpy(dtype=np.float64)
    ok = ~np.isnan(v)
    c, v = codes[ok], v[ok]
    cnt = np.bincount(c, minlength=ng).astype(np.int64)
    has = cnt > 0
    out: dict[str, npt.NDArray[np.int64] | npt.NDArray[np.float64]] = {"count": cnt}
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(c, weights=v, minlength=ng) / cnt
        dev = v - mean[c]
        ss = np.bincount(c, weights=dev * dev, minlength=ng)
        out["mean"] = np.where(has, mean, np.nan)
        out["std"] = np.where(cnt > 1, np.sqrt(ss / (cnt - 1)), np.nan)
    nan = np.full(ng, np.nan)
    if len(v) == 0 or not quantiles:  # min/max come with the sort the quantiles need
        if len(v) and not quantiles:
            out["min"] = _reduce_by(np.minimum, c, v, ng) if extremes else nan
            out["max"] = _reduce_by(np.maximum, c, v, ng) if extremes else nan
            return pd.DataFrame(out, index=index)
        out.update({"min": nan, "max": nan, **{k: nan for k in quantiles}})
        return pd.DataFrame(out, index=index)
    sv = v[np.lexsort((v, c))]
    starts = np.cumsum(cnt) - cnt
    last = np.where(has, starts + cnt - 1, 0)
    first = np.where(has, starts, 0)
    out["min"] = np.where(has, sv[first], np.nan)
    out["max"] = np.where(has, sv[last], np.nan)
    for name, q in quantiles.items():
        pos = first + q * np.maximum(cnt - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, last)
        val = sv[lo] + (sv[hi] - sv[lo]) * (pos - lo)
        out[name] = np.where(has, val, np.nan)
    return pd.DataFrame(out, index=index)


def _reduce_by(ufunc: np.ufunc, codes: npt.NDArray[np.int64], v: npt.NDArray[np.float64],
               ng: int) -> npt.NDArray[np.float64]:
    init = np.inf if ufunc is np.minimum else -np.inf
    acc = np.full(ng, init)
    ufunc.at(acc, codes, v)
    return np.where(np.isinf(acc), np.nan, acc)


def group_summary(totals: pd.DataFrame, by: Sequence[str], percentiles: bool = True) -> pd.DataFrame:
    """Per group of ``by`` (columns of ``iteration_totals``): ``iterations``, ``failures``,
    ``lam`` (λ), ``mean`` and ``sigma`` (σ) of successful totals, and unless ``percentiles``
    is false (cheaper: no sort), ``p50``, ``p95``, ``p99``."""
    by = list(by)
    base = totals[[*by, "failed"]].copy()
    base["ok_total"] = totals["total_s"].where(~totals["failed"])
    if not by:
        base["_all"] = 0
        by = ["_all"]
    g = _group(base, by)
    names = {f"p{round(p * 100)}": p for p in PERCENTILES} if percentiles else {}
    st = grouped_stats(base["ok_total"], [base[c] for c in by], names, extremes=False)
    out = pd.DataFrame({"iterations": g["failed"].size(), "failures": g["failed"].sum()})
    out["failures"] = out["failures"].astype(np.int64)
    out["mean"] = st["mean"].to_numpy()
    out["sigma"] = st["std"].to_numpy()
    out["lam"] = out["failures"] / out["iterations"]
    for name in names:
        out[name] = st[name].to_numpy()
    out = out.reset_index()
    return out.drop(columns=["_all"]) if "_all" in out.columns else out


def operation_order(df: pd.DataFrame) -> list[str]:
    """Depth-0 operations in the order they first appear (the scenario's order)."""
    ops = df["operation"]
    if isinstance(ops.dtype, pd.CategoricalDtype):  # first appearance of each code, vectorised
        codes = ops.cat.codes.to_numpy()
        codes = codes[(df["depth"].to_numpy() == 0) & (codes >= 0)]
        uniq, first = np.unique(codes, return_index=True)
        cats = ops.cat.categories
        return [str(cats[c]) for c in uniq[np.argsort(first)]]
    return [str(o) for o in pd.unique(ops[df["depth"] == 0].dropna())]


def stacked_means(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean time per depth-0 operation per successful iteration, one row per group of ``by``
    and one column per operation: a row's sum is the group's mean total (the stacked bar)."""
    by = list(by)
    mask = (df["depth"].to_numpy() == 0) & ~df["iteration_failed"].to_numpy(dtype=bool)
    ok = df.loc[mask, [*by, "operation", "duration_s"]]
    ok["_key"] = iteration_key(df)[mask]
    if not by:
        ok["_all"] = 0
        by = ["_all"]
    n_iter = _group(ok, by)["_key"].nunique()
    acts = ok[ok["operation"].notna()]
    sums = _group(acts, [*by, "operation"])["duration_s"].sum().unstack("operation")
    means = sums.div(n_iter.reindex(sums.index), axis=0).fillna(0.0)
    order = [o for o in operation_order(df) if o in means.columns]
    out: pd.DataFrame = means[order]
    out.columns = pd.Index([str(c) for c in out.columns], name="operation")
    return out


def cdf(values: npt.NDArray[np.float64] | pd.Series[float], points: int = CDF_POINTS) -> tuple[
        npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Empirical CDF of ``values`` (NaN ignored) as (x, P[X <= x]), at most ``points`` points
    (evenly spaced in rank, always keeping the minimum and the maximum)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return np.empty(0), np.empty(0)
    idx = np.unique(np.linspace(0, n - 1, min(n, max(points, 2))).round().astype(np.int64))
    y: npt.NDArray[np.float64] = ((idx + 1) / n).astype(np.float64)
    return v[idx], y


def cdfs(totals: pd.DataFrame, by: Sequence[str], points: int = CDF_POINTS) -> list[tuple[
        tuple[Hashable, ...], npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
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
    first = np.flatnonzero(~df["run"].duplicated().to_numpy())
    return pd.DataFrame({c: df[c].iloc[first].reset_index(drop=True) for c in cols})


def varying(df: pd.DataFrame, among: Sequence[str] | None = None) -> list[str]:
    """Parameter columns (or ``among``) taking more than one value over the runs."""
    runs = runs_table(df)
    cols = list(among) if among is not None else param_columns(df)
    return [c for c in cols if c in runs.columns and runs[c].astype(str).nunique(dropna=False) > 1]
