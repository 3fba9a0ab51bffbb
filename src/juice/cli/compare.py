"""``juice compare A B [C ...]``: what differs between result sets, then whether their
measurements do (``juice.compare``). Each side is a results directory, a run directory or a
Rally JSON file; the first side is the baseline."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from juice.cli.common import check_level_html, progress
from juice.errors import UserError

SIDES = typer.Argument(..., help="Two or more sides: results directories, runs or Rally JSON files "
                       "(the first is the baseline).", show_default=False)


def _fmt(v: float, unit: str = "s") -> str:
    if math.isnan(v):
        return "n/a"
    return f"{v * 1000:+.2f} ms" if unit == "s" and abs(v) < 1 else f"{v:+.3f} {unit}"


def compare(sides: list[Path] = SIDES,
            as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
            level: float = typer.Option(0.95, "--level", help="Interval level and 1 - α of the "
                                        "Holm-corrected verdicts (0.5..0.999)."),
            html: Path | None = typer.Option(None, "--html", help="Also write a self-contained HTML "
                                             "page: what differs, the Δ table, per operation the "
                                             "sides' distributions side by side."),
            use_calibration: bool = typer.Option(True, "--calibration/--no-calibration",
                                                 help="Use this host's calibrated run-to-run "
                                                 "variation (juice calibrate) where a side has too "
                                                 "few runs to show its own."),
            ) -> None:
    """Compare result sets: the parameters and versions that differ first, then per measured
    operation Δ mean and Δ p95 against the first side. The RUN is the unit of evidence: each
    run gives one mean and one p95, and the sides are compared on those (Welch's t with two or
    more runs a side; the host's calibration from `juice calibrate` where a side has one run).
    With one run a side and no calibration there is no verdict: the run-to-run variation is
    unknown. Verdicts "real" or "within noise" after a Holm correction over all the tests.

    juice compare results/a results/b
    juice compare run-0ms run-50ms --json
    juice compare results/a results/b --html compare.html
    """
    from juice.compare.calibration import Store, host_of
    from juice.compare.deltas import compare as deltas
    from juice.compare.metadata import differences
    from juice.results.samples import units

    if len(sides) < 2:
        raise UserError("compare: give at least two sides (results directories, runs or Rally files)")
    check_level_html(level, html)
    names = [str(p) for p in sides]
    if len(set(names)) < len(names):  # the same path twice: label them apart
        names = [f"{n} [{i + 1}]" for i, n in enumerate(names)]
    groups = {n: units([p]) for n, p in zip(names, sides, strict=True)}
    meta = differences(groups)
    store = None
    if use_calibration:
        store = Store.load(host_of(u for us in groups.values() for u in us))
        store = store if store.entries else None
    rows = deltas(groups, level, store)
    if html is not None:
        from juice.report.pages import compare_page
        from juice.util import atomic

        atomic.write_text(html, compare_page(groups, meta, rows, level))
        progress(f"wrote {html}")
    if as_json:
        typer.echo(json.dumps({"sides": {n: [u.name for u in us] for n, us in groups.items()},
                               "differs": [{"key": k, "values": v} for k, v in meta],
                               "level": level, "correction": "holm", "unit": "run",
                               "calibration": str(store.path) if store else None,
                               "deltas": [d.to_dict() for d in rows]}, indent=2))
        return
    for i, (n, us) in enumerate(groups.items()):
        typer.echo(f"{chr(65 + i) if i < 26 else i}: {n} ({len(us)} runs)")
    typer.echo("")
    if meta:
        typer.echo("What differs (parameters, versions, deployment, host):")
        for k, v in meta:
            typer.echo(f"  {k}: " + "  vs  ".join(v.values()))
    else:
        typer.echo("What differs: nothing recorded (same parameters, versions and host)")
    typer.echo("")
    if not rows:
        typer.echo("No measurement in common with at least 2 values per side.")
        return
    tested = [d for d in rows if not math.isnan(d.p_holm)]
    typer.echo(f"Δ against {names[0]}, {level:.0%} intervals over runs (each run one value); verdicts "
               f"Holm-corrected over {len(tested)} tests at α = {1 - level:.3g}:")
    w = max(len(d.metric) for d in rows)
    for d in rows:
        ci = f"[{_fmt(d.lo)}, {_fmt(d.hi)}]" if not math.isnan(d.lo) else "[no interval]"
        ph = f"p_holm={d.p_holm:.3g}" if not math.isnan(d.p_holm) else "p_holm=–"
        typer.echo(f"  {d.metric:<{w}}  {d.stat:<4}  {_fmt(d.delta):>12}  {ci}  {ph}  {d.verdict}"
                   f"  ({d.runs_base} vs {d.runs} runs" + ("" if d.method == d.verdict else f"; {d.method}")
                   + ")"
                   + (f"  ({d.side})" if len(names) > 2 else ""))
    real = sum(d.verdict == "real" for d in rows)
    unknown = len(rows) - len(tested)
    typer.echo(f"{real} real differences, {len(tested) - real} within noise"
               + (f", {unknown} without a verdict" if unknown else ""))
    if unknown:
        typer.echo("Without a verdict: one run a side, so the run-to-run variation is unknown"
                   + (" (a calibration judges means only: a run's p95 is too heavy-tailed between runs)"
                      if store is not None else "")
                   + ". Run more repetitions (--set repetitions=3)"
                   + (", or measure this host's variation once with `juice calibrate SPEC`." if store is None
                      else "."))


def register(app: typer.Typer) -> None:
    app.command(name="compare")(compare)
