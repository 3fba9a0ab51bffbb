"""Bootstrap intervals: coverage on known distributions, the two drawing regimes agree, the
two-level design widens intervals when repetitions disagree, seeds make them reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from juice.analysis.bootstrap import group_rng, interval, replicates, resample_counts

QS = (0.25, 0.5, 0.75, 0.95, 0.99)


@pytest.mark.parametrize("n,budget", [(30, None), (400, 0)], ids=["literal", "large-group draw"])
def test_mean_ci_of_normal_samples_covers_the_true_mean_about_95_percent(n: int, budget: int | None) -> None:
    covered = 0
    for seed in range(200):
        x = np.random.default_rng(seed).normal(0.0, 1.0, n)
        kw = {} if budget is None else {"exact_budget": budget}
        r = replicates(x, None, None, (0.5,), group_rng("coverage", seed), resamples=1000, **kw)
        assert r.exact == (budget is None)
        lo, hi = interval(r.mean)
        covered += lo <= 0.0 <= hi
    assert 0.85 <= covered / 200 <= 0.99


def test_median_ci_of_exponential_samples_covers_the_true_median() -> None:
    covered = 0
    for seed in range(200):
        x = np.random.default_rng(1000 + seed).exponential(1.0, 200)
        r = replicates(x, None, None, (0.5,), group_rng("median", seed), resamples=1000, exact_budget=0)
        lo, hi = interval(r.quantiles[0])
        covered += lo <= np.log(2.0) <= hi
    assert 0.85 <= covered / 200 <= 0.99


def test_literal_and_large_group_draws_agree() -> None:
    x = np.random.default_rng(1).gamma(2.0, 1.0, 1500)
    runs = np.repeat(np.arange(3), 500)
    x = x + runs * 0.3
    for strata in (None, np.zeros(1500, np.int64)):
        a = replicates(x, strata, runs, QS, np.random.default_rng(5), exact_budget=10**12)
        b = replicates(x, strata, runs, QS, np.random.default_rng(5), exact_budget=0)
        assert a.exact and not b.exact and a.two_level and b.two_level
        width = interval(a.mean)[1] - interval(a.mean)[0]
        for ra, rb in zip([a.mean, *a.quantiles], [b.mean, *b.quantiles], strict=True):
            (la, ha), (lb, hb) = interval(ra), interval(rb)
            assert abs(la - lb) < 0.15 * width + 0.02 and abs(ha - hb) < 0.15 * width + 0.05


def test_repetitions_that_disagree_widen_the_interval_and_strata_are_kept() -> None:
    rng = np.random.default_rng(3)
    runs = np.repeat(np.arange(6), 50)
    x = rng.normal(0.0, 0.1, 300) + np.array([0.0, 1.0, 0.2, 0.8, 0.4, 0.6])[runs]
    one = replicates(x, None, None, QS, np.random.default_rng(1))
    two = replicates(x, np.zeros(300, np.int64), runs, QS, np.random.default_rng(1))
    kept = replicates(x, runs, runs, QS, np.random.default_rng(1))  # six configurations, one run each
    assert not one.two_level and two.two_level and not kept.two_level
    w = {k: np.diff(interval(r.mean))[0] for k, r in (("one", one), ("two", two), ("kept", kept))}
    assert w["two"] > 3 * w["one"]  # the spread between runs counts
    assert w["kept"] < w["one"]  # configurations are fixed: their differences are no noise
    for r in (one, two, kept):
        lo, hi = interval(r.mean)
        assert lo <= x.mean() <= hi


def test_seeded_by_key_reproducible_and_nan_below_two_values() -> None:
    x = np.random.default_rng(0).normal(size=40)
    a = replicates(x, None, None, QS, group_rng("galera", np.int64(9), "Total"))
    b = replicates(x, None, None, QS, group_rng("galera", 9, "Total"))
    assert np.array_equal(a.mean, b.mean) and np.array_equal(a.quantiles, b.quantiles)
    c = replicates(x, None, None, QS, group_rng("mariadb", 9, "Total"))
    assert not np.array_equal(a.mean, c.mean)
    one = replicates([1.0], None, None, QS, group_rng("x"))
    assert np.isnan(interval(one.mean)).all() and np.isnan(one.quantiles).all()


def test_resample_counts_keep_strata_sizes_with_one_cluster_each() -> None:
    strata = np.array([0, 0, 0, 1, 1, 2])
    counts, two = resample_counts(strata, None, np.random.default_rng(0), resamples=50)
    assert counts.shape == (50, 6) and not two
    assert (counts[:, :3].sum(axis=1) == 3).all() and (counts[:, 3:5].sum(axis=1) == 2).all()
    assert (counts[:, 5] == 1).all()
    clusters = np.array([0, 0, 1, 2, 3, 4])  # stratum 0: two clusters of sizes 2 and 1
    counts, two = resample_counts(strata, clusters, np.random.default_rng(0), resamples=200)
    assert two and set(counts[:, :3].sum(axis=1)) <= {2, 3, 4}


def test_the_three_ways_to_invert_the_drawn_mixture_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Few cluster draws (one weighted count each), many (bisection on a count matrix) and
    huge groups (bisection with searchsorted): the same order statistics."""
    from juice.analysis import bootstrap

    x = np.random.default_rng(8).lognormal(0.0, 1.0, 3000)
    for k in (2, 6):
        runs = np.repeat(np.arange(k), 3000 // k)
        a = replicates(x, None, runs, QS, np.random.default_rng(1), exact_budget=0)
        monkeypatch.setattr(bootstrap, "_C_MATRIX_MAX", 0)
        b = replicates(x, None, runs, QS, np.random.default_rng(1), exact_budget=0)
        monkeypatch.undo()
        assert a.two_level and np.array_equal(a.quantiles, b.quantiles)
