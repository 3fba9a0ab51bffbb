"""The scheduler–database report section (the seed's figures, from the stored runs alone).

    html = section([Path("results/scheduler-db")])   # an HTML fragment, or None when no run
    summary([...])                                    # crossings per configuration, for the CLI

A configuration is (backend, client, track, schedulers, updates) and any other recorded field
that differs between the runs (``juice.analysis.configkey``: the lab, the schema, versions...);
its t(N) samples are every successful read of its runs. Fits are least squares on those samples
(``fit.py``); the crossing is where the fitted curve reaches the spec's ``threshold_s``. The crossings the
report and the CLI state come from the quadratic fit with non-negative coefficients, with a
bootstrap interval and a plain "not supported by the data" when the extrapolation is not;
the unconstrained fits of earlier versions stay in a table of their own. ``client`` is the
MySQL driver (runs made before that axis existed were PyMySQL); "" for other backends.
``paths`` may be study directories (holding run directories) or run directories.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from juice.analysis import configkey
from juice.studies.schedulerdb.fit import (
    MAX_EXTRAPOLATION,
    Crossing,
    Fit,
    crossing,
    crossing_ci,
    fit,
    fit_nonneg,
)
from juice.studies.schedulerdb.spec import DEFAULT_CLIENT, MYSQL_BACKENDS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WORKLOAD = "scheduler-db"
SHORTFALL_PCT = 5.0


def run_dirs(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if (p / "manifest.json").exists():
            out.append(p)
        elif p.is_dir():
            out += sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith(".")
                          and not d.name.endswith(".failed") and (d / "manifest.json").exists())
    return out


def load(paths: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    """(reads, updates, manifests) of every complete scheduler-db run under ``paths``. The
    recorded fields beyond CONFIG that tell runs apart are columns of both frames, named in
    ``reads.attrs["config_extra"]`` (``attrs["config_notes"]``: runs pooled though they may
    differ)."""
    reads, upds, mans, names = [], [], [], []
    for d in run_dirs(paths):
        try:
            m = json.loads((d / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if m.get("workload") != WORKLOAD or not (d / "reads.parquet").exists():
            continue
        mans.append(m)
        names.append(d.name)
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
    cands = [{"client": _client(m["params"]), **configkey.fields(m, SECTIONS)} for m in mans]
    extra = configkey.key_fields(cands, [*CONFIG, "nodes"])
    for f in extra:  # per run (runs of several results directories may share a name)
        for df, u, c in zip(reads, upds, cands, strict=True):
            df[f] = u[f] = configkey.norm(c.get(f))
    rd = pd.concat(reads, ignore_index=True) if reads else pd.DataFrame()
    notes = configkey.unrecorded(mans, cands, [*CONFIG, "nodes", *extra], names)
    rd.attrs.update(config_extra=extra, config_notes=notes)
    return rd, pd.DataFrame(upds), mans


def keys(reads: pd.DataFrame) -> list[str]:
    """A configuration's fields: CONFIG and the recorded fields beyond it that tell the runs apart."""
    return [*CONFIG, *(f for f in reads.attrs.get("config_extra", []) if f in reads.columns)]


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
SECTIONS = (*configkey.SECTIONS, "lab", "layout")  # what else the key reads of a manifest


def fits(reads: pd.DataFrame, threshold: float) -> list[dict[str, Any]]:
    """Per configuration: linear and quadratic fits, R², crossing of ``threshold``."""
    out: list[dict[str, Any]] = []
    if reads.empty:
        return out
    ok = reads[reads["ok"]]
    conf = keys(reads)
    for key, g in ok.groupby(conf, sort=True, dropna=False):
        row: dict[str, Any] = dict(zip(conf, key, strict=True))
        row["extra"] = {k: row[k] for k in conf[len(CONFIG):]}
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
        row["constrained"] = _constrained(g, threshold)
        out.append(row)
    return out


