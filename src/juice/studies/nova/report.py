"""The nova study's report section, re-made from stored runs (seeds 002 and 004's tables).

- per configuration and concurrency: success %, min/median/p90/p95/p99/max boot time, as Rally
  measures it (polling every 2 s) and from nova's own notification (no polling grid);
- boot time vs concurrency, a line per number of schedulers (the knee; schedulers side by side);
- the largest concurrency with zero failures, per configuration;
- boot time vs VMs already running, with a fitted slope (seconds per 1,000 VMs);
- failures by message template (seed 004's error table);
- per run, whether packing nodes into processes distorts a phase (``regime``);
- (the frame adds request traces, the fault timeline, resource profiles of api/conductor/
  scheduler/placement/DB/RabbitMQ (seed 004 Table 2) and the rest: ``juice.report.shared``).

A configuration is CONFIG and every other recorded field that differs between the runs (the
compute layout, deployment facts, server settings: ``juice.analysis.configkey``), in every
table, figure and finding; runs pooled though they may differ are named above the table.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from juice.analysis import configkey
from juice.report.figures import LINESTYLES, PALETTE, figure_html, new_figure
from juice.report.findings import Finding, findings_html
from juice.report.layout import fit_table
from juice.report.tables import table_html
from juice.results.store import study_runs
from juice.studies.nova import busplot, regime, slope
from juice.trace import causes, lblog

CONFIG = ["scenario", "db", "schedulers", "host_subset_size", "concurrency_backend", "max_pool_size",
          "delay_ms", "haproxy_maxconn"]
SHOWN = ["success_pct", "rally_min", "rally_median", "rally_p90", "rally_p95", "rally_p99", "rally_max",
         "rally_mean",  # Rally's "Average" column (seed 002's tables)
         "nova_median", "nova_p95", "api_median", "active_per_s"]
# the key's fields beyond CONFIG: the manifests' sections read, and the compute layout as the
# regime reads it (older runs: their defaults) before the raw params and facts
SECTIONS = (*configkey.SECTIONS, "lab", "simulation")
LAYOUT = ("compute_isolation", "nodes_per_process", "compute_processes", "max_concurrent_builds",
          "executor_threads")
BASE = [*CONFIG, "preload", "concurrency", "rate"]
HOST_NOTE = ("One 2-core host runs every nova process, the database, RabbitMQ, Keystone, placement, the "
             "simulated computes and the driver: absolute times are this host's, and more schedulers "
             "than cores compete for the same CPU (a real deployment spreads them).")


def load(paths: Sequence[Path]) -> pd.DataFrame:
    """One row per complete run: its params, layout and summary; ``attrs["config_extra"]``: the
    recorded fields beyond CONFIG that differ between the runs (added as columns, part of every
    grouping), ``attrs["config_notes"]``: runs pooled though they may differ."""
    rows, mans = [], []
    for d in study_runs(paths, "nova", ("summary.json",)):
        man = json.loads((d / "manifest.json").read_text())
        s = json.loads((d / "summary.json").read_text())
        mans.append(man)
        rows.append({"run": d.name, "dir": str(d), **man["params"], **regime.columns(man),
                     "running_vms": man.get("running_vms"), "preloaded_by": man.get("preload_method"),
                     **{k: v for k, v in s.items() if not isinstance(v, dict)},
                     "faults": json.dumps(s.get("faults") or {}),
                     "simulation": json.dumps(man.get("simulation") or {}, sort_keys=True)})
    return keyed(pd.DataFrame(rows), mans)


def keyed(df: pd.DataFrame, mans: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``df`` (a row per manifest of ``mans``) with a column per recorded field beyond CONFIG
    that tells runs apart (``juice.analysis.configkey``), named in ``attrs``."""
    if df.empty:
        return df
    cands = []
    for m in mans:
        layout = {k: v for k, v in regime.columns(m).items() if k in LAYOUT}
        rest = {k: v for k, v in configkey.fields(m, SECTIONS).items() if k not in layout}
        cands.append({**layout, **rest})
    return configkey.attach(df, mans, cands, BASE)


extra = configkey.extra_of  # the recorded fields beyond CONFIG that tell the runs apart


