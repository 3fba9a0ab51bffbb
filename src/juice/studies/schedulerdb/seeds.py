"""Seed 001 beside the scheduler-database runs: the Juice value matching each row of
``seed.yaml`` (``juice.report.seeds``), from the reads and the fits (``report.fits``). A row
whose configuration was not run says "not measured here".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from juice.report.findings import contrast, num, with_ci
from juice.report.seeds import (
    DIFFERENT,
    SAME,
    UNDECIDED,
    Match,
    guarded,
    juice_conditions,
    load_references,
    plain,
    seed_table,
    trend,
)
from juice.studies.schedulerdb.findings import reads_of

PACKAGE = "juice.studies.schedulerdb"
LINEAR_R2 = 0.95  # a linear fit this good: "grows linearly"


def _k(n: float) -> str:
    return f"{n / 1000:,.1f}K" if n >= 1000 else f"{n:g}"


def _conf(confs: Sequence[dict[str, Any]], updates: bool, schedulers: int | None = None,
          track: str = "historical") -> dict[str, Any] | None:
    got = [c for c in confs if str(c["track"]).startswith(track) and bool(c["updates"]) == updates
           and (schedulers is None or int(c["schedulers"]) == schedulers)]
    return max(got, key=lambda c: c["max_n"]) if got else None


def _cmp(reads: pd.DataFrame, a: Mapping[str, Any], b: Mapping[str, Any]):  # type: ignore[no-untyped-def]
    n = int(min(a["max_n"], b["max_n"]))
    ga, gb = reads_of(reads, a, n), reads_of(reads, b, n)
    return n, contrast(ga["seconds"].to_numpy(float), gb["seconds"].to_numpy(float), ga["run"].astype(str),
                       gb["run"].astype(str), key=("sdb-seed", n, b["schedulers"]), stat="median")


def _static(confs: Sequence[dict[str, Any]], label: Callable[[Any], str]) -> Match | None:
    c = _conf(confs, updates=False, schedulers=1)
    if c is None or not c.get("linear"):
        return None
    r2 = float(c["linear"]["r2"])
    ok = r2 >= LINEAR_R2
    return Match("sdb.static_linear", f"linear R² {r2:.3f} up to {_k(c['max_n'])} nodes; "
                 f"t({_k(c['max_n'])}) = {num(c['t_at_max_s'], 's')}", SAME if ok else DIFFERENT,
                 "a straight line fits" if ok else f"a line explains less than R² {LINEAR_R2}",
                 label(c))


def _crossing(confs: Sequence[dict[str, object]], thr: float, label: Callable[[object], str]) -> list[Match]:
    c = _conf(confs, updates=True, schedulers=1)
    if c is None or not c.get("constrained"):
        return []
    k = c["constrained"]
    x = k["crossing"]
    cond = f"{label(c)}; threshold {thr:g} s (the seed's: 60 s)"
    if x.n is None:
        m = Match("sdb.updates_crossing", f"never below 10M nodes ({_k(c['max_n'])} measured)", DIFFERENT,
                  "no quadratic growth in these reads", cond)
    elif x.supported:
        m = Match("sdb.updates_crossing", x.text(), SAME,
                  "a finite crossing of a growing fit; the N itself is this host's", cond)
    else:
        m = Match("sdb.updates_crossing", x.text(), UNDECIDED, "the data do not support the crossing", cond)
    f = k["fit"]
    t20, t10 = (float(x) for x in f.predict([20000.0, 10000.0]))
    measured = c["max_n"] >= 20000
    v20 = (f"fit: {num(t20, 's')} at 20K, {num(t10, 's')} at 10K"
           + ("" if measured else f" (extrapolated from ≤ {_k(c['max_n'])})"))
    grows = t20 > 2 * t10
    m20 = Match("sdb.updates_20k", v20, (SAME if grows else DIFFERENT) if measured else UNDECIDED,
                ("t(20K) more than twice t(10K), as 13 s vs a few" if grows else
                 "t(20K) not more than twice t(10K)") + ("" if measured else "; outside the N measured"),
                cond)
    return [m, m20]


def _more(reads: pd.DataFrame, confs: Sequence[dict[str, Any]], label: Callable[[Any], str]) -> list[Match]:
    out = []
    for upd in (True, False):
        one = _conf(confs, updates=upd, schedulers=1)
        more = sorted((c for c in confs if str(c["track"]).startswith("historical")
                       and bool(c["updates"]) == upd and int(c["schedulers"]) > 1),
                      key=lambda c: int(c["schedulers"]))
        if one is None or not more:
            continue
        tail = "" if upd else " (no updates in these runs: the seed's had N/60 per second)"
        few = [c for c in more if int(c["schedulers"]) <= 3]
        if few:
            c = few[-1]
            n, r = _cmp(reads, one, c)
            v, why = trend(r, "flat", f"{c['schedulers']} vs 1 at {_k(n)}: ")
            out.append(Match("sdb.three_schedulers", f"{with_ci(r.a)} → {with_ci(r.b)} at {_k(n)} nodes",
                             v, why + tail, label(c)))
        c = more[-1]
        if int(c["schedulers"]) > 3 or not few:
            n, r = _cmp(reads, one, c)
            v, why = trend(r, "up", f"{c['schedulers']} vs 1 at {_k(n)}: ")
            x = (c.get("constrained") or {}).get("crossing")
            cross = f"; crossing {x.text()}" if x is not None and x.supported else ""
            out.append(Match("sdb.nine_schedulers", f"{with_ci(r.a)} → {with_ci(r.b)} at {_k(n)} nodes"
                             + cross, v, why + tail, label(c)))
        break
    return out


def _memcached(confs: Sequence[dict[str, Any]], label: Callable[[Any], str]) -> Match | None:
    kv = [c for c in confs if str(c["track"]).startswith("kv") and int(c["schedulers"]) == 1]
    if not kv:
        return None
    c = max(kv, key=lambda c: c["max_n"])
    t = float(c["t_at_max_s"])
    if t >= 1.0:
        v, why = DIFFERENT, "1 s or more"
    elif c["max_n"] >= 10000:
        v, why = SAME, "under 1 s at tens of thousands of nodes"
    else:
        v, why = UNDECIDED, (f"under 1 s, but only {_k(c['max_n'])} nodes measured (the seed: tens of "
                             "thousands)")
    return Match("sdb.memcached", f"{num(t, 's')} at {_k(c['max_n'])} nodes ({c['backend']})", v, why,
                 label(c))


def matches(reads: pd.DataFrame, confs: Sequence[dict[str, object]], thr: float,
            label: Callable[[object], str]) -> list[Match]:
    out: list[Match] = []
    m = _static(confs, label)
    if m is not None:
        out.append(m)
    out += _crossing(confs, thr, label) + _more(reads, confs, label)
    m = _memcached(confs, label)
    return out + ([m] if m is not None else [])


def section(reads: pd.DataFrame, confs: Sequence[dict[str, Any]], thr: float, label: Callable[[Any], str],
            manifests: Sequence[Mapping[str, object]]) -> str:
    """The "seed beside Juice" block of the scheduler-db section."""
    return guarded("scheduler-db", lambda: seed_table(
        "scheduler-db", load_references(PACKAGE), matches(plain(reads), confs, thr, label),
        juice_conditions(manifests)))
