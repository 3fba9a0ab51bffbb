"""Bootstrap replicates of a group's mean and percentiles, and percentile confidence intervals
(numpy only, vectorised, fixed seeds: a report re-made from the same data prints the same
intervals).

    rng = group_rng("galera", 9, "Total")                     # seeded from the group's key
    reps = replicates(values, strata, clusters, (0.5, 0.95), rng)
    lo, hi = interval(reps.mean)                              # 95 % percentile interval
    lo, hi = interval(reps_b.mean - reps_a.mean)              # a difference of means

**What is resampled.** A group's values come from clusters (runs, or repetitions within a
run) belonging to strata (configurations pooled in the group, e.g. MariaDB and Galera runs
when nothing is grouped). A configuration was *chosen*, so strata are kept as they are; its
repetitions are *random*, so when a stratum holds several clusters they are resampled (k of k
with replacement), then the values within each drawn cluster (a two-level, or cluster,
bootstrap: the spread between repetitions counts, as it should). A stratum with one cluster
only has its values resampled (the ordinary bootstrap over iterations).

**How.** Up to ``EXACT_BUDGET`` drawn values per group (B × values), the resamples are drawn
for real (index draws, counted with ``bincount``; percentiles from cumulative counts, no sort
of the resamples). Above it (large groups, e.g. 1M-iteration reports) the cluster draw stays
exact and the draw within clusters uses results that need no per-value work: a resample's
percentile is an order statistic, drawn exactly through the Beta law of uniform order
statistics (and, when clusters were redrawn, the mixture of the drawn clusters); a resample's
sum is drawn from its normal limit with the exact mean and variance and a Cornish–Fisher
skewness term (the limit is reached long before ``EXACT_BUDGET / B`` values).

Intervals are percentile intervals (``LEVEL`` = 95 %) of ``RESAMPLES`` replicates; fewer
than 2 values give no interval (NaN). Percentiles are linear interpolations, as numpy's and
pandas' defaults, in the data and in every resample alike.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

LEVEL = 0.95
RESAMPLES = 2000
SEED = 2013  # fixed: reports are reproducible
EXACT_BUDGET = 250_000  # drawn values per group (B × values) up to which resampling is literal
_C_MATRIX_MAX = 8_000_000  # clusters × values for the cumulative-count matrix of the mixture

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Replicates:
    """B bootstrap replicates of one group's statistics."""

    mean: F64  # (B,)
    quantiles: F64  # (Q, B), in the order of the ``qs`` asked for
    n: int  # values in the group
    clusters: int  # clusters (runs / repetitions) in the group
    two_level: bool  # clusters were resampled (some stratum holds several)
    exact: bool  # resampled literally (not the large-group draw)


def group_rng(*key: object) -> np.random.Generator:
    """A generator seeded by ``SEED`` and the group's key (stable across processes and
    versions of numpy: numpy scalars count as the Python values they hold)."""
    norm = tuple(_plain(k) for k in key)
    return np.random.default_rng([SEED, zlib.crc32(repr(norm).encode())])


def _plain(v: object) -> object:
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    item = getattr(v, "item", None)  # numpy scalars count as the Python values they hold
    if item is not None:
        v = item()
    if isinstance(v, float) and v != v:  # NaN
        return None
    return v