def _preloaded_note(df: pd.DataFrame) -> str:
    """How the VMs running before the runs got there (the manifests' ``preload_method``)."""
    pre = df[df["preload"].astype(float) > 0] if "preload" in df.columns else df.iloc[0:0]
    ways = sorted({str(m) for m in pre.get("preloaded_by", pd.Series(dtype=object)).dropna()})
    if pre.empty or not ways:
        return ""
    return ("<p class=note>VMs running before the runs (up to "
            f"{int(pre['preload'].astype(float).max()):,}): {html.escape('; '.join(ways))}.</p>")


STAND_IN = "fake-glance (stand-in)"  # what runs made before the real glance recorded nothing about


def _service_note(dirs: Sequence[Path], key: str, before: str, said: dict[str, str], title: str) -> str:
    """What served the runs (the manifests' ``deployment.<key>``; ``before``: what runs made
    before it was recorded used), as a sentence; ``said`` explains each value."""
    seen: Counter[str] = Counter()
    for d in dirs:
        try:
            dep = json.loads((d / "manifest.json").read_text()).get("deployment") or {}
        except (OSError, ValueError):
            continue
        seen[str(dep.get(key, before))] += 1
    parts = [f"{said.get(k, html.escape(k))}{f' in {n} of {len(dirs)} runs' if len(seen) > 1 else ''}"
             for k, n in sorted(seen.items())]
    return f"{title}: {'; '.join(parts)}." if parts else ""


def image_service_note(dirs: Sequence[Path]) -> str:
    """What served the runs' images (runs made before the real glance used the stand-in)."""
    return _service_note(dirs, "image_service", STAND_IN, {
        "glance": "the real glance-api (tokens validated by Keystone, the image uploaded through its API)",
        STAND_IN: "a stand-in, fake-glance (validates no token, stores no image; a recorded deviation)"},
        "Image service")


def network_service_note(dirs: Sequence[Path]) -> str:
    """What served the runs' networks (runs made before the real neutron used the stand-in)."""
    return _service_note(dirs, "network_service", "fake-neutron (stand-in)", {
        "neutron (ML2/OVN)": "the real neutron with ML2/OVN (a port per boot on the tenant network, "
                             "bound by neutron; the nodes' ovn-controller SIMULATED, their spawn waits "
                             "for network-vif-plugged)",
        "neutron (ML2/OVS)": "the real neutron with ML2/OVS (neutron-api and neutron-rpc-server; a port "
                             "per boot, bound by neutron to the node's host; the nodes' "
                             "neutron-openvswitch-agent SIMULATED: its state reports and device RPCs on "
                             "RabbitMQ; their spawn waits for network-vif-plugged)",
        "fake-neutron (stand-in)": "a stand-in, fake-neutron (boots use <code>networks: none</code>)"},
        "Network service")


def simulation_html(df: pd.DataFrame) -> str:
    """The provenance of SIMULATED waits and failures (the manifests' ``simulation``): what each
    stage waited and how often it failed, stated as simulated; none: the fakes answered at once."""
    from juice.studies.nova.simulation import lines

    sims = sorted(set(df["simulation"])) if "simulation" in df.columns else []
    stated = [(s, lines(json.loads(s))) for s in sims]
    if not any(ls for _, ls in stated):
        return ("<p class=note>No simulated waits: simulated spawns are immediate and the stand-ins "
                "answer at once (seed 004's real spawns took 6.45–354 s).</p>")
    out = ["<h3>Simulated waits and failures (not measured)</h3>"]
    for s, ls in stated:
        n = int((df["simulation"] == s).sum())
        items = "".join(f"<li>{escape(x)}</li>" for x in ls) or "<li>none (immediate)</li>"
        out.append(f"<p class=note>{n} run(s): every time below is SIMULATED (drawn, then slept), "
                   f"not a measurement of a real hypervisor, glance or neutron.</p><ul>{items}</ul>")
    return "".join(out)


