"""``juice sla PATH... [--criteria FILE]``: re-judge stored results against SLA criteria
without re-running anything (``juice.sla``).

PATHs are results directories, run directories or Rally JSON files. The criteria are FILE's
(a YAML mapping of criteria, or a spec whose ``sla:`` holds them) or, without ``--criteria``,
each run's own: a Juice run's spec ``sla:``, a Rally workload's ``sla`` config (for a Rally
file, Rally's own stored verdict is shown next to Juice's, so they can be compared). One line
per criterion; exit 0 when all pass, 1 when one fails, 2 for bad input. Nothing is written,
unless ``--junit FILE``: the same verdicts as JUnit XML (``juice.sla.junit``), written
atomically before the exit code is decided, so a CI job shows them whether the gate passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from juice.errors import UserError

if TYPE_CHECKING:
    from juice.results.samples import Unit
    from juice.sla.criteria import Sla

PATHS = typer.Argument(..., help="Results directories, run directories or Rally JSON files.",
                       show_default=False)
CRITERIA = typer.Option(None, "--criteria", "-c", help="YAML criteria (a mapping like a spec's "
                        "sla:, or a spec with an sla: section); default: each run's own.")
JUNIT = typer.Option(None, "--junit", help="Also write the verdicts as JUnit XML to FILE (one "
                     "testsuite per run, one testcase per criterion), for a CI's test report.")


def load_criteria(path: Path) -> Sla:
    """The ``Sla`` in a YAML file (its ``sla:`` section when it has one)."""
    from juice.sla.criteria import Sla
    from juice.spec.base import read_yaml
    from juice.util.validation import validate

    data = read_yaml(path, expected="a mapping of SLA criteria (failure_rate, max_avg_duration, ...)")
    where = str(path)
    if isinstance(section := data.get("sla"), dict):
        data, where = section, f"{path}: sla"
    return validate(Sla, data, where, expected="a mapping of SLA criteria",
                    unknown_key_hint="see `juice sla --help` and docs/sla.md for the criteria")


def _own(unit: Unit) -> Sla | None:
    """The criteria a unit carries itself (None: none)."""
    from juice.sla.criteria import Sla
    from juice.util.validation import validate

    if unit.kind == "rally":
        return validate(Sla, unit.rally_sla or {}, f"{unit.path}: {unit.name}: sla",
                        expected="Rally SLA criteria", unknown_key_hint="a criterion Juice does not know")
    spec = unit.meta.get("spec") if isinstance(unit.meta.get("spec"), dict) else {}
    raw = spec.get("sla") if isinstance(spec, dict) else None
    if not raw:
        return None
    return validate(Sla, raw, f"{unit.path / 'manifest.json'}: spec.sla", expected="SLA criteria",
                    unknown_key_hint="a criterion of a newer Juice")


def sla(paths: list[Path] = PATHS, criteria: Path | None = CRITERIA,
        junit: Path | None = JUNIT) -> None:
    """Judge stored results (Juice runs or Rally JSON) against SLA criteria; exit 1 if any fails.

    juice sla results/quickstart --criteria examples/sla.yaml
    juice sla task.json              # a Rally export, against its own sla config
    juice sla results/nightly --junit sla.xml     # + JUnit XML for the CI's test report
    """
    from juice.results.samples import units
    from juice.sla.judge import judge
    from juice.sla.junit import Judged, to_text
    from juice.sla.store import host_calibration
    from juice.util.atomic import write_text

    given = load_criteria(criteria) if criteria is not None else None
    judged = failed = agree = differ = 0
    skipped: list[str] = []
    report: list[Judged] = []
    for unit in units(paths):
        crit = given if given is not None else _own(unit)
        if crit is None:
            skipped.append(unit.name)
            report.append(Judged(unit, None))
            continue
        v = judge(unit, crit, host_calibration([unit]) if crit.confidence is not None else None)
        report.append(Judged(unit, v))
        judged += 1
        for r in v.results:
            line = r["detail"].replace("\n", "; ")
            typer.echo(f"{'PASS' if r['success'] else 'FAIL'}  {unit.name}  {r['criterion']}: {line}")
            failed += not r["success"]
        if given is None and unit.rally_results is not None:
            theirs = {r.get("criterion"): r.get("success") for r in unit.rally_results}
            for r in v.results:
                if r["criterion"] in theirs:
                    same = theirs[r["criterion"]] == r["success"]
                    agree += same
                    differ += not same
                    if not same:
                        typer.echo(f"      {unit.name}  {r['criterion']}: Rally's stored verdict "
                                   f"differs ({'Passed' if theirs[r['criterion']] else 'Failed'})")
        if not v.results:
            typer.echo(f"PASS  {unit.name}  (no criteria)")
    if skipped:
        typer.echo(f"{len(skipped)} runs have no sla: criteria (give --criteria FILE): "
                   + ", ".join(skipped[:3]) + (" …" if len(skipped) > 3 else ""))
    if not judged:
        raise UserError("no criteria to judge: the runs' specs have no sla: section; give "
                        "--criteria FILE (e.g. examples/sla.yaml)")
    if agree or differ:
        typer.echo(f"Rally's stored verdicts: {agree} agree, {differ} differ")
    verdict = "all criteria passed" if not failed else f"{failed} criteria FAILED"
    typer.echo(f"{judged} runs judged: {verdict}")
    if junit is not None:
        write_text(junit, to_text(report))
        typer.echo(f"JUnit XML: {junit}")
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command(name="sla")(sla)
