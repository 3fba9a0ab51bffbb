"""The seed study's report sections (000: Keystone on MariaDB / Galera / CockroachDB), made
generic over whatever parameters vary in the results:

- outline tables: (scenario, rdbms, other varying params) × sites / delay / zones, each cell
  "mean total (λ, σ)";
- %reads/%writes per scenario and rdbms from the manifests' ``rwratio``;
- per scenario: one tile per rdbms with a stacked bar per number of sites (stacked by
  operation, λ and σ above each bar), the same per delay and per zones layout when they vary,
  and a CDF of per-iteration totals with one line per rdbms × value;
- per scenario: the describe table per operation, then (new tables, the old ones unchanged)
  the 95 % confidence interval of every mean and percentile of it, and the differences of
  mean totals between configurations shown side by side (rdbms pairs; neighbouring sites,
  delays, zones) with their CI and whether they are "real" or "within noise". The bars carry
  error bars: the CI of the mean total of the iterations they show.

Every other varying parameter (load, cache, times...) splits figures into facets, so no bar
ever pools different settings. Repetitions (``repetition``, ``seed``, ``run_id``) are pooled,
as the seed pooled its runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from juice.analysis.bootstrap import LEVEL
from juice.analysis.describe import describe
from juice.analysis.stats import cdfs, group_summary, stacked_means, varying
from juice.analysis.uncertainty import (
    GroupCIs,
    ci_display,
    describe_ci,
    design_codes,
    differences,
    grouped_ci,
    method_note,
    with_ci,
)
from juice.report.figures import Tile, cdf_figure, figure_html, tiles_figure
from juice.report.tables import fmt, table_html
from juice.results.tidy import param_columns

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

DIMS: tuple[str, ...] = ("sites", "delay_ms", "zones")
DIM_LABEL = {"sites": "sites", "delay_ms": "one-way delay (ms)", "zones": "zones"}
POOLED = frozenset({"run_id", "repetition", "seed", "study", "run", "source", "task", "workload"})
RDBMS_ORDER = ("mariadb", "galera", "cockroachdb", "cockroach", "postgres", "postgres-readlocal")


@dataclass
class Data:
    """What the sections draw from: ``df``/``it`` (all iterations) and ``df_f``/``it_f``
    (after the percentile filter used for bars and CDFs)."""

    df: pd.DataFrame
    it: pd.DataFrame
    df_f: pd.DataFrame
    it_f: pd.DataFrame
    rw: pd.DataFrame  # run, pct_reads, pct_writes, reads, writes (may be empty)
    cache: dict[str, Any] = field(default_factory=dict)  # per scenario: describe + its CIs


def _key(v: object) -> tuple[int, float, str]:
    """Sort key: numbers numerically, then text, unknown last."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return (2, 0.0, "")
    if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
        return (0, float(v), "")
    s = str(v)
    return (1, float(RDBMS_ORDER.index(s)) if s in RDBMS_ORDER else 99.0, s)


def _tuples(index: pd.Index[Any]) -> list[tuple[Any, ...]]:
    return [k if isinstance(k, tuple) else (k,) for k in index]


def needed(df: pd.DataFrame) -> list[str]:
    """The columns the figures group and sum on (narrow copies are much cheaper at 1M rows)."""
    params = [c for c in ("scenario", "rdbms", *DIMS) if c in df.columns]
    params += [c for c in varying(df) if c not in params]
    return [*params, "run", "site", "iteration", "operation", "depth", "duration_s", "iteration_failed"]


def _rows(df: pd.DataFrame, scenario: object, cols: list[str]) -> pd.DataFrame:
    """The rows of one scenario, only ``cols`` (those present)."""
    cols = [c for c in dict.fromkeys(cols) if c in df.columns]
    if "scenario" not in df.columns:
        return df[cols]
    return df.loc[(df["scenario"] == scenario).to_numpy(), cols]


def dims_to_show(df: pd.DataFrame) -> list[str]:
    """The x dimensions with more than one value; ``sites`` (or the first present) otherwise."""
    present = [d for d in DIMS if d in df.columns]
    return varying(df, present) or present[:1]


def facets_for(df: pd.DataFrame, dim: str | None) -> list[str]:
    """Varying parameters that split a figure about ``dim`` into several."""
    skip = POOLED | {"scenario", "rdbms", dim}
    return [c for c in varying(df) if c not in skip]


