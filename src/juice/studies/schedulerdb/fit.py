"""Least-squares fits of the read time t(N) and where they cross a threshold (numpy only).

    f = fit(ns, ts, degree=2)          # Fit(coef=[c0, c1, c2], r2=..., degree=2), t = c0 + c1 N + c2 N²
    f.predict(50_000)
    crossing(f, 60.0)                  # smallest N > 0 with t(N) = 60, or None if none <= 10M
    g = fit_nonneg(ns, ts)             # t = a + b N + c N² with a, b, c >= 0
    x = crossing_ci(ns, ts, 60.0, clusters=reps)   # Crossing: n, [low, high], supported, why
    x.text()                           # "31.5K nodes [28.0K, 36.1K] (extrapolated 1.7× beyond the data)"

Linear (degree 1) and quadratic (degree 2) fits as in the seed; R² = 1 - SS_res/SS_tot on
the points fitted. A fit needs at least degree + 1 distinct N.

An unconstrained quadratic can come out concave (c < 0): the curve bends back down, crosses
the threshold twice or never, and its "crossing" means nothing. A read time cannot shrink as
nodes are added, so the crossings the report trusts come from :func:`fit_nonneg`: the same
least squares with every coefficient >= 0 (exact NNLS for 3 parameters: the best of the
unconstrained fits on each subset of the terms whose coefficients come out >= 0; t(N) is then
non-decreasing and crosses at most once). :func:`crossing_ci` gives the crossing an interval
by resampling the reads at each N (the repetitions first when an N has several, then the reads
within each) and refitting, and says when the extrapolation is **not supported by the data**:
the interval is unbounded (more than 2.5 % of the refits never reach the threshold), the
crossing lies more than ``MAX_EXTRAPOLATION``× beyond the largest N measured, or it lies
beyond the data while the quadratic term is not significantly > 0 (c = 0 in more than 2.5 %
of the refits: the curvature the extrapolation rests on is not established).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

MAX_N = 10_000_000
MAX_EXTRAPOLATION = 4.0  # crossings further beyond the largest measured N are not supported
LEVEL = 0.95


@dataclass(frozen=True)
class Fit:
    degree: int
    coef: tuple[float, ...]  # ascending powers: c0 + c1*N + c2*N^2
    r2: float
    points: int

    def predict(self, n: float | Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        x = np.asarray(n, dtype=float)
        return np.asarray(sum(c * x ** i for i, c in enumerate(self.coef)), dtype=float)

    def formula(self, unit: str = "N") -> str:
        """Human form with N in thousands (as the seed states its fits)."""
        terms = []
        for i, c in enumerate(self.coef):
            ck = c * 1000 ** i
            terms.append(f"{ck:.4g}" if i == 0 else f"{ck:.4g}·{unit}" + ("²" if i == 2 else ""))
        return "t = " + " + ".join(terms).replace("+ -", "− ") + f"  ({unit} in thousands)"


def fit(ns: Sequence[float], ts: Sequence[float], degree: int) -> Fit:
    """Least squares of ``ts`` on ``ns`` (polynomial of ``degree`` 1 or 2)."""
    if degree not in (1, 2):
        raise ValueError(f"degree: 1 or 2, got {degree}")
    x = np.asarray(ns, dtype=float)
    y = np.asarray(ts, dtype=float)
    if x.shape != y.shape or len(np.unique(x)) < degree + 1:
        raise ValueError(f"need >= {degree + 1} distinct N to fit degree {degree}")
    design = np.vander(x, degree + 1, increasing=True)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    pred = design @ coef
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return Fit(degree, tuple(float(c) for c in coef), r2, len(x))


def crossing(f: Fit, threshold: float, max_n: float = MAX_N) -> float | None:
    """Smallest N in (0, max_n] where the fitted t(N) reaches ``threshold``; None if never."""
    c = list(f.coef) + [0.0] * (3 - len(f.coef))
    c0, c1, c2 = c[0] - threshold, c[1], c[2]
    if c0 >= 0:
        return 0.0  # already above at N = 0 (the intercept alone exceeds the threshold)
    roots: list[float] = []
    if abs(c2) < 1e-300:
        if c1 > 0:
            roots.append(-c0 / c1)
    else:
        disc = c1 * c1 - 4 * c2 * c0
        if disc >= 0:
            sq = float(np.sqrt(disc))
            roots += [(-c1 - sq) / (2 * c2), (-c1 + sq) / (2 * c2)]
    good = [r for r in roots if 0 < r <= max_n]
    return min(good) if good else None


# ---- non-negative fits and crossing intervals ----------------------------------------------

_SUBSETS: tuple[tuple[int, ...], ...] = ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2))


def nnls_normal(gram: npt.NDArray[np.float64], rhs: npt.NDArray[np.float64],
                yy: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Exact NNLS for 3 parameters from the normal equations, batched: ``gram`` (B, 3, 3) =
    XᵀWX, ``rhs`` (B, 3) = XᵀWy, ``yy`` (B,) = yᵀWy. Returns (B, 3) coefficients >= 0.

    The NNLS optimum is the unconstrained least squares on its own support, so the best
    residual among the subsets whose least-squares coefficients are all >= 0 is the optimum."""
    b = gram.shape[0]
    best: npt.NDArray[np.float64] = np.zeros((b, 3))
    best_ssr = yy.astype(np.float64).copy()  # the empty model: every coefficient 0
    for sub in _SUBSETS:
        idx = np.array(sub)
        g = gram[:, idx[:, None], idx[None, :]]
        beta = np.einsum("bij,bj->bi", np.linalg.pinv(g), rhs[:, idx])
        full = np.zeros((b, 3))
        full[:, idx] = beta
        ok = (beta >= 0).all(axis=1)
        ssr = yy - 2 * np.einsum("bi,bi->b", full, rhs) + np.einsum("bi,bij,bj->b", full, gram, full)
        better = ok & (ssr < best_ssr - 1e-12 * np.abs(yy))
        best = np.where(better[:, None], full, best)
        best_ssr = np.where(better, ssr, best_ssr)
    return best


