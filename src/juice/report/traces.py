"""The tracing section of the nova report, re-made from the runs' stored logs (seed 004; the
trace itself: ``juice.trace.report.traced``).

    body += trace_sections(run_dirs)        # the frame's (juice.report.shared.traces)

What it shows: how many boots were traced to a terminal state and how many match what the API
returned; the per-phase time stack per concurrency (seed 004 Figures 3-1/3-2), a tile per
number of schedulers; failure and retry rates and throughput; the clock offsets with their
bounds (in a Juice run every site shares one clock, so the offset found *is* the error); the
terminal faults and all WARNING/ERROR lines by message template; what did not fit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path

import pandas as pd

from juice.report.figures import Tile, figure_html, tiles_figure
from juice.report.layout import fit_table
from juice.report.tables import table_html
from juice.trace import causes, flow, lblog
from juice.trace.report import phase_means, traced
from juice.trace.tables import Traced
from juice.util.jsontypes import JSONObject, as_object, get_in

LEVELS_NOTE = (
    "What tracing needs from nova's logs: nova-api and nova-compute at INFO (the request log line, "
    "Claim/spawn/build lines), versioned notifications from scheduler and compute "
    "(<code>[oslo_messaging_notifications] driver = log</code> or <code>messaging</code>, "
    "<code>[notifications] notification_format = versioned</code>: "
    "<code>scheduler.select_destinations.*</code>, <code>instance.create.*</code>), the conductor at "
    "DEBUG (its request-id lines: <code>Took … to select destinations</code>, <code>Selected host …; "
    "Alternates …</code>) and placement at INFO (its request log carries nova's global request id). "
    "Juice's nova runs this way; a production cloud must enable the notifications and, for the "
    "conductor's milestones, DEBUG on <code>nova.conductor.manager</code> only (the scheduler's "
    "DEBUG is not needed: its notifications and placement's lines give its milestones).")


def _stack_figure(boots: pd.DataFrame) -> str:
    tiles = []
    several = "schedulers" in boots.columns and boots["schedulers"].nunique() > 1
    groups = boots.groupby("schedulers") if several else [(None, boots)]
    for k, g in groups:
        m = phase_means(g)
        if m.empty:
            continue
        key = m.index.name
        notes = []
        for lvl in m.index:
            sub = g[g[key] == lvl]
            fail = 100.0 * float((sub["state"] != "active").mean()) if len(sub) else 0.0
            retry = 100.0 * float((sub["attempts"] > 1).mean()) if len(sub) else 0.0
            notes.append(f"n {len(sub)}\nfail {fail:.0f}%\nretry {retry:.0f}%")
        tiles.append(Tile(f"{k!s} scheduler(s)" if k is not None else "all runs", m, notes))
    if not tiles:
        return ""
    fig = tiles_figure("Where a boot's time goes (traced from the logs)", tiles,
                       xlabel="concurrency", ylabel="mean seconds per phase (active boots)")
    return figure_html(fig, "Per-phase time of the boots that reached ACTIVE, stacked, per concurrency "
                            "(seed 004 Figures 3-1/3-2): api = POST received → conductor calls the "
                            "scheduler; rpc_* = queues and messaging between services; scheduler = "
                            "select_destinations incl. placement candidates and claims; claim/spawn/"
                            "finish on the compute. Above each bar: boots, failure and retry rates.")


def _skew_html(sk: pd.DataFrame, boots: pd.DataFrame) -> list[str]:
    if sk.empty:
        return []
    s = sk[sk["how"] != "reference"].copy()
    if s.empty:
        return []
    s["|error| (ms)"] = (s["offset_s"].abs() * 1000).round(2)
    s["bound width (ms)"] = (s["width_s"] * 1000).round(2)
    s["offset within bounds"] = (s["lo_s"] - 1e-9 <= 0) & (s["hi_s"] + 1e-9 >= 0)
    delay = None
    if "delay_ms" in boots.columns:
        d = boots.drop_duplicates("run").set_index("run")["delay_ms"]
        delay = s["run"].map(d)
    if delay is not None:
        s.insert(1, "delay_ms", delay)
    by = "delay_ms" if delay is not None and s["delay_ms"].notna().any() else None
    shown = s[[c for c in ("run", "delay_ms", "clock", "pairs", "how", "|error| (ms)", "bound width (ms)",
                           "offset within bounds") if c in s.columns]]
    out = ["<h3>Clock skew: offsets found and their bounds</h3>",
           "<p class=note>Every site of a Juice run shares one clock (one host), so the true offset is 0 "
           "and the offset the correction picks is its error. Bounds come from happens-before pairs "
           "(client → API, API → conductor, conductor ⇄ scheduler, scheduler ⇄ placement, conductor → "
           "compute, compute ⇄ placement); the offset is the middle of each clock's bounds. The width "
           "is at least the fastest round trip, so it grows with the WAN delay: for a compute site, "
           "measured ≈ 4 × the one-way delay + 20 ms wide with an error ≈ one one-way delay (its first "
           "placement call follows RPC round trips to the conductor; benchmarks/trace.md).</p>"]
    if by is not None:
        agg = (s.groupby(by).agg(clocks=("clock", "size"), max_error_ms=("|error| (ms)", "max"),
                                 mean_width_ms=("bound width (ms)", "mean"),
                                 all_within=("offset within bounds", "all")).reset_index())
        out += ["<p>Error and bound width by one-way WAN delay:</p>", table_html(agg, digits=3)]
    out.append(fit_table(shown.head(60), runs="run", digits=3, title="clocks"))
    return out


def _osprofiler_html(run_dirs: Sequence[Path], t: Traced) -> list[str]:
    """The OSProfiler comparison of the runs made with ``profiler: redis`` ([] when none was)."""
    from juice.trace import osprofiler

    runs = [(Path(d).name, Path(d)) for d in run_dirs]
    if not any(osprofiler.load(d) is not None for _, d in runs):
        return []
    table, counts = osprofiler.compare(runs, [(run, tr) for run, tr, _ in t.traces])
    out = ["<h3>Checked against OSProfiler on the same boots</h3>",
           "<p class=note>The same boots traced by OSProfiler inside nova (a trace per boot, read back "
           "into the run's osprofiler.json) and by the logs; each phase compared between the milestones "
           "both have. Median of OSProfiler − logs and 95th percentile of its absolute value, in ms, "
           "with 95 % bootstrap intervals; misfiled = boots with calls OSProfiler stored under another "
           "boot's trace (docs/trace.md).</p>", table_html(counts)]
    if not table.empty:
        out.append(table_html(osprofiler.display(table)))
    return out


def _manifests(run_dirs: Sequence[Path]) -> list[tuple[str, JSONObject]]:
    out: list[tuple[str, JSONObject]] = []
    for d in run_dirs:
        try:
            out.append((Path(d).name, json.loads((Path(d) / "manifest.json").read_text())))
        except (OSError, ValueError):
            continue
    return out


def _causes_html(run_dirs: Sequence[Path], b: pd.DataFrame) -> list[str]:
    """Failed boots by cause (seed 004 Table 1: component, error, count, cause), with what the
    database's own counters over the runs say, and the counters per run when any is not 0."""
    mans = _manifests(run_dirs)
    db: dict[str, int] = {}
    for _, man in mans:
        for k, v in as_object(get_in(man, "server_events", "database")).items():
            if isinstance(v, int):
                peak = k in ("Max_used_connections", "max_connections")
                db[k] = max(db.get(k, 0), v) if peak else db.get(k, 0) + v
    lb = lblog.summary(p for d in run_dirs for p in lblog.run_logs(Path(d)))
    out: list[str] = []
    ended = ["active", "untraced", "incomplete"]
    failed = b[~b["state"].isin(ended)] if "cause" in b.columns else b.iloc[0:0]
    if len(failed):
        knob = {c: k for _, c, k in causes.CAUSES}
        rows = []
        for cause, g in failed.groupby(failed["cause"].fillna(""), sort=False):
            row = {"cause": cause or "not named by a known message (see the templates below)",
                   "failed boots": len(g), "% of failed": round(100.0 * len(g) / len(failed), 1),
                   "components": ", ".join(sorted({str(c) for c in g["fault_component"].dropna()})),
                   "what governs it": knob.get(cause, ""),
                   "database counters": causes.db_verdict(cause or None, db) or ""}
            if lb:  # runs behind haproxy that kept its log
                row["load balancer's log"] = lblog.lb_verdict(cause or None, lb) or ""
            rows.append(row)
        also = ", the database's counters and haproxy's log" if lb else " and the database's counters"
        out += [f"<h3>Failed boots by cause (from the services' messages{also})</h3>",
                table_html(pd.DataFrame(rows).sort_values("failed boots", ascending=False))]
    table = causes.server_counters_table(mans)
    events = ("Innodb_deadlocks", "wsrep_local_cert_failures", "wsrep_local_bf_aborts",
              "Connection_errors_max_connections")
    if any(r.get(k) for r in table for k in events):
        out += ["<h3>Database event counters over each run</h3>",
                "<p class=note>From the database itself (<code>SHOW GLOBAL STATUS</code>, summed over "
                "Galera's nodes): deadlocks InnoDB resolved, write-sets that failed certification, "
                "transactions aborted by a replicated one, connections refused at max_connections; the "
                "peak of connections since the server started beside the limit.</p>",
                table_html(pd.DataFrame(table))]
    bad = lblog.table_rows(lb)
    if bad:
        out += ["<h3>haproxy's own log: the answers that went wrong</h3>",
                "<p class=note>From haproxy's log lines (<code>option httplog</code>) over the runs: each "
                "5xx or abnormal end by frontend, request, status and termination state (haproxy's own "
                "words for who ended the session and when: <code>sH</code> = its timeout server struck "
                "before the backend's response headers came); longest = its total time.</p>",
                table_html(pd.DataFrame(bad))]
    return out


