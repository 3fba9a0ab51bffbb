"""``juice analyze`` and ``juice report``: tables and the HTML report from stored results.

Both are plain functions; ``cli.py`` registers them as top-level commands::

    from juice.cli import analyze as cli_analyze
    cli_analyze.register(app)          # = app.command("analyze")(...); app.command("report")(...)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from juice.cli.common import err, out
from juice.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

PATHS_ARG = typer.Argument(..., help="Results directories (e.g. results/quickstart), run "
                                     "directories or Rally JSON files.", show_default=False)
PARAM_OPT = typer.Option([], "--param", "-p", help="key=value for imported Rally files, which do not "
                                                   "say it themselves (e.g. -p rdbms=galera -p sites=9).")
FILTER_OPT = typer.Option(None, "--filter-percentile", "-f",
                          help="Drop, per run, iterations whose total is above this percentile "
                               "(0.95 or 95), as the seed's filter_percentile.")


INT_RE = re.compile(r"[+-]?[0-9]+")
FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
NOT_FINITE = {f"{sign}{word}" for sign in ("", "+", "-") for word in ("nan", "inf", "infinity")}


def parse_params(pairs: list[str]) -> dict[str, str | int | float | bool | None]:
    """``["rdbms=galera", "sites=9", "cache=true"]`` -> typed values (int, finite float, bool,
    null, else the text); a UserError naming ``--param`` for NaN/inf, a key given twice or a
    control character."""
    params: dict[str, str | int | float | bool | None] = {}
    for p in pairs:
        if "=" not in p or not p.split("=", 1)[0].strip():
            raise UserError(f"--param: expected key=value, got {p!r} (e.g. --param rdbms=galera)")
        k, v = (x.strip() for x in p.split("=", 1))
        if k in params:
            raise UserError(f"--param: {k} is given twice")
        if not (k + v).isprintable():
            raise UserError(f"--param: control characters in {p!r}")
        val: str | int | float | bool | None = v
        if v.lower() in ("null", "none", ""):
            val = None
        elif v.lower() in ("true", "false"):
            val = v.lower() == "true"
        elif v.lower() in NOT_FINITE:
            raise UserError(f"--param: {k}={v}: not a finite number")
        elif INT_RE.fullmatch(v):
            val = int(v)
        elif FLOAT_RE.fullmatch(v):
            val = float(v)
            if not math.isfinite(val):
                raise UserError(f"--param: {k}={v}: not a finite number")
        params[k] = val
    return params


def parse_percentile(p: float | None) -> float | None:
    """0.95 or 95 -> 0.95; None stays None; anything else (NaN, inf...) is a UserError."""
    if p is None:
        return None
    if not math.isfinite(p):
        raise UserError(f"--filter-percentile: expected a finite number, got {p}")
    q = p / 100.0 if p > 1.0 else p
    if not 0.0 < q <= 1.0 or math.isnan(q):
        raise UserError(f"--filter-percentile: {p} is not a percentile (give 0 < P <= 1, or 1 < P <= 100)")
    return q


def _jsonable(v: object) -> object:
    if v is None:
        return None
    item = getattr(v, "item", None)  # numpy scalars: the Python value
    if item is not None:
        v = item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def analyze(
    paths: list[Path] = PATHS_ARG,
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows instead of tables."),
    by: list[str] = typer.Option([], "--by", "-b", help="Group by this parameter (repeatable), "
                                                       "e.g. --by rdbms --by sites."),
    filter_percentile: float | None = FILTER_OPT,
    param: list[str] = PARAM_OPT,
) -> None:
    """Describe tables of every study found under PATHS: per operation for iteration-based
    studies (count, mean, std, min, p25, p50, p75, p95, p99, max seconds, failures, plus the
    iteration Total), per configuration for the others, grouped by any parameters; then the
    95 % confidence intervals of the mean and percentiles (bootstrap: over iterations, or
    over runs then iterations when a configuration has several runs; --json: mean_ci_low,
    mean_ci_high, p50_ci_low, ..., ci_level, ci_method).

    juice analyze results/keystone --by rdbms --by sites

    juice analyze rally.json --param rdbms=galera --json
    """
    from juice import studies
    from juice.results import tidy

    q = parse_percentile(filter_percentile)
    params = parse_params(param)
    found = tidy.discover(paths)
    if found.empty:
        raise tidy.no_run_error(paths, found)
    tables = [(s, table) for s in studies.all()
              if (table := s.analyze(paths, by, params, q)) is not None]
    if not tables:
        raise UserError(f"{', '.join(str(p) for p in paths)}: no study knows these runs "
                        f"(studies: {', '.join(studies.names())})")
    if as_json:
        tag = len(tables) > 1  # rows of several studies say whose they are
        rows = [{**({"workload": s.name} if tag else {}), **{k: _jsonable(v) for k, v in r.items()}}
                for s, table in tables for r in table.to_dict(orient="records")]
        typer.echo(json.dumps(rows, indent=1))
        for s, table in tables:
            err.print(f"[dim]{s.title}: {table.attrs.get('note', '')}[/dim]")
        return
    from juice.analysis.bootstrap import LEVEL, RESAMPLES
    from juice.analysis.uncertainty import CI_COLUMNS

    for s, table in tables:
        title = f"{s.title}: {table.attrs.get('title', 'describe')} ({table.attrs.get('note', '')})"
        ci = [c for c in CI_COLUMNS if c in table.columns]
        _print_table(table.drop(columns=ci), title)
        if "mean_ci_low" in table.columns:  # the intervals: a second table, same rows
            _print_table(_ci_table(table), f"{s.title}: {LEVEL:.0%} confidence intervals "
                                           f"(percentile bootstrap, {RESAMPLES} resamples; "
                                           "--json gives them as numbers)")


def _ci_table(table: pd.DataFrame) -> pd.DataFrame:
    """Key columns, n, "value [low, high]" per mean and percentile with an interval, method."""
    from juice.analysis.describe import STAT_COLUMNS
    from juice.analysis.uncertainty import CI_COLUMNS, CI_STATS, ci_display

    keys = [c for c in table.columns if c not in STAT_COLUMNS and c not in CI_COLUMNS]
    stats = [c for c in CI_STATS if f"{c}_ci_low" in table.columns and c in table.columns]
    return ci_display(table, keys, stats)


def _print_table(table: pd.DataFrame, title: str) -> None:
    rich_table = Table(*table.columns, title=title)
    cells = [[_cell(v) for v in row] for row in table.itertuples(index=False, name=None)]
    for row_cells in cells:
        rich_table.add_row(*row_cells)
    # never squeeze numbers into ellipses: as wide as the widest row needs
    need = sum(max([len(str(c)), *(len(r[i]) for r in cells)]) + 3
               for i, c in enumerate(table.columns)) + 1
    console = out if out.width >= need else Console(width=need, highlight=False, file=out.file)
    console.print(rich_table)


def _cell(v: object) -> str:
    from juice.util.cells import fmt

    return fmt(v, 4, "–")


def report(
    paths: list[Path] = PATHS_ARG,
    output: Path | None = typer.Option(None, "--output", "-o", help="HTML file to write (default: "
                                       "report.html in the results directory)."),
    filter_percentile: float | None = typer.Option(
        0.95, "--filter-percentile", "-f", help="Bars and CDFs drop, per run, iterations above this "
                                                "percentile (seed: 0.95); 1 keeps them all."),
    param: list[str] = PARAM_OPT,
) -> None:
    """Write ONE self-contained HTML report (figures inline, no network) re-made from the
    stored results, and print its path.

    juice report results/keystone -o keystone.html
    """
    from juice.studies import report as render

    q = parse_percentile(filter_percentile)
    if output is None:
        output = paths[0] / "report.html" if len(paths) == 1 and paths[0].is_dir() else Path("report.html")
    if output.exists() and output.is_dir():
        raise UserError(f"--output: {output} is a directory: give a file name such as report.html")
    path = render(paths, output, filter_q=None if q == 1.0 else q,
                  params=parse_params(param))
    typer.echo(str(path.resolve()))


def register(app: typer.Typer) -> None:
    """Add ``analyze`` and ``report`` as top-level commands of ``app``."""
    app.command("analyze")(analyze)
    app.command("report")(report)
