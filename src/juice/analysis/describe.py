"""Describe tables per operation (the seed's ``df.describe().transpose()``, with p95/p99 and
failures) and the seed's ``filter_percentile``.

    describe(df, by=["rdbms", "sites"])
    #  rdbms sites operation                 count  mean  std  min  p25  p50  p75  p95  p99  max  failures
    #  galera    3 keystone_v3.create_user      38  ...
    #  galera    3 Total                        38  ...                                          2

Statistics of an operation are over its actions in successful iterations (as the seed, which
kept ``data[len(@.error) is 0]``); ``failures`` counts its actions that failed. The ``Total``
row is over successful iterations' totals (sum of depth-0 actions), its ``failures`` the
failed iterations. Percentiles interpolate linearly (numpy's and pandas' default).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from juice.analysis.stats import KeyColumn, grouped_stats, iteration_key, iteration_totals, operation_order

QUANTILES: dict[str, float] = {"p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95, "p99": 0.99}
STAT_COLUMNS: tuple[str, ...] = ("count", "mean", "std", "min", *QUANTILES, "max", "failures")
TOTAL = "Total"


def _stats(values: pd.Series[float], keys: list[KeyColumn]) -> pd.DataFrame:
    return grouped_stats(values, keys, QUANTILES)


def describe(df: pd.DataFrame, by: Sequence[str] = (), depth: int | None = 0,
             total: bool = True) -> pd.DataFrame:
    """One row per group of ``by`` and operation: count, mean, std, min, p25, p50, p75, p95,
    p99, max (seconds), failures; plus a ``Total`` row per group when ``total``.

    ``depth=0`` (default) describes top-level actions only; ``None`` every depth."""
    by = list(by)
    mask = df["operation"].notna().to_numpy()
    if depth is not None:
        mask &= df["depth"].to_numpy() == depth
    rows = df.loc[mask, [*by, "operation", "duration_s", "iteration_failed", "action_failed"]]
    ok = rows[~rows["iteration_failed"] & ~rows["action_failed"]]
    keys = [*by, "operation"]
    stats = _stats(ok["duration_s"], [ok[c] for c in keys])
    failed = rows[rows["action_failed"]]
    fails = failed.groupby([failed[c] for c in keys], observed=True, dropna=False).size()
    stats = stats.join(fails.rename("failures"), how="outer")
    stats["count"] = stats["count"].fillna(0)
    stats["failures"] = stats["failures"].fillna(0)
    out = stats.reset_index()
    out["operation"] = out["operation"].astype(str)
    parts = [out]
    if total:
        it = iteration_totals(df)
        okt = it[~it["failed"]]
        tstats = _stats(okt["total_s"], [okt[c] for c in by])
        tf = it.groupby([it[c] for c in by] or [pd.Series(0, index=it.index, name="_all")],
                        observed=True, dropna=False)["failed"].sum()
        tstats = tstats.join(tf.rename("failures"), how="outer")
        tstats["count"] = tstats["count"].fillna(0)
        tstats = tstats.reset_index()
        if "_all" in tstats.columns:
            tstats = tstats.drop(columns=["_all"])
        tstats["operation"] = TOTAL
        parts.append(tstats)
    res = pd.concat(parts, ignore_index=True)
    res["count"] = res["count"].astype(np.int64)
    res["failures"] = res["failures"].astype(np.int64)
    order = {op: i for i, op in enumerate([*operation_order(df), TOTAL])}
    res["_o"] = res["operation"].map(lambda o: order.get(o, len(order)))
    for c in by:  # categorical group columns sort by their values, not as text
        if isinstance(res[c].dtype, pd.CategoricalDtype):
            res[c] = res[c].astype(res[c].cat.categories.dtype if len(res[c].cat.categories) else object)
    res = res.sort_values([*by, "_o", "operation"], kind="stable", na_position="last")
    return res.drop(columns=["_o"])[[*by, "operation", *STAT_COLUMNS]].reset_index(drop=True)


def percentile_drop_keys(totals: pd.DataFrame, q: float = 0.95,
                         by: Sequence[str] = ("run",)) -> npt.NDArray[np.int64]:
    """Iteration keys (see ``iteration_key``) of the successful iterations whose total is above
    the ``q`` quantile of their group's totals; ``totals`` from ``iteration_totals``."""
    if not 0.0 < q <= 1.0:
        raise ValueError(f"percentile must be in (0, 1], got {q}")
    ok = totals[~totals["failed"]]
    grp = ok.groupby([ok[c] for c in by], observed=True, dropna=False)["total_s"]
    thr = grp.transform("quantile", q)
    keys: npt.NDArray[np.int64] = ok.loc[ok["total_s"] > thr, "key"].to_numpy(np.int64)
    return keys


def filter_percentile(df: pd.DataFrame, q: float = 0.95, by: Sequence[str] = ("run",)) -> pd.DataFrame:
    """Drop the iterations whose total is above the ``q`` quantile of their group's totals
    (default: per run, as the seed's ``filter_percentile(.95, xp.dataframe)``), all their rows
    together so stacked sums stay consistent. Failed iterations are kept (they count in λ)."""
    drop = percentile_drop_keys(iteration_totals(df), q, by)
    if len(drop) == 0:
        return df
    return df.loc[~np.isin(iteration_key(df), drop)]
