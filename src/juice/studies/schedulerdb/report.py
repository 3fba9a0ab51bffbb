"""The scheduler–database report section (the seed's figures, from the stored runs alone).

    html = section([Path("results/scheduler-db")])   # an HTML fragment, or None when no run
    summary([...])                                    # crossings per configuration, for the CLI

A configuration is (backend, client, track, schedulers, updates); its t(N) samples are every
successful read of its runs. Fits are least squares on those samples (``fit.py``); the
crossing is where the fitted curve reaches the spec's ``threshold_s``. ``client`` is the
MySQL driver (runs made before that axis existed were PyMySQL); "" for other backends.
``paths`` may be study directories (holding run directories) or run directories.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from juice.studies.schedulerdb.fit import Fit, crossing, fit
from juice.studies.schedulerdb.spec import DEFAULT_CLIENT, MYSQL_BACKENDS

WORKLOAD = "scheduler-db"
SHORTFALL_PCT = 5.0


def _run_dirs(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if (p / "manifest.json").exists():
            out.append(p)
        elif p.is_dir():
            out += sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith(".")
                          and not d.name.endswith(".failed") and (d / "manifest.json").exists())
    return out


def load(paths: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    """(reads, updates, manifests) of every complete scheduler-db run under ``paths``."""
    reads, upds, mans = [], [], []
    for d in _run_dirs(paths):
        try:
            m = json.loads((d / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if m.get("workload") != WORKLOAD or not (d / "reads.parquet").exists():
            continue
        mans.append(m)
        df = pd.read_parquet(d / "reads.parquet")
        for k, v in m["params"].items():  # params come from the manifest, never the dir name
            df[k] = v
        df["client"] = _client(m["params"])
        df["run"] = d.name
        reads.append(df)
        try:
            u = json.loads((d / "updates.json").read_text())
        except (OSError, json.JSONDecodeError):
            u = {}
        upds.append({**m["params"], "run": d.name, "target_rate": u.get("target_rate", 0.0),
                     "achieved_rate": u.get("achieved_rate", 0.0), "count": u.get("count", 0),
                     "errors": u.get("errors", 0), "window_s": u.get("window_s")})
    rd = pd.concat(reads, ignore_index=True) if reads else pd.DataFrame()
    return rd, pd.DataFrame(upds), mans


def _client(params: dict[str, Any]) -> str:
    """The point's MySQL driver; runs older than the ``clients`` axis read with PyMySQL."""
    if params.get("client"):
        return str(params["client"])
    return DEFAULT_CLIENT if params.get("backend") in MYSQL_BACKENDS else ""


def _threshold(mans: list[dict[str, Any]]) -> float:
    for m in mans:
        t = m.get("spec", {}).get("threshold_s")
        if t:
            return float(t)
    return 60.0


CONFIG = ["backend", "client", "track", "schedulers", "updates"]


def fits(reads: pd.DataFrame, threshold: float) -> list[dict[str, Any]]:
    """Per configuration: linear and quadratic fits, R², crossing of ``threshold``."""
    out: list[dict[str, Any]] = []
    if reads.empty:
        return out
    ok = reads[reads["ok"]]
    for key, g in ok.groupby(CONFIG, sort=True):
        row: dict[str, Any] = dict(zip(CONFIG, key, strict=True))
        row["points"] = int(g["nodes"].nunique())
        row["reads"] = len(g)
        row["max_n"] = int(g["nodes"].max())
        row["t_at_max_s"] = float(g[g["nodes"] == g["nodes"].max()]["seconds"].median())
        for deg, name in ((1, "linear"), (2, "quadratic")):
            try:
                f = fit(g["nodes"].tolist(), g["seconds"].tolist(), deg)
            except ValueError:
                row[name] = None
                continue
            row[name] = {"coef": list(f.coef), "r2": f.r2, "formula": f.formula(),
                         "crossing_n": crossing(f, threshold), "fit": f}
        out.append(row)
    return out


def summary(paths: list[Path]) -> dict[str, Any]:
    """What the CLI prints: crossings per configuration, update-rate shortfalls."""
    reads, upd, mans = load(paths)
    thr = _threshold(mans)
    confs = []
    for r in fits(reads, thr):
        c = {k: r[k] for k in (*CONFIG, "points", "reads", "max_n", "t_at_max_s")}
        for name in ("linear", "quadratic"):
            f = r.get(name)
            c[name] = None if f is None else {"formula": f["formula"], "r2": round(f["r2"], 4),
                                              "crossing_n": None if f["crossing_n"] is None
                                              else round(f["crossing_n"])}
        confs.append(c)
    return {"threshold_s": thr, "runs": len(mans), "configurations": confs,
            "update_shortfalls": _shortfalls(upd)}