def _constrained(g: pd.DataFrame, threshold: float) -> dict[str, Any] | None:
    """The non-negative quadratic fit of one configuration and its crossing with interval
    (repetitions, when an N has several, are resampled before the reads within)."""
    try:
        f = fit_nonneg(g["nodes"].to_numpy(float), g["seconds"].to_numpy(float))
    except ValueError:
        return None
    reps = g["repetition"] if "repetition" in g.columns else pd.Series(0, index=g.index)
    clusters = (g["run"].astype(str) + "/" + reps.astype(str)).to_numpy()
    x = crossing_ci(g["nodes"].to_numpy(float), g["seconds"].to_numpy(float), threshold, clusters)
    return {"coef": list(f.coef), "r2": f.r2, "formula": f.formula(), "fit": f, "crossing": x,
            "crossing_n": x.n, "reads_per_n": int(g.groupby("nodes").size().min())}


def summary(paths: list[Path]) -> dict[str, Any]:
    """What the CLI prints: crossings per configuration, update-rate shortfalls."""
    reads, upd, mans = load(paths)
    thr = _threshold(mans)
    confs = []
    for r in fits(reads, thr):
        c = {k: r[k] for k in (*CONFIG, *r["extra"], "points", "reads", "max_n", "t_at_max_s")}
        if r["extra"]:
            c["extra"] = r["extra"]
        for name in ("linear", "quadratic"):
            f = r.get(name)
            c[name] = None if f is None else {"formula": f["formula"], "r2": round(f["r2"], 4),
                                              "crossing_n": None if f["crossing_n"] is None
                                              else round(f["crossing_n"])}
        k = r.get("constrained")
        if k is None:
            c["constrained"] = None
        else:
            x: Crossing = k["crossing"]
            c["constrained"] = {
                "formula": k["formula"], "r2": round(k["r2"], 4),
                "crossing_n": None if x.n is None else round(x.n),
                "ci": [None if x.low is None else round(x.low), None if x.high is None else round(x.high)],
                "ci_level": 0.95, "supported": x.supported, "extrapolation": x.factor,
                "quadratic_positive_share": x.curvature, "reasons": list(x.reasons), "text": x.text()}
        confs.append(c)
    notes = reads.attrs.get("config_notes", [])
    return {"threshold_s": thr, "runs": len(mans), "configurations": confs,
            "update_shortfalls": _shortfalls(upd), **({"notes": notes} if notes else {})}


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
    extra = r.get("extra") or {}
    more = f" · {configkey.label(extra)}" if extra else ""
    return f"{backend} {r['track']} · {r['schedulers']} sched · {upd}{more}"


def _n_fmt(n: float | None) -> str:
    if n is None:
        return "never (≤ 10M)"
    return f"{n / 1000:,.1f}K"


def _n_short(n: float) -> str:
    """600 -> "600", 19000 -> "19K", 2500 -> "2.5K"."""
    return f"{n:g}" if n < 1000 else f"{n / 1000:g}K"


# ---- figures -------------------------------------------------------------------------------

def _fig_points(reads: pd.DataFrame, confs: list[dict[str, Any]], title: str, degree: int) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ok = reads[reads["ok"]]
    for i, c in enumerate(confs):
        g = ok
        for k in (*CONFIG, *(c.get("extra") or {})):
            g = g[(g[k] == c[k]) | (g[k].isna() & pd.isna(c[k]))]
        med = g.groupby("nodes")["seconds"].agg(["median", "min", "max"])
        color = f"C{i % 10}"
        err = [med["median"] - med["min"], med["max"] - med["median"]]
        ax.errorbar(med.index / 1000, med["median"], yerr=err, fmt="o", ms=4, color=color, capsize=2,
                    label=_label(c))
        f = c.get("linear" if degree == 1 else "constrained")
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


