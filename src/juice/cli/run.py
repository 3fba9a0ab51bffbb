"""`juice plan SPEC` and `juice run SPEC`: the experiment commands, for every study.

A spec's ``workload:`` names its study (see ``juice.studies``; default: the Keystone study).
These commands know no study by name: they read the study's points, plan columns, estimates,
summary lines and report sections through the study contract (``juice.contract``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from juice.cli.common import out, progress
from juice.errors import UserError

if TYPE_CHECKING:
    from juice.contract import P, S, Study


def _fmt_s(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _cell(v: object) -> str:
    return "" if v is None else str(v)


def plan(spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
         results: Path | None = typer.Option(None, help="Results directory (default: the spec's)."),
         limit: int = typer.Option(60, help="Show at most this many runs (0 = all)."),
         sets: list[str] = typer.Option([], "--set", help="Override a spec field, validated like the "
                                      "file: --set runner.times=200 --set wan.delay_ms='[0, 50]' "
                                      "(Rally's --task-args; recorded in each manifest)."),
         ) -> None:
    """Print the run matrix, what is already done, and an estimate of the time left."""
    from juice import studies
    from juice.sweep import order, sweep, warmup

    study, s, _ = studies.load_spec(spec, sets)
    study_dir = sweep.results_for(study, results)[0] if results is not None else study.results_dir(s)
    pl = sweep.plan(study, s, study_dir)
    rows = sweep.plan_rows(study, pl.points[: limit or None])
    cols = list(rows[0]) if rows else []
    t = Table(title=f"{s.name} ({study.title}): {len(pl.points)} runs "
                    f"({len(pl.points) - len(pl.todo)} done) → {study_dir}")
    for col in ("#", *cols, "est.", "status"):
        t.add_column(col, justify="right" if col in ("#", "est.") else "left")
    for i, (p, row) in enumerate(zip(pl.points, rows, strict=False), 1):
        t.add_row(str(i), *(_cell(row.get(c)) for c in cols), _fmt_s(study.estimate_s(p)),
                  "done" if p.key in pl.done else "todo")
    out.print(t)
    if limit and len(pl.points) > limit:
        out.print(f"… {len(pl.points) - limit} more runs (--limit 0 shows all)")
    warm = ", warm-up runs included" if pl.warmup_s else ""
    out.print(f"to run: {len(pl.todo)} runs in {pl.labs} labs and {pl.deployments} deployments; "
              f"estimated {_fmt_s(pl.estimate_s)} (rough, ±2×{warm})")
    out.print(warmup.plan_line(pl.warmup_runs, pl.deployments, _fmt_s(pl.warmup_s)))
    out.print(f"run order: {order.mode_of(s)} (runner.order, seed {order.seed_of(s)}); the table lists "
              "the runs in that order")
    from juice.compare.calibration import Store, advice

    tips = advice(Store.load(), study.name, int(getattr(s, "repetitions", 1) or 1))
    for line in tips:
        out.print(f"to detect {line}")
    if not tips:
        out.print("repetitions needed to detect a change: unknown on this host (no calibration for this "
                  f"study; juice calibrate {spec} measures it); with one run per point no difference "
                  "gets a verdict")


def run(spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
        results: Path | None = typer.Option(None, help="Results directory (default: the spec's)."),
        report: bool = typer.Option(True, help="Render report.html at the end."),
        dry_run: bool = typer.Option(False, "--dry-run", help="List every API call and every "
                                     "resource the runs would make (a spec with a target); send nothing."),
        yes: bool = typer.Option(False, "--yes", help="Run scenarios that create resources in a "
                                 "target cloud that is not a Juice lab."),
        sets: list[str] = typer.Option([], "--set", help="Override a spec field, validated like the "
                                       "file: --set runner.times=200 --set wan.delay_ms='[0, 50]' "
                                       "(Rally's --task-args; recorded in each manifest)."),
        ) -> None:
    """Run every run of SPEC not done yet (resumable), then render the HTML report.

    Exit status: 0 when every run completed and met the spec's sla: criteria, 1 when a run
    failed or a criterion failed (any complete run of the spec), 2 for bad input, 130 Ctrl-C.

    Interrupt with Ctrl-C at any time: completed runs are kept, the lab and servers are
    removed (or, against an existing cloud, what the run created is deleted), and running
    the same command again continues where it stopped.
    """
    from juice import studies
    from juice.lab.local import require_root
    from juice.spec.overrides import arguments
    from juice.sweep import sweep

    study, s, data = studies.load_spec(spec, sets)
    task_args = arguments(sets) or None
    study_dir, where = (sweep.results_for(study, results) if results is not None
                        else (study.results_dir(s), None))
    if where:
        out.print(where, highlight=False)
    todo = sweep.plan(study, s, study_dir).todo
    if dry_run:
        lines = study.dry_run(s, todo, progress)
        if lines is None:
            raise UserError(f"--dry-run: the {study.name} study has no dry run")
        for line in lines:
            out.print(line, highlight=False, soft_wrap=True)
        return
    study.preflight(s, todo, yes)
    require_root()
    before, ran, failed = sweep.run(study, s, data, spec.read_text(), study_dir, progress,
                                    task_args=task_args)
    out.print(f"{ran} runs completed now, {before} before, {failed} failed")
    for line in study.summary_lines(study_dir):
        out.print(line)
    if report:
        typer.echo(f"report: {_report(study, study_dir).resolve()}")
    sla_failed = sweep.sla_failures(study, s, study_dir)
    if sla_failed:
        out.print(f"SLA failed in {len(sla_failed)} runs (juice sla {study_dir} says which criteria): "
                  + ", ".join(d.name for d in sla_failed[:5]) + (" …" if len(sla_failed) > 5 else ""))
    if failed or sla_failed:
        raise typer.Exit(1)


def cleanup(target: Path = typer.Option(..., "--target", help="The experiment spec naming the cloud "
                                         "(its target: section)."),
            prefix: str | None = typer.Option(None, "--prefix", help="Only names starting with this (a "
                                              "run's created_prefix); default every Juice run's: s_juice_."),
            ) -> None:
    """Delete what Juice runs left in an existing cloud: users, projects, roles and services
    whose names start with s_juice_ (e.g. after a run was killed).

    juice cleanup --target examples/existing-cloud.yaml
    """
    from juice import studies

    study, s, _ = studies.load_spec(target)
    lines = study.cleanup(s, prefix, progress)
    if lines is None:
        raise UserError(f"--target: {target} names no existing cloud (no target: section)")
    for line in lines:
        out.print(line, highlight=False)


def _report(study: Study[S, P], study_dir: Path) -> Path:
    """``study_dir/report.html``: this study's runs (not another study's under ``<dir>/<study>/``)."""
    from juice import studies
    from juice.sweep import sweep

    return studies.report(sweep.report_paths(study, study_dir), study_dir / "report.html")