def interval(reps: npt.ArrayLike, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of replicates (NaN, NaN when there are none or any is NaN)."""
    r = np.asarray(reps, dtype=np.float64)
    if r.size == 0 or np.isnan(r).any():
        return (float("nan"), float("nan"))
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(r, [a, 1.0 - a])
    return (float(lo), float(hi))


def replicates(values: npt.ArrayLike, strata: npt.ArrayLike | None, clusters: npt.ArrayLike | None,
               qs: Sequence[float], rng: np.random.Generator, resamples: int = RESAMPLES,
               exact_budget: int = EXACT_BUDGET) -> Replicates:
    """Bootstrap replicates of the mean and the ``qs`` quantiles of ``values`` (no NaN).

    ``strata`` and ``clusters``: one integer code per value (None: one stratum, one cluster),
    clusters nested in strata. See the module's docstring for the design."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    q = np.asarray(qs, dtype=np.float64)
    s = np.zeros(n, np.int64) if strata is None else np.asarray(strata).astype(np.int64)
    c = np.zeros(n, np.int64) if clusters is None else np.asarray(clusters).astype(np.int64)
    if n < 2:
        return Replicates(np.full(resamples, np.nan), np.full((len(q), resamples), np.nan), n,
                          len(np.unique(c)), False, True)
    order = np.lexsort((c, s))
    v, s, c = v[order], s[order], c[order]
    new, size, picks, two = _design(s, c, resamples, rng)
    k = len(new)
    if resamples * k * int(size.max()) <= exact_budget:
        mean, quant = _exact(v, new, size, picks, q, rng)
        return Replicates(mean, quant, n, k, two, True)
    mean = _large_mean(v, new, size, picks, rng)
    quant = _large_quantiles(v, new, size, picks, q, rng, two)
    return Replicates(mean, quant, n, k, two, False)


def _design(s: I64, c: I64, resamples: int, rng: np.random.Generator) -> tuple[I64, I64, I64, bool]:
    """Clusters of values sorted by (stratum, cluster): (first value, size, drawn cluster per
    replicate and slot, whether clusters were redrawn)."""
    n = len(s)
    new = np.flatnonzero(np.r_[True, (c[1:] != c[:-1]) | (s[1:] != s[:-1])])
    size = np.diff(np.r_[new, n]).astype(np.int64)
    cs = s[new]
    k = len(new)
    # per cluster slot: the first slot of its stratum and the stratum's cluster count
    sfirst = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    scount = np.diff(np.r_[sfirst, k])
    first = np.repeat(sfirst, scount)
    count = np.repeat(scount, scount)
    two = bool((scount > 1).any())
    picks: I64 = first + np.floor(rng.random((resamples, k)) * count).astype(np.int64) if two \
        else np.broadcast_to(np.arange(k, dtype=np.int64), (resamples, k))
    return new, size, picks, two


def resample_counts(strata: npt.ArrayLike, clusters: npt.ArrayLike | None, rng: np.random.Generator,
                    resamples: int = RESAMPLES) -> tuple[I64, bool]:
    """How many times each value is drawn in each of ``resamples`` literal resamples of the
    design (strata kept; clusters redrawn within a stratum holding several; values redrawn
    within each drawn cluster): ((B, n) counts in the values' order, clusters redrawn)."""
    s = np.asarray(strata).astype(np.int64)
    c = np.zeros(len(s), np.int64) if clusters is None else np.asarray(clusters).astype(np.int64)
    order = np.lexsort((c, s))
    start, size, picks, two = _design(s[order], c[order], resamples, rng)
    counts = _counts(start, size, picks, len(s), rng)
    out = np.empty_like(counts)
    out[:, order] = counts
    return out, two


def _counts(start: I64, size: I64, picks: I64, n: int, rng: np.random.Generator) -> I64:
    b, k = picks.shape
    m = int(size.max())
    sz = size[picks][..., None]  # (B, k, 1)
    idx = start[picks][..., None] + np.floor(rng.random((b, k, m)) * sz).astype(np.int64)
    keep = np.arange(m) < sz
    flat = (np.arange(b, dtype=np.int64)[:, None, None] * n + idx)[keep]
    counts: I64 = np.bincount(flat, minlength=b * n).reshape(b, n)
    return counts


def _exact(v: F64, start: I64, size: I64, picks: I64, q: F64,
           rng: np.random.Generator) -> tuple[F64, F64]:
    """Literal resampling: index draws within the drawn clusters, counted per value."""
    b = picks.shape[0]
    n = len(v)
    counts = _counts(start, size, picks, n, rng)
    tot = counts.sum(axis=1)
    mean = (counts @ v) / tot
    if len(q) == 0:
        return mean, np.empty((0, b))
    by_value = np.argsort(v, kind="stable")
    sv = v[by_value]
    cum = np.cumsum(counts[:, by_value], axis=1)
    span = int(tot.max()) + 1
    flat_cum = (cum + (np.arange(b, dtype=np.int64) * span)[:, None]).ravel()
    out = np.empty((len(q), b))
    rows = np.arange(b, dtype=np.int64)
    for i, qq in enumerate(q):
        pos = qq * (tot - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, tot - 1)
        jl = np.searchsorted(flat_cum, rows * span + lo + 1, side="left") - rows * n
        jh = np.searchsorted(flat_cum, rows * span + hi + 1, side="left") - rows * n
        out[i] = sv[jl] + (sv[jh] - sv[jl]) * (pos - lo)
    return mean, out


def _large_mean(v: F64, start: I64, size: I64, picks: I64, rng: np.random.Generator) -> F64:
    """The resample's sum per drawn cluster from its normal limit: exact mean n·μ and variance
    n·σ² (σ with ddof 0, as the bootstrap's), skewness by a Cornish–Fisher term."""
    sums = np.add.reduceat(v, start)
    mu = sums / size
    dev = v - np.repeat(mu, size)
    var = np.add.reduceat(dev * dev, start) / size
    k3 = np.add.reduceat(dev * dev * dev, start) / size
    tot_n = size[picks].sum(axis=1).astype(np.float64)
    mean_sum = (size * mu)[picks].sum(axis=1)
    var_sum = (size * var)[picks].sum(axis=1)
    k3_sum = (size * k3)[picks].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma = np.where(var_sum > 0, k3_sum / np.maximum(var_sum, 1e-300) ** 1.5, 0.0)
    gamma = np.clip(gamma, -0.5, 0.5)
    z = rng.standard_normal(len(tot_n))
    cf = z + gamma / 6.0 * (z * z - 1.0)
    mean: F64 = (mean_sum + np.sqrt(var_sum) * cf) / tot_n
    return mean


def _large_quantiles(v: F64, start: I64, size: I64, picks: I64, q: F64, rng: np.random.Generator,
                     two: bool) -> F64:
    """Order statistics of the resample, drawn exactly: the j-th smallest of N uniforms is
    Beta(j+1, N-j), the next one follows from the minimum of the rest; a uniform maps to a
    value through the (weighted, when clusters were redrawn) empirical distribution."""
    b, k = picks.shape
    n = len(v)
    order = np.argsort(v, kind="stable")
    sv = v[order]
    if two:
        mult = np.zeros((b, k), dtype=np.int64)
        np.add.at(mult, (np.arange(b)[:, None], picks), 1)
        tot = mult @ size
    else:
        mult = np.ones((b, k), dtype=np.int64)
        tot = np.full(b, n, dtype=np.int64)
    if len(q) == 0:
        return np.empty((0, b))
    pos = q[:, None] * (tot - 1)[None, :]  # (Q, B)
    lo = np.floor(pos).astype(np.int64)
    u1 = rng.beta(lo + 1.0, (tot[None, :] - lo).astype(np.float64))
    rest = tot[None, :] - lo - 1
    w = rng.random(lo.shape)
    with np.errstate(divide="ignore"):
        gap = 1.0 - w ** (1.0 / np.maximum(rest, 1))
    u2 = np.where(rest > 0, u1 + (1.0 - u1) * gap, u1)
    j = _inverse(np.concatenate([u1, u2]), tot, mult, size, order, n, two)
    j1, j2 = j[: len(q)], j[len(q):]
    out: F64 = (sv[j1] + (sv[j2] - sv[j1]) * (pos - lo)).astype(np.float64)
    return out


def _inverse(u: F64, tot: I64, mult: I64, size: I64, order: I64, n: int, two: bool) -> I64:
    """Position in the sorted values of the draw of uniform ``u`` (rows: replicates): the
    smallest j whose weighted count of values at sorted positions <= j exceeds u·N."""
    target = u * tot
    if not two:  # every value weighs 1
        direct: I64 = np.minimum(np.floor(target).astype(np.int64), n - 1)
        return direct
    cluster_of = np.repeat(np.arange(len(size)), size)[order]  # cluster of each sorted value
    k = len(size)
    lo = np.zeros(u.shape, dtype=np.int64)
    hi = np.full(u.shape, n - 1, dtype=np.int64)
    if k * n <= _C_MATRIX_MAX:
        onehot = np.zeros((n, k), dtype=np.int32)
        onehot[np.arange(n), cluster_of] = 1
        cmat = np.cumsum(onehot, axis=0).T  # (k, n): cluster's values at sorted positions <= j
        pats, which = np.unique(mult, axis=0, return_inverse=True)
        which = which.ravel()
        if len(pats) <= 64 and len(pats) * n <= _C_MATRIX_MAX:  # few draws of clusters: one
            out = np.empty(u.shape, dtype=np.int64)              # weighted count per draw
            for i, pat in enumerate(pats):
                cols = which == i
                weight = pat @ cmat
                out[:, cols] = np.searchsorted(weight, target[:, cols], side="right")
            found: I64 = np.minimum(out, n - 1)
            return found
        while (lo < hi).any():
            mid = (lo + hi) // 2
            weight = (cmat[:, mid] * mult.T[:, None, :]).sum(axis=0)
            up = weight > target
            hi = np.where(up, mid, hi)
            lo = np.where(up, lo, mid + 1)
        return lo
    pos_of = np.empty(n, dtype=np.int64)
    pos_of[order] = np.arange(n)
    comp = np.sort(np.repeat(np.arange(k, dtype=np.int64), size) * n + pos_of)
    base = np.arange(k, dtype=np.int64) * n
    first = np.searchsorted(comp, base)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        cnt = np.searchsorted(comp, base[:, None, None] + mid[None], side="right") - first[:, None, None]
        weight = (cnt * mult.T[:, None, :]).sum(axis=0)
        up = weight > target
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid + 1)
    return lo