def _features(ns: npt.NDArray[np.float64], scale: float) -> npt.NDArray[np.float64]:
    x = ns / scale
    return np.stack([np.ones_like(x), x, x * x], axis=1)


def _weighted_fits(ns: npt.NDArray[np.float64], ts: npt.NDArray[np.float64],
                   weights: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """NNLS coefficients (ascending powers of N) for each row of ``weights`` (B, n)."""
    scale = float(ns.max())
    f = _features(ns, scale)
    gram = np.einsum("bi,ij,ik->bjk", weights, f, f)
    rhs = weights @ (f * ts[:, None])
    yy = weights @ (ts * ts)
    beta = nnls_normal(gram, rhs, yy)
    out: npt.NDArray[np.float64] = beta / np.array([1.0, scale, scale * scale])
    return out


def fit_nonneg(ns: Sequence[float] | npt.NDArray[np.float64],
               ts: Sequence[float] | npt.NDArray[np.float64]) -> Fit:
    """Least squares of t = a + b N + c N² with a, b, c >= 0 (a quadratic ``Fit``)."""
    x = np.asarray(ns, dtype=float)
    y = np.asarray(ts, dtype=float)
    if x.shape != y.shape or len(np.unique(x)) < 3:
        raise ValueError("need >= 3 distinct N to fit degree 2")
    coef = _weighted_fits(x, y, np.ones((1, len(x))))[0]
    pred = coef[0] + coef[1] * x + coef[2] * x * x
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return Fit(2, tuple(float(c) for c in coef), r2, len(x))


def crossings(coef: npt.NDArray[np.float64], threshold: float,
              max_n: float = MAX_N) -> npt.NDArray[np.float64]:
    """Where t = a + b N + c N² (rows of non-negative ``coef``) reaches ``threshold``: 0 when
    a already does, ``inf`` when never within ``max_n``."""
    a, b, c = coef[:, 0], coef[:, 1], coef[:, 2]
    room = threshold - a
    with np.errstate(divide="ignore", invalid="ignore"):
        n = 2 * room / (b + np.sqrt(b * b + 4 * c * room))  # the stable root of c N² + b N - room
    n = np.where(room <= 0, 0.0, n)
    bad = ~np.isfinite(n) | (n > max_n)
    out: npt.NDArray[np.float64] = np.where(bad, np.inf, n)
    return out


@dataclass(frozen=True)
class Crossing:
    """The crossing of the non-negative fit, its interval and whether the data support it."""

    n: float | None  # None: never within MAX_N
    low: float | None
    high: float | None  # None: unbounded
    max_n: float  # the largest N measured
    curvature: float  # share of refits with c > 0
    reasons: tuple[str, ...]  # why the crossing is not supported ((): it is)
    resamples: int
    two_level: bool  # repetitions were resampled, then reads

    @property
    def supported(self) -> bool:
        return self.n is not None and not self.reasons

    @property
    def factor(self) -> float | None:
        """How far beyond the largest measured N (1.7 = 1.7×); None without a crossing."""
        return None if self.n is None else self.n / self.max_n

    def interval_text(self) -> str:
        if self.low is None:
            return "[–]"
        hi = "∞)" if self.high is None else f"{_k(self.high)}]"
        return f"[{_k(self.low)}, {hi}"

    def text(self) -> str:
        """``31.5K nodes [28.0K, 36.1K] (extrapolated 1.7× beyond the data)``, or ``not
        supported by the data (...)``, or ``never (≤ 10M nodes)``."""
        if self.n is None:
            return f"never (≤ {MAX_N / 1e6:g}M nodes)"
        core = f"{_k(self.n)} nodes {self.interval_text()}"
        if self.reasons:
            return f"not supported by the data: {core}; " + "; ".join(self.reasons)
        f = self.factor or 0.0
        where = "within the measured range" if f <= 1.0 else f"extrapolated {f:.1f}× beyond the data"
        return f"{core} ({where})"


def _k(n: float) -> str:
    return f"{n / 1000:,.1f}K"


def crossing_ci(ns: Sequence[float] | npt.NDArray[np.float64],
                ts: Sequence[float] | npt.NDArray[np.float64], threshold: float,
                clusters: Sequence[Any] | npt.NDArray[Any] | None = None, resamples: int = 2000,
                seed: int = 2013, max_factor: float = MAX_EXTRAPOLATION,
                level: float = LEVEL) -> Crossing:
    """The non-negative fit's crossing of ``threshold`` with a percentile-bootstrap interval:
    the reads at each N are resampled (``clusters``, e.g. repetitions: redrawn first when an
    N has several, then the reads within each), the fit redone. ``max_factor``: beyond that
    many times the largest measured N, a crossing is not supported."""
    from juice.analysis.bootstrap import resample_counts

    x = np.asarray(ns, dtype=float)
    y = np.asarray(ts, dtype=float)
    point = fit_nonneg(x, y)
    n0 = float(crossings(np.array([point.coef]), threshold)[0])
    strata = pd_codes(x)
    cl = None if clusters is None else pd_codes(np.asarray(clusters))
    rng = np.random.default_rng([seed, len(x), int(threshold * 1000)])
    counts, two = resample_counts(strata, cl, rng, resamples)
    coefs = _weighted_fits(x, y, counts.astype(np.float64))
    reps = crossings(coefs, threshold)
    a = (1.0 - level) / 2.0
    srt = np.sort(reps)
    lo_v, hi_v = (float(srt[int(np.floor(a * (len(srt) - 1)))]),
                  float(srt[int(np.ceil((1.0 - a) * (len(srt) - 1)))]))
    curv = float(np.mean(coefs[:, 2] > 0))
    max_n = float(x.max())
    n = None if np.isinf(n0) else n0
    reasons: list[str] = []
    if n is not None and n > max_n:
        if np.isinf(hi_v):
            reasons.append(f"interval unbounded ({np.mean(np.isinf(reps)):.0%} of the refits never "
                           f"reach {threshold:g} s)")
        if n > max_factor * max_n:
            reasons.append(f"{n / max_n:,.0f}× beyond the largest N measured ({max_n:,.0f})")
        if curv < 1.0 - a:
            reasons.append(f"quadratic term not significantly > 0 (c = 0 in {1 - curv:.0%} of the refits)")
    return Crossing(n, None if np.isinf(lo_v) else lo_v, None if np.isinf(hi_v) else hi_v, max_n,
                    curv, tuple(reasons), resamples, two)


def pd_codes(values: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Integer codes of ``values`` (in sorted order of the distinct values)."""
    if values.dtype == object:
        values = np.array([repr(v) for v in values])
    codes: npt.NDArray[np.int64] = np.unique(values, return_inverse=True)[1].astype(np.int64).ravel()
    return codes
