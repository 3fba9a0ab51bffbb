"""Intervals attached to describe tables, row by row; differences say real or within noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from juice.analysis.bootstrap import group_rng, replicates
from juice.analysis.describe import describe
from juice.analysis.uncertainty import CI_COLUMNS, ci_display, describe_ci, differences, with_ci
from juice.results import tidy
from tests.results.fake_runs import fake_params, write_fake_run


def _load(root: Path) -> pd.DataFrame:
    return tidy.load(tidy.discover([root]).runs)


def test_describe_ci_rows_match_describe_and_bracket_the_estimates(tmp_path: Path) -> None:
    for i, db in enumerate(("galera", "mariadb")):
        write_fake_run(tmp_path, f"{db}-r0", fake_params(rdbms=db, repetition=0, run_id=f"{db}0"),
                       n=40, fail_every=7, seed=i)
        write_fake_run(tmp_path, f"{db}-r1", fake_params(rdbms=db, repetition=1, run_id=f"{db}1"),
                       n=40, seed=10 + i, scale=0.08)
    write_fake_run(tmp_path, "cockroach", fake_params(rdbms="cockroachdb"), n=30, seed=5)
    df = _load(tmp_path)
    by = ["rdbms"]
    base = describe(df, by=by)
    full = with_ci(base, describe_ci(df, by), by)
    assert list(full.columns) == [*base.columns, *CI_COLUMNS]
    pd.testing.assert_frame_equal(full[base.columns], base)  # the describe values are untouched
    for s in ("mean", "p25", "p50", "p75", "p95", "p99"):
        assert (full[f"{s}_ci_low"] <= full[s] + 1e-12).all()
        assert (full[s] <= full[f"{s}_ci_high"] + 1e-12).all()
    assert (full["ci_level"] == 0.95).all()
    methods = dict(zip(full["rdbms"], full["ci_method"], strict=False))
    assert methods["galera"] == "two-level bootstrap: runs, then iterations within"
    assert methods["cockroachdb"] == "bootstrap over iterations"
    shown = ci_display(full, ["rdbms", "operation"])
    assert shown.columns[-1] == "method" and "mean [95% CI]" in shown.columns
    assert shown["mean [95% CI]"].str.match(r"^[\d.]+ \[[\d.]+, [\d.]+\]$").all()


def test_describe_ci_is_reproducible(tmp_path: Path) -> None:
    write_fake_run(tmp_path, "a", fake_params(), n=25, seed=2)
    df = _load(tmp_path)
    a, b = describe_ci(df), describe_ci(df)
    pd.testing.assert_frame_equal(a[0].table, b[0].table)
    assert a[1] is not None and b[1] is not None
    pd.testing.assert_frame_equal(a[1].table, b[1].table)


def test_differences_real_or_within_noise() -> None:
    rng = np.random.default_rng(0)
    data = {("mariadb", 0): rng.normal(1.0, 0.1, 200), ("galera", 0): rng.normal(1.0, 0.1, 200),
            ("mariadb", 50): rng.normal(1.0, 0.1, 200), ("galera", 50): rng.normal(1.5, 0.1, 200)}
    reps = {k: replicates(v, None, None, (), group_rng(*k)) for k, v in data.items()}
    means = {k: float(v.mean()) for k, v in data.items()}
    order = {"mariadb": 0, "galera": 1}
    rows = differences(means, reps, ["rdbms", "delay_ms"], "rdbms", "all",
                       sort_key=lambda v: order.get(v, v))
    got = {r["at"]: r for r in rows}
    assert got["delay_ms=0"]["verdict"] == "within noise" and got["delay_ms=50"]["verdict"] == "real"
    assert got["delay_ms=50"]["compared"] == "rdbms=galera − rdbms=mariadb"
    r = got["delay_ms=50"]
    assert r["Δ CI low"] < r["Δ mean (s)"] < r["Δ CI high"] and r["Δ CI low"] > 0.4
