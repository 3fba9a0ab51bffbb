"""The scheduler–database section's findings, computed from the reads and the fits
(``report.fits``): per SQL configuration with 1 scheduler its crossing of the threshold (with
its interval, or why the data do not support it); at the largest N measured, more schedulers
vs 1, the cache design vs the 2013 SQL read, the modern schema vs the 2013 layout. Values:
successful reads (median; clusters = run/repetition).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from juice.report.findings import Finding, contrast, with_ci


def reads_of(reads: pd.DataFrame, c: Mapping[str, Any], n: int) -> pd.DataFrame:
    """The successful reads of configuration ``c`` at ``n`` nodes."""
    g = reads[reads["ok"] & (reads["nodes"] == n)]
    for k in ("backend", "track", "schedulers", "updates"):
        g = g[g[k] == c[k]]
    if "client" in g.columns and c.get("client") is not None:
        g = g[g["client"].fillna("") == (c.get("client") or "")]
    for k, v in (c.get("extra") or {}).items():  # recorded fields beyond them (report.keys)
        g = g[g[k].isna()] if pd.isna(v) else g[g[k] == v]
    return g


def _cmp(reads: pd.DataFrame, a: dict[str, object], b: dict[str, object], n: int):  # type: ignore[no-untyped-def]
    ga, gb = reads_of(reads, a, n), reads_of(reads, b, n)

    def cl(g: pd.DataFrame) -> pd.Series:  # type: ignore[type-arg]
        rep = g["repetition"] if "repetition" in g.columns else pd.Series(0, index=g.index)
        return g["run"].astype(str) + "/" + rep.astype(str)

    return contrast(ga["seconds"].to_numpy(float), gb["seconds"].to_numpy(float), cl(ga), cl(gb),
                    key=("sdb", n, a["backend"], a["track"], b["backend"], b["track"], b["schedulers"]),
                    stat="median")


def _k(n: float) -> str:
    return f"{n / 1000:,.1f}K" if n < 100_000 else f"{n / 1000:,.0f}K"


def findings(reads: pd.DataFrame, confs: list[dict[str, Any]], thr: float,
             label: Any) -> list[Finding]:
    out: list[Finding] = []
    hist = [c for c in confs if str(c["track"]).startswith("historical")]
    for c in [c for c in hist if c["schedulers"] == 1][:3]:
        k = c.get("constrained")
        x = k["crossing"] if k else None
        if x is None:
            continue
        if x.n is None:
            out.append(Finding(f"{label(c)}: t(N) stays below {thr:g} s up to 10M nodes (fit with "
                               f"coefficients ≥ 0; {_k(c['max_n'])} nodes measured)"))
        elif x.supported:
            out.append(Finding(f"{label(c)}: t(N) reaches {thr:g} s at {_k(x.n)} nodes "
                               f"{x.interval_text()} ({x.factor:,.1f}× beyond the {_k(c['max_n'])} "
                               "measured)"))
        else:
            out.append(Finding(f"{label(c)}: the {thr:g} s crossing ({_k(x.n)}) is not supported by the "
                               "data: " + "; ".join(x.reasons)))
    def same(c: dict[str, object]) -> tuple[object, ...]:
        return (c["backend"], c.get("client"), c["track"], c["updates"], str(c.get("extra") or {}))

    for c in confs:
        if c["schedulers"] != 1:
            continue
        more = [o for o in confs if same(o) == same(c) and o["schedulers"] > 1]
        if not more or len(out) >= 6:
            continue
        o = max(more, key=lambda o: o["schedulers"])
        n = min(c["max_n"], o["max_n"])
        r = _cmp(reads, c, o, n)
        out.append(Finding(f"{o['backend']} {o['track']}: {o['schedulers']} schedulers vs 1 at "
                           f"{_k(n)} nodes: {with_ci(r.b)} against {with_ci(r.a)} ({r.ratio_text})",
                           r.verdict))
    ref = next((c for c in hist if c["schedulers"] == 1 and not c["updates"]), None)
    for track in ("kv", "modern"):
        alt = next((c for c in confs if str(c["track"]).startswith(track) and c["schedulers"] == 1
                    and not c["updates"] and ref is not None and same(c)[-1] == same(ref)[-1]), None)
        if ref is None or alt is None:
            continue
        n = min(ref["max_n"], alt["max_n"])
        r = _cmp(reads, ref, alt, n)
        out.append(Finding(f"At {_k(n)} nodes, {alt['backend']} {alt['track']} reads in {with_ci(r.b)} "
                           f"against {with_ci(r.a)} for the 2013 {ref['backend']} join ({r.ratio_text})",
                           r.verdict))
    return out[:8]
