"""``juice trend PATH...``: runs of the same configuration in time order, each metric with its
interval, and the step changes that are real (``juice.compare.trend``); text, ``--json``,
``--html FILE``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from juice.cli.common import check_level_html, progress
from juice.errors import UserError

PATHS = typer.Argument(..., help="Results directories, runs or Rally JSON files (any mix).",
                       show_default=False)


def _v(v: float, metric: str) -> str:
    if math.isnan(v):
        return "n/a"
    if metric == "failure_pct":
        return f"{v:.1f} %"
    return f"{v * 1000:.2f} ms" if abs(v) < 1 else f"{v:.3f} s"


def _d(v: float, metric: str) -> str:
    s = _v(v, metric)
    return s if s == "n/a" or v < 0 else "+" + s


def trend(paths: list[Path] = PATHS,
          as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
          html: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML "
                                           "page: one figure per metric, intervals, steps marked."),
          level: float = typer.Option(0.95, "--level", help="Interval level and 1 - α of the "
                                      "Holm-corrected step verdicts (0.5..0.999)."),
          use_calibration: bool = typer.Option(True, "--calibration/--no-calibration",
                                               help="Judge steps against this host's calibrated "
                                               "run-to-run variation (juice calibrate)."),
          ) -> None:
    """Follow a figure over time: runs with the same stored parameters (directory names are
    never read), ordered by start time; per operation mean, p95 and failure % with each run's
    own bootstrap interval, and the step changes between consecutive runs that are real after a
    Holm correction over all the step tests. A step is one run against one run: it is judged
    against this host's run-to-run variation measured by `juice calibrate`, and has no verdict
    without it. Rally's `task trends`, with uncertainty.

    juice trend results/nightly
    juice trend task-*.json --html trend.html
    """
    from juice.analysis.runlevel import UNKNOWN
    from juice.compare.trend import trend as series_of
    from juice.results.samples import units

    check_level_html(level, html)
    found = units(paths)
    if not found:
        raise UserError(f"{' '.join(map(str, paths))}: no run found (give results directories, runs "
                        "or Rally JSON files)")
    from juice.compare.calibration import Store, host_of

    store = Store.load(host_of(found)) if use_calibration else None
    series = series_of(found, level, store if store is not None and store.entries else None)
    if html is not None:
        from juice.report.pages import trend_page
        from juice.util import atomic

        atomic.write_text(html, trend_page(series, level))
        progress(f"wrote {html}")
    if as_json:
        typer.echo(json.dumps({"level": level, "correction": "holm",
                               "series": [s.to_dict() for s in series]}, indent=2))
        return
    tests = sum(len(s.steps) for s in series)
    typer.echo(f"{len(series)} configurations, {len(found)} runs; {level:.0%} bootstrap intervals; "
               f"steps Holm-corrected over {tests} tests at α = {1 - level:.3g}")
    for n, s in enumerate(series, 1):
        typer.echo(f"\nSeries {n} ({len(s.runs)} runs): {s.label}")
        for i, r in enumerate(s.runs):
            typer.echo(f"  run {i + 1}: {r.when} UTC  {r.name}  ({r.n} iterations)")
        if len(s.runs) < 2:
            typer.echo("  one run: no trend")
            continue
        for metric, stat in s.metrics():
            pts = [p for p in s.points if p.metric == metric and p.stat == stat]
            typer.echo(f"  {metric} {stat}: " + "  ".join(
                f"{p.run + 1}: {_v(p.value, metric)} [{_v(p.lo, metric)}, {_v(p.hi, metric)}]"
                for p in pts))
        real = [st for st in s.steps if st.verdict == "real"]
        for st in real:
            typer.echo(f"  STEP {st.metric} {st.stat} between run {st.before + 1} "
                       f"({s.runs[st.before].name}) and run {st.after + 1} ({s.runs[st.after].name}): "
                       f"{_d(st.delta, st.metric)} [{_d(st.lo, st.metric)}, {_d(st.hi, st.metric)}]"
                       f"  p_holm={st.p_holm:.3g}")
        unknown = [st for st in s.steps if st.verdict == UNKNOWN]
        if unknown and not real:
            typer.echo(f"  {len(unknown)} steps without a verdict: one run against one run, and this "
                       "host's run-to-run variation is not calibrated (juice calibrate SPEC)")
        elif not real:
            typer.echo("  no step change beyond noise")


def register(app: typer.Typer) -> None:
    app.command(name="trend")(trend)
