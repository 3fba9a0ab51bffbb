"""`juice plan SPEC` and `juice run SPEC`: the experiment commands.

A spec's ``workload`` selects the study: ``keystone`` (the default; seed 000, the Rally
Keystone scenarios over MariaDB/Galera/PostgreSQL) or ``scheduler-db`` (seed 001).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from juice.cli_common import out, progress
from juice.errors import UserError


def _load(spec: Path) -> tuple[str, dict[str, Any]]:
    from juice.spec.experiment import read_yaml

    data = read_yaml(spec)
    workload = data.get("workload", "keystone")
    if workload not in ("keystone", "scheduler-db"):
        raise UserError(f"{spec}: workload: unknown study {workload!r} (choose keystone or scheduler-db)")
    return str(workload), data


def _fmt_s(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def plan(spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
         results: Path | None = typer.Option(None, help="Results directory (default: the spec's)."),
         limit: int = typer.Option(60, help="Show at most this many runs (0 = all)."),
         ) -> None:
    """Print the run matrix, what is already done, and an estimate of the time left."""
    workload, data = _load(spec)
    if workload == "scheduler-db":
        _plan_schedulerdb(spec, data, limit)
        return
    from juice.runner.study import completed, study_dir_of
    from juice.spec import estimate
    from juice.spec.experiment import parse
    from juice.spec.matrix import expand

    exp = parse(data, str(spec))
    points = expand(exp)
    study_dir = study_dir_of(exp, results)
    done = completed(study_dir)
    todo = [p for p in points if p.key not in done]
    t = Table(title=f"{exp.name}: {len(points)} runs ({len(points) - len(todo)} done) → {study_dir}")
    for col in ("#", "scenario", "rdbms", "sites", "wan (one-way)", "load", "cache", "rep", "est.", "status"):
        t.add_column(col, justify="right" if col in ("#", "sites", "rep", "est.") else "left")
    for i, p in enumerate(points, 1):
        if limit and i > limit:
            break
        t.add_row(str(i), p.scenario.split(".")[-1], p.rdbms, str(p.sites), p.wan.label, p.load,
                  "on" if p.cache else "off", str(p.repetition), _fmt_s(estimate.run_s(p)),
                  "done" if p.key in done else "todo")
    out.print(t)
    if limit and len(points) > limit:
        out.print(f"… {len(points) - limit} more runs (--limit 0 shows all)")
    deployments = len({p.deployment for p in todo})
    out.print(f"to run: {len(todo)} runs in {len({p.sites for p in todo})} labs and {deployments} "
              f"deployments; estimated {_fmt_s(estimate.total_s(todo))} (rough, ±2×)")


def run(spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
        results: Path | None = typer.Option(None, help="Results directory (default: the spec's)."),
        report: bool = typer.Option(True, help="Render report.html at the end."),
        ) -> None:
    """Run every run of SPEC not done yet (resumable), then render the HTML report.

    Interrupt with Ctrl-C at any time: completed runs are kept, the lab and servers are
    removed, and running the same command again continues where it stopped.
    """
    from juice.lab.local import require_root

    workload, data = _load(spec)
    require_root()
    if workload == "scheduler-db":
        path = _run_schedulerdb(spec, data, results)
        typer.echo(f"results: {path.resolve()}")
        if report:
            typer.echo(f"report: {_report(path).resolve()}")
        return
    from juice.runner import study
    from juice.spec.experiment import parse

    exp = parse(data, str(spec))
    study_dir = study.study_dir_of(exp, results)
    before, ran, failed = study.run(exp, data, study_dir, progress)
    out.print(f"{ran} runs completed now, {before} before, {failed} failed")
    if report:
        typer.echo(f"report: {_report(study_dir).resolve()}")
    if failed:
        raise typer.Exit(1)


def _report(study_dir: Path) -> Path:
    from juice.report import html

    sections = []
    try:
        from juice.workloads.schedulerdb import report as sdb

        sections.append(sdb.section)
    except ImportError:
        pass
    return html.render([study_dir], study_dir / "report.html", sections=sections)


def _plan_schedulerdb(spec: Path, data: dict[str, Any], limit: int) -> None:
    from juice.workloads.schedulerdb import spec as sspec
    from juice.workloads.schedulerdb import study as sstudy

    s = sspec.parse(data, str(spec))
    rows = sstudy.plan(s)
    t = Table(title=f"{s.name}: {len(rows)} measured points")
    cols = [c for c in rows[0] if c != "est_s"] if rows else []
    for c in [*cols, "est."]:
        t.add_column(c)
    for r in rows[: limit or None]:
        t.add_row(*(str(r[c]) for c in cols), _fmt_s(float(r.get("est_s", 0))))
    out.print(t)
    out.print(f"estimated {_fmt_s(sum(float(r.get('est_s', 0)) for r in rows))} (rough)")


def _run_schedulerdb(spec: Path, data: dict[str, Any], results: Path | None) -> Path:
    from juice.workloads.schedulerdb import spec as sspec
    from juice.workloads.schedulerdb import study as sstudy

    s = sspec.parse(data, str(spec))
    root = results if results is not None else Path("results")
    path: Path = sstudy.run(s, spec, root, progress)
    from juice.workloads.schedulerdb import report as sreport

    for line in sreport.summary_lines(sreport.summary([path])):
        out.print(line)
    return path
