"""Confidence intervals for what the describe tables print, and differences of means.

    cis = describe_ci(df, by=["rdbms", "sites"])     # per group and operation (and Total)
    table = with_ci(describe(df, by=[...]), cis, [...])  # + mean_ci_low ... ci_level, ci_method
    ci_display(table, [...])                         # "0.0272 [0.0251, 0.0296]" cells
    differences(means, cis.reps_total, by, "rdbms")  # Δ mean, its CI, "real" / "within noise"

Intervals come from ``juice.analysis.bootstrap`` (percentile bootstrap, fixed seeds). The
resampling units: runs are clusters, and the configuration of a run (its parameters but its
repetition, seed and id) is its stratum: repetitions of one configuration are resampled,
then the iterations within each (``two-level``); a configuration with one run has only its
iterations resampled. ``ci_method`` says which, per row.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from juice.analysis.bootstrap import LEVEL, RESAMPLES, Replicates, group_rng, interval, replicates
from juice.analysis.describe import QUANTILES, TOTAL
from juice.analysis.stats import KeyColumn, iteration_totals

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

REPEAT_COLUMNS = frozenset({"repetition", "seed", "run_id", "run", "source", "task"})
CI_STATS: tuple[str, ...] = ("mean", *QUANTILES)
CI_COLUMNS: tuple[str, ...] = (*(f"{s}_ci_{e}" for s in CI_STATS for e in ("low", "high")),
                               "ci_level", "ci_method")
Key = tuple[Hashable, ...]  # a group's key: plain Python values (NaN and NA as None)


def method(two_level: bool, units: str = "iterations", clusters: str = "runs") -> str:
    """The ``ci_method`` text of a group."""
    if two_level:
        return f"two-level bootstrap: {clusters}, then {units} within"
    return f"bootstrap over {units}"


def method_note(units: str = "iterations", clusters: str = "runs") -> str:
    """One sentence for reports: how the intervals were made."""
    return (f"{LEVEL:.0%} confidence intervals: percentile bootstrap, {RESAMPLES} resamples, fixed "
            f"seed (the same data give the same intervals). When a configuration has several "
            f"{clusters}, its {clusters} are resampled, then the {units} within each "
            f"({method(True, units, clusters)}); otherwise its {units} are ({method(False, units)}). "
            f"Configurations pooled in one row are kept as they are (strata). Rough: intervals of "
            f"high percentiles from few {units} (p99 of fewer than ~100: they mostly span the "
            f"largest values seen), and two-level intervals from 2–3 {clusters} (the spread "
            f"between {clusters} is itself poorly known, and under-estimated).")


def norm_key(key: object) -> Key:
    """A group key as a tuple of plain Python values (NaN and NA as None)."""
    t = key if isinstance(key, tuple) else (key,)
    out: list[Hashable] = []
    for v in t:
        if v is None or v is pd.NA or (isinstance(v, float | np.floating) and math.isnan(float(v))):
            out.append(None)
            continue
        out.append(v.item() if hasattr(v, "item") else v)
    return tuple(out)


@dataclass
class GroupCIs:
    """Per group: ``table`` (key columns, ``n``, ``clusters``, the CI columns) and the
    bootstrap replicates by normalised key (for differences and error bars)."""

    table: pd.DataFrame
    reps: dict[Key, Replicates] = field(default_factory=dict)


def grouped_ci(values: pd.Series[float], keys: Sequence[KeyColumn], strata: npt.NDArray[np.int64],
               clusters: npt.NDArray[np.int64], quantiles: dict[str, float] | None = None,
               salt: str = "", units: str = "iterations", cluster_name: str = "runs") -> GroupCIs:
    """Bootstrap CIs of the mean and ``quantiles`` of ``values`` per group of ``keys``
    (NaN values left out). ``strata``/``clusters``: one code per value (see the module)."""
    quantiles = QUANTILES if quantiles is None else quantiles
    names = [str(k.name) for k in keys]
    v = values.to_numpy(dtype=np.float64)
    ok = ~np.isnan(v)
    rows_ok = np.flatnonzero(ok)  # (categoricals stay categoricals: grouping them is fast)
    frame = pd.DataFrame({f"_k{i}": k.iloc[rows_ok].reset_index(drop=True) for i, k in enumerate(keys)}) \
        if keys else pd.DataFrame({"_k0": np.zeros(len(rows_ok))})
    g = frame.groupby(list(frame.columns), observed=True, dropna=False, sort=True)
    codes = g.ngroup().to_numpy()
    index = g.size().index
    v, st, cl = v[ok], np.asarray(strata)[ok], np.asarray(clusters)[ok]
    order = np.argsort(codes, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(codes, minlength=len(index)))]
    rows: list[dict[str, object]] = []
    reps: dict[Key, Replicates] = {}
    for gi, key in enumerate(index):
        k = norm_key(key) if keys else ()
        sel = order[bounds[gi]:bounds[gi + 1]]
        r = replicates(v[sel], st[sel], cl[sel], list(quantiles.values()), group_rng(salt, *k))
        reps[k] = r
        row: dict[str, object] = dict(zip(names, k, strict=True))
        row["n"] = r.n
        row["clusters"] = r.clusters
        row["mean_ci_low"], row["mean_ci_high"] = interval(r.mean)
        for name, qr in zip(quantiles, r.quantiles, strict=True):
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = interval(qr)
        row["ci_level"] = LEVEL
        row["ci_method"] = method(r.two_level, units, cluster_name)
        rows.append(row)
    cols = [*names, "n", "clusters", *(f"{s}_ci_{e}" for s in ("mean", *quantiles)
                                       for e in ("low", "high")), "ci_level", "ci_method"]
    return GroupCIs(pd.DataFrame(rows, columns=cols), reps)


def design_codes(frame: pd.DataFrame, params: Sequence[str]) -> tuple[npt.NDArray[np.int64],
                                                                       npt.NDArray[np.int64]]:
    """(strata, clusters) per row of a tidy or per-iteration frame: the cluster is the run,
    the stratum the run's configuration (``params`` but repetition, seed, ids)."""
    run = frame["run"]
    rc = (run.cat.codes.to_numpy().astype(np.int64) if isinstance(run.dtype, pd.CategoricalDtype)
          else pd.factorize(run)[0].astype(np.int64))
    conf_cols = [c for c in params if c not in REPEAT_COLUMNS and c in frame.columns]
    if len(rc) == 0 or not conf_cols:
        return np.zeros(len(rc), np.int64), rc
    n_runs = int(rc.max()) + 1
    first = np.full(n_runs, -1, dtype=np.int64)
    first[rc[::-1]] = np.arange(len(rc) - 1, -1, -1)  # first row of each run
    present = first >= 0
    conf = frame[conf_cols].iloc[first[present]].astype(str).agg("\x1f".join, axis=1)
    per_run = np.zeros(n_runs, dtype=np.int64)
    per_run[present] = pd.factorize(conf)[0]
    return per_run[rc], rc


