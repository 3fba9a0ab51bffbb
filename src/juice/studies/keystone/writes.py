"""Writes by table in the Keystone report: the manifests' ``write_attribution`` (runs made with
``keystone.write_attribution``, ``juice.services.databases.attribution``) as a table under %reads/%writes,
and a comparison with the seed's totals.

Seed 000 (Keystone of devstack stable/pike on MariaDB, ``Com_*`` counters) gives only each
scenario's %reads/%writes, no table: the comparison says how many writes the seed's ratio
would give for the run's reads, how many more (or fewer) Juice's Keystone made, and which
tables took the most writes. Runs without the field (older runs, or made without the option)
are simply not in the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from juice.report.findings import Finding, num
from juice.report.tables import table_html

WRITES = ("insert", "update", "delete", "replace", "merge")
# seed 000, "List of Rally scenarios": %writes per scenario (MariaDB, Com_* around the run)
SEED_PCT_WRITES = {
    "authenticate_user_and_validate_token": 3.54, "create_add_and_list_user_roles": 3.78,
    "create_and_list_tenants": 7.88, "get_entities": 8.1, "create_user_update_password": 10.21,
    "create_user_set_enabled_and_delete": 8.93, "create_and_list_users": 7.95}


def frame(manifests: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (run, kind, table, columns) of the runs with write attribution."""
    rows = []
    for m in manifests:
        wa, params = m.get("write_attribution"), m.get("params")
        if not isinstance(wa, Mapping) or not isinstance(params, Mapping):
            continue
        base = {"run": str(m.get("_dir")), "scenario": str(params.get("scenario", "")).split(".")[-1],
                "rdbms": params.get("rdbms"), "run_reads": wa.get("reads"), "run_writes": wa.get("writes")}
        for r in wa.get("rows") or []:
            if isinstance(r, Mapping):
                rows.append({**base, "kind": r.get("kind"), "table": r.get("table") or "(none)",
                             "columns": ", ".join(r.get("columns") or []), "statements": r.get("statements")})
    return pd.DataFrame(rows)


def writes_table(f: pd.DataFrame) -> pd.DataFrame:
    """Writes per run by scenario, rdbms, kind, table and SET columns (mean over runs), with
    their share of the run's writes."""
    w = f[f["kind"].isin(WRITES)]
    if w.empty:
        return pd.DataFrame()
    n_runs = f.groupby(["scenario", "rdbms"])["run"].nunique().rename("runs")
    w = w.assign(share=100.0 * w["statements"] / w["run_writes"].where(w["run_writes"] > 0))
    t = w.groupby(["scenario", "rdbms", "kind", "table", "columns"], sort=False).agg(
        total=("statements", "sum"), share=("share", "sum")).reset_index()
    t = t.join(n_runs, on=["scenario", "rdbms"])
    t["per run"] = t["total"] / t["runs"]
    t["% of writes"] = t["share"] / t["runs"]
    t = t.sort_values(["scenario", "rdbms", "per run"], ascending=[True, True, False], kind="stable")
    return t[["scenario", "rdbms", "kind", "table", "columns", "per run", "% of writes", "runs"]]


def reads_table(f: pd.DataFrame, top: int = 12) -> pd.DataFrame:
    r = f[f["kind"] == "select"]
    if r.empty:
        return pd.DataFrame()
    n_runs = f.groupby(["scenario", "rdbms"])["run"].nunique().rename("runs")
    t = r.groupby(["scenario", "rdbms", "table"], sort=False)["statements"].sum().reset_index().join(
        n_runs, on=["scenario", "rdbms"])
    t["per run"] = t["statements"] / t["runs"]
    t = t.sort_values(["scenario", "rdbms", "per run"], ascending=[True, True, False], kind="stable")
    return t.groupby(["scenario", "rdbms"], sort=False).head(top)[["scenario", "rdbms", "table", "per run",
                                                                   "runs"]]


def seed_findings(f: pd.DataFrame) -> list[Finding]:
    """Per scenario with a seed ratio: the writes the seed's ratio would give for these reads,
    against Juice's, and the tables that took the most writes."""
    out: list[Finding] = []
    if f.empty:
        return out
    runs = f.drop_duplicates("run")
    wt = writes_table(f)
    for (scen, rdbms), g in runs.groupby(["scenario", "rdbms"], sort=True):
        seed = SEED_PCT_WRITES.get(str(scen))
        reads, writes = float(g["run_reads"].mean()), float(g["run_writes"].mean())
        if seed is None or not reads + writes:
            continue
        at_seed = reads * seed / (100.0 - seed)
        top = wt[(wt["scenario"] == scen) & (wt["rdbms"] == rdbms)].head(4)
        where = "; ".join(f"{r.kind} {r.table}" + (f" ({r.columns})" if r.columns else "")
                          + f" {num(float(r[5]), '', 3)}" for r in top.itertuples(index=False))
        out.append(Finding(
            f"{scen} on {rdbms}: {num(100 * writes / (reads + writes), '%')} writes against "
            f"{seed:g}% in the seed (stable/pike, totals only): at the seed's ratio its "
            f"{num(reads, '', 4)} reads per run would come with {num(at_seed, '', 3)} writes, it made "
            f"{num(writes, '', 4)} ({num(writes - at_seed, '', 3)} more); most writes per run: {where}"))
    return out


def section(manifests: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Finding]]:
    """The HTML parts under %reads/%writes and the findings ([] without attributed runs)."""
    f = frame(manifests)
    if f.empty:
        return [], []
    wt, rt = writes_table(f), reads_table(f)
    sources = sorted({str(m["write_attribution"].get("source")) for m in manifests
                      if isinstance(m.get("write_attribution"), Mapping)})
    parts = ["<h3>Writes by table</h3>",
             "<p class=note>Statements of each run's window by kind and table (an UPDATE: the columns it "
             f"sets), from the database's own statistics ({', '.join(sources)}); mean per run and "
             "share of the run's writes. On MariaDB/Galera this needs performance_schema ON "
             "(keystone.write_attribution), a deviation from the server's defaults.</p>"]
    if not wt.empty:
        parts.append(table_html(wt, digits=3))
    if not rt.empty:
        parts += ["<details><summary>Reads by table (most read first)</summary>",
                  table_html(rt, digits=3), "</details>"]
    return parts, seed_findings(f)
