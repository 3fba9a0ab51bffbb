"""Fits recover known coefficients from synthetic data; crossings solve the fitted curve."""

from __future__ import annotations

import numpy as np
import pytest

from juice.studies.schedulerdb.fit import crossing, crossing_ci, fit, fit_nonneg


def _synthetic(coef: tuple[float, ...], noise: float, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ns = np.repeat(np.arange(1000, 19001, 1000, dtype=float), 5)
    ts = sum(c * ns ** i for i, c in enumerate(coef)) + rng.normal(0, noise, ns.size)
    return ns, ts


def test_linear_recovers_slope_and_r2_is_high() -> None:
    true = (0.05, 0.32e-3)  # the seed's t = 0.32 s per 1000 nodes
    ns, ts = _synthetic(true, noise=0.05)
    f = fit(ns, ts, 1)
    assert f.coef[1] == pytest.approx(true[1], rel=0.03)
    assert f.coef[0] == pytest.approx(true[0], abs=0.1)
    assert 0.99 < f.r2 <= 1.0
    assert f.predict([10_000])[0] == pytest.approx(true[0] + true[1] * 10_000, rel=0.03)


def test_quadratic_recovers_coefficients_and_crossing() -> None:
    true = (0.2, 0.1e-3, 2.0e-8)
    ns, ts = _synthetic(true, noise=0.02)
    f = fit(ns, ts, 2)
    for got, want in zip(f.coef[1:], true[1:], strict=True):
        assert got == pytest.approx(want, rel=0.05)
    # The true curve reaches 60 s where c2 N² + c1 N + c0 - 60 = 0.
    c0, c1, c2 = true[0] - 60, true[1], true[2]
    want_n = (-c1 + np.sqrt(c1 * c1 - 4 * c2 * c0)) / (2 * c2)
    got_n = crossing(f, 60.0)
    assert got_n is not None and got_n == pytest.approx(want_n, rel=0.03)
    assert float(f.predict([got_n])[0]) == pytest.approx(60.0, rel=1e-6)


def test_noisy_data_lowers_r2() -> None:
    ns, ts = _synthetic((0.0, 1e-4), noise=2.0)
    assert fit(ns, ts, 1).r2 < fit(*_synthetic((0.0, 1e-4), noise=0.01), 1).r2


def test_crossing_none_when_curve_never_reaches_threshold() -> None:
    ns = np.arange(1000, 10001, 1000, dtype=float)
    flat = fit(ns, 0.5 + 0 * ns + np.linspace(0, 1e-9, ns.size), 1)
    assert crossing(flat, 60.0) is None  # slope ~0: beyond 10M nodes
    falling = fit(ns, 5.0 - 1e-4 * ns - 1e-9 * ns ** 2, 2)
    assert crossing(falling, 60.0) is None


def test_crossing_linear_solves_exactly() -> None:
    ns = np.arange(1000, 6001, 1000, dtype=float)
    f = fit(ns, 1.0 + 2e-3 * ns, 1)
    got = crossing(f, 61.0)
    assert got is not None and got == pytest.approx(30_000, rel=1e-6)


def test_fit_rejects_too_few_points() -> None:
    with pytest.raises(ValueError, match="distinct N"):
        fit([1000, 1000, 2000], [1, 2, 3], 2)


# ---- non-negative fits, crossing intervals, "not supported by the data" ---------------------

def _brute_nnls(ns: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, float]:
    """Reference: least squares on every subset of the terms, the best with all coefficients >= 0."""
    x = np.vander(ns / ns.max(), 3, increasing=True)
    best, best_ssr = np.zeros(3), float(ts @ ts)
    for sub in ([0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]):
        beta, *_ = np.linalg.lstsq(x[:, sub], ts, rcond=None)
        if (beta >= 0).all():
            full = np.zeros(3)
            full[sub] = beta
            ssr = float(np.sum((ts - x @ full) ** 2))
            if ssr < best_ssr:
                best, best_ssr = full, ssr
    return best / np.array([1.0, ns.max(), ns.max() ** 2]), best_ssr


def test_concave_data_gives_non_negative_coefficients() -> None:
    # like the 9-scheduler run: the unconstrained quadratic bends back down
    ns, ts = _synthetic((0.2, 3e-3, -8e-8), noise=0.05)
    assert fit(ns, ts, 2).coef[2] < 0
    f = fit_nonneg(ns, ts)
    assert all(c >= 0 for c in f.coef) and f.coef[2] == 0.0
    want, _ = _brute_nnls(ns, ts)
    assert np.allclose(f.coef, want, rtol=1e-6, atol=1e-12)
    assert np.all(np.diff(f.predict(np.linspace(0, 1e6, 50))) >= 0)  # never bends back down


def test_nonneg_fit_equals_unconstrained_when_that_is_already_non_negative() -> None:
    ns, ts = _synthetic((0.2, 0.1e-3, 2.0e-8), noise=0.02)
    u, c = fit(ns, ts, 2), fit_nonneg(ns, ts)
    assert np.allclose(u.coef, c.coef, rtol=1e-6) and c.r2 == pytest.approx(u.r2, rel=1e-9)


def test_nnls_matches_brute_force_on_random_data() -> None:
    rng = np.random.default_rng(11)
    for _ in range(20):
        ns = np.repeat(rng.choice(np.arange(100, 5001, 100), 5, replace=False).astype(float), 3)
        ts = np.abs(rng.normal(0.0, 1.0, 3)) @ np.vander(ns / 5000, 3, increasing=True).T \
            + rng.normal(0.0, 0.3, ns.size)
        f = fit_nonneg(ns, ts)
        want, ssr = _brute_nnls(ns, ts)
        got = float(np.sum((ts - f.predict(ns)) ** 2))
        assert got == pytest.approx(ssr, rel=1e-7, abs=1e-12) and min(f.coef) >= 0


def test_crossing_of_quadratic_data_is_recovered_within_its_interval() -> None:
    rng = np.random.default_rng(4)
    ns = np.repeat(np.arange(1000, 19001, 1000, dtype=float), 5)
    ts = 1e-7 * ns ** 2 * (1 + rng.normal(0, 0.05, ns.size))
    x = crossing_ci(ns, ts, 60.0)
    true = np.sqrt(60.0 / 1e-7)  # 24.5K nodes, 1.3× beyond the data
    assert x.n is not None and x.low is not None and x.high is not None
    assert x.low <= true <= x.high and x.low < x.n < x.high
    assert x.supported and x.curvature > 0.975 and x.factor == pytest.approx(x.n / 19000)
    assert x.text().startswith(f"{x.n / 1000:,.1f}K nodes [")
    assert "extrapolated 1.3× beyond the data" in x.text()


def test_crossing_within_the_data_says_so() -> None:
    ns = np.repeat(np.arange(1000, 10001, 1000, dtype=float), 4)
    ts = 1e-6 * ns ** 2 + np.random.default_rng(2).normal(0, 0.5, ns.size)
    x = crossing_ci(ns, ts, 60.0)
    assert x.supported and x.n is not None and x.n < 10000 and "within the measured range" in x.text()


def test_data_stopping_far_below_the_threshold_is_not_supported() -> None:
    rng = np.random.default_rng(5)
    ns = np.repeat(np.array([200.0, 400.0, 600.0]), 4)
    ts = 6e-5 * ns + rng.normal(0, 0.002, ns.size)  # 0.036 s at 600 nodes; 60 s is ~1M nodes away
    x = crossing_ci(ns, ts, 60.0, clusters=np.tile([0, 1], 6))
    assert not x.supported and x.two_level
    assert any("beyond the largest N measured" in r for r in x.reasons)
    assert x.text().startswith("not supported by the data")


def test_flat_curvature_or_unbounded_interval_is_not_supported() -> None:
    rng = np.random.default_rng(6)
    ns = np.repeat(np.arange(1000, 10001, 1000, dtype=float), 3)
    ts = 20 + 1e-3 * ns + rng.normal(0, 3.0, ns.size)  # linear, noisy: reaches 60 s at ~3.3× the data
    x = crossing_ci(ns, ts, 60.0)
    assert x.n is not None and not x.supported
    assert any("quadratic term not significantly > 0" in r for r in x.reasons)
    flat = crossing_ci(ns, 1.0 + rng.normal(0, 0.2, ns.size) + 1e-5 * ns, 60.0)
    assert not flat.supported and (flat.n is None or flat.high is None)
