"""The messaging study's tables and figures (``juice report`` / ``juice analyze``).

    runs = load(paths)               # one row per complete run: params + summary.json
    analyze(paths, by)               # medians over repetitions, one row per configuration
    sections(paths)                  # HTML: table, scale, locality, latency CDFs, resilience,
                                     # agents' cost (faults and resource profiles: the frame's,
                                     # juice.report.shared)

A configuration is KEYS and every other recorded field that differs between the runs (params,
bus facts, versions...: ``juice.analysis.configkey``), in every table, figure and finding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from juice.analysis import configkey
from juice.report.figures import LINESTYLES, PALETTE, cdf_figure, figure_html, new_figure
from juice.report.findings import Finding, findings_html
from juice.report.layout import fit_table
from juice.results.store import study_runs
from juice.studies.messaging.metrics import latencies

KEYS = ["case", "tc", "method", "bus", "delay_ms", "agents", "clients", "servers", "targets", "rate"]
SHOWN = {"runs": "runs", "send_rate": "sent/s", "delivery_rate": "delivered/s", "rtt_p50_ms": "call p50 ms",
         "rtt_p99_ms": "call p99 ms", "oneway_p50_ms": "one-way p50 ms",
         "spread_p50_ms": "fanout spread p50 ms",
         "locality_pct": "local %", "lost": "lost", "duplicates": "dup", "errors": "errors",
         "skipped": "skipped", "client_cpu_ms_per_message": "client CPU ms/msg"}
SECTIONS = (*configkey.SECTIONS, "bus", "facts", "lab")  # what else the key reads of a manifest
FOUND_BY_FINDINGS = ("case", "tc", "method", "bus", "delay_ms", "agents", "sites")
HOST_NOTE = ("All sites, buses and agents share this host's cores: rates and latencies are those of one "
             "machine, not of the seed's Grid'5000 cluster (hundreds of cores); compare shapes and ratios.")


def run_dirs(paths: Sequence[Path]) -> list[Path]:
    return study_runs(paths, "messaging", ("summary.json",))


def load(paths: Sequence[Path]) -> pd.DataFrame:
    """One row per complete run (params + summary); ``attrs["config_extra"]``: the recorded
    fields beyond KEYS that differ between the runs (columns, part of every grouping),
    ``attrs["config_notes"]``: runs pooled though they may differ."""
    rows, mans = [], []
    for d in run_dirs(paths):
        man = json.loads((d / "manifest.json").read_text())
        s = json.loads((d / "summary.json").read_text())
        flat = {k: v for k, v in s.items() if not isinstance(v, dict)}
        mans.append(man)
        rows.append({"run": d.name, "dir": str(d), **man["params"], **flat,
                     "oslo_messaging": man.get("facts", {}).get("oslo_messaging")})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    cands = [configkey.fields(m, SECTIONS) for m in mans]
    return configkey.attach(df, mans, cands, KEYS)


extra = configkey.extra_of  # the recorded fields beyond KEYS that tell the runs apart


def _with(row: pd.Series | dict[str, object], cols: Sequence[str]) -> str:  # type: ignore[type-arg]
    """``, a=1, b=x`` for a label ("" without ``cols``)."""
    return "".join(f", {c}={row[c]}" for c in cols)


def analyze(paths: Sequence[Path], by: Sequence[str]) -> pd.DataFrame | None:
    df = load(paths)
    if df.empty:
        return None
    keys = [k for k in KEYS if k in df.columns] + extra(df)
    keys += [b for b in by if b not in keys]
    missing = [b for b in by if b not in df.columns]
    if missing:
        from juice.errors import UserError

        raise UserError(f"--by: unknown parameter(s) {', '.join(missing)} of the messaging study "
                        f"(choose among {', '.join(sorted(c for c in df.columns if c not in SHOWN))})")
    vals = [c for c in SHOWN if c in df.columns and c != "runs"]
    g = df.groupby(keys, dropna=False, sort=True)
    out = g[vals].median(numeric_only=True)
    out.insert(0, "runs", g.size())
    out = out.reset_index()
    out.attrs["note"] = f"{len(df)} messaging runs; medians over repetitions" + "".join(
        f"; {n}" for n in df.attrs.get("config_notes", []))
    out.attrs["config_extra"] = extra(df)
    return out


def summary_lines(paths: Sequence[Path]) -> list[str]:
    df = load(paths)
    if df.empty:
        return []
    lines = [f"messaging: {len(df)} runs"]
    for _, r in df.iterrows():
        if pd.notna(r.get("rtt_p50_ms")):
            lat = f"call p50 {r['rtt_p50_ms']:.1f} ms"
        elif pd.notna(r.get("oneway_p50_ms")):
            b = r.get("oneway_bound_ms")
            lat = f"one-way p50 {r['oneway_p50_ms']:.1f} ms" + (f" ± {b:.1f}" if pd.notna(b) and b else "")
        elif isinstance(r.get("oneway_withheld"), str):
            lat = f"one-way {r['oneway_withheld']}"
        else:
            lat = "no delivery"
        loc = f", {r['locality_pct']:.0f} % local" if pd.notna(r.get("locality_pct")) else ""
        lines.append(f"  {r['case']} {r['bus']} {r['delay_ms']:g} ms, {r['agents']} agents @ "
                     f"{r['rate']:g}/s: {r['delivery_rate']:.0f} delivered/s, {lat}{loc}, "
                     f"lost {r['lost']}, dup {r['duplicates']}")
    return lines[:40]


def _table(df: pd.DataFrame) -> str:
    ex = [c for c in df.attrs.get("config_extra", []) if c in df.columns]
    cols = [k for k in KEYS if k in df.columns and k != "tc"] + ex + [c for c in SHOWN if c in df.columns]
    return fit_table(df[cols].rename(columns=SHOWN), digits=4,
                     sort=["case", "bus", "delay_ms", "agents", "clients", "servers", "rate", *ex],
                     title="configurations")


def split_findings(df: pd.DataFrame, fn: Callable[[pd.DataFrame], list[Finding]]) -> list[Finding]:
    """``fn``'s findings per group of runs that differ in a configuration field the findings do
    not compare themselves (rate, clients, recorded fields...): none pools such runs."""
    groups = configkey.split(df, [*KEYS, *extra(df)], FOUND_BY_FINDINGS)
    return configkey.relabel(groups, fn, lambda f, lab: replace(f, text=f"{lab}: {f.text}"))


def scale_figure(df: pd.DataFrame, case: str) -> str:
    """Latency and delivered rate vs agents for one case, a line per bus × delay × rate."""
    d = df[df["case"] == case]
    if d.empty or d["agents"].nunique() < 2:
        return ""
    lat = "rtt_p50_ms" if d["rtt_p50_ms"].notna().any() else "oneway_p50_ms"
    fig = new_figure(8.0, 3.4)
    a1, a2 = fig.subplots(1, 2)
    fig.subplots_adjust(wspace=0.35)
    ex = extra(df)
    for i, (k, g) in enumerate(d.groupby(["bus", "delay_ms", "rate", *ex], dropna=False)):
        bus, delay, rate = k[:3]
        more = _with(dict(zip(ex, k[3:], strict=True)), ex)
        g = g.groupby("agents", as_index=False)[[lat, "delivery_rate"]].median()
        style = {"color": PALETTE[i % len(PALETTE)], "linestyle": LINESTYLES[(i // len(PALETTE)) % 4],
                 "marker": "o", "markersize": 3}
        a1.plot(g["agents"], g[lat], label=f"{bus}, {delay:g} ms, {rate:g}/s{more}", **style)
        a2.plot(g["agents"], g["delivery_rate"], **style)
    a1.set_xlabel("agents")
    a1.set_ylabel(("call round trip" if lat.startswith("rtt") else "one-way") + " p50 (ms)")
    a2.set_xlabel("agents")
    a2.set_ylabel("delivered messages/s")
    for a in (a1, a2):
        a.grid(True, alpha=0.3)
        a.set_xscale("log")
    a1.legend(fontsize=7)
    fig.suptitle(f"{case}: scale")
    return figure_html(fig, f"{case}: latency and delivered rate vs number of agents, per bus")


def saturation(df: pd.DataFrame) -> pd.DataFrame:
    """Per configuration measured at several rates: the highest offered rate that was carried
    (every expected delivery made, within 5 %, no send skipped or failed), and the first that
    was not."""
    rows = []
    keys = ["case", "bus", "delay_ms", "agents", *extra(df)]
    for k, g in df.groupby(keys, dropna=False):
        if g["rate"].nunique() < 2:
            continue
        g = g.groupby("rate", as_index=False)[["delivered", "expected_deliveries", "skipped", "errors",
                                               "delivery_rate", "rtt_p99_ms"]].median()
        ok = (g["delivered"] >= 0.95 * g["expected_deliveries"]) & (g["skipped"] == 0) & (g["errors"] == 0)
        carried = g[ok]["rate"]
        over = g[~ok & (g["rate"] > (carried.max() if len(carried) else 0))]["rate"]
        rows.append({**dict(zip(keys, k, strict=True)), "rates": len(g),
                     "carried (msg/s)": float(carried.max()) if len(carried) else None,
                     "first not carried": float(over.min()) if len(over) else None,
                     "max delivered/s": float(g["delivery_rate"].max())})
    out = pd.DataFrame(rows)
    if not out.empty:
        cores = os.cpu_count() or 1
        out["carried per core"] = out["carried (msg/s)"] / cores
    return out


def rate_figure(df: pd.DataFrame) -> str:
    """Delivered vs offered rate, a line per configuration measured at several rates."""
    ex = extra(df)
    groups = [(k, g) for k, g in df.groupby(["case", "bus", "delay_ms", "agents", *ex], dropna=False)
              if g["rate"].nunique() > 1]
    if not groups:
        return ""
    fig = new_figure(8.0, 3.4)
    a1, a2 = fig.subplots(1, 2)
    fig.subplots_adjust(wspace=0.35)
    top = 0.0
    for i, (k, g) in enumerate(groups[:10]):
        case, bus, delay, agents = k[:4]
        more = _with(dict(zip(ex, k[4:], strict=True)), ex)
        g = g.groupby("rate", as_index=False)[["delivery_rate", "rtt_p99_ms", "oneway_p99_ms"]].median()
        style = {"color": PALETTE[i % len(PALETTE)], "marker": "o", "markersize": 3}
        a1.plot(g["rate"], g["delivery_rate"], label=f"{case} {bus} {delay:g} ms ({agents} ag{more})",
                **style)
        lat = g["rtt_p99_ms"] if g["rtt_p99_ms"].notna().any() else g["oneway_p99_ms"]
        a2.plot(g["rate"], lat, **style)
        top = max(top, float(g["rate"].max()))
    a1.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle=":")
    a1.set_xlabel("offered messages/s")
    a1.set_ylabel("delivered messages/s")
    a2.set_xlabel("offered messages/s")
    a2.set_ylabel("p99 latency (ms)")
    a2.set_yscale("log")
    for a in (a1, a2):
        a.grid(True, alpha=0.3)
    a1.legend(fontsize=6)
    fig.suptitle("Load: delivered rate and p99 vs offered rate")
    return figure_html(fig, "where the bus (or this host) stops keeping up: delivered below the dotted "
                            "line, p99 climbing")


def locality_figure(df: pd.DataFrame) -> str:
    d = df[df["locality_pct"].notna() & (df["sites"] > 1)] if "sites" in df.columns else df.iloc[0:0]
    d = d[d["clients_in"].notna()] if "clients_in" in d.columns else d
    if d.empty:
        return ""
    ex = extra(df)
    g = d.groupby(["bus", "delay_ms", "rate", *ex], as_index=False, dropna=False)["locality_pct"].median()
    at = [(float(a), float(b), *(str(x) for x in more)) for a, b, *more in
          zip(g["delay_ms"], g["rate"], *(g[c] for c in ex), strict=True)]
    combos = sorted(set(at))
    labels = [f"{c[0]:g} ms\n{c[1]:g}/s" + "".join(f"\n{k}={v}" for k, v in zip(ex, c[2:], strict=True))
              for c in combos]
    bus_list = list(dict.fromkeys(g["bus"]))
    fig = new_figure(max(5.0, 1.2 * len(combos) * max(1, len(bus_list)) / 2 + 2), 3.4, bottom=0.8)
    ax = fig.subplots()
    w = 0.8 / max(1, len(bus_list))
    for i, bus in enumerate(bus_list):
        pct = [(c, float(v)) for c, b, v in zip(at, g["bus"], g["locality_pct"], strict=True) if b == bus]
        vals = [max((v for c2, v in pct if c2 == c), default=float("nan")) for c in combos]
        xs = np.arange(len(combos)) + i * w
        ax.bar(xs, vals, width=w, color=PALETTE[i % len(PALETTE)], label=bus)
        for x, v in zip(xs, vals, strict=True):
            if not np.isnan(v):
                ax.text(float(x), v + 1, f"{v:.0f}", ha="center", fontsize=7)
    ax.set_xticks(np.arange(len(combos)) + w * (len(bus_list) - 1) / 2, labels)
    ax.set_ylim(0, 125)
    ax.set_yticks([0, 20, 40, 60, 80, 100])
    ax.set_ylabel("deliveries in the producer's site (%)")
    ax.legend(fontsize=7, ncol=min(4, len(bus_list)), loc="upper center")
    fig.suptitle("Locality: producers in a subset of sites, servers in every site")
    return figure_html(fig, "share of deliveries served in the producer's own site, per bus × one-way "
                            "delay × rate (the seed's '99 % / 66 % / 95 % local' picture)")


def cdf_figures(df: pd.DataFrame) -> list[str]:
    out = []
    ex = extra(df)
    for case, d in df.groupby("case"):
        curves = []
        for _, r in d.iterrows():
            _, lat = latencies(pd.read_parquet(Path(r["dir"]) / "messages.parquet"))
            x = np.sort(lat.to_numpy(dtype=float))  # one-way times withheld by their clocks: none
            if len(x):
                curves.append((f"{r['bus']} {r['delay_ms']:g} ms, {r['agents']} ag @ {r['rate']:g}/s"
                               + _with(r, ex),
                               x * 1000, np.arange(1, len(x) + 1) / len(x)))
        if curves:
            what = "call round trip" if d["method"].iloc[0] == "call" else "one-way delivery"
            out.append(figure_html(cdf_figure(f"{case}: {what}", curves[:12], xlabel=f"{what} (ms)"),
                                   f"{case}: distribution of {what} times, per run (first 12)"))
    return out


def resilience_figures(df: pd.DataFrame) -> list[str]:
    from juice.faults.report import read_events
    from juice.studies.messaging.metrics import timeline

    out = []
    for _, r in df[df["tc"] == "tc5"].iterrows():
        d = Path(r["dir"])
        m = pd.read_parquet(d / "messages.parquet")
        tl = timeline(m)
        if tl.empty:
            continue
        t0 = float(m["t_int"].min())
        fig = new_figure(8.0, 3.2)
        ax = fig.subplots()
        ax.plot(tl["t"], tl["ok"], label="succeeded", color=PALETTE[0])
        ax.plot(tl["t"], tl["failed"], label="failed", color=PALETTE[1])
        ax.plot(tl["t"], tl["lost"], label="lost deliveries", color=PALETTE[2], linestyle="--")
        ax2 = ax.twinx()
        ax2.plot(tl["t"], tl["rtt_p50_ms"], color=PALETTE[3], linestyle=":", label="call p50 (ms)")
        ax2.set_ylabel("call p50 (ms)")
        for ev in read_events(d):
            if ev.get("t_start"):
                ax.axvspan(ev["t_start"] - t0, (ev.get("t_end") or t0 + float(tl["t"].max())) - t0,
                           color="grey", alpha=0.2)
                ax.text(ev["t_start"] - t0, ax.get_ylim()[1] * 0.95, ev.get("description", "")[:40],
                        fontsize=7)
        ax.set_xlabel("seconds since the first intended send")
        ax.set_ylabel("messages per second")
        ax.legend(fontsize=7, loc="lower left")
        held = json.loads((d / "summary.json").read_text()).get("killed_nodes_held") or []
        where = "; ".join(f"killed node held {', '.join(h['held_queues']) or 'none of its queues'}"
                          for h in held)
        fig.suptitle(f"{r['case']} on {r['bus']}: lost {r['lost']}, duplicated {r['duplicates']}, "
                     f"failed {r['errors']}" + (f"\n{where}" if where else ""), fontsize=9)
        out.append(figure_html(fig, f"{r['run']}: resilience timeline (grey: the fault)"))
    return out


def agents_table(df: pd.DataFrame) -> str:
    rows = []
    for _, r in df.iterrows():
        procs = json.loads((Path(r["dir"]) / "processes.json").read_text())
        for role in ("server", "client"):
            ps = [p for p in procs if p["role"] == role]
            if not ps:
                continue
            n = sum(p["agents"] for p in ps)
            rss = sum(p.get("rss_kib") or 0 for p in ps) / 1024
            rows.append({"run": r["run"], "role": role, "processes": len(ps), "agents": n,
                         "agents/process": round(n / len(ps), 1), "RSS MiB": round(rss, 1),
                         "RSS MiB/agent": round(rss / n, 3) if n else None,
                         "start-up s (max)": max((p.get("startup_s") or 0) for p in ps),
                         "CPU s (run)": round(sum(p.get("run_cpu_s") or 0 for p in ps), 2),
                         "CPU s (life)": round(sum(p.get("cpu_s") or 0 for p in ps), 2)})
    return fit_table(pd.DataFrame(rows), runs="run", title="processes") if rows else ""


def clocks_note(df: pd.DataFrame) -> str:
    """Runs on hosts: one-way times corrected by each host's clock offset, with their bound,
    and the runs whose one-way times are withheld (the bound exceeds the one-way p50)."""
    rows = []
    for _, r in df.iterrows():
        why = r.get("oneway_withheld")
        bound = r.get("oneway_bound_ms")
        if isinstance(why, str):
            rows.append(f"{escape(str(r['run']))}: one-way {escape(why)}")
        elif isinstance(bound, int | float) and pd.notna(bound) and bound > 0:
            rows.append(f"{escape(str(r['run']))}: one-way p50 {r['oneway_p50_ms']:.1f} ± {bound:.1f} ms")
    if not rows:
        return ""
    return ("<p class=note>On hosts a send is timed on its client's clock and a delivery on its server's: "
            "each is corrected by its host's clock offset measured at the run's start, and a one-way time "
            "across hosts is uncertain by the sum of both offsets' bounds (half their probe's RTT). "
            "Withheld when that bound exceeds the one-way p50 (the figures would measure the clocks, not the "
            "delay).</p><ul class=note>" + "".join(f"<li>{x}</li>" for x in rows[:40]) + "</ul>")


def sections(paths: Sequence[Path]) -> list[str]:
    df = load(paths)
    if df.empty:
        return []
    df = df.sort_values(["tc", "case", "bus", "delay_ms", "agents", "rate"])
    a = analyze(paths, [])
    vers = sorted({str(v) for v in df["oslo_messaging"].dropna()})
    note = (f"<p class=note>oslo.messaging {escape(', '.join(vers) or 'unknown')}; every message has an "
            "id and is timestamped at send, at server receive and at reply; one clock for all sites of a "
            "local lab, so one-way times are exact (on hosts: below). Load is open loop (intended send "
            "times; a late send counts from its intended time in 'rtt_int'). NATS runs use Juice's own "
            "oslo.messaging transport "
            f"(plugins/juice-messaging), not an upstream driver. {escape(HOST_NOTE)}</p>")
    from juice.studies.messaging import seeds
    from juice.studies.messaging.findings import findings

    mans = [json.loads((Path(d) / "manifest.json").read_text()) for d in df["dir"]]
    body = ["<h2>Messaging: oslo.messaging RPC over real buses</h2>",
            findings_html("messaging", split_findings(df, findings)), seeds.section(df, mans), note,
            clocks_note(df),
            "<h3>Configurations (medians over repetitions)</h3>",
            configkey.notes_html(extra(df), df.attrs.get("config_notes", [])),
            _table(a) if a is not None else ""]
    for case in sorted(df["case"].unique()):
        body.append(scale_figure(df, str(case)))
    sat = saturation(df)
    if not sat.empty:
        body += ["<h3>Saturation</h3>", rate_figure(df), fit_table(sat, digits=4, sort=["rates"]),
                 f"<p class=note>Carried = every expected delivery made (within 5 %), no send skipped "
                 f"by the generator, no error. Per core: divided by this host's {os.cpu_count()} "
                 "cores, which the bus, the agents and the generator all share.</p>"]
    body.append(locality_figure(df))
    body += cdf_figures(df)
    res = resilience_figures(df)
    if res:
        body += ["<h3>Resilience (tc5)</h3>", *res]
    body += ["<h3>Agents: processes, memory and CPU</h3>", agents_table(df)]
    # the fault events and resource profiles: the frame's (juice.report.shared)
    return [b for b in body if b]
