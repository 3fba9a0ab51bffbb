"""Before/after as one experiment (seed 004, Figure 3-4 and Table 1; issue 28): the runs of a
spec with ``configurations`` compared configuration by configuration.

Per configuration and load: boots, failure % and retry % (boots that needed more than one
attempt, from the trace when the runs kept their logs), throughput (ACTIVE boots per second of
the run's window) and nova's boot median — each with its 95 % bootstrap interval (boots
resampled within runs, runs resampled: repetitions are the clusters), then each configuration
against the first one (the difference and its interval; "real" when the interval excludes 0).
A figure shows failure %, retry % and throughput side by side, as seed 004's Figure 3-4 does
for its before/after (25.7 % → 0 % failed, 29 % → 0.83 % retried, 1.31 → 4.35 req/s).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
from matplotlib.figure import Figure

from juice.analysis.bootstrap import group_rng, interval, replicates
from juice.report.figures import figure_html, new_figure
from juice.report.tables import table_html

METRICS = (("failure_pct", "failed, %"), ("retry_pct", "retried, %"), ("active_per_s", "ACTIVE boots/s"),
           ("nova_boot_s", "boot median, s"))


def _boots(runs: pd.DataFrame, traced: pd.DataFrame | None) -> pd.DataFrame:
    """One row per boot of these runs: run, ok, retried (None without a trace), nova_boot_s."""
    frames = []
    for _, r in runs.iterrows():
        f = Path(str(r["dir"])) / "boots.parquet"
        if not f.is_file():
            continue
        b = pd.read_parquet(f, columns=["request_id", "ok", "nova_boot_s"])
        b["run"] = r["run"]
        frames.append(b)
    if not frames:
        return pd.DataFrame(columns=["run", "request_id", "ok", "nova_boot_s", "retried"])
    out = pd.concat(frames, ignore_index=True)
    if traced is not None and not traced.empty and "retries" in traced.columns:
        t = traced[["run", "request_id", "retries"]].dropna(subset=["request_id"])
        out = out.merge(t, on=["run", "request_id"], how="left")
        out["retried"] = [None if pd.isna(x) else bool(x > 0) for x in out["retries"]]
    else:
        out["retried"] = None
    return out


def _estimate(values: npt.NDArray[np.float64], clusters: npt.NDArray[np.int64], key: tuple[object, ...],
              stat: str) -> tuple[float, float, float, npt.NDArray[np.float64] | None]:
    """(value, lo, hi, replicates) of the mean or median of ``values`` (runs as clusters)."""
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan"), None
    q = (0.5,) if stat == "median" else ()
    reps = replicates(values, None, clusters, q, group_rng("beforeafter", *key, stat))
    r = reps.quantiles[0] if stat == "median" else reps.mean
    lo, hi = interval(r)
    value = float(np.median(values)) if stat == "median" else float(np.mean(values))
    return value, lo, hi, r


def _spec_order(df: pd.DataFrame) -> list[str]:
    """The configurations in the order the spec ran them (the first is the baseline): by the
    runs' ``order_index`` (the sweep's order), else their start time, else as listed. (The stored
    spec's keys are sorted, so they cannot give it.)"""
    first: dict[str, tuple[float, float]] = {}
    for conf, d in zip(df["configuration"], df["dir"], strict=True):
        try:
            man = json.loads((Path(str(d)) / "manifest.json").read_text())
        except (OSError, ValueError):
            man = {}
        idx = man.get("order_index")
        at = (float(idx) if isinstance(idx, int | float) else float("inf"),
              float(man.get("started_at") or float("inf")))
        first[str(conf)] = min(first.get(str(conf), at), at)
    seen = list(dict.fromkeys(str(c) for c in df["configuration"]))
    return sorted(seen, key=lambda c: (*first.get(c, (float("inf"), float("inf"))), seen.index(c)))


def compare(df: pd.DataFrame, traced: pd.DataFrame | None, by: Sequence[str] = ()) -> pd.DataFrame:
    """The before/after table of the runs in ``df`` (``report.load``'s frame) that have a
    ``configuration`` (empty when none do); ``by``: other fields that tell runs apart (each
    value compared on its own, never pooled)."""
    if "configuration" not in df.columns or df["configuration"].isna().all():
        return pd.DataFrame()
    df = df[df["configuration"].notna()]
    order = _spec_order(df)
    loads = [c for c in ("concurrency", "rate") if c in df.columns and df[c].notna().any()]
    std = len(loads)  # the load levels keep their keys (and so their resamples) of before
    loads += [c for c in by if c in df.columns and c not in (*loads, "configuration")]
    rows = []
    for load, g in df.groupby(loads, dropna=False, sort=True) if loads else [((), df)]:
        at = load if isinstance(load, tuple) else (load,)
        base: dict[str, npt.NDArray[np.float64] | None] = {}
        for conf in order:
            runs = g[g["configuration"] == conf]
            if runs.empty:
                continue
            boots = _boots(runs, traced)
            clusters = pd.factorize(boots["run"])[0]
            levels = dict(zip(loads, at, strict=False))
            row: dict[str, object] = {"configuration": conf, **levels, "runs": len(runs), "boots": len(boots)}
            key = (conf, *np.atleast_1d(at[:std]).tolist(), *at[std:])
            fail = 100.0 * (~boots["ok"].astype(bool)).to_numpy(dtype=float)
            retried = boots.dropna(subset=["retried"])
            retry = 100.0 * retried["retried"].astype(bool).to_numpy(dtype=float)
            rc = pd.factorize(retried["run"])[0]
            ok = boots[boots["ok"].astype(bool)].dropna(subset=["nova_boot_s"])
            thr = (runs["active_per_s"].dropna().to_numpy(dtype=float) if "active_per_s" in runs
                   else np.array([]))
            for name, vals, cl, stat in (("failure_pct", fail, clusters, "mean"),
                                         ("retry_pct", retry, rc, "mean"),
                                         ("active_per_s", thr, np.arange(len(thr)), "mean"),
                                         ("nova_boot_s", ok["nova_boot_s"].to_numpy(dtype=float),
                                          pd.factorize(ok["run"])[0], "median")):
                v, lo, hi, reps = _estimate(np.asarray(vals, dtype=np.float64), cl, (*key, name), stat)
                row[name], row[f"{name}_lo"], row[f"{name}_hi"] = v, lo, hi
                if conf == order[0]:
                    base[name] = reps
                elif (reps is not None and (b0 := base.get(name)) is not None
                      and np.isfinite(reps).any() and np.isfinite(b0).any()):
                    d = reps - b0
                    dlo, dhi = interval(d)
                    verdict = "real" if (dlo > 0 or dhi < 0) else "within noise"
                    row[f"{name}_vs_{order[0]}"] = (f"{np.nanmedian(d):+.3g} [{dlo:+.3g}, {dhi:+.3g}] "
                                                    f"{verdict}")
            rows.append(row)
    return pd.DataFrame(rows)


def section(df: pd.DataFrame, traced: pd.DataFrame | None, by: Sequence[str] = ()) -> list[str]:
    """The report's before/after block ([] when the runs have no configurations); ``by`` as in
    ``compare``."""
    t = compare(df, traced, by)
    if t.empty:
        return []
    loads = [c for c in ("concurrency", "rate", *by) if c in t.columns and c != "configuration"]
    shown = ["configuration", *loads, "runs", "boots",
             *[c for n, _ in METRICS for c in (n, f"{n}_lo", f"{n}_hi")]]
    vs = [c for c in t.columns if "_vs_" in c]
    note = ("<p class=note>Each configuration ran in turn within every repetition, each on its own "
            "deployment of the same shape (the spec's <code>configurations</code>). Intervals: 95 % "
            "bootstrap (boots within runs, runs resampled). Retried % counts boots traced with more than "
            "one attempt (from the runs' logs; empty without them). The last columns compare each "
            f"configuration with the first ({escape(str(t['configuration'].iloc[0]))}).</p>")
    return ["<h3>Before/after: configurations compared (seed 004, Figure 3-4)</h3>", note,
            table_html(t[[c for c in shown if c in t.columns]], digits=3),
            table_html(t[["configuration", *loads, *vs]]) if vs else "",
            figure_html(_figure(t, loads), "before/after: failed %, retried %, ACTIVE boots/s")]


def _figure(t: pd.DataFrame, loads: list[str]) -> Figure:
    """Failed %, retried % and throughput per configuration (and load), with 95 % intervals."""
    fig = new_figure(9.0, 2.8, bottom=0.9)
    labels = [f"{c}\n{' '.join(f'{k} {_g(t.iloc[i][k])}' for k in loads)}".strip()
              for i, c in enumerate(t["configuration"])]
    x = np.arange(len(t))
    for j, (name, label) in enumerate(METRICS[:3]):
        ax = fig.add_subplot(1, 3, j + 1)
        v = t[name].to_numpy(dtype=float)
        err = np.vstack([np.nan_to_num(v - t[f"{name}_lo"].to_numpy(dtype=float)),
                         np.nan_to_num(t[f"{name}_hi"].to_numpy(dtype=float) - v)])
        ax.bar(x, np.nan_to_num(v), yerr=np.clip(err, 0, None), color="#4c72b0", capsize=3)
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_title(label, fontsize=9)
    return fig


def _g(v: object) -> str:
    return f"{v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else str(v)
