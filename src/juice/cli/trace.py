"""``juice trace``: request tracing from service logs (seed 004). ``cli.py`` registers it::

    from juice.cli import trace as cli_trace
    cli_trace.register(app)          # = app.command("trace")(cli_trace.trace)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from juice.cli.common import err, out

if TYPE_CHECKING:
    from juice.trace.tables import Traced

PATHS = typer.Argument(..., help="Nova runs (with logs/), study directories, or directories of plain "
                                 "service logs (oslo.log text or JSON).", show_default=False)


def trace(
    paths: list[Path] = PATHS,
    no_skew: bool = typer.Option(False, "--no-skew", help="Do not correct clock skew (the bounds are "
                                                          "still computed and shown)."),
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Write the tidy tables here as "
                                        "trace_<table>.parquet (default: nothing written)."),
    clock: list[str] = typer.Option([], "--clock", help="STREAM[,STREAM…]=CLOCK: log files (by stem) "
                                    "that share one host clock, or a YAML/JSON file host → [files] "
                                    "(default: a Juice run's sites, else JSON logs' hostname, else one "
                                    "clock per file)."),
    otlp: Path | None = typer.Option(None, "--otlp", help="Write the boots as OpenTelemetry traces "
                                     "(OTLP/JSON) to this file: a trace per boot, a span per phase "
                                     "and per service call."),
    jaeger: bool = typer.Option(False, "--jaeger", help="Load the boots into a real Jaeger (built once "
                                "by scripts/jaeger.sh) started in a one-site lab, print its UI address "
                                "and wait for Ctrl-C (needs root)."),
    jaeger_for: float | None = typer.Option(None, "--jaeger-for", metavar="S", help="Like --jaeger, but "
                                            "keep Jaeger up S seconds instead of waiting for Ctrl-C."),
    jaeger_ui: Path | None = typer.Option(None, "--jaeger-ui", metavar="DIR", help="A jaeger-ui build "
                                          "(the directory of its index.html) for Jaeger to serve (the "
                                          "binary built from the Go module has only a placeholder page)."),
    workers: int | None = typer.Option(None, "--workers", "-j", help="Parser processes (default: CPUs)."),
) -> None:
    """Trace every nova boot in the logs: one state machine per request (API → super-conductor →
    scheduler and placement claims → conductor → compute → ACTIVE, with reschedules), terminal
    states checked against what the API said (Juice runs), clock skew corrected from causal
    pairs with its bounds, per-phase times, failure/retry rates and an error table.

    juice trace results/nova-boot

    juice trace /var/log/nova /var/log/placement --out trace/ --no-skew

    juice trace logs/ --clock nova-api,nova-conductor,nova-scheduler,placement-api=ctl --otlp boots.json

    juice trace results/nova-boot --jaeger
    """
    import time

    from juice.errors import UserError

    if jaeger_for is not None and not jaeger_for >= 0:
        raise UserError(f"--jaeger-for: {jaeger_for:g} is not a number of seconds >= 0 "
                        "(e.g. --jaeger-for 60)")
    if jaeger_ui is not None and not (jaeger_ui / "index.html").is_file():
        raise UserError(f"--jaeger-ui: {jaeger_ui} has no index.html: "
                        "give the directory of a jaeger-ui build")

    from juice.trace.clocks import parse_clock_args
    from juice.trace.tables import trace as run_trace

    t0 = time.monotonic()
    t = run_trace(paths, correct=not no_skew, workers=workers, clocks=parse_clock_args(clock))
    took = time.monotonic() - t0
    _print(t, took)
    if out_dir is not None:
        for p in t.write(out_dir):
            err.print(f"[dim]·[/dim] wrote {p}")
    _osprofiler(paths, t, out_dir)
    if otlp is not None:
        from juice.trace.otlp import write

        n = write(t, otlp)
        err.print(f"[dim]·[/dim] wrote {otlp} ({n} traces, OTLP/JSON)")
    if jaeger or jaeger_for is not None or jaeger_ui is not None:
        from juice.trace.jaeger import show
        from juice.trace.otlp import document

        show(document(t), keep_s=jaeger_for, ui_assets=jaeger_ui.resolve() if jaeger_ui else None,
             announce=lambda m: out.print(m, soft_wrap=True, highlight=False),
             progress=lambda m: err.print(f"[dim]·[/dim] {m}"))


def _print(t: Traced, took: float) -> None:
    from juice.cli.analyze import _print_table

    s = t.summary
    cols = [c for c in ("run", "boots", "terminal_pct", "active", "no_valid_host", "retries_exhausted",
                        "compute_failed", "api_failed", "incomplete", "untraced", "match_pct", "failure_pct",
                        "retry_pct", "anomalous_boots", "active_per_s") if c in s.columns]
    _print_table(s[cols], f"boots traced ({took:.1f} s)")
    if not t.boots.empty:
        from juice.trace.report import phase_means

        pm = phase_means(t.boots)
        if not pm.empty:
            _print_table(pm.reset_index(), "mean seconds per phase (active boots), by concurrency")
    if not t.clocks.empty:
        _print_table(t.clocks[["run", "stream", "clock", "why", "shares_with"]],
                     "clocks: which files share one, and why")
    if not t.skew.empty:
        sk = t.skew[["run", "clock", "offset_s", "lo_s", "hi_s", "width_s", "pairs", "how", "applied"]]
        _print_table(sk, "clock offsets (local − reference), bounds from happens-before pairs")
        needs = t.skew[t.skew["needs"].fillna("") != ""] if "needs" in t.skew.columns else t.skew.iloc[:0]
        for r in needs.itertuples(index=False):
            out.print(f"[yellow]{r.clock} ({r.run}) is {r.how}[/yellow]: not corrected beyond causal order; "
                      f"it needs {r.needs}")
        for r in t.summary.itertuples(index=False):
            if getattr(r, "skew_note", ""):
                out.print(f"[dim]skew {r.run}: {r.skew_note}[/dim]")
    if not t.faults.empty:
        _print_table(t.faults, "terminal faults by message template")
    if not t.errors.empty:
        _print_table(t.errors.head(15), "WARNING/ERROR lines by template (top 15)")
    unfit = [u for u in t.unfit if u["orphan_events"] or u["no_request_id"]]
    for u in unfit:
        out.print(f"[yellow]not in a boot[/yellow] {u['run']}: {u['orphan_events']} orphan events, "
                  f"{u['no_request_id']} flow events without a request id. {u['examples']}")


def _osprofiler(paths: list[Path], t: Traced, out_dir: Path | None) -> None:
    """Runs with OSProfiler traces (``profiler: redis``): the per-phase agreement table."""
    from juice.trace import osprofiler
    from juice.trace.tables import sources

    runs = [(s.name, s.run_dir) for s in sources(paths) if s.run_dir is not None]
    if not any(osprofiler.load(d) is not None for _, d in runs):
        return
    from juice.cli.analyze import _print_table

    table, counts = osprofiler.compare(runs, [(run, tr) for run, tr, _ in t.traces])
    _print_table(counts, "OSProfiler: boots sent with a trace id, traced by OSProfiler, matched to the logs")
    if table.empty:
        out.print("[yellow]OSProfiler: no boot has milestones both ways[/yellow]")
    else:
        _print_table(osprofiler.display(table), "OSProfiler − Juice per phase, ms: median difference "
                     "and 95th percentile of |difference| [95% bootstrap intervals]")
    if out_dir is not None:
        import os

        p = out_dir / "trace_osprofiler.parquet"
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        table.to_parquet(tmp, index=False)
        os.replace(tmp, p)
        err.print(f"[dim]·[/dim] wrote {p}")


def register(app: typer.Typer) -> None:
    app.command("trace")(trace)
