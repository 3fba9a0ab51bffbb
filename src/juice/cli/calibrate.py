"""``juice calibrate SPEC``: A/A runs of one point of a spec, and this host's run-to-run
variation per metric stored for the verdicts that need it (``juice.compare.calibration``).

``juice calibrate RESULTS`` measures it from runs already stored instead (every configuration
with two or more runs)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from juice.cli.common import out, progress
from juice.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from juice.compare.calibration import Entry
    from juice.contract import P, S, Study
    from juice.results.samples import Unit

EFFECTS = (0.05, 0.10, 0.20)


def _config(study: Study[S, P], point: P) -> tuple[tuple[str, str], ...]:
    """What a point is without its repetition (its plan columns but ``rep``)."""
    return tuple((str(k), str(v)) for k, v in study.plan_columns(point).items() if k != "rep")


def calibrate(source: Path = typer.Argument(..., help="An experiment spec (YAML) to run A/A, or a "
                                            "results directory whose repeated runs to measure."),
              runs: int = typer.Option(6, "--runs", help="A/A runs of the point (2..50)."),
              point: int = typer.Option(1, "--point", help="Which point of the spec: the N-th distinct "
                                        "configuration in `juice plan`'s list (repetitions aside)."),
              results: Path | None = typer.Option(None, help="Where the A/A runs go (default: the "
                                                  "spec's results directory + '-calibration')."),
              same_deployment: bool = typer.Option(False, "--same-deployment", help="Run the A/A runs "
                                                   "on one deployment (cheaper; leaves out the variation "
                                                   "between deployments, which two result sets made "
                                                   "apart also differ by)."),
              sets: list[str] = typer.Option([], "--set", help="Override a spec field, as for juice run."),
              ) -> None:
    """Measure this host's run-to-run variation: run one point of SPEC several times (A/A: the
    same configuration, nothing changed) and store, per measured metric, the spread of its mean
    and p95 between runs in /var/lib/juice/calibration/<host>.json. `juice compare`, `juice
    trend`, the reports and SLA confidence then use it where a side has too few runs to show
    its own spread, and `juice plan` says how many repetitions a change needs.

    juice calibrate examples/quickstart.yaml --runs 8
    juice calibrate examples/nova-boot.yaml --point 3 --same-deployment
    juice calibrate results/nightly              # from runs already repeated
    """
    from juice.compare.calibration import Store, measure
    from juice.results.samples import units

    if not 2 <= runs <= 50:
        raise UserError(f"--runs: {runs} is out of range; give 2..50 A/A runs")
    if source.is_dir():
        found = units([source])
        entries = measure(found, fresh=False, results=str(source))
        fresh = False
    else:
        found, fresh = _run(source, runs, point, results, same_deployment, sets)
        entries = measure(found, fresh=fresh, results=str(found[0].path.parent) if found else "")
    if not entries:
        raise UserError(f"{source}: no configuration with 2 or more complete runs to measure; "
                        "give a spec (juice calibrate SPEC --runs 6) or results with repetitions >= 2")
    from juice.compare.calibration import host_of

    store = Store.load(host_of(found))
    store.add(entries)
    store.save()
    _print(entries, fresh)
    out.print(f"stored in {store.path} ({len(store.entries)} entries for this host)")


def _run(spec: Path, runs: int, point: int, results: Path | None, same_deployment: bool,
         sets: list[str]) -> tuple[list[Unit], bool]:
    from juice import studies
    from juice.lab.local import require_root
    from juice.results.samples import units
    from juice.sweep import order, sweep

    study, s, data = studies.load_spec(spec, [*sets, f"repetitions={runs}"])
    arranged = order.arrange(study.expand(s), order.mode_of(s), order.seed_of(s))
    firsts = list({_config(study, p): p for p in arranged}.values())
    if not 1 <= point <= len(firsts):
        raise UserError(f"--point: {point} is out of range; {spec} has {len(firsts)} points (juice plan "
                        "lists them)")
    want = _config(study, firsts[point - 1])
    chosen = [p for p in study.expand(s) if _config(study, p) == want]
    if len(chosen) < 2:
        raise UserError(f"{spec}: point {point} does not repeat (its study has no repetitions field); "
                        "calibrate from stored repeated runs: juice calibrate RESULTS")
    study_dir = results if results is not None else Path(f"{study.results_dir(s)}-calibration")
    label = ", ".join(f"{k}={v}" for k, v in want)
    mode = "on one deployment" if same_deployment else "each on a deployment of its own"
    progress(f"calibration: {len(chosen)} A/A runs of {label}, {mode} → {study_dir}")
    require_root()
    groups = [chosen] if same_deployment else [[p] for p in chosen]
    for i, group in enumerate(groups):
        only = copy.copy(study)
        only.__dict__["expand"] = lambda _spec, g=group: list(g)
        if not same_deployment:
            progress(f"calibration run {i + 1}/{len(groups)}")
        sweep.run(only, s, data, spec.read_text(), study_dir, progress)
    keys = {p.key for p in chosen}
    done = sweep.completed(study, study_dir)
    found = [u for u in units([study_dir]) if any(done.get(k) == u.path for k in keys)]
    if len(found) < 2:
        raise UserError(f"{study_dir}: only {len(found)} of {len(chosen)} A/A runs completed; see the "
                        "failed runs there and run juice calibrate again (it resumes)")
    return found, not same_deployment


def _print(entries: Sequence[Entry], fresh: bool) -> None:
    from rich.table import Table

    from juice.analysis.runlevel import runs_needed

    by_config: dict[str, list[Entry]] = {}
    for e in entries:
        by_config.setdefault(e.label, []).append(e)
    for label, es in sorted(by_config.items()):
        t = Table(title=f"{label}: run-to-run variation (A/A runs"
                        + (", a deployment each)" if fresh else ")"))
        for col in ("metric", "stat", "mean", "CV", "runs", *(f"n@{e:.0%}" for e in EFFECTS)):
            if col == "metric":
                t.add_column(col, overflow="fold", max_width=30)
            else:
                t.add_column(col, justify="left" if col == "stat" else "right", no_wrap=True)
        for e in sorted(es, key=lambda e: (e.metric != "iteration", e.metric, e.stat)):
            need = [runs_needed(e.cv, eff) if math.isfinite(e.cv) else None for eff in EFFECTS]
            t.add_row(e.metric, e.stat, f"{e.mean:.4g}", f"{e.cv:.1%}" if math.isfinite(e.cv) else "–",
                      str(e.runs), *("–" if not math.isfinite(e.cv) else "> 200" if n is None else str(n)
                                     for n in need))
        out.print(t)
    out.print("n@X: runs a side to detect a change of X in that statistic at α = 0.05 with 80 % "
              "power (two-sided t on the runs' values, this CV)")


def register(app: typer.Typer) -> None:
    app.command(name="calibrate")(calibrate)
