"""Describe tables, percentile filter, λ, σ, stacked means and CDFs, each checked against
values computed independently with numpy on the durations the fake runs drew."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from juice.analysis import (
    cdf,
    cdfs,
    describe,
    filter_percentile,
    group_summary,
    iteration_totals,
    stacked_means,
)
from juice.results import tidy
from tests.results.fake_runs import OPS, FakeRun, fake_params, write_fake_run

QS = {"p25": 25, "p50": 50, "p75": 75, "p95": 95, "p99": 99}


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[pd.DataFrame, FakeRun, FakeRun]:
    a = write_fake_run(tmp_path, "a", fake_params(rdbms="galera"), n=60, fail_every=7, seed=1, child=True)
    b = write_fake_run(tmp_path, "b", fake_params(rdbms="mariadb"), n=45, fail_every=5, seed=2,
                       fail_before_actions=True, scale=0.2)
    return tidy.load([tmp_path]), a, b


def _check(row: pd.Series, values: list[float], failures: int) -> None:
    v = np.asarray(values)
    assert row["count"] == len(v)
    assert np.isclose(row["mean"], v.mean(), rtol=0, atol=1e-6)
    assert np.isclose(row["std"], v.std(ddof=1), rtol=0, atol=1e-6)
    assert np.isclose(row["min"], v.min(), rtol=0, atol=1e-6)
    assert np.isclose(row["max"], v.max(), rtol=0, atol=1e-6)
    for col, q in QS.items():
        assert np.isclose(row[col], np.percentile(v, q), rtol=0, atol=1e-6), col
    assert row["failures"] == failures


def test_describe_grouped_matches_numpy(two_runs: tuple[pd.DataFrame, FakeRun, FakeRun]) -> None:
    df, a, b = two_runs
    t = describe(df, by=["rdbms"])
    assert list(t.columns) == ["rdbms", "operation", "count", "mean", "std", "min", "p25", "p50",
                               "p75", "p95", "p99", "max", "failures"]
    for run, rdbms in ((a, "galera"), (b, "mariadb")):
        mine = t[t["rdbms"] == rdbms].set_index("operation")
        assert list(mine.index) == [*OPS, "Total"]  # the scenario's order, Total last
        # a's failed iterations fail in their last op; b's fail before any action
        a_fails = run.failed_iterations if run is a else 0
        # stats over successful iterations only (as the seed); failures = failed actions
        _check(mine.loc[OPS[0]], run.ok_durations[OPS[0]], 0)
        _check(mine.loc[OPS[1]], run.ok_durations[OPS[1]], a_fails)
        _check(mine.loc["Total"], run.totals, run.failed_iterations)


def test_describe_child_actions_only_when_asked(two_runs: tuple[pd.DataFrame, FakeRun, FakeRun]) -> None:
    df, _, _ = two_runs
    assert "db.query" not in set(describe(df)["operation"])
    every = describe(df, depth=None, total=False)
    assert "db.query" in set(every["operation"]) and "Total" not in set(every["operation"])


def test_totals_lambda_sigma_and_percentiles(two_runs: tuple[pd.DataFrame, FakeRun, FakeRun]) -> None:
    df, a, b = two_runs
    it = iteration_totals(df)
    assert len(it) == a.iterations + b.iterations
    s = group_summary(it, ["rdbms"]).set_index("rdbms")
    for run, rdbms in ((a, "galera"), (b, "mariadb")):
        row = s.loc[rdbms]
        assert row["iterations"] == run.iterations and row["failures"] == run.failed_iterations
        assert np.isclose(row["lam"], run.failed_iterations / run.iterations)
        assert np.isclose(row["sigma"], np.std(run.totals, ddof=1), atol=1e-6)
        assert np.isclose(row["mean"], np.mean(run.totals), atol=1e-6)
        for p in (50, 95, 99):
            assert np.isclose(row[f"p{p}"], np.percentile(run.totals, p), atol=1e-6)
    whole = group_summary(it, [])
    assert whole["iterations"].iloc[0] == a.iterations + b.iterations


def test_stacked_means_sum_to_the_mean_total(two_runs: tuple[pd.DataFrame, FakeRun, FakeRun]) -> None:
    df, a, b = two_runs
    m = stacked_means(df, ["rdbms", "sites"])
    assert list(m.columns) == list(OPS)
    for run, rdbms in ((a, "galera"), (b, "mariadb")):
        row = m.loc[(rdbms, 3)]
        assert np.isclose(row.sum(), np.mean(run.totals), atol=1e-6)
        assert np.isclose(row[OPS[1]], np.mean(run.durations[OPS[1]]), atol=1e-6)


def test_filter_percentile_drops_whole_iterations_above_the_run_quantile(
        two_runs: tuple[pd.DataFrame, FakeRun, FakeRun]) -> None:
    df, a, b = two_runs
    f = filter_percentile(df, 0.9)
    it = iteration_totals(f)
    for run in (a, b):
        mine = it[it["run"] == run.path.name]
        thr = np.quantile(run.totals, 0.9)
        kept = mine[~mine["failed"]]["total_s"].to_numpy()
        assert len(kept) == int(np.sum(np.asarray(run.totals) <= thr + 1e-12))
        assert (kept <= thr + 1e-9).all()
        assert mine["failed"].sum() == run.failed_iterations  # failures are never filtered
    # the rows of a kept iteration all stay (children included)
    per_iter = f.groupby(["run", "iteration"], observed=True).size()
    full = df.groupby(["run", "iteration"], observed=True).size()
    assert (per_iter == full.loc[per_iter.index]).all()
    with pytest.raises(ValueError):
        filter_percentile(df, 1.5)


def test_cdf_is_downsampled_monotonic_and_keeps_the_extremes() -> None:
    rng = np.random.default_rng(3)
    v = rng.exponential(0.1, 50_000)
    x, y = cdf(v, points=1000)
    assert len(x) <= 1000 and x[0] == v.min() and x[-1] == v.max()
    assert np.all(np.diff(x) >= 0) and np.all(np.diff(y) > 0) and y[-1] == 1.0
    # each point is the empirical CDF at x
    i = len(x) // 2
    assert np.isclose(y[i], np.mean(v <= x[i]))
    x2, y2 = cdf(np.array([0.3, np.nan, 0.1]))
    assert list(x2) == [0.1, 0.3] and list(y2) == [0.5, 1.0]
    assert len(cdf(np.array([]))[0]) == 0


def test_cdfs_per_group(two_runs: tuple[pd.DataFrame, FakeRun, FakeRun]) -> None:
    df, a, b = two_runs
    curves = dict((k, (x, y)) for k, x, y in cdfs(iteration_totals(df), ["rdbms"]))
    assert set(curves) == {("galera",), ("mariadb",)}
    x, y = curves[("mariadb",)]
    assert len(x) == len(b.totals) and np.isclose(x[-1], max(b.totals))


def test_grouped_stats_matches_numpy_with_null_keys_and_values() -> None:
    from juice.analysis.stats import grouped_stats

    rng = np.random.default_rng(5)
    vals = rng.lognormal(-3, 1, 3000)
    vals[::17] = np.nan  # failed: left out of the stats
    raw = rng.choice(np.array(["a", "b", None], dtype=object), 3000)
    raw[:5] = "only-nan"
    key = pd.Series(raw, dtype="category")
    vals[:5] = np.nan
    got = grouped_stats(pd.Series(vals), [key.rename("k")], {"p50": 0.5, "p99": 0.99})
    for k in ("a", "b", None):
        sel = (key.isna() if k is None else key == k).to_numpy()
        v = vals[sel & ~np.isnan(vals)]
        row = got.loc[np.nan if k is None else k]
        assert row["count"] == len(v)
        assert np.isclose(row["std"], v.std(ddof=1)) and np.isclose(row["mean"], v.mean())
        assert np.isclose(row["p99"], np.percentile(v, 99)) and np.isclose(row["min"], v.min())
    assert got.loc["only-nan", "count"] == 0 and np.isnan(got.loc["only-nan", "p50"])