def table(paths: Sequence[Path], by: Sequence[str]) -> pd.DataFrame | None:
    """``juice analyze``: medians over repetitions per configuration × concurrency × preload."""
    df = load(paths)
    if df.empty:
        return None
    missing = [b for b in by if b not in df.columns]
    if missing:
        from juice.errors import UserError

        known = ", ".join(sorted([*CONFIG, *extra(df), "concurrency", "preload"]))
        raise UserError(f"--by: unknown parameter(s) {', '.join(missing)} of the nova study "
                        f"(choose among {known})")
    keys = [k for k in [*CONFIG, *extra(df), "preload", "concurrency", "rate", *by] if k in df.columns]
    keys = list(dict.fromkeys(keys))
    g = df.groupby(keys, dropna=False, sort=True)
    out = g[[c for c in SHOWN if c in df.columns]].median(numeric_only=True)
    out.insert(0, "boots", g["boots"].sum())
    out.insert(0, "runs", g.size())
    out = out.reset_index()
    out.attrs["note"] = f"{len(df)} nova runs; medians over repetitions; boot times in seconds" + "".join(
        f"; {n}" for n in df.attrs.get("config_notes", []))
    return out


def split_findings(df: pd.DataFrame, fn: Callable[[pd.DataFrame], list[Finding]]) -> list[Finding]:
    """``fn``'s findings per group of runs that differ in a configuration field the findings do
    not compare themselves (concurrency, schedulers, VMs running): none pools such runs."""
    handled = ["concurrency", "schedulers", "preload", "running_vms"]
    groups = configkey.split(df, [*CONFIG, *extra(df)], handled)
    return configkey.relabel(groups, fn, lambda f, lab: replace(f, text=f"{lab}: {f.text}"))


def _varying(df: pd.DataFrame, cols: Sequence[str]) -> list[str]:
    return [c for c in cols if c in df.columns and df[c].nunique(dropna=False) > 1]


def knee_figure(df: pd.DataFrame) -> str:
    """Boot time (median, p95) and success % vs concurrency (or rate: open loop), a line per
    configuration."""
    x = "rate" if "rate" in df.columns and df["rate"].notna().all() else "concurrency"
    if df[x].nunique() < 2:
        return ""
    keys = _varying(df, [c for c in CONFIG if c != "scenario"] + extra(df) + ["preload"])
    fig = new_figure(8.4, 3.4)
    a1, a2 = fig.subplots(1, 2)
    fig.subplots_adjust(wspace=0.35)
    groups = df.groupby(["scenario", *keys], dropna=False) if keys else df.groupby(["scenario"])
    for i, (k, g) in enumerate(groups):
        k = k if isinstance(k, tuple) else (k,)
        g = g.groupby(x, as_index=False)[["rally_median", "rally_p95", "nova_median", "success_pct"]].median()
        parts = (f"{c}={v}" for c, v in zip(keys, k[1:], strict=False))
        label = ", ".join([str(k[0]).split(".")[-1], *parts])
        color = PALETTE[i % len(PALETTE)]
        a1.plot(g[x], g["rally_median"], marker="o", markersize=3, color=color, label=label)
        a1.plot(g[x], g["rally_p95"], linestyle=LINESTYLES[1], color=color, linewidth=0.8)
        a1.plot(g[x], g["nova_median"], linestyle=LINESTYLES[2], color=color, linewidth=0.8)
        a2.plot(g[x], g["success_pct"], marker="o", markersize=3, color=color)
    a1.set_ylabel("boot time (s): median —, p95 --, nova's :")
    a2.set_ylabel("success %")
    a2.set_ylim(-2, 102)
    for a in (a1, a2):
        a.set_xlabel("boots per second (open loop)" if x == "rate" else "concurrent boots")
        a.grid(True, alpha=0.3)
    a1.legend(fontsize=7)
    fig.suptitle("Boot time and success vs concurrency")
    return figure_html(fig, "Rally's boot time (median and p95, 2 s polling) and nova's own "
                            "(create.end − POST), and the share of boots that reached ACTIVE, "
                            "per concurrency")


def zero_failure_table(df: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in [*CONFIG, *extra(df), "preload"] if c in df.columns]
    rows = []
    for k, g in df.groupby(keys, dropna=False):
        k = k if isinstance(k, tuple) else (k,)
        clean = g.groupby("concurrency")["failed"].sum()
        ok = [int(str(c)) for c, f in clean.items() if f == 0]
        bad = [int(str(c)) for c, f in clean.items() if f > 0]
        rows.append({**dict(zip(keys, k, strict=False)),
                     "max concurrency with 0 failures": max(ok) if ok else None,
                     "first concurrency with failures": min(bad) if bad else None})
    return pd.DataFrame(rows)