def describe_ci(df: pd.DataFrame, by: Sequence[str] = (), depth: int | None = 0,
                total: bool = True, salt: str = "",
                totals: pd.DataFrame | None = None) -> tuple[GroupCIs, GroupCIs | None]:
    """CIs for the rows of ``describe(df, by, depth, total)``: (per operation, Total), same
    selections (successful iterations, successful actions), keys ``[*by, "operation"]`` and
    ``[*by]``. ``totals``: ``iteration_totals(df)`` when the caller has it already."""
    from juice.results.tidy import param_columns

    by = list(by)
    params = param_columns(df)
    mask = df["operation"].notna().to_numpy()
    if depth is not None:
        mask &= df["depth"].to_numpy() == depth
    mask &= ~df["iteration_failed"].to_numpy(dtype=bool) & ~df["action_failed"].to_numpy(dtype=bool)
    strata, clusters = design_codes(df, params)
    rows = df.loc[mask, [*by, "operation", "duration_s"]]
    ops = grouped_ci(rows["duration_s"], [rows[c] for c in [*by, "operation"]], strata[mask],
                     clusters[mask], salt=salt)
    ops.table["operation"] = ops.table["operation"].astype(str)
    if not total:
        return ops, None
    it = iteration_totals(df) if totals is None else totals
    okt = it[~it["failed"].to_numpy(dtype=bool)]
    s_it, c_it = design_codes(okt, params)
    tot = grouped_ci(okt["total_s"], [okt[c] for c in by], s_it, c_it, salt=f"{salt}/{TOTAL}")
    return ops, tot


