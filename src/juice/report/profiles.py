"""The resource-profile section of a report (seed 004, section 3.5): the peak-consumption table
across runs (its Table 2, ``juice.profile.report.peak_table``) and utilisation over time per
component (its Figure 3-5), one figure per run.

    html = sections(run_dirs, level_key="load")        # [] when no run has a profile
    fig = run_figure(per_component(utilisation(df)), "run-1")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from juice.profile.frames import per_component
from juice.profile.report import LINK, MIB, Profiles, peak_table, read
from juice.report.figures import LINESTYLES, PALETTE, figure_html, new_figure
from juice.report.tables import table_html

MAX_SITE_LINES = 3  # lines per component and site in a run's figure up to this many sites


def run_figure(c: pd.DataFrame, title: str, window: tuple[float, float] | None = None) -> Figure:
    """One run's profile over time (seconds from its first sample): CPU % and RSS per
    component (summed over its processes; per site when ``c`` has a ``site`` column and at
    most ``MAX_SITE_LINES`` sites), and the links' traffic summed over sites. ``window`` (epoch
    s) is shaded: e.g. the load drivers' iterations."""
    t0 = float(c["time"].min()) if len(c) else 0.0
    procs = c[c["component"].astype(str) != LINK]
    split = "site" in c.columns and procs.loc[procs["site"] > 0, "site"].nunique() <= MAX_SITE_LINES
    comps = sorted(x for x in c["component"].astype(str).unique() if x != LINK)
    colors = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(comps)}
    with matplotlib.rc_context({"font.size": 8}):
        fig = new_figure(13.0, 3.4, bottom=0.55, top=0.45)
        axes = fig.subplots(1, 3)
        fig.subplots_adjust(wspace=0.3, right=0.86)
        for ax, metric, label, div in ((axes[0], "cpu_pct", "CPU (% of one core)", 1.0),
                                       (axes[1], "rss_bytes", "RSS (MiB)", MIB)):
            m = c[(c["metric"].astype(str) == metric) & (c["component"].astype(str) != LINK)]
            keys = ["component", "site"] if split else ["component"]
            for key, s in m.groupby(keys, observed=True, sort=True):
                comp = str(key[0])
                site = int(key[1]) if split else None
                line = s.groupby("time")["value"].sum()
                style = LINESTYLES[(site - 1) % len(LINESTYLES)] if site else "-"
                name = comp if site is None else (f"{comp} s{site}" if site else f"{comp} core")
                ax.plot(line.index - t0, line.to_numpy() / div, color=colors[comp], linestyle=style,
                        linewidth=1.0, label=name)
            ax.set_ylabel(label)
        ax = axes[2]
        for metric, label, style in (("net_in_Bps", "in", "-"), ("net_out_Bps", "out", "--")):
            m = c[(c["metric"].astype(str) == metric) & (c["component"].astype(str) == LINK)]
            if len(m):
                line = m.groupby("time")["value"].sum()
                ax.plot(line.index - t0, line.to_numpy() / 1e6, color="#555555", linestyle=style,
                        linewidth=1.0, label=f"all sites {label}")
        ax.set_ylabel("network (MB/s)")
        for ax in axes:
            ax.set_xlabel("time (s)")
            ax.set_ylim(bottom=0)
            if window is not None:
                ax.axvspan(window[0] - t0, window[1] - t0, color="#dddddd", alpha=0.5, linewidth=0)
        h, lbl = axes[0].get_legend_handles_labels()
        if h:
            fig.legend(h, lbl, loc="center right", fontsize=7, frameon=False)
        h2, l2 = axes[2].get_legend_handles_labels()
        if h2:
            axes[2].legend(h2, l2, fontsize=7, frameon=False)
        fig.suptitle(title)
    return fig


