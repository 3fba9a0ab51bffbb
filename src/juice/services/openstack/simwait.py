"""Simulated waiting times and injected failures: STDLIB ONLY (no Juice import), because the
same file runs in three places: in Juice (validation, tests), inside nova-compute (shipped with
the juice-nova plugin as ``juice_nova/simwait.py``: the fake driver's spawn time) and next to
the fake-glance/fake-neutron script (``juice_simwait.py``: their answer latencies).

A distribution is a plain mapping, seconds everywhere, every draw capped at ``cap_s``::

    {"dist": "constant", "value_s": 2}
    {"dist": "uniform", "low_s": 1, "high_s": 5}
    {"dist": "lognormal", "median_s": 20, "sigma": 1.0}          # sigma of ln(seconds)
    {"dist": "table", "table": "seed004"}                        # a named table (TABLES)
    {"dist": "table", "points": [[0, 6.45], [1, 354]]}           # (quantile, seconds) points
    + optional "cap_s" (default 600, at most 3600) and "seed" (an integer)

    check(d)                                   # None, or what is wrong (one line, names the key)
    draw(d, "spawn", instance_uuid)            # seconds: the same for the same (seed, stage, key)
    fails(0.1, seed, "spawn", instance_uuid)   # True for about 10 % of the keys, reproducibly

Draws are a hash of (seed, stage, key) mapped through the distribution's inverse CDF: no
random state, so a restarted process, another thread or another host draws the same value.
A table's quantile points are interpolated in log(seconds) between points (durations that span
orders of magnitude); below the first / above the last point the end values hold.
"""

from __future__ import annotations

import hashlib
import math
from itertools import pairwise
from statistics import NormalDist
from typing import Any

DISTS = ("constant", "uniform", "lognormal", "table")
DEFAULT_CAP_S = 600.0
MAX_CAP_S = 3600.0
# Seed 004 (Intel, 1000-node cloud, nova with 5/10 schedulers) publishes only the range of its
# spawn times: "sometimes swinging from 6.45 seconds to 354 seconds". No quantile in between is
# published, so the table is log-uniform between those two extremes (an assumption, stated so).
TABLES: dict[str, list[tuple[float, float]]] = {"seed004": [(0.0, 6.45), (1.0, 354.0)]}
PARAMS = {"constant": ("value_s",), "uniform": ("low_s", "high_s"), "lognormal": ("median_s", "sigma"),
          "table": ()}
COMMON = ("dist", "cap_s", "seed")


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _points(d: dict[str, Any]) -> list[tuple[float, float]]:
    if "table" in d:
        return TABLES[d["table"]]
    return [(float(q), float(s)) for q, s in d["points"]]


def check(d: Any) -> str | None:
    """What is wrong with distribution ``d`` (one line naming the key), or None."""
    if not isinstance(d, dict):
        return "expected a mapping such as {dist: constant, value_s: 2}"
    kind = d.get("dist")
    if kind not in DISTS:
        return f"dist: expected one of {', '.join(DISTS)}, got {kind!r}"
    allowed = set(COMMON) | set(PARAMS[kind]) | ({"table", "points"} if kind == "table" else set())
    extra = sorted(set(d) - allowed)
    if extra:
        known = ", ".join(sorted(allowed - {"dist"}))
        return f"{extra[0]}: not a parameter of dist {kind} (allowed: {known})"
    for k in PARAMS[kind]:
        if k not in d:
            return f"{k}: required by dist {kind}"
        if not _num(d[k]) or d[k] < 0:
            return f"{k}: expected a number of seconds >= 0, got {d[k]!r}"
    cap = d.get("cap_s", DEFAULT_CAP_S)
    if not _num(cap) or not 0 < cap <= MAX_CAP_S:
        return f"cap_s: expected seconds in (0, {MAX_CAP_S:g}] (every draw is capped so a run stays bounded)"
    if "seed" in d and (not isinstance(d["seed"], int) or isinstance(d["seed"], bool)):
        return f"seed: expected an integer, got {d['seed']!r}"
    if kind == "uniform" and d["low_s"] > d["high_s"]:
        return f"high_s: must be >= low_s ({d['low_s']})"
    if kind == "lognormal" and d["median_s"] <= 0:
        return "median_s: expected seconds > 0 (a lognormal's median)"
    if kind == "table":
        return _check_table(d)
    return None