def fault_table(df: pd.DataFrame) -> pd.DataFrame:
    """Failures by message template, each with the cause its message names and what governs
    it (``juice.trace.causes``; blank when no known message matches) and, for a load balancer's
    answer, what haproxy's own log over these runs says (``juice.trace.lblog``; runs that kept it)."""
    c: Counter[str] = Counter()
    for f in df["faults"]:
        for k, v in json.loads(f).items():
            c[k] += int(v)
    dirs = [Path(str(d)) for d in df["dir"]] if "dir" in df.columns else []
    lb = lblog.summary(p for d in dirs for p in lblog.run_logs(d))
    rows = []
    for k, v in c.most_common():
        row: dict[str, Any] = {"failure (message template)": k, "count": v, **_cause(k)}
        if lb:
            row["haproxy's log"] = lblog.lb_verdict(row["cause"] or None, lb) or ""
        rows.append(row)
    return pd.DataFrame(rows)


def _cause(text: str) -> dict[str, str]:
    """The cause a message names and what governs it (blank when no known message matches)."""
    cause, knob = causes.cause_of(text) or ("", "")
    return {"cause": cause, "what governs it": knob}


def _failed_dirs(paths: Sequence[Path]) -> list[Path]:
    """The failed runs (``<run>.failed``) of the study directories in ``paths``."""
    return [d for p in paths if p.is_dir() for d in sorted(p.glob("*.failed"))]


def failed_runs(paths: Sequence[Path]) -> list[Path]:
    """The failed runs (``<run>.failed``) of the study directories in ``paths`` that kept
    haproxy's counters: left out of every other table, their counters may say why they failed."""
    return [d for d in _failed_dirs(paths) if (d / "haproxy-stats.json").exists()]


def failed_runs_table(paths: Sequence[Path]) -> pd.DataFrame:
    """Every failed run of the study directories in ``paths`` (``<run>.failed``, left out of the
    other tables): why the run failed, then its boots' failures by message (its summary.json,
    when the run got that far), each with the cause its message names."""
    rows: list[dict[str, object]] = []
    for d in _failed_dirs(paths):
        err = (d / "error.txt").read_text(errors="replace").strip() if (d / "error.txt").exists() else ""
        why = " ".join(err.split())[:240]
        rows.append({"run": d.name, "failure": f"the run: {why or 'no error recorded'}", "count": None,
                     **_cause(why)})
        try:
            faults = json.loads((d / "summary.json").read_text()).get("faults") or {}
        except (OSError, ValueError, AttributeError):
            faults = {}
        rows += [{"run": d.name, "failure": str(k), "count": int(v), **_cause(str(k))}
                 for k, v in faults.items()]
    return pd.DataFrame(rows)


