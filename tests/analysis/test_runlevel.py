"""The run as the unit of evidence: Student's t, Welch, pooled and calibrated spreads, and the
false-"real" rate of A/A pairs simulated with a run-to-run effect (the case the iteration
bootstrap gets wrong)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from juice.analysis import runlevel as rl
from juice.analysis.bootstrap import group_rng, interval, replicates


@pytest.mark.parametrize(("df", "q", "table"), [(1, 0.975, 12.706), (2, 0.975, 4.303),
                                                (10, 0.975, 2.228), (30, 0.975, 2.042),
                                                (5, 0.8, 0.920), (120, 0.995, 2.617)])
def test_t_quantiles_match_the_printed_table(df: int, q: float, table: float) -> None:
    assert rl.t_ppf(q, df) == pytest.approx(table, abs=5e-4)
    assert rl.t_sf2(rl.t_ppf(q, df), df) == pytest.approx(2 * (1 - q), rel=1e-6)


def test_welch_matches_a_hand_computation() -> None:
    a, b = [1.0, 1.1, 0.9], [1.2, 1.3, 1.25]
    r = rl.difference(a, b)
    va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    half = rl.t_ppf(0.975, df) * math.sqrt(va + vb)
    assert r.method == rl.WELCH and r.df == pytest.approx(df)
    assert (r.lo, r.hi) == pytest.approx((0.25 - half, 0.25 + half))
    assert r.verdict == rl.REAL


def test_one_run_a_side_has_no_verdict_without_a_calibration() -> None:
    r = rl.difference([0.105], [0.082])
    assert r.verdict == rl.UNKNOWN and r.method == rl.UNKNOWN and math.isnan(r.p)
    assert r.delta == pytest.approx(-0.023)
    cal = rl.Spread(cv=0.07, df=9, source="calibration of today (10 runs)")
    r = rl.difference([0.105], [0.082], cal)
    assert r.method.startswith("calibration") and r.df == 9
    # SE = cv * sqrt(ma^2 + mb^2); a 22 % change against a 7 % CV is beyond noise
    se = 0.07 * math.hypot(0.105, 0.082)
    assert r.hi == pytest.approx(-0.023 + rl.t_ppf(0.975, 9) * se) and r.verdict == rl.REAL
    assert rl.difference([0.100], [0.104], cal).verdict == rl.NOISE


def test_one_side_with_runs_lends_its_spread_and_the_same_runs_are_noise() -> None:
    r = rl.difference([1.0, 1.1, 0.9, 1.0], [1.5])
    assert r.method == rl.POOLED and r.df == 3 and r.verdict == rl.REAL
    same = rl.difference([1.0], [1.0])
    assert same.verdict == rl.NOISE and same.p == 1.0


def test_a_failure_share_of_zero_pools_absolute_spreads() -> None:
    r = rl.difference([0.0, 0.0, 0.0], [10.0, 0.0, 20.0])
    assert r.method == rl.WELCH and r.verdict == rl.NOISE  # 3 runs, one at 0 %: not enough
    r = rl.difference([0.0], [10.0, 12.0, 8.0])
    assert r.method == rl.POOLED and r.verdict == rl.REAL


def test_runs_needed_grows_with_the_square_of_cv_over_effect() -> None:
    n10 = rl.runs_needed(0.07, 0.10)
    n5 = rl.runs_needed(0.07, 0.05)
    assert n10 is not None and n5 is not None and 3 * n10 <= n5 <= 5 * n10
    assert rl.runs_needed(0.0, 0.1) is None and rl.runs_needed(0.5, 0.01, max_runs=20) is None


def _aa_runs(rng: np.random.Generator, runs: int, n: int = 60) -> list[np.ndarray]:
    """Runs of one configuration: each run's level moves by a 7 % CV (run-to-run), its
    iterations spread 30 % around that level."""
    return [rng.gamma(1 / 0.3**2, 0.1 * 0.3**2 * rng.normal(1.0, 0.07) / 1.0, n) for _ in range(runs)]


def test_aa_pairs_are_real_at_about_alpha_by_runs_and_far_more_by_iterations() -> None:
    rng = np.random.default_rng(38)
    pairs = 300
    by_runs = by_runs_cal = by_iterations = 0
    cal_runs = [float(v.mean()) for v in _aa_runs(rng, 10)]
    cal = rl.spread_of(cal_runs, "calibration")
    assert cal is not None
    for i in range(pairs):
        a, b = _aa_runs(rng, 3), _aa_runs(rng, 3)
        d = rl.difference([float(v.mean()) for v in a], [float(v.mean()) for v in b])
        by_runs += d.verdict == rl.REAL
        a1, b1 = a[0], b[0]
        by_runs_cal += rl.difference([float(a1.mean())], [float(b1.mean())], cal).verdict == rl.REAL
        ra = replicates(a1, None, None, (), group_rng("aa", i, "a"), resamples=400)
        rb = replicates(b1, None, None, (), group_rng("aa", i, "b"), resamples=400)
        lo, hi = interval(rb.mean - ra.mean)
        by_iterations += lo > 0 or hi < 0
    assert by_runs / pairs <= 0.08 and by_runs_cal / pairs <= 0.08
    assert by_iterations / pairs >= 0.3  # one run a side, iterations resampled: wrong most of the time
