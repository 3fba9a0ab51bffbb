"""Seeds 002 and 004 beside the nova runs: the Juice value matching each row of ``seed.yaml``
(``juice.report.seeds``), from the runs (``report.load``'s frame: summaries, boots.parquet) and,
when the runs kept their logs, the traced boots' phases (``juice.trace``). A row whose data
are absent says "not measured here".
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from juice.report.findings import contrast, num, with_ci
from juice.report.seeds import (
    CONTEXT,
    DIFFERENT,
    SAME,
    UNDECIDED,
    Match,
    guarded,
    juice_conditions,
    load_references,
    plain,
    remote_hosts,
    seed_table,
    trend,
)
from juice.studies.nova.findings import boot_times

PACKAGE = "juice.studies.nova"
DEADLOCK = re.compile(r"deadlock|does not return rows", re.I)
NEUTRON = re.compile(r"neutron|port|allocate the network", re.I)
KEYSTONE = re.compile(r"not authorized|unauthorized|401|HTTP 500|authenticat|token", re.I)


def _base(df: pd.DataFrame) -> pd.DataFrame:
    pre = df["preload"].fillna(0) if "preload" in df.columns else pd.Series(0, index=df.index)
    out: pd.DataFrame = df[pre == pre.min()]
    return out


def _scale(df: pd.DataFrame) -> str:
    parts = []
    if "concurrency" in df.columns:
        lo, hi = df["concurrency"].min(), df["concurrency"].max()
        parts.append(f"concurrency {lo:g}" + (f"–{hi:g}" if hi != lo else ""))
    if "nodes" in df.columns and df["nodes"].notna().any():
        parts.append(f"{df['nodes'].max():g} simulated computes")
    if "schedulers" in df.columns:
        parts.append("schedulers " + "/".join(f"{s:g}" for s in sorted(df["schedulers"].dropna().unique())))
    if "db" in df.columns:
        parts.append("/".join(sorted(str(x) for x in df["db"].dropna().unique())))
    return ", ".join(parts)


def _failures(df: pd.DataFrame) -> list[Match]:
    out: list[Match] = []
    base = _base(df)
    if "failed" not in base.columns or "boots" not in base.columns or base.empty:
        return out
    per = base.groupby("concurrency")[["failed", "boots"]].sum()
    bad = [float(str(c)) for c, f in per["failed"].items() if f > 0]
    ok = [float(str(c)) for c, f in per["failed"].items() if f == 0]
    top = float(per.index.max())
    if bad:
        first = min(bad)
        below = [c for c in ok if c < first]
        out.append(Match("s002.stable_concurrency",
                         (f"no failure up to {max(below):g}; " if below else "") + f"failures from {first:g}",
                         SAME, f"a limit exists here too, at this host's scale ({first:g} vs the seed's "
                         "250 on 350 computes)", _scale(base)))
    else:
        out.append(Match("s002.stable_concurrency", f"no failure up to {top:g}", UNDECIDED,
                         f"the limit lies beyond the largest concurrency run here ({top:g})", _scale(base)))
    at_top = per.index == top
    n_boots, n_failed = float(per["boots"][at_top].sum()), float(per["failed"][at_top].sum())
    pct = 100.0 * (n_boots - n_failed) / max(1.0, n_boots)
    fails = n_failed > 0
    out.append(Match("s004.success", f"{num(pct, '%', 4)} at {top:g} concurrent ({int(n_boots)} boots)",
                     SAME if fails else DIFFERENT,
                     "boots fail at the highest concurrency here too" if fails else
                     "no boot failed: Juice deploys Fernet tokens (the seed's fix) at a smaller scale",
                     _scale(base)))
    if "max_pool_size" in base.columns and base["max_pool_size"].nunique() >= 2:
        g = base.groupby("max_pool_size")[["failed", "boots"]].sum()
        share = 100.0 * g["failed"] / g["boots"].clip(lower=1)
        lo, hi = share.index.min(), share.index.max()
        fewer = share[hi] < share[lo]
        out.append(Match("s002.pool_size", f"failed {num(share[lo], '%', 3)} with pool {lo:g}, "
                         f"{num(share[hi], '%', 3)} with {hi:g}",
                         SAME if fewer else DIFFERENT,
                         "fewer failures with the larger pool" if fewer else
                         "the larger pool did not reduce failures here", _scale(base)))
    return out


def _schedulers(df: pd.DataFrame) -> Match | None:
    base = _base(df)
    if "schedulers" not in base.columns or base["schedulers"].nunique() < 2:
        return None
    both = base.groupby("concurrency")["schedulers"].nunique()
    both = both[both >= 2]
    if both.empty:  # no concurrency was run with two numbers of schedulers
        return None
    hi = both.index.max()
    at = base[base["concurrency"] == hi]
    s = sorted(at["schedulers"].dropna().unique())
    a, b = at[at["schedulers"] == s[0]], at[at["schedulers"] == s[-1]]
    va, ca = boot_times(a)
    vb, cb = boot_times(b)
    c = contrast(va, vb, ca, cb, key=("nova-seed", "sched", hi), stat="median")
    v, why = trend(c, "down", f"{s[-1]:g} vs {s[0]:g} schedulers: ")
    if v != SAME and not any(remote_hosts(m) for m in manifests(df)):
        why += "; one host runs every scheduler: they share its cores"
    return Match("s004.schedulers", f"{with_ci(c.a)} → {with_ci(c.b)} (median boot, {hi:g} concurrent)",
                 v, why, _scale(at))


def _preload(df: pd.DataFrame) -> Match | None:
    if "running_vms" not in df.columns or df["running_vms"].nunique() < 2:
        return None
    vm = df.dropna(subset=["running_vms"])
    conc = vm.groupby("concurrency")["running_vms"].nunique().idxmax()
    vm = vm[vm["concurrency"] == conc]
    lo, hi = vm["running_vms"].min(), vm["running_vms"].max()
    va, ca = boot_times(vm[vm["running_vms"] == lo])
    vb, cb = boot_times(vm[vm["running_vms"] == hi])
    c = contrast(va, vb, ca, cb, key=("nova-seed", "preload"), stat="median")
    return Match("s002.boot_vs_running", f"{lo:,.0f} → {hi:,.0f} VMs running: {with_ci(c.a)} → "
                 f"{with_ci(c.b)} ({c.ratio_text}, {c.verdict})", CONTEXT,
                 "the seed gives this curve only as a diagram: its text states no trend to compare",
                 f"{hi:,.0f} VMs at most, concurrency {conc:g}")


def _throughput(df: pd.DataFrame) -> Match | None:
    if "active_per_s" not in df.columns or df["active_per_s"].isna().all():
        return None
    base = _base(df)
    top = base["concurrency"].max()
    r = float(base[base["concurrency"] == top]["active_per_s"].median())
    return Match("s004.throughput", f"{num(r, '', 3)} boots/s at {top:g} concurrent (median of runs)",
                 CONTEXT, "absolute rate of one host with simulated computes", _scale(base))


def _errors(df: pd.DataFrame) -> list[Match]:
    faults: Counter[str] = Counter()
    for f in df.get("faults", pd.Series(dtype=str)):
        for k, v in json.loads(f or "{}").items():
            faults[k] += int(v)
    total = sum(faults.values())
    cond = ("Juice's boots: a port each from the real neutron (ML2/OVN, nodes' ovn-controller simulated; "
            "ML2/OVS with simulated neutron-openvswitch-agents when the report says so) unless it says "
            "fake-neutron (networks none), images from glance-api unless it says fake-glance, Fernet tokens")
    out = []
    for rid, pat in (("s004.err_deadlock", DEADLOCK), ("s004.err_keystone", KEYSTONE)):
        n = sum(v for k, v in faults.items() if pat.search(k))
        if not total:
            out.append(Match(rid, "0 (no boot failed)", DIFFERENT, "no failure to classify in these results",
                             cond))
            continue
        top = faults.most_common(1)[0][0]
        text = f"{n} of {total} failures ({num(100.0 * n / total, '%', 3)})"
        if rid == "s004.err_deadlock":
            commonest = bool(pat.search(top))
            why = "the commonest failure here too" if commonest else f"Juice's commonest: {top[:80]}"
            out.append(Match(rid, text, SAME if commonest else DIFFERENT, why, cond))
        else:
            out.append(Match(rid, text, SAME if n else DIFFERENT,
                             "authentication failures here too" if n else
                             f"none (Fernet tokens, the seed's fix); Juice's commonest: {top[:80]}", cond))
    n = sum(v for k, v in faults.items() if NEUTRON.search(k))
    if n:
        out.append(Match("s004.err_neutron", f"{n} of {total} failures ({num(100.0 * n / total, '%', 3)})",
                         SAME, "network failures here too (port creation, binding or vif-plugged)", cond))
    else:
        out.append(Match("s004.err_neutron", None, DIFFERENT, "no failure came from the network service in "
                         "these results (with fake-neutron, port creation is not exercised)", cond))
    return out


def _rates(summary: pd.DataFrame | None) -> Match | None:
    if summary is None or summary.empty or "failure_pct" not in summary.columns:
        return None
    f, r = float(summary["failure_pct"].mean()), float(summary.get("retry_pct", pd.Series([np.nan])).mean())
    low = f <= 5.0 and (not np.isfinite(r) or r <= 5.0)
    return Match("s004.fixed_failures", f"failure {num(f, '%', 3)}, retry {num(r, '%', 3)} (traced, mean "
                 f"of {len(summary)} runs)", SAME if low else DIFFERENT,
                 "near the seed's tuned cloud (Juice deploys its fixes: Fernet, single-writer Galera by "
                 "default)" if low else "more failures or retries than the seed's tuned cloud",
                 "traced from the runs' logs")


def _phases(boots: pd.DataFrame | None) -> list[Match]:
    from juice.trace.report import phase_means

    if boots is None or boots.empty:
        return []
    m = phase_means(boots)
    if m.empty or len(m) < 1:
        return []
    out = []
    cond = f"traced boots per {m.index.name}: {', '.join(f'{x:g}' for x in m.index)}"
    if "api" in m.columns and "scheduler" in m.columns:
        above = [f"{x:g}" for x, r in m.iterrows() if r["api"] > r["scheduler"]]
        text = f"api > scheduler at {', '.join(above)}" if above else "api ≤ scheduler at every level"
        out.append(Match("s004.api_below_scheduler", text, DIFFERENT if above else SAME,
                         "nova-api's phase (incl. Keystone) exceeds the scheduler's here" if above else "",
                         cond))
    act = boots[boots["state"] == "active"]
    key = m.index.name
    if "scheduler_s" in act.columns and len(m) >= 2:
        lo, hi = m.index.min(), m.index.max()
        a, b = act[act[key] == lo], act[act[key] == hi]
        c = contrast(a["scheduler_s"].to_numpy(float), b["scheduler_s"].to_numpy(float),
                     a["run"].astype(str), b["run"].astype(str), key=("nova-seed", "sched-phase"))
        v, why = trend(c, "up", f"{hi:g} vs {lo:g}: ")
        out.append(Match("s004.scheduler_grows", f"{with_ci(c.a)} at {lo:g} → {with_ci(c.b)} at {hi:g}",
                         v, why, cond))
    top = m.iloc[-1]
    share = top / top.sum() if top.sum() else top
    p = str(share.idxmax())
    compute = p in COMPUTE_PHASES
    out.append(Match("s004.dominant_phase", f"{p}: {num(100 * float(share[p]), '%', 3)} of a boot at "
                     f"{m.index[-1]:g}", SAME if compute or p == "scheduler" else DIFFERENT,
                     ("the compute side dominates, as on the seed's real hypervisors (Juice's computes "
                      "spawn nothing)" if compute else "the scheduler dominates, as at the seed's saturation"
                      if p == "scheduler" else f"{p} dominates here"), cond))
    return out


def manifests(df: pd.DataFrame) -> list[dict[str, object]]:
    out = []
    for d in df.get("dir", pd.Series(dtype=str)):
        try:
            out.append(json.loads((Path(str(d)) / "manifest.json").read_text()))
        except (OSError, ValueError):
            continue
    return out


def matches(df: pd.DataFrame, boots: pd.DataFrame | None = None,
            summary: pd.DataFrame | None = None) -> list[Match]:
    if df.empty or "concurrency" not in df.columns:
        return []
    out = _failures(df)
    for m in (_schedulers(df), _preload(df), _throughput(df), _rates(summary)):
        if m is not None:
            out.append(m)
    return simulated(df, out + _errors(df) + _phases(boots))


# verdicts that injected failures decide by construction, and those a simulated spawn time does
FAILURE_IDS = ("s002.stable_concurrency", "s004.success", "s002.pool_size", "s004.fixed_failures")
COMPUTE_PHASES = ("claim", "image", "spawn", "finish", "rpc_compute")  # image: the node's fetch


def simulated(df: pd.DataFrame, out: list[Match]) -> list[Match]:
    """The matches, with what SIMULATED waits/failures (the manifests' ``simulation``) decide
    by construction turned into no verdict, and the others' conditions saying they were there."""
    import dataclasses

    sims = [json.loads(x) for x in df["simulation"].dropna()] if "simulation" in df.columns else []
    stages = {k: v for sim in sims for k, v in (sim.get("stages") or {}).items()}
    if not stages:
        return out
    failing = sorted(k for k, v in stages.items() if v.get("failure"))
    spawn_wait = bool((stages.get("spawn") or {}).get("wait_s"))
    note = "with SIMULATED " + ", ".join(sorted(stages)) + " (see the simulated waits)"
    res = []
    for m in out:
        cond = f"{m.conditions}; {note}" if m.conditions else note
        if failing and m.id in FAILURE_IDS:
            m = dataclasses.replace(m, verdict=UNDECIDED, reason="failures are injected (SIMULATED "
                                    f"failures.{', failures.'.join(failing)}): an input, not a finding")
        elif spawn_wait and m.id == "s004.dominant_phase" and (m.juice or "").split(":")[0] in COMPUTE_PHASES:
            m = dataclasses.replace(m, verdict=UNDECIDED, reason="the spawn time is SIMULATED "
                                    "(computes.spawn_time): the compute side's share is an input here")
        res.append(dataclasses.replace(m, conditions=cond))
    return res


def section(df: pd.DataFrame, boots: pd.DataFrame | None = None, summary: pd.DataFrame | None = None,
            mans: Sequence[Mapping[str, object]] | None = None) -> str:
    """The "seed beside Juice" block of the nova section (``boots``, ``summary``: the traced
    boots and per-run summary of ``juice.trace``, when the runs kept their logs)."""
    return guarded("nova", lambda: seed_table(
        "nova", load_references(PACKAGE),
        matches(plain(df), None if boots is None else plain(boots),
                None if summary is None else plain(summary)),
        juice_conditions(manifests(df) if mans is None else mans)))