def with_ci(table: pd.DataFrame, cis: tuple[GroupCIs, GroupCIs | None], by: Sequence[str]) -> pd.DataFrame:
    """``table`` (a describe table) with the CI columns after its own, row by row."""
    by = list(by)
    ops, tot = cis
    look: dict[Key, dict[Hashable, object]] = {}
    for r in ops.table.to_dict("records"):
        look[norm_key(tuple(r[c] for c in [*by, "operation"]))] = r
    tot_look: dict[Key, dict[Hashable, object]] = {norm_key(tuple(r[c] for c in by)): r for r in
                                            tot.table.to_dict("records")} if tot is not None else {}
    out = table.copy()
    got: list[dict[Hashable, object]] = []
    for row in table[[*by, "operation"]].itertuples(index=False, name=None):
        key = norm_key(tuple(row))
        hit = tot_look.get(key[:-1]) if row[-1] == TOTAL and tot is not None else look.get(key)
        got.append(hit or {})
    for c in CI_COLUMNS:
        default: object = None if c == "ci_method" else (LEVEL if c == "ci_level" else float("nan"))
        out[c] = [g.get(c, default) for g in got]
    return out


def attach(table: pd.DataFrame, cis: GroupCIs, keys: Sequence[str]) -> pd.DataFrame:
    """``table`` with the CI columns of ``cis`` after its own, matched on ``keys``."""
    keys = list(keys)
    look = {norm_key(tuple(r[c] for c in keys)): r for r in cis.table.to_dict("records")}
    got = [look.get(norm_key(tuple(row)), {}) for row in table[keys].itertuples(index=False, name=None)]
    out = table.copy()
    for c in CI_COLUMNS:
        default: object = None if c == "ci_method" else (LEVEL if c == "ci_level" else float("nan"))
        out[c] = [g.get(c, default) for g in got]
    return out


def ci_cell(point: object, lo: object, hi: object, digits: int = 4) -> str:
    """``"0.0272 [0.0251, 0.0296]"``; ``"0.0272"`` when there is no interval."""
    from juice.util.cells import fmt

    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return fmt(point, digits, "–")
    return f"{fmt(point, digits, '–')} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def ci_display(table: pd.DataFrame, keys: Sequence[str], stats: Sequence[str] = CI_STATS) -> pd.DataFrame:
    """Key columns, ``n``, then one "value [low, high]" column per statistic and the method:
    for printing a table made by :func:`with_ci`."""
    out = table[list(keys)].copy()
    if "count" in table.columns:
        out["n"] = table["count"]
    for s in stats:
        out[f"{s} [{LEVEL:.0%} CI]"] = [ci_cell(p, lo, hi) for p, lo, hi in zip(
            table[s], table[f"{s}_ci_low"], table[f"{s}_ci_high"], strict=True)]
    out["method"] = table["ci_method"].fillna("–")
    return out


def differences(means: dict[Key, float], reps: dict[Key, Replicates], by: Sequence[str], along: str,
                pairs: str = "all", sort_key: Callable[[Hashable], SupportsRichComparison] = str,
                label: Callable[[str, Hashable], str] | None = None) -> list[dict[str, object]]:
    """Differences of means between groups that differ only in ``along``: every pair
    (``pairs="all"``) or neighbours in ``sort_key`` order (``"adjacent"``). Each row: what is
    compared, where, both means, Δ = second − first, its bootstrap CI (the two groups resampled
    independently, each as its own design), and ``real`` when the CI excludes 0, else
    ``within noise``."""
    by = list(by)
    lab = label or (lambda c, v: f"{c}={v}")
    i = by.index(along)
    others: dict[Key, list[Key]] = {}
    for k in reps:
        others.setdefault(k[:i] + k[i + 1:], []).append(k)
    out: list[dict[str, object]] = []
    for rest in sorted(others, key=lambda t: [sort_key(v) for v in t]):
        ks = sorted(others[rest], key=lambda k: sort_key(k[i]))
        todo = [(a, b) for x, a in enumerate(ks) for b in ks[x + 1:]] if pairs == "all" \
            else list(itertools.pairwise(ks))
        where = ", ".join(lab(c, v) for c, v in zip([c for c in by if c != along], rest, strict=True))
        for a, b in todo:
            lo, hi = interval(reps[b].mean - reps[a].mean)
            ma, mb = means.get(a, float("nan")), means.get(b, float("nan"))
            verdict = "–" if math.isnan(lo) else ("real" if lo > 0 or hi < 0 else "within noise")
            out.append({"compared": f"{lab(along, b[i])} − {lab(along, a[i])}", "at": where or "–",
                        "mean first (s)": ma, "mean second (s)": mb, "Δ mean (s)": mb - ma,
                        "Δ CI low": lo, "Δ CI high": hi, "verdict": verdict})
    return out