def trace_sections(run_dirs: Sequence[Path], t: Traced | str | None = None) -> list[str]:
    """The HTML of the tracing section for these nova runs ([] when none kept its logs);
    ``t``: their ``traced(run_dirs)`` when the caller already has it."""
    if t is None:
        t = traced(run_dirs)
    if t is None:
        return []
    if isinstance(t, str):
        return ["<h2>nova: request tracing from logs (seed 004)</h2>",
                f"<p class=note>tracing failed: {escape(t)}</p>"]
    s, b = t.summary, t.boots
    n = int(s["boots"].sum()) if not s.empty else 0
    term = int(s["terminal"].sum()) if "terminal" in s.columns else 0
    matched = int(s["matches_api"].sum()) if "matches_api" in s.columns else 0
    api_n = int(s["api_boots"].sum()) if "api_boots" in s.columns else 0
    body = ["<h2>nova: request tracing from logs (seed 004)</h2>",
            f"<p class=note>{n} boots in {len(s)} runs, traced from the services' own logs (re-made by "
            "<code>juice trace &lt;runs&gt;</code>): "
            f"{term} ({100.0 * term / max(n, 1):.2f} %) reached a terminal state, {matched} of {api_n} "
            f"({100.0 * matched / max(api_n, 1):.2f} %) the same one the API reported. {LEVELS_NOTE}</p>"]
    cols = [c for c in ("run", "boots", "terminal_pct", "match_pct", *flow.TERMINALS, "incomplete",
                        "untraced", "failure_pct", "retry_pct", "anomalous_boots", "active_per_s",
                        "orphan_events", "other_requests") if c in s.columns]
    # short run ids with a legend, columns the same in every run (all-zero counts) stated once
    body += ["<h3>Boots traced, per run</h3>", fit_table(s[cols], runs="run", digits=3, title="runs"),
             _stack_figure(b)]
    body += _skew_html(t.skew, b)
    body += _osprofiler_html(run_dirs, t)
    if not t.faults.empty:
        keys = [c for c in ("component", "state", "fault", "cause") if c in t.faults.columns]
        body += ["<h3>Terminal faults by message template (one per failed boot)</h3>",
                 table_html(t.faults.groupby(keys, dropna=False)["count"].sum()
                            .reset_index().sort_values("count", ascending=False))]
    body += _causes_html(run_dirs, b)
    if not t.errors.empty:
        errs = (t.errors.groupby(["component", "level", "template"])[["count", "requests"]].sum()
                .reset_index().sort_values("count", ascending=False).head(25))
        body += ["<h3>WARNING/ERROR lines by message template and component</h3>", table_html(errs)]
    odd = b[(b.get("anomalies", pd.Series(dtype=float)) > 0) | (b["state"].isin(["incomplete", "untraced"]))]
    if len(odd):
        cols2 = [c for c in ("run", "request_id", "uuid", "state", "api_state", "anomaly", "fault")
                 if c in odd.columns]
        body += [f"<h3>Boots that did not fit the flow ({len(odd)})</h3>", table_html(odd[cols2].head(40))]
    return [x for x in body if x]