def value_label(col: str, v: object) -> str:
    """``9 sites``, ``50 ms``, ``zones Z1Z1Z3``, ``load=high``."""
    if col == "sites":
        return f"{fmt(v)} sites"
    if col == "delay_ms":
        return f"{fmt(v)} ms"
    return f"{col}={fmt(v)}"


def _label(cols: Sequence[str], values: Sequence[object]) -> str:
    return ", ".join(value_label(c, v) for c, v in zip(cols, values, strict=True))


@dataclass
class _Plan:
    """One figure pair (bars + CDF): dimension, facet values, and the groups it shows."""

    dim: str | None
    by: list[str]
    nf: int
    combo: tuple[object, ...]
    rows: list[tuple[object, ...]]
    means: pd.DataFrame
    lam: pd.DataFrame
    sig: pd.DataFrame
    curves: list[tuple[tuple[Any, ...], Any, Any]]

    @property
    def values(self) -> int:
        return len({_key(k[-1]) for k in self.rows}) if self.dim else 1

    def points(self) -> set[frozenset[tuple[str, object]]]:
        return {frozenset((c, _key(v)) for c, v in zip(self.by, k, strict=True)) for k in self.rows}


def _plans(d: Data, scenario: object) -> list[_Plan]:
    """Every figure pair of one scenario; a pair whose dimension has a single value is left
    out when its bars all appear in a figure about another dimension (a seed-like matrix,
    sites at 0 ms and delays at 9 sites, gives exactly the seed's two figures)."""
    has = "scenario" in d.df_f.columns
    sub = _rows(d.df_f, scenario, needed(d.df))
    it_all = d.it[d.it["scenario"] == scenario] if has else d.it
    it_f = d.it_f[d.it_f["scenario"] == scenario] if has else d.it_f
    has_rdbms = "rdbms" in d.df.columns
    plans: list[_Plan] = []
    shown: list[str | None] = [*dims_to_show(d.df)] or [None]
    for dim in shown:
        facets = facets_for(d.df, dim)
        by = [*facets, *(["rdbms"] if has_rdbms else []), *([dim] if dim else [])]
        means = stacked_means(sub, by)
        lam = group_summary(it_all, by, percentiles=False)
        sig = group_summary(it_f, by, percentiles=False)
        if by:
            lam, sig = lam.set_index(by), sig.set_index(by)
        curves = cdfs(it_f, by)
        nf = len(facets)
        keys_all = _tuples(lam.index) if by else [()]
        for combo in sorted({k[:nf] for k in keys_all}, key=lambda t: [_key(v) for v in t]):
            rows = [k for k in keys_all if k[:nf] == combo]
            plans.append(_Plan(dim, by, nf, combo, rows, means, lam, sig,
                               [c for c in curves if c[0][:nf] == combo]))
    covered: set[frozenset[tuple[str, object]]] = set()
    for p in plans:
        if p.values > 1:
            covered |= p.points()
    return [p for p in plans if p.values > 1 or not p.points() <= covered]


