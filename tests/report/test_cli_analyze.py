"""``juice analyze`` / ``juice report``: JSON shape, grouping, errors (exit 2), report path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from juice.cli import analyze as cli_analyze
from juice.errors import UserError
from tests.results.fake_runs import OPS, fake_params, write_fake_run

KEYS = ["operation", "count", "mean", "std", "min", "p25", "p50", "p75", "p95", "p99", "max", "failures"]
CI_KEYS = [f"{s}_ci_{e}" for s in ("mean", "p25", "p50", "p75", "p95", "p99") for e in ("low", "high")] \
    + ["ci_level", "ci_method"]


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    cli_analyze.register(a)
    return a


def test_analyze_json_rows_grouped(tmp_path: Path, app: typer.Typer) -> None:
    a = write_fake_run(tmp_path, "a", fake_params(rdbms="galera"), n=10, fail_every=5)
    write_fake_run(tmp_path, "b", fake_params(rdbms="mariadb"), n=8, seed=3)
    res = CliRunner(mix_stderr=False).invoke(app, ["analyze", str(tmp_path), "--json", "--by", "rdbms"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert all(list(r) == ["rdbms", *KEYS, *CI_KEYS] for r in rows)
    assert [(r["rdbms"], r["operation"]) for r in rows] == [
        (db, op) for db in ("galera", "mariadb") for op in (*OPS, "Total")]
    total = next(r for r in rows if r["rdbms"] == "galera" and r["operation"] == "Total")
    assert total["failures"] == a.failed_iterations == 2
    assert np.isclose(total["mean"], np.mean(a.totals))
    assert "2 runs" in res.stderr


def test_analyze_table_filter_and_params(tmp_path: Path, app: typer.Typer) -> None:
    run = write_fake_run(tmp_path, "a", fake_params(), n=20)
    rally = run.path / "rally.json"
    res = CliRunner().invoke(app, ["analyze", str(rally), "-p", "rdbms=cockroachdb", "-p", "sites=9",
                                   "--by", "rdbms", "--by", "sites", "-f", "95"])
    assert res.exit_code == 0, res.output
    assert "cockroachdb" in res.stdout and OPS[1] in res.stdout and "…" not in res.stdout
    res = CliRunner(mix_stderr=False).invoke(app, ["analyze", str(rally), "--json", "-f", "0.5"])
    totals = [r for r in json.loads(res.stdout) if r["operation"] == "Total"]
    assert totals[0]["count"] == 10  # the upper half of the run's iterations dropped


@pytest.mark.parametrize("args,match", [
    (["analyze", "{d}/missing"], "no such file"),
    (["analyze", "{d}/empty"], "no complete run"),
    (["analyze", "{d}/runs", "--by", "colour"], "--by: unknown parameter 'colour'"),
    (["analyze", "{d}/runs", "-f", "250"], "--filter-percentile"),
    (["analyze", "{d}/runs", "-p", "oops"], "--param: expected key=value"),
    (["report", "{d}/empty"], "no complete run"),
])
def test_bad_input_is_a_one_line_user_error(tmp_path: Path, app: typer.Typer, args: list[str],
                                             match: str) -> None:
    (tmp_path / "empty").mkdir()
    write_fake_run(tmp_path / "runs", "a", fake_params(), n=3)
    res = CliRunner().invoke(app, [a.format(d=tmp_path) for a in args])
    assert isinstance(res.exception, UserError), res.output
    assert res.exception.exit_code == 2
    msg = str(res.exception)
    assert match in msg and "\n" not in msg


def test_report_prints_the_path(tmp_path: Path, app: typer.Typer) -> None:
    write_fake_run(tmp_path / "res", "a", fake_params(), n=6)
    res = CliRunner(mix_stderr=False).invoke(app, ["report", str(tmp_path / "res")])
    assert res.exit_code == 0, res.output
    path = Path(res.stdout.strip())
    assert path == (tmp_path / "res" / "report.html").resolve() and path.is_file()
    out = tmp_path / "elsewhere.html"
    res = CliRunner(mix_stderr=False).invoke(app, ["report", str(tmp_path / "res"), "-o", str(out)])
    assert res.exit_code == 0 and Path(res.stdout.strip()) == out.resolve()
    assert "<svg" not in out.read_text()[:200] and out.read_text().startswith("<!DOCTYPE html>")


def test_parse_params_types() -> None:
    assert cli_analyze.parse_params(["a=1", "b=2.5", "c=true", "d=null", "e=galera"]) == {
        "a": 1, "b": 2.5, "c": True, "d": None, "e": "galera"}
