"""Self-contained HTML pages of ``juice compare --html`` and ``juice trend --html``: the
report's CSS, figures as base64 SVG ``<img>`` (``figure_html``), tables escaped
(``table_html``), no script, no network.

    html = compare_page(groups, meta, deltas, level)   # metadata diff, Δ table, paired figures
    html = trend_page(series, level)                   # per series: runs, steps, one figure a metric
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
import sys
from collections.abc import Mapping, Sequence
from html import escape

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from juice import __version__
from juice.compare.deltas import Delta, metrics_of, pooled
from juice.compare.metadata import FAILURE
from juice.compare.trend import Series
from juice.report.figures import _RC, PALETTE, figure_html, new_figure
from juice.report.html import CSS
from juice.report.tables import table_html
from juice.results.samples import Unit

MAX_FIGURES = 40  # per page: the tables keep every metric


def _page(title: str, parts: Sequence[str]) -> str:
    cmd = " ".join(shlex.quote(a) for a in ["juice", *sys.argv[1:]])
    prov = (f"<p class=note>Generated {escape(dt.datetime.now().isoformat(timespec='seconds'))} by "
            f"juice {escape(__version__)}: <code>{escape(cmd)}</code>.</p>")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1>{prov}" + "\n".join(parts) + "</body></html>\n")


def _unit_of(metric: str) -> str:
    return "percent" if metric == FAILURE else "seconds"


# ---- compare -------------------------------------------------------------------------------
def paired_figure(metric: str, sides: Mapping[str, Sequence[Unit]]) -> Figure:
    """Left: each side's ECDF of ``metric``; right: a box per side (whiskers 5-95 %)."""
    with matplotlib.rc_context(_RC):
        fig = new_figure(9.0, 3.4, bottom=0.6, top=0.45)
        ecdf, box = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2], "wspace": 0.3})
        data, labels = [], []
        for i, units in enumerate(sides.values()):
            v, _ = pooled(units, metric)
            v = np.sort(v)
            tag = chr(65 + i) if i < 26 else str(i)
            if len(v):
                ecdf.step(v, np.arange(1, len(v) + 1) / len(v) * 100, where="post",
                          color=PALETTE[i % len(PALETTE)], label=f"{tag} (n={len(v)})")
            data.append(v)
            labels.append(tag)
        ecdf.set_xlabel(f"{metric} (s)")
        ecdf.set_ylabel("cumulative percent")
        ecdf.set_ylim(0, 101)
        ecdf.grid(True, alpha=0.3)
        ecdf.legend(loc="lower right", fontsize=7, frameon=False)
        bp = box.boxplot([d if len(d) else [np.nan] for d in data], whis=(5, 95), showfliers=False,
                         patch_artist=True, showmeans=True)
        for i, patch in enumerate(bp["boxes"]):
            patch.set_facecolor(PALETTE[i % len(PALETTE)])
            patch.set_alpha(0.5)
        box.set_xticks(range(1, len(labels) + 1), labels)
        box.set_ylabel("seconds")
        box.grid(True, axis="y", alpha=0.3)
        fig.suptitle(metric)
    return fig


def compare_page(sides: Mapping[str, Sequence[Unit]], meta: Sequence[tuple[str, Mapping[str, str]]],
                 deltas: Sequence[Delta], level: float) -> str:
    names = list(sides)
    tags = {n: (chr(65 + i) if i < 26 else str(i)) for i, n in enumerate(names)}
    parts = ["<h2>Sides</h2>", table_html(pd.DataFrame(
        [{"side": tags[n], "path": n, "runs": len(us)} for n, us in sides.items()]))]
    parts.append("<h2>What differs</h2>")
    if meta:
        parts.append("<p class=note>Parameters, versions, deployment, task arguments, Juice and host "
                     "recorded with the runs; only keys whose values differ.</p>")
        parts.append(table_html(pd.DataFrame([{"key": k, **{tags[n]: v[n] for n in names}}
                                              for k, v in meta])))
    else:
        parts.append("<p>Nothing recorded differs (same parameters, versions and host).</p>")
    parts.append("<h2>Differences</h2>")
    if not deltas:
        parts.append("<p>No measurement in common with at least 2 values per side.</p>")
        return _page("Juice compare", parts)
    real = sum(d.verdict == "real" for d in deltas)
    parts.append(f"<p>Δ against side A ({escape(names[0])}), {level:.0%} bootstrap intervals; verdicts "
                 f"Holm-corrected over {len(deltas)} tests at α = {1 - level:.3g}: <b>{real} real "
                 f"differences</b>, {len(deltas) - real} within noise.</p>")
    parts.append(table_html(pd.DataFrame([{
        "metric": d.metric, "stat": d.stat, "side": tags.get(d.side, d.side), "A (s)": d.base,
        "side (s)": d.value, "Δ (s)": d.delta, "lo": d.lo, "hi": d.hi, "p_holm": d.p_holm,
        "verdict": d.verdict, "n A": d.n_base, "n": d.n} for d in deltas]), digits=4))
    parts.append("<h2>Distributions, side by side</h2><p class=note>Per operation: the ECDF of each "
                 "side (left) and boxes (quartiles, whiskers 5–95 %, triangle: mean).</p>")
    shown = metrics_of(sides)
    for metric in shown[:MAX_FIGURES]:
        parts.append(figure_html(paired_figure(metric, sides)))
    if len(shown) > MAX_FIGURES:
        parts.append(f"<p class=note>{len(shown) - MAX_FIGURES} more metrics are in the table only.</p>")
    return _page("Juice compare", parts)