def scenario_figures(d: Data, scenario: object, colors: dict[str, str]) -> list[str]:
    """Stacked-bar tiles and CDFs of one scenario, per shown dimension and facet."""
    has_rdbms = "rdbms" in d.df.columns
    out: list[str] = []
    for p in _plans(d, scenario):
        dim, by, nf, combo = p.dim, p.by, p.nf, p.combo
        facets = by[:nf]
        tiles, bar_keys = [], []
        rdbmss = sorted({k[nf] for k in p.rows}, key=_key) if has_rdbms else [None]
        for r in rdbmss:
            mine = sorted([k for k in p.rows if not has_rdbms or _same(k[nf], r)],
                          key=lambda k: _key(k[-1]) if dim else 0)
            if by:  # groups where every iteration failed get an empty bar (and their λ)
                m = p.means.reindex([k if len(k) > 1 else k[0] for k in mine]).fillna(0.0)
            else:
                m = p.means.copy()
            m.index = pd.Index([fmt(k[-1]) if dim else "all" for k in mine] if by else ["all"])
            notes = [_note(p.lam, p.sig, k, by) for k in mine] if by else [_note(p.lam, p.sig, (), by)]
            tiles.append(Tile(fmt(r) if has_rdbms else "all runs", m, notes))
            bar_keys.append(mine if by else [()])
        what = {"delay_ms": "delay"}.get(dim, dim) if dim else "all runs"
        suffix = f" ({_label(facets, combo)})" if facets else ""
        title = f"{scenario}: mean completion time by {what}{suffix}"
        xlabel = DIM_LABEL.get(dim, dim) if dim else what
        fig = tiles_figure(title, tiles, xlabel=xlabel, colors=colors,
                           ylabel=f"completion time (s), error bar: {LEVEL:.0%} CI")
        bars = _bar_cis(d, scenario)
        _error_bars(fig, [[bars.get(_point(by, k)) for k in keys] for keys in bar_keys])
        out.append(figure_html(fig, caption=title))
        mine_c = sorted(p.curves, key=lambda c: [_key(v) for v in c[0][nf:]])
        labels = [" · ".join(value_label(c, v) if c != "rdbms" else fmt(v)
                             for c, v in zip(by[nf:], k[nf:], strict=True)) or "all" for k, _, _ in mine_c]
        styles = _styles([k[nf:] for k, _, _ in mine_c], has_rdbms)
        ctitle = f"{scenario}: CDF of completion time by {what}{suffix}"
        cfig = cdf_figure(ctitle, [(lab, x, y) for lab, (_, x, y) in zip(labels, mine_c, strict=True)],
                          styles=styles)
        out.append(figure_html(cfig, caption=ctitle))
    return out


def _point(by: Sequence[str], k: tuple[object, ...]) -> frozenset[tuple[str, object]]:
    return frozenset((c, _key(v)) for c, v in zip(by, k, strict=True))


def _finest(d: Data) -> list[str]:
    """Every parameter that splits a group (the describe tables' and the bars' groups)."""
    dims = dims_to_show(d.df)
    return [*(["rdbms"] if "rdbms" in d.df.columns else []), *dims,
            *[f for f in facets_for(d.df, None) if f not in dims]]


def _bar_cis(d: Data, scenario: object) -> dict[frozenset[tuple[str, object]], tuple[float, float]]:
    """CI of the mean total of the bars' iterations (after the percentile filter), per group."""
    ck = f"bars/{scenario}"
    if ck not in d.cache:
        it = d.it_f[d.it_f["scenario"] == scenario] if "scenario" in d.it_f.columns else d.it_f
        ok = it[~it["failed"].to_numpy(dtype=bool)]
        by = _finest(d)
        strata, clusters = design_codes(ok, param_columns(d.df))
        cis = grouped_ci(ok["total_s"], [ok[c] for c in by], strata, clusters, quantiles={},
                         salt=f"bars/{scenario}")
        d.cache[ck] = {_point(by, tuple(r[c] for c in by)): (r["mean_ci_low"], r["mean_ci_high"])
                       for r in cis.table.to_dict("records")}
    out: dict[frozenset[tuple[str, Any]], tuple[float, float]] = d.cache[ck]
    return out


def _error_bars(fig: Figure, cis: list[list[tuple[float, float] | None]]) -> None:
    """Error bars on each tile's stacked bars (bar ``i`` of tile ``t``: ``cis[t][i]``); the
    λ/σ notes move above the bars' upper ends and the y axis grows to fit."""
    axes = fig.axes
    top_all = 0.0
    for ax, tile in zip(axes, cis, strict=False):
        heights = [sum(float(r.get_height()) for r in c) for c in _bars_by_x(ax, len(tile))]
        for i, ci in enumerate(tile):
            if ci is None or any(v is None or math.isnan(float(v)) for v in ci):
                continue
            h, (lo, hi) = heights[i], ci
            ax.errorbar([i], [h], yerr=[[max(h - lo, 0.0)], [max(hi - h, 0.0)]], fmt="none",
                        ecolor="#222222", elinewidth=0.9, capsize=3)
            top_all = max(top_all, hi)
    if not axes or top_all <= 0:
        return
    ymax = max(axes[0].get_ylim()[1], top_all * 1.25)
    axes[0].set_ylim(0, ymax)
    for ax, tile in zip(axes, cis, strict=False):
        notes = [t for t in ax.texts if t.get_transform() is not ax.transAxes]
        for i, t in enumerate(notes[: len(tile)]):
            ci = tile[i]
            if ci is not None and not any(v is None or math.isnan(float(v)) for v in ci):
                x, y = t.get_position()
                t.set_position((x, max(y, float(ci[1]) + ymax * 0.015)))