def notes(manifests: Mapping[str, Mapping[str, Any]]) -> str:
    """One paragraph: the rate and the sampler's own cost, from the runs' manifests."""
    prof = [m.get("profile") for m in manifests.values() if isinstance(m.get("profile"), Mapping)]
    if not prof:
        return ""
    hz = sorted({float(p.get("hz") or 0) for p in prof if p})
    pct = [float(p["tick_cpu_pct"]) for p in prof if p and p.get("tick_cpu_pct") is not None]
    errs = sum(int(p.get("errors") or 0) for p in prof if p)
    procs = max(int(p.get("processes") or 0) for p in prof if p)
    cost = f"; the sampler's own CPU: {np.mean(pct):.2f} % of one core on average" if pct else ""
    return (f"<p class=note>Sampled at {', '.join(f'{h:g}' for h in hz)} Hz in {len(prof)} runs "
            f"(up to {procs} processes per run){cost}; {errs} sampling errors.{hosts_note(prof)}</p>")


def hosts_note(prof: Sequence[Any]) -> str:
    """For runs on SSH hosts (``juice.profile.hosts``): which host each site is, its largest
    measured clock offset (applied to its samples) and the host sampler's CPU."""
    hosts: dict[int, dict[str, Any]] = {}
    cpu: list[float] = []
    for p in prof:
        if not isinstance(p, Mapping) or p.get("source") != "hosts":
            continue
        for h in p.get("hosts") or []:
            one = hosts.setdefault(int(h["site"]), {"name": h.get("host"), "off": [], "rtt": []})
            if h.get("offset_s") is not None:
                one["off"].append(float(h["offset_s"]))
                one["rtt"].append(float(h.get("rtt_s") or 0.0))
        if p.get("sampler_cpu_pct") is not None:
            cpu.append(float(p["sampler_cpu_pct"]))
    if not hosts:
        return ""
    parts = []
    for site, one in sorted(hosts.items()):
        off = max(one["off"], key=abs) if one["off"] else None
        clock = (f"clock offset up to {off * 1e3:+.2f} ms (RTT {max(one['rtt']) * 1e3:.2f} ms)"
                 if off is not None else "clock not measured")
        parts.append(f"s{site} = {escape(str(one['name']))}, {clock}")
    cost = f" The host sampler's own CPU: {np.mean(cpu):.2f} % of one core per host." if cpu else ""
    return (" On SSH hosts, samples on this machine's clock (each host's offset measured at the "
            f"start of each run and applied): {'; '.join(parts)}.{cost}")


def sections(run_dirs: Sequence[Path], level_key: str = "load",
             windows: Mapping[str, tuple[float, float]] | None = None,
             max_figures: int = 12, title_of: Callable[[str], str] | None = None,
             data: Profiles | None = None) -> list[str]:
    """The resource-profile section of a report over ``run_dirs`` ([] when none of them holds
    a ``profile.parquet``): the peak table by ``level_key`` (a run parameter), then one figure
    per run (the first ``max_figures``), folded. ``data``: the profiles already ``read``."""
    data = data or read(run_dirs)
    if data is None:
        return []
    runs, u, manifests = data.runs, data.u, data.manifests
    level_of = {r: str(data.params(r).get(level_key, "all runs")) for r in runs}
    c = per_component(u)
    body = ["<h2>Resource profiles</h2>",
            "<p class=note>What every process Juice started in the lab spent (seed 004, Table 2 and "
            "Figure 3-5): CPU in % of one core, summed over a component's processes and sites; "
            "idle = the lowest sample of any run, peak = the highest sample of the runs at that "
            f"load ({escape(level_key)}).</p>", notes(manifests),
            table_html(peak_table(c, level_of), digits=3)]
    cs = per_component(u, by_site=True)
    figs = []
    for r in runs[:max_figures]:
        one = cs[cs["run"].astype(str) == r]
        name = title_of(r) if title_of else r
        figs.append(figure_html(run_figure(one, name, (windows or {}).get(r))))
    more = (f"<p class=note>Figures for the first {max_figures} of {len(runs)} runs; "
            "`juice report RUN_DIR` draws any other.</p>" if len(runs) > max_figures else "")
    body.append(f"<details><summary>Utilisation over time, per run ({min(len(runs), max_figures)})"
                f"</summary>{''.join(figs)}{more}</details>")
    return body