# ---- trend ---------------------------------------------------------------------------------
def trend_figure(s: Series, metric: str) -> Figure:
    """One axis per stat: each run's value with its interval, in time order; a red dashed
    line between two runs where a step is real."""
    stats = [st for m, st in s.metrics() if m == metric]
    with matplotlib.rc_context(_RC):
        fig = new_figure(4.2 * len(stats) + 0.8, 3.4, bottom=0.75, top=0.45)
        axes = fig.subplots(1, len(stats), squeeze=False)[0]
        ticks = [f"{i + 1}\n{r.when[5:16]}" for i, r in enumerate(s.runs)]
        for k, (ax, stat) in enumerate(zip(axes, stats, strict=True)):
            pts = [p for p in s.points if p.metric == metric and p.stat == stat]
            x = np.array([p.run for p in pts], dtype=float)
            y = np.array([p.value for p in pts])
            lo = np.array([p.lo if not math.isnan(p.lo) else p.value for p in pts])
            hi = np.array([p.hi if not math.isnan(p.hi) else p.value for p in pts])
            ax.errorbar(x, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)], fmt="o-",
                        color=PALETTE[k % len(PALETTE)], capsize=3, linewidth=1, markersize=4)
            for st in s.steps:
                if st.metric == metric and st.stat == stat and st.verdict == "real":
                    ax.axvline(st.before + 0.5, color="#e15759", linestyle="--", linewidth=1)
            ax.set_xticks(range(len(s.runs)), ticks, fontsize=7)
            ax.set_xlim(-0.5, len(s.runs) - 0.5)
            ax.set_title(stat)
            ax.set_ylabel(_unit_of(metric))
            ax.grid(True, axis="y", alpha=0.3)
        fig.suptitle(metric)
    return fig


def trend_page(series: Sequence[Series], level: float) -> str:
    parts = []
    tests = sum(len(s.steps) for s in series)
    real = sum(st.verdict == "real" for s in series for st in s.steps)
    parts.append(f"<p>{len(series)} configurations; {level:.0%} bootstrap intervals per run; a step "
                 f"between consecutive runs is real when its Holm-corrected p-value (over the "
                 f"{tests} step tests) is below {1 - level:.3g}: <b>{real} real steps</b>.</p>")
    figures = 0
    for n, s in enumerate(series, 1):
        parts.append(f"<h2>Series {n}: {len(s.runs)} runs</h2><p class=note>{escape(s.label)}</p>")
        parts.append(table_html(pd.DataFrame([{"run": i + 1, "when (UTC)": r.when, "name": r.name,
                                               "iterations": r.n}
                                              for i, r in enumerate(s.runs)])))
        if len(s.runs) < 2:
            parts.append("<p>One run: no trend.</p>")
            continue
        steps = [st for st in s.steps if st.verdict == "real"]
        if steps:
            parts.append("<h3>Step changes</h3>" + table_html(pd.DataFrame([{
                "metric": st.metric, "stat": st.stat, "between": f"run {st.before + 1} → {st.after + 1}",
                "Δ": st.delta, "lo": st.lo, "hi": st.hi, "p_holm": st.p_holm} for st in steps])))
        else:
            parts.append("<p>No step change beyond noise.</p>")
        for metric in dict.fromkeys(m for m, _ in s.metrics()):
            if figures >= MAX_FIGURES:
                break
            parts.append(figure_html(trend_figure(s, metric)))
            figures += 1
        parts.append("<details><summary>Every value</summary>" + table_html(pd.DataFrame([{
            "metric": p.metric, "stat": p.stat, "run": p.run + 1, "value": p.value, "lo": p.lo,
            "hi": p.hi, "n": p.n} for p in s.points])) + "</details>")
    if figures >= MAX_FIGURES:
        parts.append(f"<p class=note>Figures stop at {MAX_FIGURES}; the tables have every metric.</p>")
    return _page("Juice trend", parts)