def _check_table(d: dict[str, Any]) -> str | None:
    if ("table" in d) == ("points" in d):
        return f"table: give either table ({', '.join(TABLES)}) or points: [[quantile, seconds], ...]"
    if "table" in d:
        if d["table"] not in TABLES:
            return f"table: expected one of {', '.join(TABLES)}, got {d['table']!r}"
        return None
    pts = d["points"]
    if not isinstance(pts, list) or len(pts) < 2:
        return "points: expected at least two [quantile, seconds] pairs"
    prev: tuple[float, float] | None = None
    for p in pts:
        if not (isinstance(p, list | tuple) and len(p) == 2 and _num(p[0]) and _num(p[1])):
            return f"points: expected [quantile, seconds] pairs, got {p!r}"
        if not 0 <= p[0] <= 1 or p[1] <= 0:
            return f"points: quantiles 0..1 and seconds > 0, got {list(p)!r}"
        if prev is not None and (p[0] <= prev[0] or p[1] < prev[1]):
            return "points: quantiles must increase and seconds must not decrease"
        prev = (p[0], p[1])
    return None


def unit(seed: int, stage: str, key: str) -> float:
    """A number in (0, 1), a pure function of (seed, stage, key)."""
    h = hashlib.sha256(f"juice-sim/{seed}/{stage}/{key}".encode()).digest()
    return (int.from_bytes(h[:8], "big") + 0.5) / 2.0**64


def quantile(d: dict[str, Any], u: float) -> float:
    """The distribution's value at quantile ``u`` (0 < u < 1), before the cap."""
    kind = d["dist"]
    if kind == "constant":
        return float(d["value_s"])
    if kind == "uniform":
        return float(d["low_s"]) + u * (float(d["high_s"]) - float(d["low_s"]))
    if kind == "lognormal":
        return float(d["median_s"]) * math.exp(float(d["sigma"]) * NormalDist().inv_cdf(u))
    pts = _points(d)
    if u <= pts[0][0]:
        return pts[0][1]
    for (q0, s0), (q1, s1) in pairwise(pts):
        if u <= q1:
            f = (u - q0) / (q1 - q0)
            return math.exp(math.log(s0) + f * (math.log(s1) - math.log(s0)))
    return pts[-1][1]


def draw(d: dict[str, Any], stage: str, key: str, seed: int = 1) -> float:
    """Seconds for ``key`` (an instance uuid, a request number) at ``stage``: reproducible per
    (``d['seed']`` or ``seed``, stage, key), never above ``cap_s``."""
    s = d.get("seed", seed)
    return min(quantile(d, unit(s, stage, key)), float(d.get("cap_s", DEFAULT_CAP_S)))


def mean(d: dict[str, Any], points: int = 1000) -> float:
    """The distribution's mean after the cap (seconds), over ``points`` evenly spaced quantiles:
    what a plan's estimate adds per simulated wait."""
    cap = float(d.get("cap_s", DEFAULT_CAP_S))
    return sum(min(quantile(d, (i + 0.5) / points), cap) for i in range(points)) / points


def fails(p: float, seed: int, stage: str, key: str) -> bool:
    """Whether ``key`` fails at ``stage`` under failure probability ``p`` (reproducible)."""
    return p > 0 and unit(seed, f"{stage}-failure", key) < p


def describe(d: dict[str, Any]) -> str:
    """One line for a report: ``lognormal (median 20 s, sigma 1), cap 600 s``."""
    kind = d["dist"]
    if kind == "table":
        what = (f"table {d['table']}" if "table" in d
                else "table " + ", ".join(f"q{q:g}={s:g} s" for q, s in _points(d)))
    else:
        what = kind + " (" + ", ".join(f"{k.removesuffix('_s')} {d[k]:g}{' s' if k.endswith('_s') else ''}"
                                       for k in PARAMS[kind]) + ")"
    return f"{what}, cap {float(d.get('cap_s', DEFAULT_CAP_S)):g} s"
