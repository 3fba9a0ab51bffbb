"""Fits recover known coefficients from synthetic data; crossings solve the fitted curve."""

from __future__ import annotations

import numpy as np
import pytest

from juice.studies.schedulerdb.fit import crossing, fit


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
