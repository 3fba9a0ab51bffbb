"""The Keystone section's findings, computed from the iterations (``iteration_totals``): per
scenario the largest delay against 0 ms per rdbms, the rdbms side by side, the most sites
against the fewest, failures; then %reads/%writes. Values: the totals of successful
iterations (mean; clusters = runs).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from juice.analysis.runlevel import Spread
from juice.analysis.uncertainty import REPEAT_COLUMNS
from juice.report.findings import Finding, contrast, num, study_spread, with_ci
from juice.results.tidy_table import param_columns

# columns of an iteration_totals frame that are not a configuration's
NOT_CONFIG = REPEAT_COLUMNS | {"failed", "total_s", "key", "iteration_duration_s"}


def _short(s: object) -> str:
    return str(s).split(".")[-1]


def findings(it: pd.DataFrame, rw: pd.DataFrame | None = None,
             order: Mapping[str, float] | None = None) -> list[Finding]:
    """``order``: run name -> place in the run order (``juice.report.findings.run_order``): a
    difference between runs that all ran before the other side's is "confounded"."""

    spread: Spread | None = None  # the scenario's run-to-run CV, pooled over its configurations

    def _cmp(a: pd.DataFrame, b: pd.DataFrame, key: object):  # type: ignore[no-untyped-def]
        return contrast(a["total_s"].to_numpy(float), b["total_s"].to_numpy(float), a["run"].astype(str),
                        b["run"].astype(str), key=("keystone", key), stat="mean", order=order,
                        spread=spread)

    out: list[Finding] = []
    ok = it[~it["failed"].astype(bool)].dropna(subset=["total_s"])
    if ok.empty:
        return [Finding(f"No successful iteration among {len(it)}")]
    scen = sorted(ok["scenario"].dropna().unique(), key=str) if "scenario" in ok.columns else [None]
    for s in scen:
        d = ok if s is None else ok[ok["scenario"] == s]
        name = _short(s) if s is not None else "all runs"
        spread = study_spread(d, "total_s", [c for c in param_columns(d) if c not in NOT_CONFIG])
        if "delay_ms" in d.columns and d["delay_ms"].nunique() >= 2:
            lo, hi = d["delay_ms"].min(), d["delay_ms"].max()
            for rd in sorted(d["rdbms"].dropna().unique()) if "rdbms" in d.columns else [None]:
                g = d if rd is None else d[d["rdbms"] == rd]
                a, b = g[g["delay_ms"] == lo], g[g["delay_ms"] == hi]
                if a.empty or b.empty:
                    continue
                c = _cmp(a, b, (s, rd, lo, hi))
                out.append(Finding(f"{rd or 'All'} at {hi:g} ms one-way: {name} takes {with_ci(c.b)} "
                                   f"against {with_ci(c.a)} at {lo:g} ms ({c.ratio_text})", c.verdict))
        if "rdbms" in d.columns and d["rdbms"].nunique() >= 2:
            base = d[d["delay_ms"] == d["delay_ms"].min()] if "delay_ms" in d.columns else d
            r = sorted(base["rdbms"].dropna().unique())
            c = _cmp(base[base["rdbms"] == r[0]], base[base["rdbms"] == r[-1]], (s, "rdbms"))
            out.append(Finding(f"{name}: {r[-1]} vs {r[0]} at the lowest delay: {with_ci(c.b)} against "
                               f"{with_ci(c.a)} ({c.ratio_text})", c.verdict))
        if "sites" in d.columns and d["sites"].nunique() >= 2:
            lo, hi = d["sites"].min(), d["sites"].max()
            c = _cmp(d[d["sites"] == lo], d[d["sites"] == hi], (s, "sites"))
            out.append(Finding(f"{name}: {hi:g} sites vs {lo:g}: {with_ci(c.b)} against {with_ci(c.a)} "
                               f"({c.ratio_text})", c.verdict))
    failed = int(it["failed"].sum())
    if failed:
        worst = it.groupby("run", observed=True)["failed"].mean().max()
        out.append(Finding(f"{failed} of {len(it)} iterations failed (λ up to {num(worst, '', 2)} in a run)"))
    if rw is not None and not rw.empty and "scenario" in it.columns:
        sc = it.drop_duplicates("run").set_index(it.drop_duplicates("run")["run"].astype(str))["scenario"]
        rr = rw.assign(scenario=rw["run"].astype(str).map(sc)).dropna(subset=["scenario", "pct_reads"])
        if not rr.empty:
            m = rr.groupby("scenario", observed=True)[["pct_reads", "pct_writes"]].mean()
            out.append(Finding("Database statements, %reads/%writes: " + "; ".join(
                f"{_short(k)} {num(v['pct_reads'], '%')}/{num(v['pct_writes'], '%')}"
                for k, v in m.iterrows())))
    return out
