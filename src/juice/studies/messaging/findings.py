"""The messaging section's findings, computed from the runs (``report.load``'s frame): the
share of deliveries kept in the producer's site per bus, the fastest vs the slowest bus at the
largest delay, the delay's and the agents' effect, losses and duplicates.

Latencies: the median call round trip (one-way delivery for casts) of each run's measured
messages (``messages.parquet``, warm-up left out); clusters = runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from juice.report.findings import Finding, contrast, estimate, num, with_ci
from juice.studies.messaging.metrics import latencies as measured


def latencies(runs: pd.DataFrame) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.str_]]:
    vals: list[float] = []
    who: list[str] = []
    for _, r in runs.iterrows():
        f = Path(str(r["dir"])) / "messages.parquet"
        if not f.exists():
            continue
        _, lat = measured(pd.read_parquet(f))  # one-way times withheld by their clocks: none
        v: list[float] = [float(x) * 1000 for x in lat.to_numpy(float)]
        vals += v
        who += [str(r["run"])] * len(v)
    return np.asarray(vals, dtype=float), np.asarray(who)


def _cmp(a: pd.DataFrame, b: pd.DataFrame, key: object):  # type: ignore[no-untyped-def]
    va, ca = latencies(a)
    vb, cb = latencies(b)
    return contrast(va, vb, ca, cb, key=("messaging", key), stat="median")


def _ms(e: object) -> str:
    return with_ci(e, "ms")  # type: ignore[arg-type]


def findings(df: pd.DataFrame) -> list[Finding]:
    out: list[Finding] = []
    if df.empty:
        return out
    multi = df[(df.get("sites", pd.Series(1, index=df.index)) > 1) & df["locality_pct"].notna()]
    if not multi.empty:
        parts = []
        for bus, g in sorted(multi.groupby("bus"), key=lambda kv: -kv[1]["locality_pct"].mean()):
            e, _ = estimate(g["locality_pct"].to_numpy(float), None, ("locality", bus), "mean")
            parts.append(f"{bus} {with_ci(e, '%', 3)}")
        out.append(Finding("Deliveries kept in the producer's site (mean over runs): " + "; ".join(parts)))
    # the main case: the one with the most runs
    case = df["case"].value_counts().idxmax()
    d = df[df["case"] == case]
    what = "call round trip" if (d["method"] == "call").all() else "one-way delivery"
    buses = sorted(d["bus"].unique())
    top = d["delay_ms"].max()
    at = d[d["delay_ms"] == top]
    if len(buses) >= 2:
        med = {b: float(np.median(latencies(at[at["bus"] == b])[0])) if len(latencies(
            at[at["bus"] == b])[0]) else np.nan for b in buses}
        ok = {b: v for b, v in med.items() if np.isfinite(v)}
        if len(ok) >= 2:
            fast, slow = min(ok, key=ok.__getitem__), max(ok, key=ok.__getitem__)
            c = _cmp(at[at["bus"] == fast], at[at["bus"] == slow], ("bus", top, fast, slow))
            out.append(Finding(f"{case} at {top:g} ms one-way: {what} median {_ms(c.b)} on {slow} "
                               f"against {_ms(c.a)} on {fast} ({c.ratio_text})", c.verdict))
    if d["delay_ms"].nunique() >= 2:
        lo = d["delay_ms"].min()
        for bus in buses[:3]:
            g = d[d["bus"] == bus]
            c = _cmp(g[g["delay_ms"] == lo], g[g["delay_ms"] == top], ("delay", bus, lo, top))
            out.append(Finding(f"{bus}: {top:g} ms one-way vs {lo:g} ms: {_ms(c.b)} against {_ms(c.a)} "
                               f"({c.ratio_text})", c.verdict))
    if d["agents"].nunique() >= 2:
        a0, a1 = d["agents"].min(), d["agents"].max()
        g = d[d["delay_ms"] == d["delay_ms"].min()]
        c = _cmp(g[g["agents"] == a0], g[g["agents"] == a1], ("agents", a0, a1))
        out.append(Finding(f"{a1:g} agents vs {a0:g} (all buses, {d['delay_ms'].min():g} ms): "
                           f"{_ms(c.b)} against {_ms(c.a)} ({c.ratio_text})", c.verdict))
    lost, dup = int(df["lost"].fillna(0).sum()), int(df["duplicates"].fillna(0).sum())
    errs = int(df["errors"].fillna(0).sum())
    if lost or dup or errs:
        worst = df.loc[(df["lost"].fillna(0) + df["errors"].fillna(0)).idxmax()]
        out.append(Finding(f"{lost} deliveries lost, {dup} duplicated, {errs} calls failed over "
                           f"{len(df)} runs; most in {worst['case']} on {worst['bus']} "
                           f"({num(float(worst['lost']), '')} lost)"))
    else:
        out.append(Finding(f"No delivery lost or duplicated and no call failed in {len(df)} runs"))
    return out
