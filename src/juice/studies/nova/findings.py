"""The nova section's findings, computed from the runs (``report.load``'s frame): the knee
(boot time at the highest vs the lowest concurrency), schedulers side by side at the highest
concurrency, where failures start, boot time vs VMs running, the commonest failure.

Boot times are Rally's (``rally_boot_s`` of the boots that reached ACTIVE, from each run's
``boots.parquet``; clusters = runs); a run without that file counts by its median.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from juice.report.findings import BROKEN, Finding, contrast, num, run_order_of_dirs, with_ci
from juice.studies.nova import invariants

CONFIG = ["scenario", "db", "schedulers", "host_subset_size", "concurrency_backend", "max_pool_size",
          "delay_ms", "galera_writers"]


def boot_times(runs: pd.DataFrame) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.str_]]:
    """(boot seconds, run of each) over ``runs``: every ACTIVE boot's Rally time."""
    vals: list[float] = []
    who: list[str] = []
    for _, r in runs.iterrows():
        f = Path(str(r["dir"])) / "boots.parquet"
        if f.exists():
            b = pd.read_parquet(f, columns=["ok", "rally_boot_s"])
            v: npt.NDArray[np.float64] = b.loc[b["ok"].astype(bool), "rally_boot_s"].dropna().to_numpy(float)
        else:
            v = np.asarray([r.get("rally_median")], dtype=float)
        vals += [float(x) for x in v]
        who += [str(r["run"])] * len(v)
    return np.asarray(vals, dtype=float), np.asarray(who)


def _cmp(a: pd.DataFrame, b: pd.DataFrame, key: object):  # type: ignore[no-untyped-def]
    va, ca = boot_times(a)
    vb, cb = boot_times(b)
    order = run_order_of_dirs([*a["dir"], *b["dir"]]) if "dir" in a and "dir" in b else None
    return contrast(va, vb, ca, cb, key=("nova", key), stat="median", order=order)


def _scenario(s: str) -> str:
    return str(s).split(".")[-1]


def invariant_findings(df: pd.DataFrame) -> list[Finding]:
    """One sentence on what must hold after every run (``juice.studies.nova.invariants``): the
    broken ones named (a finding, never silent), else how many runs were checked."""
    if df.empty or "dir" not in df.columns:
        return []
    n, bad, runs = invariants.summary([Path(str(d)) for d in df["dir"]])
    if not n:
        return []
    if not bad:
        return [Finding(f"Invariants held after every run checked ({n} of {len(df)}): no resource "
                        "provider over its capacity × allocation ratio, no allocation left without "
                        "its server")]
    first = runs[0]
    return [Finding(f"INVARIANT BROKEN in {bad} of {n} runs checked: {first.run}: "
                    + "; ".join(first.broken[:3]) + (" …" if len(first.broken) > 3 else ""), BROKEN)]


