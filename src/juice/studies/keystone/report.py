"""The Keystone study's report section (seed 000's shape), re-made from stored runs alone.

Content: provenance (runs, parameters, versions, host facts, WAN backend, skipped runs); the
outline tables; %reads/%writes and the writes by table (``writes``); the run order and its
effect (``runorder``); per scenario the stacked-bar tiles per rdbms (by sites, by
delay, by zones when they vary) with λ and σ, the CDFs, and the describe tables; Keystone and
database CPU per site (faults, servers' errors and resource profiles: the frame's,
``juice.report.shared``). Bars and
CDFs drop, per run, the iterations above the 95th percentile of the run's totals (the seed's
``filter_percentile(.95, ...)``; ``filter_q=None`` keeps them all); tables use every iteration.

Its data are the iterations of Keystone runs and of imported Rally JSON files (whatever their
scenarios: the Rally-style tables and figures fit any of them). Recorded fields that are not run
parameters but differ between the runs (deployment facts, server settings, versions, the host:
``juice.analysis.configkey``) become columns like parameters (``keyed``), so every table, figure
and finding keys on them; the findings are made per value of any varying field they do not
compare themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice.analysis import configkey
from juice.analysis.describe import percentile_drop_keys
from juice.analysis.stats import iteration_key, iteration_totals, operation_order, runs_table, varying
from juice.contract import ReportInput
from juice.report.figures import op_colors
from juice.report.tables import fmt, table_html
from juice.results import tidy
from juice.studies.keystone import figures as keystone


def _manifests(runs: Sequence[Path]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for r in runs:
        try:
            out.append({"_dir": r.name, **tidy.read_manifest(r)})
        except Exception:  # provenance is best effort; the data were already loaded
            out.append({"_dir": r.name})
    return out


# the manifests' sections whose fields join the run parameters in the configuration key
SECTIONS = ("deployment", "deviations", "versions", "host", "runner", "scenario_args", "contexts")
FOUND_BY_FINDINGS = ("scenario", "rdbms", "delay_ms", "sites")  # what the findings compare themselves


@dataclass(frozen=True)
class Keyed:
    """The recorded fields beyond the run parameters that tell runs apart (columns of the
    frame now), the sentences on runs pooled though they may differ, and the manifests with
    those fields among their ``params`` (for what keys points by their params: the run order)."""

    extra: list[str]
    notes: list[str]
    manifests: list[dict[str, object]]


def keyed(df: pd.DataFrame, manifests: list[dict[str, Any]]) -> tuple[pd.DataFrame, Keyed]:
    """``df`` with a column per recorded field that is not a run parameter and tells its runs
    apart (``juice.analysis.configkey``): every table, figure and finding then keys on it as on
    a parameter (facets, groups)."""
    runs = runs_table(df)
    base = [c for c in tidy.param_columns(df) if c not in keystone.POOLED]
    by_dir = {str(m.get("_dir")): m for m in manifests}
    rows: dict[str, dict[str, object]] = {}
    for r in runs.to_dict("records"):
        name = str(r["run"])
        row = {k: r[k] for k in base}
        m = by_dir.get(name)
        if m is not None:
            row.update({k: v for k, v in configkey.fields(m, SECTIONS).items() if k not in row})
        rows[name] = row
    extra = configkey.key_fields(list(rows.values()), base)
    for f in extra:
        df[f] = configkey.run_column(df["run"], {n: r.get(f) for n, r in rows.items()})
    mine = [m for m in manifests if str(m.get("_dir")) in rows]
    notes = configkey.unrecorded(mine, [rows[str(m.get("_dir"))] for m in mine], [*base, *extra],
                                 [str(m.get("_dir")) for m in mine])
    aug = [{**m, "params": {**(m.get("params") or {}),
                            **{f: rows[str(m.get("_dir"))].get(f) for f in extra}}}
           if extra and str(m.get("_dir")) in rows else m for m in manifests]
    return df, Keyed(extra, notes, aug)


def _distinct(values: list[object]) -> str:
    seen: list[str] = []
    for v in values:
        s = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        if s not in seen:
            seen.append(s)
    return "; ".join(seen)


def _provenance(found: tidy.Discovery, df: pd.DataFrame, it: pd.DataFrame,
                manifests: list[dict[str, object]], filter_q: float | None, key: Keyed | None = None) -> str:
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
    keys: dict[str, list[object]] = {}
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
    return (f"<p class=note>Keystone study and Rally files: {n_runs} runs, {len(it)} iterations, "
            f"{int(it['failed'].sum())} failed.</p>{skipped}"
            f"<p class=note>An iteration's total is the sum of its top-level atomic actions; "
            f"λ = failed iterations / iterations; σ = standard deviation of the totals of "
            f"successful iterations; delays are one-way. {flt}.</p>"
            "<h3>Parameters</h3>" + table_html(pd.DataFrame(rows, columns=["parameter", "value"]))
            + (configkey.notes_html(key.extra, key.notes) if key is not None else "")
            + ("<h3>Versions, host, WAN</h3>" + table_html(pd.DataFrame(facts)) if facts else "")
            + f"<details><summary>{len(rt)} runs</summary><div class=tw>{table_html(rt, digits=3)}</div>"
            "</details>")


def _rwratio(manifests: list[dict[str, object]]) -> pd.DataFrame:
    rows = []
    for m in manifests:
        rw = m.get("rwratio")
        if isinstance(rw, Mapping):
            rows.append({"run": m["_dir"], **{k: rw.get(k) for k in
                                                 ("pct_reads", "pct_writes", "reads", "writes")}})
    return pd.DataFrame(rows, columns=["run", "pct_reads", "pct_writes", "reads", "writes"])


def sections(inputs: ReportInput) -> list[str]:
    """The section over the Keystone runs and Rally files among ``inputs.paths`` ([] if none).
    Runs of other studies (their manifests name another ``workload``) are left to them."""
    found = tidy.discover(inputs.paths)
    mine = [d for d in found.runs if _is_keystone(d)]
    if not mine and not found.rally_files:
        return []
    df = tidy.load([*mine, *found.rally_files], inputs.params, allow_empty=True)
    if df.empty:
        return []
    manifests = _manifests(mine)
    df, key = keyed(df, manifests)
    # faults, servers' errors and resource profiles: the frame's (juice.report.shared)
    return _body(found, df, manifests, inputs.filter_q, key) + _site_cpu(mine, df)


# ---- resource profiles (runs without profile.parquet, e.g. made by juice 0.1, have none) ----

ROLES = ("keystone", "database")
GROUPS = ("rdbms", "sites", "delay_ms", "cache")


def site_cpu_table(data: Any, windows: Mapping[str, tuple[float, float]]) -> pd.DataFrame:
    """Keystone and database CPU (% of one core, all their processes) per site, light vs high
    load: the mean over the drivers' window and the peak sample, averaged (mean) / maxed (peak)
    over the runs of each (varying parameters, site, load)."""
    from juice.profile.report import window_mean_peak

    wm = window_mean_peak(data.u, "cpu_pct", windows)
    if wm.empty:
        return pd.DataFrame()
    rows = []
    for r in wm.itertuples(index=False):
        params = data.params(str(r.run))
        comp = str(r.component)
        role = "keystone" if comp == "keystone" else "database" if comp == params.get("rdbms") else None
        site = int(str(r.site))
        if role is None or site == 0:
            continue
        rows.append({**{g: params.get(g) for g in GROUPS}, "site": site,
                     "load": str(params.get("load", "?")), "role": role, "mean": r.mean, "peak": r.peak})
    if not rows:
        return pd.DataFrame()
    t = pd.DataFrame(rows)
    keep = [g for g in GROUPS if g == "rdbms" or t[g].astype(str).nunique() > 1]
    t[keep] = t[keep].astype(str)
    agg = t.groupby([*keep, "site", "role", "load"], sort=False).agg(mean=("mean", "mean"),
                                                                    peak=("peak", "max"))
    wide = agg.unstack(["role", "load"])  # type: ignore[arg-type]
    loads = [x for x in ("light", "high") if x in t["load"].unique()] + sorted(
        x for x in t["load"].unique() if x not in ("light", "high"))
    cols, names = [], []
    for role in ROLES:
        for load in loads:
            for stat in ("mean", "peak"):
                if (stat, role, load) in wide.columns:
                    cols.append((stat, role, load))
                    names.append(f"{role} {load} ({stat})")
    out = wide.loc[:, cols]
    out.columns = pd.Index(names)
    return out.reset_index().sort_values([*keep, "site"], kind="stable")


def _site_cpu(mine: Sequence[Path], df: pd.DataFrame) -> list[str]:
    from juice.profile import report as profile_report

    data = profile_report.read(mine)
    if data is None:
        return []
    from juice.report.shared import windows

    table = site_cpu_table(data, windows(df))
    body: list[str] = []
    if not table.empty:
        body += ["<h3>Keystone and database CPU per site, light vs high load</h3>",
                 "<p class=note>% of one core, summed over the component's processes in the site "
                 "(gunicorn master and workers; the database server); mean over the drivers' window "
                 "(first iteration start to last iteration end) and peak sample. Light load drives "
                 "site 1 only; high load every site at once.</p>", table_html(table, digits=3)]
    return body


def _targets(manifests: list[dict[str, object]]) -> list[str]:
    """Runs against existing clouds: the endpoints, their measured RTT, and what was not seen."""
    rows: list[dict[str, object]] = []
    missing: dict[str, str] = {}
    for m in manifests:
        t = m.get("target")
        if not isinstance(t, Mapping):
            continue
        missing.update(t.get("not_measured") or {})
        for region, r in (t.get("rtt") or {}).items():
            if region == "catalog" or not isinstance(r, Mapping):
                continue
            rows.append({"target": t.get("target"), "region": region, "url": r.get("url"),
                         "TCP connect median (ms)": (r.get("tcp") or {}).get("median_ms"),
                         "GET /v3 median (ms)": (r.get("http") or {}).get("median_ms"),
                         "rate cap (req/s)": t.get("max_rps"),
                         "Juice lab": t.get("juice_lab") or "no"})
    if not rows:
        return []
    tab = pd.DataFrame(rows).drop_duplicates(subset=["target", "region", "url"])
    notes = "".join(f"<li>{escape(k)}: {escape(str(v))}</li>" for k, v in missing.items())
    return ["<h2>Existing cloud</h2>", "<p class=note>Runs against a cloud Juice did not deploy: drivers "
            "on this machine, no lab. The round trip to each endpoint was measured once before the runs "
            "(in place of a WAN spec). Not measured there:</p>", f"<ul>{notes}</ul>", table_html(tab)]


def _is_keystone(run_dir: Path) -> bool:
    try:
        workload = tidy.read_manifest(run_dir).get("workload", "keystone")
    except Exception:  # an unreadable manifest: its iterations decide (tidy.load says why)
        return True
    return bool(workload == "keystone")


def _body(found: tidy.Discovery, df: pd.DataFrame, manifests: list[dict[str, object]],
          filter_q: float | None, key: Keyed | None = None) -> list[str]:
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
    from juice.report.findings import findings_html, run_order
    from juice.studies.keystone import ordercause, runorder, seeds, writes

    by_table, write_found = writes.section(manifests)
    keyed_mans = key.manifests if key is not None else manifests
    order_parts, order_found = runorder.section(keyed_mans, it)
    cause_parts, cause_found = ordercause.section(keyed_mans, it)
    order_parts, order_found = order_parts + cause_parts, order_found + cause_found
    split = _split_findings(it, data.rw, varying(df), run_order(keyed_mans))
    body = [findings_html("Keystone", order_found + split + write_found),
            seeds.section(it, data.rw, manifests),
            _provenance(found, df, it, manifests, filter_q, key), *_targets(manifests),
            "<h2>Outline</h2>", keystone.outline_tables(data)]
    rw = keystone.rwratio_table(data)
    if rw or by_table:
        body += ["<h2>%reads / %writes</h2>"]
    if rw:
        body += ["<p class=note>Statement counters of the database "
                 "around each run's window (reads: SELECT; writes: INSERT, UPDATE, DELETE, REPLACE); "
                 "mean over runs.</p>", rw]
    body += by_table + order_parts
    scenarios: list[object] = (sorted(df["scenario"].dropna().unique().tolist(), key=str)
                            if "scenario" in df.columns else [None])
    for s in scenarios:
        body.append(f"<h2>{escape(str(s) if s is not None else 'All runs')}</h2>")
        body.extend(keystone.scenario_figures(data, s, colors))
        body += ["<h3>Per operation (seconds, every iteration)</h3>", keystone.describe_tables(data, s)]
        body += keystone.uncertainty_tables(data, s)
    return body



def _split_findings(it: pd.DataFrame, rw: pd.DataFrame, var: Sequence[str],
                    order: Mapping[str, float] | None = None) -> list[Any]:
    """The findings per group of runs that differ in a parameter (or recorded field) of ``var``
    the findings do not compare themselves (load, cache, zones...): none pools such runs."""
    from juice.studies.keystone.findings import findings

    groups = configkey.split(it, [c for c in var if c not in keystone.POOLED], FOUND_BY_FINDINGS)

    def of(g: pd.DataFrame) -> list[Any]:
        runs = set(g["run"].astype(str))
        return findings(g, rw[rw["run"].astype(str).isin(runs)] if len(groups) > 1 else rw, order)

    return configkey.relabel(groups, of, lambda f, lab: replace(f, text=f"{lab}: {f.text}"))


def describe_runs(paths: Sequence[Path], by: Sequence[str], params: Mapping[str, object],
                  filter_q: float | None) -> pd.DataFrame | None:
    """``juice analyze``: describe tables per operation (and the iteration Total) over the
    Keystone runs and Rally files under ``paths``, grouped by ``by``; None when there are none."""
    from juice.analysis.describe import describe, filter_percentile
    from juice.analysis.uncertainty import describe_ci, with_ci
    from juice.errors import UserError

    found = tidy.discover(paths)
    mine = [d for d in found.runs if _is_keystone(d)]
    if not mine and not found.rally_files:
        return None
    df = tidy.load([*mine, *found.rally_files], params)
    df, key = keyed(df, _manifests(mine))  # recorded fields that tell runs apart: --by them too
    known = tidy.param_columns(df)
    for b in by:
        if b not in known:
            raise UserError(f"--by: unknown parameter {b!r} (known: {', '.join(known)})")
    if filter_q is not None:
        df = filter_percentile(df, filter_q)
    table = with_ci(describe(df, by=list(by)), describe_ci(df, by=list(by)), list(by))
    skipped = len(found.failed)
    pooled = [c for c in varying(df) if c not in keystone.POOLED and c not in by]
    table.attrs["note"] = (f"{int(df['run'].nunique())} runs" + (f"; {skipped} failed runs skipped" if skipped
                                                                  else "")
                           + (f"; pooled over {', '.join(pooled)} (--by to split)" if pooled else "")
                           + "".join(f"; {n}" for n in key.notes))
    table.attrs["title"] = "seconds per operation"
    return table
