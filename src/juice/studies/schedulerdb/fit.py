"""Least-squares fits of the read time t(N) and where they cross a threshold (numpy only).

    f = fit(ns, ts, degree=2)          # Fit(coef=[c0, c1, c2], r2=..., degree=2), t = c0 + c1 N + c2 N²
    f.predict(50_000)
    crossing(f, 60.0)                  # smallest N > 0 with t(N) = 60, or None if none <= 10M

Linear (degree 1) and quadratic (degree 2) fits as in the seed; R² = 1 - SS_res/SS_tot on
the points fitted. A fit needs at least degree + 1 distinct N.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MAX_N = 10_000_000


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
