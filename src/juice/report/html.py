"""The HTML report: ONE self-contained file (inline CSS, figures as base64 SVG ``<img>``, no
script, no external fetch), re-made from the stored results alone, written atomically.

    from juice.report import render
    render([Path("results/keystone")], Path("report.html"))

Content: provenance (runs, parameters, versions, host facts, WAN backend, skipped runs); the
outline tables; %reads/%writes; per scenario the stacked-bar tiles per rdbms (by sites, by
delay, by zones when they vary) with λ and σ, the CDFs, and the describe tables. Bars and
CDFs drop, per run, the iterations above the 95th percentile of the run's totals (the seed's
``filter_percentile(.95, ...)``; ``filter_q=None`` keeps them all); tables use every iteration.

Other modules add sections with ``render(..., sections=[fn])`` (or ``register_section(fn)``),
``fn(paths) -> str | None`` (``paths``: a list of the paths given) returning an HTML
fragment: make one with :func:`figure_html` and :func:`table_html`.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice import __version__
from juice.analysis.describe import percentile_drop_keys
from juice.analysis.stats import iteration_key, iteration_totals, operation_order, runs_table, varying
from juice.errors import UserError
from juice.report import keystone
from juice.report.figures import figure_html, op_colors
from juice.report.tables import fmt, table_html
from juice.results import tidy
from juice.util import atomic

Section = Callable[[list[Path]], "str | None"]  # a function taking Sequence[Path] fits too
_REGISTERED: list[Section] = []

__all__ = ["Section", "figure_html", "register_section", "render", "render_html", "table_html"]


def register_section(fn: Section) -> Section:
    """Add ``fn`` to every report (``juice report`` included); usable as a decorator. Sections
    passed to :func:`render` come after the registered ones."""
    if fn not in _REGISTERED:
        _REGISTERED.append(fn)
    return fn

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;margin-top:2em}
h3{margin-top:1.4em}
table.data{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}
table.data th,table.data td{border:1px solid #ddd;padding:2px 6px;text-align:left}
table.data th{background:#f3f3f3}table.data td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure img{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}
.note{color:#555;font-size:13px}details{margin:.5em 0}code{background:#f3f3f3;padding:0 3px}
"""