def _shortfalls(upd: pd.DataFrame) -> list[dict[str, Any]]:
    if upd.empty:
        return []
    u = upd[upd["target_rate"] > 0]
    short = u[u["achieved_rate"] < u["target_rate"] * (1 - SHORTFALL_PCT / 100)]
    return [{"run": str(r["run"]), "target_rate": round(float(r["target_rate"]), 1),
             "achieved_rate": float(r["achieved_rate"])} for r in short.to_dict("records")]


def _label(r: dict[str, Any] | pd.Series) -> str:  # type: ignore[type-arg]
    upd = "updates" if r["updates"] else "no updates"
    client = r.get("client") or ""
    backend = f"{r['backend']}/{client}" if client else str(r["backend"])
    return f"{backend} {r['track']} · {r['schedulers']} sched · {upd}"


def _n_fmt(n: float | None) -> str:
    if n is None:
        return "never (≤ 10M)"
    return f"{n / 1000:,.1f}K"


# ---- figures -------------------------------------------------------------------------------

def _fig_points(reads: pd.DataFrame, confs: list[dict[str, Any]], title: str, degree: int) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ok = reads[reads["ok"]]
    for i, c in enumerate(confs):
        g = ok
        for k in CONFIG:
            g = g[g[k] == c[k]]
        med = g.groupby("nodes")["seconds"].agg(["median", "min", "max"])
        color = f"C{i % 10}"
        err = [med["median"] - med["min"], med["max"] - med["median"]]
        ax.errorbar(med.index / 1000, med["median"], yerr=err, fmt="o", ms=4, color=color, capsize=2,
                    label=_label(c))
        f = c.get("linear" if degree == 1 else "quadratic")
        if f:
            xs = np.linspace(0, med.index.max(), 50)
            ax.plot(xs / 1000, f["fit"].predict(xs), "-", color=color, lw=1,
                    label=f"  fit R²={f['r2']:.3f}")
    ax.set_xlabel("compute nodes N (thousands)")
    ax.set_ylabel("read time t(N), s")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _fig_extrapolated(confs: list[dict[str, Any]], thr: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    xmax = 0.0
    for c in confs:
        q = c.get("quadratic")
        if q and q["crossing_n"]:
            xmax = max(xmax, q["crossing_n"])
    xmax = max(xmax * 1.15, max((c["max_n"] for c in confs), default=1000) * 1.5)
    xs = np.linspace(0, xmax, 200)
    for i, c in enumerate(confs):
        q = c.get("quadratic")
        if not q:
            continue
        color = f"C{i % 10}"
        ax.plot(xs / 1000, q["fit"].predict(xs), "-", color=color, lw=1.2, label=_label(c))
        if q["crossing_n"]:
            ax.plot([q["crossing_n"] / 1000], [thr], "o", color="red", ms=6)
            ax.annotate(_n_fmt(q["crossing_n"]), (q["crossing_n"] / 1000, thr), fontsize=7, color=color,
                        xytext=(4, -12 - 9 * i), textcoords="offset points")
    ax.axhline(thr, color="red", lw=0.8, ls="--")
    ax.set_ylim(0, thr * 1.4)
    ax.set_xlabel("compute nodes N (thousands)")
    ax.set_ylabel("fitted t(N), s (quadratic)")
    ax.set_title(f"Quadratic fits extended to the {thr:g} s threshold (red: crossing)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _fig_updates(upd: pd.DataFrame) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    u = upd[upd["target_rate"] > 0]
    for i, (key, g) in enumerate(u.groupby(["backend", "track", "schedulers"])):
        g = g.sort_values("nodes")
        ax.plot(g["nodes"] / 1000, g["achieved_rate"], "o-", ms=3, color=f"C{i % 10}",
                label=f"{key[0]} {key[1]} · {key[2]} sched")
    if not u.empty:
        ns = sorted(u["nodes"].unique())
        ax.plot([n / 1000 for n in ns], [n / 60 for n in ns], "k--", lw=1, label="target N/60")
    ax.set_xlabel("compute nodes N (thousands)")
    ax.set_ylabel("updates per second")
    ax.set_title("Achieved node-update rate during the reads vs N/60", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


# ---- the section ---------------------------------------------------------------------------

MODERN_WHY = (
    "<p><b>Why the modern curve differs.</b> A current nova scheduler does not read the 2013 "
    "join. Node statistics are a JSON column of <code>compute_nodes</code> (no "
    "<code>compute_node_stats</code> table, so no N × 10 row fan-out and no join), and the "
    "scheduler first asks placement for allocation candidates, capped at "
    "<code>[scheduler] max_placement_results</code> = 1000, then reads only those nodes "
    "(<code>ComputeNodeList.get_all_by_uuids</code>, one <code>IN (...)</code> of ≤ 1000 uuids). "
    "What still grows with N is <code>ServiceList.get_by_binary('nova-compute')</code>, which "
    "returns every compute service (small rows). So the modern read is nearly flat past 1000 "
    "nodes, with a small linear term from the services; placement's own query cost (not "
    "measured here) is where the growth moved.</p>")


def section(paths: list[Path]) -> str | None:
    """The HTML fragment for ``juice report``; None when ``paths`` hold no scheduler-db run."""
    from juice.report.figures import figure_html
    from juice.report.tables import table_html

    reads, upd, mans = load(paths)
    if reads.empty:
        return None
    thr = _threshold(mans)
    confs = fits(reads, thr)
    sql = [c for c in confs if c["track"] != "kv"]
    hist = [c for c in sql if str(c["track"]).startswith("historical")]
    host = mans[0].get("host", {})
    loads = [m.get("load_avg_before", [0])[0] for m in mans]
    parts = [
        "<h2>Scheduler ↔ database: compute-node state read, t(N)</h2>",
        f"<p>{len(mans)} runs; host {escape(str(host.get('hostname', '?')))}, "
        f"{host.get('cpus', '?')} CPUs, {host.get('mem_gib', '?')} GiB; 1-min load average before "
        f"the runs {min(loads):.1f}–{max(loads):.1f} (other work on the host inflates the times). "
        f"Each point: every scheduler process issues the read at the same moment; the read time "
        f"includes fetching and hydrating the objects in Python. With more schedulers than CPUs the "
        f"scheduler processes share the cores with each other, the database and the updaters: that "
        f"contention is part of the result. The client libraries decode rows differently (PyMySQL is "
        f"pure Python, psycopg has a C core), which weighs on the SQL reads of many rows. Versions: "
        f"{escape(', '.join(f'{k} {v}' for k, v in mans[0].get('versions', {}).items()))}.</p>",
    ]
    static = [c for c in hist if not c["updates"] and c["schedulers"] == 1]
    if static:
        parts.append(figure_html(_fig_points(reads, static, "t(N) without updates, 1 scheduler "
                                             "(linear fit)", 1), "Figure 1 — static database"))
    dyn = [c for c in hist if c["updates"] and c["schedulers"] == 1]
    if dyn:
        parts.append(figure_html(_fig_points(reads, dyn, "t(N) with N/60 updates per second, 1 scheduler "
                                             "(quadratic fit)", 2), "Figure 2 — with updates"))
    if hist:
        parts.append(figure_html(_fig_extrapolated(hist, thr), "Figure 3 — extrapolation"))
        by_s = [c for c in hist if c["updates"] or c["schedulers"] == 1]
        parts.append(figure_html(_fig_points(reads, by_s, "All configurations: per number of "
                                             "schedulers (quadratic fits)", 2),
                                 "Figure 4 — schedulers and load"))
    kv = [c for c in confs if c["track"] == "kv"]
    if kv:
        parts.append("<p>The cache design: every node writes its state (what the scheduler's HostState "
                     "needs, packed as a JSON array of ~220 bytes) under its own key once a minute; a "
                     "scheduler reads an index "
                     "key, then every node key with multi-gets of 1000 keys, and decodes each value. "
                     + " ".join(f"{escape(c['backend'])} with {c['schedulers']} scheduler(s)"
                                f"{' under updates' if c['updates'] else ''}: {c['max_n'] / 1000:g}K nodes "
                                f"in {c['t_at_max_s']:.3f} s (median)." for c in kv) + "</p>")
        parts.append(figure_html(_fig_points(reads, kv, "The cache alternative: node state in "
                                             "memcached/redis, get_multi of every node", 1),
                                 "Figure 5 — cache alternative"))
    modern_c = [c for c in sql if str(c["track"]).startswith("modern")]
    if modern_c:
        ref = [c for c in hist if c["schedulers"] == 1 and not c["updates"]]
        parts.append(figure_html(_fig_points(reads, modern_c + ref, "Modern nova schema vs the 2013 "
                                             "layout (1 scheduler)", 1), "Figure 6 — modern track"))
        parts.append(MODERN_WHY)
    rows = []
    for c in confs:
        lin, quad = c.get("linear"), c.get("quadratic")
        rows.append({"configuration": _label(c), "N points": c["points"], "reads": c["reads"],
                     f"t at {c['max_n'] // 1000}K (s)": round(c["t_at_max_s"], 3),
                     "linear": lin["formula"] if lin else "–", "R² lin": round(lin["r2"], 4) if lin else None,
                     f"lin. crossing {thr:g} s": _n_fmt(lin["crossing_n"]) if lin else "–",
                     "quadratic": quad["formula"] if quad else "–",
                     "R² quad": round(quad["r2"], 4) if quad else None,
                     f"quad. crossing {thr:g} s": _n_fmt(quad["crossing_n"]) if quad else "–"})
    parts += ["<h3>Fits and crossings</h3>",
              "<p>The seed (2013 hardware, one MySQL): ~49.7K nodes with 1 scheduler, ~33K with 9, "
              "with updates. Juice's crossing per configuration:</p>",
              table_html(pd.DataFrame(rows).rename(columns=lambda c: str(c)))]
    if not upd.empty and (upd["target_rate"] > 0).any():
        parts.append(figure_html(_fig_updates(upd), "Figure 7 — achieved update rate"))
        short = _shortfalls(upd)
        if short:
            parts.append(f"<p><b>The update load fell short</b> (> {SHORTFALL_PCT:g}% below N/60) in "
                         f"{len(short)} runs: " + ", ".join(
                             f"{escape(s['run'])} ({s['achieved_rate']}/{s['target_rate']} per s)"
                             for s in short) + ". Those points saw less write load than intended.</p>")
        else:
            parts.append(f"<p>The achieved update rate was within {SHORTFALL_PCT:g}% of N/60 in every "
                         "run with updates.</p>")
    return "\n".join(parts)



def summary_lines(summ: dict[str, Any]) -> list[str]:
    """``summary(...)`` as lines for a terminal: one per configuration, then shortfalls."""
    thr = summ["threshold_s"]
    out = [f"{summ['runs']} runs; crossing of {thr:g} s per configuration (linear | quadratic fit):"]
    for c in summ["configurations"]:
        def part(f: dict[str, Any] | None) -> str:
            if f is None:
                return "–"
            n = f["crossing_n"]
            return f"{_n_fmt(n)} (R² {f['r2']:.3f})"
        out.append(f"  {_label(c):<55} t({c['max_n'] // 1000}K) = {c['t_at_max_s']:.3f} s   "
                   f"{part(c['linear'])} | {part(c['quadratic'])}")
    for s in summ["update_shortfalls"]:
        out.append(f"  update rate short: {s['run']}: {s['achieved_rate']}/{s['target_rate']} per s")
    return out


__all__ = ["Fit", "fits", "load", "section", "summary", "summary_lines"]


def describe_reads(paths: list[Path], by: Sequence[str] = ()) -> pd.DataFrame | None:
    """``juice analyze``: the read time (seconds) per configuration and N — count, mean, std,
    min, p25..p99, max over successful reads, and failed reads; None when ``paths`` hold no
    scheduler-db run. ``by`` adds grouping columns (any read or point column)."""
    from juice.analysis.describe import QUANTILES, STAT_COLUMNS
    from juice.analysis.stats import grouped_stats
    from juice.errors import UserError

    reads, _, mans = load(paths)
    if not mans:
        return None
    for b in by:
        if b not in reads.columns:
            raise UserError(f"--by: unknown parameter {b!r} (known: {', '.join(map(str, reads.columns))})")
    keys: list[str] = list(dict.fromkeys([*by, *CONFIG, "nodes"]))
    ok = reads[reads["ok"]]
    stats = grouped_stats(ok["seconds"], [ok[c] for c in keys], QUANTILES)
    fails = reads[~reads["ok"]].groupby(keys, dropna=False).size().rename("failures")
    out = stats.join(fails, how="outer").reset_index()
    out["count"] = out["count"].fillna(0)
    out["failures"] = out["failures"].fillna(0)
    out = out.sort_values(keys, kind="stable", ignore_index=True)
    out = out[[*keys, *STAT_COLUMNS]]
    out.attrs["note"] = f"{len(mans)} runs"
    out.attrs["title"] = "scheduler read (seconds) per configuration"
    return out
