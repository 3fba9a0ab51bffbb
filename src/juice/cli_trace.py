"""``juice trace``: request tracing from service logs (seed 004). ``cli.py`` registers it::

    from juice import cli_trace
    cli_trace.register(app)          # = app.command("trace")(cli_trace.trace)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from juice.cli_common import err, out
from juice.errors import UserError

PATHS = typer.Argument(..., help="Nova runs (with logs/), study directories, or directories of plain "
                                 "service logs (oslo.log text or JSON).", show_default=False)


def _clock_map(pairs: list[str]) -> dict[str, str]:
    m = {}
    for p in pairs:
        if "=" not in p:
            raise UserError(f"--clock: expected STREAM=CLOCK, got {p!r} (e.g. --clock nova-compute-7=host7)")
        k, v = (x.strip() for x in p.split("=", 1))
        m[k] = v
    return m


def trace(
    paths: list[Path] = PATHS,
    no_skew: bool = typer.Option(False, "--no-skew", help="Do not correct clock skew (the bounds are "
                                                          "still computed and shown)."),
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Write the tidy tables here as "
                                        "trace_<table>.parquet (default: nothing written)."),
    clock: list[str] = typer.Option([], "--clock", help="STREAM=CLOCK: log files (by stem) that share "
                                    "one host clock (default: a Juice run's sites, else one per file)."),
    workers: int | None = typer.Option(None, "--workers", "-j", help="Parser processes (default: CPUs)."),
) -> None:
    """Trace every nova boot in the logs: one state machine per request (API → super-conductor →
    scheduler and placement claims → conductor → compute → ACTIVE, with reschedules), terminal
    states checked against what the API said (Juice runs), clock skew corrected from causal
    pairs with its bounds, per-phase times, failure/retry rates and an error table.

    juice trace results/nova-boot

    juice trace /var/log/nova /var/log/placement --out trace/ --no-skew
    """
    import time

    from juice.trace.tables import trace as run_trace

    t0 = time.monotonic()
    t = run_trace(paths, correct=not no_skew, workers=workers, clocks=_clock_map(clock))
    took = time.monotonic() - t0
    _print(t, took)
    if out_dir is not None:
        for p in t.write(out_dir):
            err.print(f"[dim]·[/dim] wrote {p}")


def _print(t: Any, took: float) -> None:
    from juice.cli_analyze import _print_table

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
    if not t.skew.empty:
        sk = t.skew[["run", "clock", "offset_s", "lo_s", "hi_s", "width_s", "pairs", "how", "applied"]]
        _print_table(sk, "clock offsets (local − reference), bounds from happens-before pairs")
    if not t.faults.empty:
        _print_table(t.faults, "terminal faults by message template")
    if not t.errors.empty:
        _print_table(t.errors.head(15), "WARNING/ERROR lines by template (top 15)")
    unfit = [u for u in t.unfit if u["orphan_events"] or u["no_request_id"]]
    for u in unfit:
        out.print(f"[yellow]not in a boot[/yellow] {u['run']}: {u['orphan_events']} orphan events, "
                  f"{u['no_request_id']} flow events without a request id. {u['examples']}")


def register(app: typer.Typer) -> None:
    app.command("trace")(trace)