def _manifests(runs: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        try:
            out.append({"_dir": r.name, **tidy.read_manifest(r)})
        except Exception:  # provenance is best effort; the data were already loaded
            out.append({"_dir": r.name})
    return out


def _distinct(values: list[Any]) -> str:
    seen: list[str] = []
    for v in values:
        s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        if s not in seen:
            seen.append(s)
    return "; ".join(seen)


def _provenance(paths: Sequence[Path], found: tidy.Discovery, df: pd.DataFrame, it: pd.DataFrame,
                manifests: list[dict[str, Any]], out: Path, filter_q: float | None) -> str:
    cmd = f"juice report {' '.join(shlex.quote(str(p)) for p in paths)} -o {shlex.quote(str(out))}"
    n_runs = int(df["run"].nunique())
    skipped = ""
    if found.failed or found.partial:
        names = ", ".join(p.name for p in [*found.failed, *found.partial][:20])
        skipped = (f"<p class=note>Skipped: {len(found.failed)} failed and {len(found.partial)} "
                   f"incomplete run directories ({escape(names)}).</p>")
    runs = runs_table(df)
    var = varying(df)
    const = {c: runs[c].iloc[0] for c in runs.columns if c != "run" and c not in var}
    rows = [{"parameter": k, "value": fmt(v)} for k, v in const.items()]
    rows += [{"parameter": k, "value": ", ".join(fmt(v) for v in sorted(
        runs[k].drop_duplicates().tolist(), key=keystone._key))} for k in var if k not in keystone.POOLED]
    facts: list[dict[str, str]] = []
    keys: dict[str, list[Any]] = {}
    for m in manifests:
        for k, v in m.items():
            if k in ("versions",) and isinstance(v, Mapping):
                for vk, vv in v.items():
                    keys.setdefault(f"version: {vk}", []).append(vv)
            elif k == "juice":
                keys.setdefault("version: juice (runs)", []).append(v)
            elif k == "wan" and isinstance(v, Mapping):  # the runner's WAN record: backend + check
                chk = v.get("check")
                status = ("not checked" if not isinstance(chk, Mapping)
                          else "check passed" if chk.get("ok") else "check FAILED")
                keys.setdefault("WAN emulation", []).append(f"{v.get('backend')} ({status})")
            elif k == "host" or "wan" in k.lower() or k == "backend":
                keys.setdefault(k, []).append(v)
    facts = [{"fact": k, "value": _distinct(v)} for k, v in keys.items()]
    per_run = it.groupby(it["run"].astype(str), sort=True).agg(
        iterations=("failed", "size"), failures=("failed", "sum")).reset_index()
    per_run["lam"] = per_run["failures"] / per_run["iterations"]
    shown = [c for c in var if c not in keystone.POOLED or c == "repetition"]
    rt = runs.astype({"run": str})[["run", *shown]].merge(per_run, on="run", how="left")
    flt = (f"bars and CDFs leave out, per run, the iterations above the {filter_q:.0%} quantile of "
           "the run's totals (as the seed's <code>filter_percentile</code>); tables use every iteration"
           if filter_q else "bars, CDFs and tables use every iteration")
    return (f"<p class=note>Generated {escape(dt.datetime.now().isoformat(timespec='seconds'))} by "
            f"juice {escape(__version__)} from {escape(', '.join(str(p) for p in paths))}: "
            f"{n_runs} runs, {len(it)} iterations, {int(it['failed'].sum())} failed. "
            f"Re-make it with <code>{escape(cmd)}</code>.</p>{skipped}"
            f"<p class=note>An iteration's total is the sum of its top-level atomic actions; "
            f"λ = failed iterations / iterations; σ = standard deviation of the totals of "
            f"successful iterations; delays are one-way. {flt}.</p>"
            "<h3>Parameters</h3>" + table_html(pd.DataFrame(rows, columns=["parameter", "value"]))
            + ("<h3>Versions, host, WAN</h3>" + table_html(pd.DataFrame(facts)) if facts else "")
            + f"<details><summary>{len(rt)} runs</summary>{table_html(rt, digits=3)}</details>")


def _rwratio(manifests: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for m in manifests:
        rw = m.get("rwratio")
        if isinstance(rw, Mapping):
            rows.append({"run": m["_dir"], **{k: rw.get(k) for k in
                                                 ("pct_reads", "pct_writes", "reads", "writes")}})
    return pd.DataFrame(rows, columns=["run", "pct_reads", "pct_writes", "reads", "writes"])


def _keystone_body(paths: Sequence[Path], found: tidy.Discovery, df: pd.DataFrame,
                   manifests: list[dict[str, Any]], out_html: Path, filter_q: float | None) -> list[str]:
    it = iteration_totals(df)
    if filter_q:
        drop = percentile_drop_keys(it, filter_q, ("run",))
        keep = ~np.isin(iteration_key(df), drop)
        df_f = df.loc[keep, keystone.needed(df)] if len(drop) else df
        it_f = it[~np.isin(it["key"].to_numpy(), drop)] if len(drop) else it
    else:
        df_f, it_f = df, it
    data = keystone.Data(df=df, it=it, df_f=df_f, it_f=it_f, rw=_rwratio(manifests))
    colors = op_colors(operation_order(df))
    body = [_provenance(paths, found, df, it, manifests, out_html, filter_q),
            "<h2>Outline</h2>", keystone.outline_tables(data)]
    rw = keystone.rwratio_table(data)
    if rw:
        body += ["<h2>%reads / %writes</h2>", "<p class=note>Statement counters of the database "
                 "around each run's window (reads: SELECT; writes: INSERT, UPDATE, DELETE, REPLACE); "
                 "mean over runs.</p>", rw]
    scenarios: list[Any] = (sorted(df["scenario"].dropna().unique().tolist(), key=str)
                            if "scenario" in df.columns else [None])
    for s in scenarios:
        body.append(f"<h2>{escape(str(s) if s is not None else 'All runs')}</h2>")
        body.extend(keystone.scenario_figures(data, s, colors))
        body += ["<h3>Per operation (seconds, every iteration)</h3>", keystone.describe_tables(data, s)]
    return body


def _provenance_short(paths: Sequence[Path], found: tidy.Discovery, manifests: list[dict[str, Any]],
                      out: Path) -> str:
    cmd = f"juice report {' '.join(shlex.quote(str(p)) for p in paths)} -o {shlex.quote(str(out))}"
    skipped = f" {len(found.failed)} failed runs skipped." if found.failed else ""
    return (f"<p class=note>Generated {escape(dt.datetime.now().isoformat(timespec='seconds'))} by "
            f"juice {escape(__version__)} from {escape(', '.join(str(p) for p in paths))}: "
            f"{len(manifests)} runs.{skipped} Re-make it with <code>{escape(cmd)}</code>.</p>")


def render_html(paths: Sequence[Path], out_html: Path, sections: Sequence[Section] | None = None,
                filter_q: float | None = 0.95, params: Mapping[str, Any] | None = None,
                title: str = "Juice report") -> str:
    """The report's HTML text (see :func:`render`)."""
    found = tidy.discover(paths)
    df = tidy.load(paths, params, allow_empty=True)
    manifests = _manifests(found.runs)
    if df.empty:  # runs without iterations (e.g. scheduler-db): their sections say it all
        body = [f"<h1>{escape(title)}</h1>", _provenance_short(paths, found, manifests, out_html)]
    else:
        body = [f"<h1>{escape(title)}</h1>", *_keystone_body(paths, found, df, manifests, out_html,
                                                             filter_q)]
    extra = 0
    for fn in [*_REGISTERED, *(sections or [])]:
        frag = fn(list(paths))
        if frag:
            body.append(frag)
            extra += 1
    if df.empty and not extra:
        raise UserError(f"{', '.join(str(p) for p in paths)}: the runs hold no iteration (and no "
                        "report section knows them): nothing to report")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def render(paths: Sequence[Path], out_html: Path, sections: Sequence[Section] | None = None,
           filter_q: float | None = 0.95, params: Mapping[str, Any] | None = None) -> Path:
    """Write the self-contained report of the runs under ``paths`` to ``out_html``
    (atomically) and return its path. UserError when no complete run is found."""
    text = render_html(paths, out_html, sections, filter_q, params)
    atomic.write_text(out_html, text)
    return out_html