def haproxy_table(dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per run and haproxy frontend, from each run's ``haproxy-stats.json`` (runs without
    haproxy, or made before it existed, have none and add no row)."""
    rows = []
    for d in dirs:
        f = d / "haproxy-stats.json"
        if not f.exists():
            continue
        data = json.loads(f.read_text())
        stats = data.get("stats") or []
        sampled = data.get("sampled") or {}  # optional: earlier runs have none

        def num(r: dict[str, str], k: str) -> int:
            v = r.get(k) or "0"
            return int(v) if v.isdigit() else 0

        for fe in (r for r in stats if r.get("svname") == "FRONTEND"):
            name = fe.get("pxname", "")
            be: dict[str, str] = next((r for r in stats if r.get("pxname") == name
                                       and r.get("svname") == "BACKEND"), {})
            servers = [r for r in stats if r.get("pxname") == name and r.get("svname") not in
                       ("FRONTEND", "BACKEND")]
            rows.append({"run": d.name, "failed": d.name.endswith(".failed"),
                         "maxconn": data.get("maxconn") or "default", "frontend": name,
                         "requests": num(be, "stot"),
                         "servers_used": sum(1 for r in servers if num(r, "stot")),
                         "servers": len(servers), "smax": num(fe, "smax"), "slim": num(fe, "slim"),
                         "reached": bool(num(fe, "slim")) and num(fe, "smax") >= num(fe, "slim"),
                         "global_max": sampled.get("max_curr_conns"),
                         "s_at_global_limit": (round(sampled["at_limit"] * sampled["interval_s"])
                                               if "at_limit" in sampled else None),
                         "5xx": num(fe, "hrsp_5xx"), "errors": num(fe, "ereq") + num(be, "econ")
                         + num(be, "eresp")})
    return pd.DataFrame(rows)


def sections(paths: Sequence[Path]) -> list[str]:
    df = load(paths)
    failed = failed_runs_table(paths)
    failed_html = [] if failed.empty else [
        "<h3>Failed runs: why, and their boots' failures by message</h3>",
        "<p class=note>Runs kept as <code>&lt;run&gt;.failed</code> are left out of every other "
        "table; what they measured before failing is here, each message with the cause it names "
        "(<code>juice.trace.causes</code>).</p>", table_html(failed)]
    if df.empty:
        return ["<h2>nova: boots under load (seeds 002, 004)</h2>", *failed_html] if failed_html else []
    t = table(paths, [])
    from juice.studies.nova import seeds
    from juice.studies.nova.findings import findings, phase_findings
    from juice.trace.report import phase_means, traced

    dirs = [Path(d) for d in df["dir"]]
    tr = traced(dirs)
    boots = tr.boots if tr is not None and not isinstance(tr, str) else None
    summ = tr.summary if tr is not None and not isinstance(tr, str) else None
    phases = phase_findings(phase_means(boots)) if boots is not None else []
    body = ["<h2>nova: boots under load (seeds 002, 004)</h2>",
            findings_html("nova", split_findings(df, findings) + phases + regime.findings(df)),
            seeds.section(df, boots, summ),
            f"<p class=note>{len(df)} runs, {int(df['boots'].sum())} boots. Boot time as Rally measures it "
            "(<code>nova.boot_server</code>: POST, 1 s, then a GET every 2 s until ACTIVE) and from nova's "
            "own <code>instance.create.end</code> notification (minus the POST's send time, one clock): "
            f"Rally's figure is on a 2 s grid, nova's is not. {escape(HOST_NOTE)} Compute hosts are "
            "simulated (Juice's multi-node fake driver): a boot goes through nova's real API, scheduler, "
            "placement claims, conductor and compute manager, but spawns nothing (unless a simulated "
            f"spawn time is stated below). {image_service_note(dirs)} {network_service_note(dirs)}</p>",
            simulation_html(df),
            "<h3>Per configuration and concurrency (medians over repetitions; seconds)</h3>",
            configkey.notes_html(extra(df), df.attrs.get("config_notes", [])),
            fit_table(t, digits=3, sort=["preload", "concurrency", "rate"], title="configurations")
            if t is not None else "", knee_figure(df),
            "<h3>Largest concurrency with zero failures</h3>", fit_table(zero_failure_table(df)),
            "<h3>Simulation regime per run</h3><p class=note>Whether packing simulated nodes into "
            "nova-compute processes distorts per-phase times: more than one node per process and more "
            "boots in flight per process than its build slots or RPC executor threads "
            "(<code>juice.studies.nova.regime</code>; docs/nova-simulation.md).</p>",
            fit_table(regime.table(df), title="regime")]
    from juice.studies.nova.beforeafter import section as before_after

    body += before_after(df, boots, extra(df))
    fig, slopes = slope.figure(df, [c for c in CONFIG if c != "preload"] + extra(df) + ["concurrency"])
    if fig:
        body += ["<h3>Boot time vs VMs running (a point per boot)</h3>", fig, fit_table(slopes, digits=4),
                 _preloaded_note(df)]
    body += busplot.section(df)
    lb = haproxy_table([Path(d) for d in df["dir"]] + failed_runs(paths))
    if not lb.empty:
        body += ["<h3>haproxy per run (its stats socket; docs/topology.md)</h3>",
                 "<p class=note>Counters cleared before each run. <i>reached</i>: the frontend's most "
                 "concurrent connections (smax) hit its limit (slim, the global maxconn). The frontends "
                 "share the global limit: <i>global_max</i> is the most concurrent connections of the whole "
                 "process (show info's CurrConns, sampled every second) and <i>s_at_global_limit</i> "
                 "about how long it sat at maxconn, new connections waiting in the kernel's listen "
                 "queue. Failed runs (left out of the other tables) are listed too.</p>", fit_table(lb)]
    faults = fault_table(df)
    if not faults.empty:
        body += ["<h3>Failures by message</h3>", table_html(faults)]
    body += failed_html  # request traces and resource profiles: the frame's (juice.report.shared)
    return [b for b in body if b]