def findings(df: pd.DataFrame) -> list[Finding]:
    out: list[Finding] = invariant_findings(df)
    if df.empty or "concurrency" not in df.columns:
        return out
    pre = df["preload"].fillna(0) if "preload" in df.columns else pd.Series(0, index=df.index)
    base = df[pre == pre.min()]
    levels = sorted(base["concurrency"].dropna().unique())
    sched = sorted(base["schedulers"].dropna().unique()) if "schedulers" in base.columns else [None]
    s0 = sched[0]
    on = base if s0 is None else base[base["schedulers"] == s0]
    if len(levels) >= 2:
        lo, hi = levels[0], levels[-1]
        c = _cmp(on[on["concurrency"] == lo], on[on["concurrency"] == hi], ("knee", lo, hi))
        who = f" with {s0} scheduler{'s' if s0 != 1 else ''}" if s0 is not None else ""
        out.append(Finding(f"At {hi:g} concurrent boots{who}, a boot takes {with_ci(c.b)} (median) "
                           f"against {with_ci(c.a)} at {lo:g} ({c.ratio_text})", c.verdict))
    if len(sched) >= 2 and levels:
        hi = levels[-1]
        at = base[base["concurrency"] == hi]
        c = _cmp(at[at["schedulers"] == sched[0]], at[at["schedulers"] == sched[-1]], ("sched", hi))
        out.append(Finding(f"{sched[-1]:g} schedulers vs {sched[0]:g} at {hi:g} concurrent boots: "
                           f"{with_ci(c.b)} against {with_ci(c.a)} ({c.ratio_text})", c.verdict))
    fails = base.groupby("concurrency")["failed"].sum() if "failed" in base.columns else pd.Series()
    if len(fails):
        bad = [float(str(c)) for c, f in fails.items() if f > 0]
        ok = [float(str(c)) for c, f in fails.items() if f == 0]
        at = f" with {pre.min():,.0f} VMs running" if pre.nunique() > 1 else ""
        if not bad:
            out.append(Finding(f"No boot failed{at}, up to {max(ok):g} concurrent boots "
                               f"({int(base['boots'].sum())} boots)"))
        else:
            first = min(bad)
            pct = 100 * base[base["concurrency"] == first]["failed"].sum() / max(
                1, base[base["concurrency"] == first]["boots"].sum())
            below = [c for c in ok if c < first]
            out.append(Finding(f"Failures start at {first:g} concurrent boots{at} ({num(pct, '%', 2)} of "
                               "them failed)" + (f"; none up to {max(below):g}" if below else "")))
    if "running_vms" in df.columns and df["running_vms"].nunique() >= 2:
        vm = df.dropna(subset=["running_vms"])
        conc = vm.groupby("concurrency")["running_vms"].nunique().idxmax()
        vm = vm[vm["concurrency"] == conc]
        lo, hi = vm["running_vms"].min(), vm["running_vms"].max()
        c = _cmp(vm[vm["running_vms"] == lo], vm[vm["running_vms"] == hi], ("preload", lo, hi))
        failed = ""
        if "failed" in vm.columns and "boots" in vm.columns:
            def share(g: pd.DataFrame) -> str:
                return f"{int(g['failed'].sum())} of {int(g['boots'].sum())}"
            failed = (f"; boots failed: {share(vm[vm['running_vms'] == hi])} against "
                      f"{share(vm[vm['running_vms'] == lo])}, and a failed boot has no time")
        out.append(Finding(f"With {hi:,.0f} VMs already running, a boot takes {with_ci(c.b)} against "
                           f"{with_ci(c.a)} with {lo:,.0f} ({c.ratio_text}, at {conc:g} concurrent)"
                           + failed, c.verdict))
    faults: Counter[str] = Counter()
    for f in df.get("faults", pd.Series(dtype=str)):
        for k, v in json.loads(f or "{}").items():
            faults[k] += int(v)
    if faults:
        msg, n = faults.most_common(1)[0]
        out.append(Finding(f"Commonest failure ({n} of {sum(faults.values())}): {msg[:120]}"))
    if "scenario" in df.columns and df["scenario"].nunique() > 1:
        out.append(Finding("Scenarios: " + ", ".join(_scenario(s) for s in sorted(df["scenario"].unique()))
                           + " (the findings above pool them)"))
    return out


def phase_findings(means: pd.DataFrame) -> list[Finding]:
    """From the traced boots' mean seconds per phase, a row per concurrency (``juice.trace.
    report.phase_means``): which phase dominates a boot, and from which concurrency on, e.g.
    "The claim phase dominates above 20 concurrent boots (41 % of a boot at 60)"."""
    if means.empty:
        return []
    m = means.sort_index()
    share = m.div(m.sum(axis=1).replace(0, np.nan), axis=0)
    top = share.idxmax(axis=1)
    last = str(top.iloc[-1])
    key = str(m.index.name or "concurrency")
    what = "concurrent boots" if key == "concurrency" else f"({key})"
    at = f"{100 * float(share[last].iloc[-1]):.0f} % of a boot at {m.index[-1]:g}"
    if len(m) < 2:
        return [Finding(f"The {last} phase dominates at {m.index[-1]:g} {what} ({at})")]
    i = len(top) - 1
    while i > 0 and str(top.iloc[i - 1]) == last:
        i -= 1
    if i == 0:
        return [Finding(f"The {last} phase dominates at every concurrency traced, {m.index[0]:g} to "
                        f"{m.index[-1]:g} {what} ({at})")]
    before = str(top.iloc[i - 1])
    return [Finding(f"The {last} phase dominates above {m.index[i - 1]:g} {what} ({at}); "
                    f"the {before} phase below")]