def _bars_by_x(ax: Axes, n: int) -> list[list[Rectangle]]:
    """The bar rectangles of a stacked-bar axis, by bar position 0..n-1."""
    from matplotlib.patches import Rectangle

    out: list[list[Rectangle]] = [[] for _ in range(n)]
    for patch in ax.patches:
        if not isinstance(patch, Rectangle):  # a bar is one
            continue
        i = int(round(patch.get_x() + patch.get_width() / 2))
        if 0 <= i < n:
            out[i].append(patch)
    return out


def _styles(keys: list[tuple[Any, ...]], has_rdbms: bool) -> list[tuple[int, int]]:
    """Colour per rdbms, line style per value of the dimension."""
    if not has_rdbms or not keys or len(keys[0]) < 2:
        return [(i, i // 10) for i in range(len(keys))]
    rs = sorted({k[0] for k in keys}, key=_key)
    vs = sorted({k[1] for k in keys}, key=_key)
    return [(rs.index(k[0]), vs.index(k[1])) for k in keys]


def _same(a: Any, b: Any) -> bool:
    return _key(a) == _key(b)


def _note(lam: pd.DataFrame, sig: pd.DataFrame, k: tuple[Any, ...], by: list[str]) -> str:
    key: Any = k if len(k) > 1 else (k[0] if k else None)
    try:
        lv = float(lam.loc[key, "lam"]) if by else float(lam["lam"].iloc[0])
        sv = float(sig.loc[key, "sigma"]) if by else float(sig["sigma"].iloc[0])
    except (KeyError, TypeError):
        return ""
    s = "–" if math.isnan(sv) else f"{sv:.3f}"
    return f"λ {lv:.2f}\nσ {s}"


def outline_tables(d: Data) -> str:
    """(scenario, rdbms, facets) × dimension value: "mean s (λ, σ)" over all iterations."""
    parts: list[str] = []
    for dim in dims_to_show(d.df):
        facets = facets_for(d.df, dim)
        rows = [c for c in ("scenario", "rdbms") if c in d.it.columns] + facets
        s = group_summary(d.it, [*rows, dim])
        if s.empty:
            continue
        s["cell"] = [f"{fmt(m, 4)} s (λ {lam:.2f}, σ {fmt(sg, 3)})"
                     for m, lam, sg in zip(s["mean"], s["lam"], s["sigma"], strict=True)]
        s[dim] = s[dim].map(lambda v: fmt(v))
        wide = s.pivot_table(index=rows, columns=dim, values="cell", aggfunc="first",
                             observed=True, dropna=False) if rows else None
        if wide is None:
            wide = s.set_index(dim)[["cell"]].T
        cols = sorted(wide.columns, key=lambda v: _key(_num(v)))
        wide = wide[cols].reset_index()
        if rows:
            wide = _sort_rows(wide, rows)
        parts.append(f"<h3>By {escape(DIM_LABEL[dim])}</h3>" + table_html(wide, na="–"))
    return "".join(parts)


def _num(v: Any) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def rwratio_table(d: Data) -> str | None:
    """Mean %reads/%writes per scenario and rdbms (and facets) from the manifests."""
    if d.rw.empty:
        return None
    runs = d.it.drop_duplicates("run")
    keys = [c for c in ("scenario", "rdbms") if c in runs.columns]
    facets = [c for c in facets_for(d.df, None) if c not in DIMS]
    cols = [*keys, *facets]
    j = d.rw.merge(runs[["run", *cols]].astype({"run": str}), on="run", how="inner")
    if j.empty:
        return None
    g = j.groupby(cols, observed=True, dropna=False, sort=True) if cols else j.groupby(lambda _: 0)
    t = g.agg(runs=("run", "size"), pct_reads=("pct_reads", "mean"), pct_writes=("pct_writes", "mean"),
              reads=("reads", "sum"), writes=("writes", "sum")).reset_index()
    return table_html(t.rename(columns={"pct_reads": "%reads", "pct_writes": "%writes"}), na="–", digits=4)


def _described(d: Data, scenario: object) -> tuple[list[str], pd.DataFrame, pd.DataFrame,
                                                 tuple[GroupCIs, GroupCIs | None]]:
    """(by, sub-frame, describe table, its CIs) of one scenario, computed once."""
    ck = f"describe/{scenario}"
    if ck not in d.cache:
        sub = _rows(d.df, scenario, [*needed(d.df), "action_failed", "iteration_duration_s",
                                     "latency_s", "dispatch_lag_s"])
        by = _finest(d)
        t = describe(sub, by=by)
        if by and len(t):
            t = _sort_rows(t, by)
        d.cache[ck] = (by, sub, t, None)
    by, sub, t, cis = d.cache[ck]
    if cis is None and len(t):
        its = d.it[d.it["scenario"] == scenario] if "scenario" in d.it.columns else d.it
        cis = describe_ci(sub, by, salt=str(scenario), totals=its)
        d.cache[ck] = (by, sub, t, cis)
    return by, sub, t, cis


def describe_tables(d: Data, scenario: object) -> str:
    """The describe table of one scenario, by rdbms, shown dimensions and facets."""
    return table_html(_described(d, scenario)[2], na="–", digits=4)


def uncertainty_tables(d: Data, scenario: object) -> list[str]:
    """The 95 % CI of every mean and percentile of the describe table (same rows), then the
    differences of mean totals between configurations shown side by side."""
    by, _, t, cis = _described(d, scenario)
    if not len(t) or cis is None:
        return []
    full = with_ci(t, cis, by)
    parts = [f"<h3>Uncertainty: mean and percentiles with {LEVEL:.0%} CI per group (seconds)</h3>",
             f"<p class=note>{escape(method_note())} The Total rows' means are the outline's. "
             f"The error bars of the bar figures are the {LEVEL:.0%} CI of each bar's mean total "
             "(the iterations the bar shows, after the percentile filter), made the same way.</p>",
             table_html(ci_display(full, [*by, "operation"]), na="–", digits=4)]
    tot = full[full["operation"] == "Total"]
    if cis[1] is None or not len(tot):
        return parts
    means = {tuple(_plain(v) for v in k): float(m) for k, m in zip(
        tot[by].itertuples(index=False, name=None), tot["mean"], strict=True)}
    rows: list[dict[str, Any]] = []
    comps = [("rdbms", "all")] if "rdbms" in by else []
    comps += [(dim, "adjacent") for dim in DIMS if dim in by]
    for col, pairs in comps:
        if len({_key(k[by.index(col)]) for k in cis[1].reps}) < 2:
            continue
        rows += differences(means, cis[1].reps, by, col, pairs, sort_key=_key, label=_diff_label)
    if rows:
        parts += ["<h3>Differences of mean totals: real or within noise? (seconds)</h3>",
                  "<p class=note>Configurations side by side (every pair of databases at the same "
                  "point; neighbouring values of sites, delay, zones for the same database): "
                  "Δ = mean total of the second − mean total of the first, over every successful "
                  f"iteration, with the {LEVEL:.0%} percentile-bootstrap CI of Δ (both groups "
                  "resampled independently, each as in the uncertainty table). <b>real</b>: the CI "
                  "excludes 0; <b>within noise</b>: it does not. Each CI is 95 % on its own: among "
                  "many rows, about 1 in 20 could say real by chance.</p>",
                  table_html(pd.DataFrame(rows), na="–", digits=4)]
    return parts


def _plain(v: Any) -> Any:
    if v is None or (isinstance(v, float | np.floating) and math.isnan(float(v))):
        return None
    return v.item() if hasattr(v, "item") else v


def _diff_label(col: str, v: Any) -> str:
    return fmt(v) if col == "rdbms" else value_label(col, v)


def _sort_rows(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Rows of a (small, displayed) table ordered by ``cols`` with :func:`_key` (numbers
    numerically, the seed's RDBMS order, unknown last); stable for ties."""
    vals = [df[c].tolist() for c in cols]
    order = sorted(range(len(df)), key=lambda i: tuple(_key(v[i]) for v in vals))
    return df.iloc[order].reset_index(drop=True)