def _fig_extrapolated(confs: list[dict[str, Any]], thr: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    xmax = 0.0
    for c in confs:
        q = c.get("constrained")
        if q and q["crossing_n"]:
            xmax = max(xmax, q["crossing_n"])
    xmax = max(xmax * 1.15, max((c["max_n"] for c in confs), default=1000) * 1.5)
    xs = np.linspace(0, xmax, 200)
    for i, c in enumerate(confs):
        q = c.get("constrained")
        if not q:
            continue
        color = f"C{i % 10}"
        x: Crossing = q["crossing"]
        ax.plot(xs / 1000, q["fit"].predict(xs), "-", color=color, lw=1.2, label=_label(c))
        ax.axvline(c["max_n"] / 1000, color=color, lw=0.6, ls=":")
        if x.n is not None:
            lo = (x.low if x.low is not None else x.n) / 1000
            hi = (x.high if x.high is not None else xmax) / 1000
            ax.plot([lo, hi], [thr, thr], "-", color=color, lw=3, alpha=0.5)
            ax.plot([x.n / 1000], [thr], "o", color="red" if x.supported else "white",
                    markeredgecolor="red", ms=6)
            note = _n_fmt(x.n) + ("" if x.supported else " (not supported)")
            ax.annotate(note, (x.n / 1000, thr), fontsize=7, color=color,
                        xytext=(4, -12 - 9 * i), textcoords="offset points")
    ax.axhline(thr, color="red", lw=0.8, ls="--")
    ax.set_ylim(0, thr * 1.4)
    ax.set_xlim(0, xmax / 1000)
    ax.set_xlabel("compute nodes N (thousands)")
    ax.set_ylabel("fitted t(N), s (quadratic, coefficients ≥ 0)")
    ax.set_title(f"Fits extended to the {thr:g} s threshold\n(dot: crossing, hollow when not supported "
                 "by the data; band: its 95 % CI; dotted: largest N measured)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _fig_updates(upd: pd.DataFrame) -> Figure:
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

    reads, upd, mans = load(paths)
    if reads.empty:
        return None
    thr = _threshold(mans)
    confs = fits(reads, thr)
    sql = [c for c in confs if c["track"] != "kv"]
    hist = [c for c in sql if str(c["track"]).startswith("historical")]
    host = mans[0].get("host", {})
    loads = [m.get("load_avg_before", [0])[0] for m in mans]
    from juice.report.findings import findings_html
    from juice.report.layout import boxed
    from juice.report.tables import table_html
    from juice.studies.schedulerdb import seeds
    from juice.studies.schedulerdb.findings import findings

    parts = [
        "<h2>Scheduler ↔ database: compute-node state read, t(N)</h2>",
        findings_html("scheduler-db", findings(reads, confs, thr, _label)),
        configkey.notes_html(keys(reads)[len(CONFIG):], reads.attrs.get("config_notes", [])),
        seeds.section(reads, confs, thr, _label, mans),
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
                                             "(quadratic fit, coefficients ≥ 0)", 2),
                                 "Figure 2 — with updates"))
    if hist:
        parts.append(figure_html(_fig_extrapolated(hist, thr), "Figure 3 — extrapolation"))
        by_s = [c for c in hist if c["updates"] or c["schedulers"] == 1]
        parts.append(figure_html(_fig_points(reads, by_s, "All configurations: per number of "
                                             "schedulers (quadratic fits, coefficients ≥ 0)", 2),
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
              f"with updates. Juice's crossing per configuration, from the quadratic fit with "
              f"coefficients ≥ 0 (t = a + b·N + c·N², a, b, c ≥ 0: a read cannot get faster as "
              f"nodes are added), with its {0.95:.0%} interval (percentile bootstrap, "
              f"{_resamples(confs)} refits on the reads resampled at each N: the repetitions first "
              f"when an N has several, then the reads within each). <b>Not supported by the "
              f"data</b>: the interval is unbounded, or the crossing lies more than "
              f"{MAX_EXTRAPOLATION:g}× beyond the largest N measured, or beyond the data while "
              f"the quadratic term is not significantly &gt; 0 (c = 0 in more than 2.5 % of the "
              f"refits).</p>",
              boxed(table_html(pd.DataFrame(_constrained_rows(confs, thr)))),
              "<h3>Unconstrained least squares, as before</h3>",
              "<p class=note>The fits of earlier versions, kept for comparison: ordinary least "
              "squares, coefficients of any sign. A negative N² coefficient makes the curve bend "
              "back down (concave): it reaches the threshold twice or never, and its crossing is "
              "not to be trusted; nor is any crossing far beyond the largest N measured. The "
              "table above is the one to quote.</p>",
              boxed(table_html(pd.DataFrame(rows).rename(columns=lambda c: str(c))))]
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



def _resamples(confs: list[dict[str, Any]]) -> int:
    for c in confs:
        k = c.get("constrained")
        if k:
            return int(k["crossing"].resamples)
    return 0


def _constrained_rows(confs: list[dict[str, Any]], thr: float) -> list[dict[str, Any]]:
    rows = []
    for c in confs:
        k = c.get("constrained")
        x: Crossing | None = k["crossing"] if k else None
        rows.append({
            "configuration": _label(c), "N points": c["points"], "reads": c["reads"],
            "largest N": c["max_n"], "t at largest N (s)": round(c["t_at_max_s"], 3),
            "fit, coefficients ≥ 0": k["formula"] if k else "–",
            "R²": round(k["r2"], 4) if k else None,
            "c > 0 in refits": f"{x.curvature:.0%}" if x else "–",
            f"crossing {thr:g} s": _n_fmt(x.n) if x else "–",
            "95 % CI": x.interval_text() if x and x.n is not None else "–",
            "beyond the data": f"{x.factor:,.1f}×" if x and x.factor is not None else "–",
            "verdict": _verdict(x, k)})
    return rows


def _verdict(x: Crossing | None, k: dict[str, Any] | None) -> str:
    if x is None or k is None:
        return "–"
    if x.n is None:
        return "no crossing ≤ 10M nodes"
    few = f" (only {k['reads_per_n']} reads at some N: a rough interval)" if k["reads_per_n"] < 5 else ""
    if x.reasons:
        return "not supported by the data: " + "; ".join(x.reasons) + few
    f = x.factor or 0.0
    return ("within the measured range" if f <= 1 else f"extrapolated {f:.1f}× beyond the data") + few


def summary_lines(summ: dict[str, Any]) -> list[str]:
    """``summary(...)`` as lines for a terminal: one per configuration, then shortfalls."""
    thr = summ["threshold_s"]
    out = [f"{summ['runs']} runs; where t(N) reaches {thr:g} s per configuration (quadratic fit "
           "with coefficients >= 0; 95 % CI: bootstrap over the reads at each N):"]
    for c in summ["configurations"]:
        k = c.get("constrained")
        what = "crossing: –" if k is None else f"crossing {k['text']}"
        out.append(f"  {_label(c):<55} t({_n_short(c['max_n'])}) = {c['t_at_max_s']:.3f} s   {what}")
    for s in summ["update_shortfalls"]:
        out.append(f"  update rate short: {s['run']}: {s['achieved_rate']}/{s['target_rate']} per s")
    out += [f"  pooled though they may differ: {n}" for n in summ.get("notes", [])]
    return out


__all__ = ["Fit", "fits", "load", "section", "summary", "summary_lines"]


def describe_reads(paths: list[Path], by: Sequence[str] = ()) -> pd.DataFrame | None:
    """``juice analyze``: the read time (seconds) per configuration and N — count, mean, std,
    min, p25..p99, max over successful reads, and failed reads; None when ``paths`` hold no
    scheduler-db run. ``by`` adds grouping columns (any read or point column)."""
    from juice.analysis.describe import QUANTILES, STAT_COLUMNS
    from juice.analysis.stats import grouped_stats
    from juice.analysis.uncertainty import attach, grouped_ci
    from juice.errors import UserError

    reads, _, mans = load(paths)
    if not mans:
        return None
    for b in by:
        if b not in reads.columns:
            raise UserError(f"--by: unknown parameter {b!r} (known: {', '.join(map(str, reads.columns))})")
    cols: list[str] = list(dict.fromkeys([*by, *keys(reads), "nodes"]))
    ok = reads[reads["ok"]]
    stats = grouped_stats(ok["seconds"], [ok[c] for c in cols], QUANTILES)
    fails = reads[~reads["ok"]].groupby(cols, dropna=False).size().rename("failures")
    out = stats.join(fails, how="outer").reset_index()
    out["count"] = out["count"].fillna(0)
    out["failures"] = out["failures"].fillna(0)
    out = out.sort_values(cols, kind="stable", ignore_index=True)
    out = out[[*cols, *STAT_COLUMNS]]
    # CIs: a run's repetitions are its clusters (all its schedulers read at once in each)
    reps = ok["repetition"] if "repetition" in ok.columns else pd.Series(0, index=ok.index)
    runs = ok["run"].astype(str)
    cis = grouped_ci(ok["seconds"], [ok[c] for c in cols], pd.factorize(runs)[0],
                     pd.factorize(runs + "/" + reps.astype(str))[0], units="reads",
                     cluster_name="repetitions", salt="sdb")
    out = attach(out, cis, cols)
    out.attrs["note"] = f"{len(mans)} runs"
    out.attrs["title"] = "scheduler read (seconds) per configuration"
    return out
