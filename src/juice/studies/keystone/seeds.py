"""Seed 000 beside the Keystone runs: the Juice value matching each row of ``seed.yaml``
(``juice.report.seeds``), computed from the iterations (``iteration_totals``) and the runs'
%reads/%writes. A row whose runs are absent (no high load, no CockroachDB, …) is left out:
the table says "not measured here".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from juice.report.findings import CONFOUNDED, ONE_RUN, contrast, num, with_ci
from juice.report.seeds import (
    CONTEXT,
    DIFFERENT,
    SAME,
    UNDECIDED,
    Match,
    by_id,
    guarded,
    juice_conditions,
    load_references,
    near,
    plain,
    seed_table,
    trend,
)

AUTH = "authenticate_user_and_validate_token"
WRITE = "create_user_update_password"
RW_TOLERANCE = 3.0  # percentage points: same shape when %reads is this close to the seed's


def _scen(s: Any) -> str:
    return str(s).split(".")[-1]


def _ok(it: pd.DataFrame) -> pd.DataFrame:
    return it[~it["failed"].astype(bool)].dropna(subset=["total_s"])


def _cmp(a: pd.DataFrame, b: pd.DataFrame, key: Any):  # type: ignore[no-untyped-def]
    return contrast(a["total_s"].to_numpy(float), b["total_s"].to_numpy(float), a["run"].astype(str),
                    b["run"].astype(str), key=("keystone-seed", key), stat="mean")


def _where(d: pd.DataFrame) -> str:
    parts = []
    for col, unit in (("sites", " sites"), ("delay_ms", " ms one-way"), ("load", " load")):
        if col in d.columns and d[col].notna().any():
            vals = sorted(d[col].dropna().unique(), key=str)
            parts.append("/".join(f"{v:g}" if isinstance(v, float | int) else str(v) for v in vals) + unit)
    return ", ".join(parts)


def _rw(it: pd.DataFrame, rw: pd.DataFrame | None, refs: Mapping[str, Any]) -> list[Match]:
    if rw is None or rw.empty or "scenario" not in it.columns:
        return []
    runs = it.drop_duplicates("run")
    sc = pd.Series(runs["scenario"].to_numpy(), index=runs["run"].astype(str))
    rr = rw.assign(scenario=rw["run"].astype(str).map(sc)).dropna(subset=["scenario", "pct_reads"])
    out = []
    for s, g in rr.groupby(rr["scenario"].map(_scen)):
        ref = refs.get(f"rw.{s}")
        if ref is None:
            continue
        r, w = float(g["pct_reads"].mean()), float(g["pct_writes"].mean())
        seed_r = ref.numbers["pct_reads"]
        ok = near(r, seed_r, RW_TOLERANCE)
        why = (f"{r - seed_r:+.2f} points of reads; reads dominate on both sides" if ok else
               f"{r - seed_r:+.2f} points of reads: statements per call depend on the Keystone release "
               "and the driver's context (the seed counted its Rally context's setup/cleanup too)")
        out.append(Match(ref.id, f"{r:.2f} / {w:.2f} ({len(g)} run{'s' * (len(g) > 1)})",
                         SAME if ok else DIFFERENT, why, "MariaDB/Galera statement counters around "
                         "the drivers' window, contexts included"))
    return out


def _light_order(ok: pd.DataFrame) -> Match | None:
    d = ok[(ok["scenario"].map(_scen) == AUTH)] if "scenario" in ok.columns else ok
    if "load" in d.columns:
        d = d[d["load"].fillna("light") == "light"]
    if "delay_ms" in d.columns and len(d):
        d = d[d["delay_ms"] == d["delay_ms"].min()]
    have = set(d["rdbms"].dropna()) if "rdbms" in d.columns else set()
    if not {"mariadb", "galera"} <= have:
        return None
    c = _cmp(d[d["rdbms"] == "mariadb"], d[d["rdbms"] == "galera"], "order")
    verdict, why = trend(c, "up", "Galera/MariaDB ")
    text = f"MariaDB {with_ci(c.a)}, Galera {with_ci(c.b)}"
    if "cockroach" in have:
        k = _cmp(d[d["rdbms"] == "galera"], d[d["rdbms"] == "cockroach"], "order-crdb")
        text += f", CockroachDB {with_ci(k.b)}"
        v2, w2 = trend(k, "up", "CockroachDB/Galera ")
        if v2 != SAME and verdict == SAME:
            verdict, why = v2, w2
        else:
            why += f"; {w2}"
    return Match("light.rdbms_order", text, verdict, why, _where(d))


def _high(ok: pd.DataFrame, it: pd.DataFrame) -> list[Match]:
    if "load" not in it.columns or set(it["load"].dropna()) < {"light", "high"}:
        return []
    out = []
    top = it["sites"].max() if "sites" in it.columns else None
    at = it if top is None else it[it["sites"] == top]
    if "delay_ms" in at.columns:
        at = at[at["delay_ms"] == at["delay_ms"].min()]
    m = at[at["rdbms"] == "mariadb"] if "rdbms" in at.columns else at.iloc[:0]
    if not m.empty and set(m["load"]) >= {"light", "high"}:
        lam = m.groupby("load")["failed"].mean()
        lo, hi = float(lam.get("light", np.nan)), float(lam.get("high", np.nan))
        rises = hi >= 0.5 and hi > lo
        out.append(Match("high.mariadb_failures", f"λ {num(lo, '', 2)} light → {num(hi, '', 2)} high",
                         SAME if rises else DIFFERENT,
                         "failures dominate under high load" if rises else
                         f"no collapse at {top:g} sites (the seed's: 45 instances, 450 transactions in "
                         "flight)", _where(m)))
    g = _ok(at[(at["rdbms"] == "galera")]) if "rdbms" in at.columns else at.iloc[:0]
    if "scenario" in g.columns:
        g = g[g["scenario"].map(_scen) == AUTH]
    if not g.empty and set(g["load"]) >= {"light", "high"}:
        c = _cmp(g[g["load"] == "light"], g[g["load"] == "high"], "galera-high")
        v, why = trend(c, "up", "high/light ")
        out.append(Match("high.galera_time", f"{with_ci(c.a)} → {with_ci(c.b)} ({c.ratio_text})", v,
                         why + f"; seed ≈4× at 45 instances, here {top:g} sites", _where(g)))
        tail = g[g["load"] == "high"]["total_s"].to_numpy(float)
        if len(tail) >= 20:
            q95, mx = float(np.quantile(tail, 0.95)), float(tail.max())
            heavy = mx > 5 * q95
            out.append(Match("high.tail", f"p95 {num(q95, 's')}, max {num(mx, 's')} (Galera)",
                             SAME if heavy else DIFFERENT,
                             "a long tail past the 95th percentile" if heavy else
                             "no long tail past the 95th percentile (max < 5 × p95)", _where(g)))
    return out


def _delay(ok: pd.DataFrame) -> Match | None:
    if "delay_ms" not in ok.columns or ok["delay_ms"].nunique() < 2 or "scenario" not in ok.columns:
        return None
    g = ok[ok["rdbms"] == "galera"] if "rdbms" in ok.columns else ok.iloc[:0]
    if "load" in g.columns:
        g = g[g["load"].fillna("light") == "light"]
    lo, hi = ok["delay_ms"].min(), ok["delay_ms"].max()
    ratios = {}
    for name in (AUTH, WRITE):
        s = g[g["scenario"].map(_scen) == name]
        a, b = s[s["delay_ms"] == lo], s[s["delay_ms"] == hi]
        if a.empty or b.empty:
            return None
        ratios[name] = _cmp(a, b, ("delay", name))
    r, w = ratios[AUTH], ratios[WRITE]
    text = (f"Galera {hi:g} vs {lo:g} ms: authenticate {r.ratio_text}, create-user-update-password "
            f"{w.ratio_text}")
    if not (np.isfinite(r.ratio) and np.isfinite(w.ratio)):
        return Match("delay.galera_reads_writes", text, UNDECIDED, "no ratio")
    if w.verdict in (ONE_RUN, CONFOUNDED):
        return Match("delay.galera_reads_writes", text, UNDECIDED,
                     f"writes {w.ratio_text} against reads {r.ratio_text}, but the write contrast is "
                     f"{w.verdict} (repetitions >= 2, interleaved, decide it)")
    same = w.ratio > r.ratio and w.real
    why = ("writes slow down more than reads" if same else
           "writes do not slow down more than reads here")
    return Match("delay.galera_reads_writes", text, SAME if same else DIFFERENT, why, _where(g))


def _crdb(ok: pd.DataFrame) -> Match | None:
    if "rdbms" not in ok.columns or "scenario" not in ok.columns:
        return None
    d = ok[(ok["rdbms"] == "cockroach") & (ok["scenario"].map(_scen) == "create_and_list_tenants")]
    if "delay_ms" in d.columns:
        d = d[d["delay_ms"] == 0]
    if d.empty:
        return None
    e = contrast(d["total_s"].to_numpy(float), d["total_s"].to_numpy(float), d["run"].astype(str),
                 d["run"].astype(str), key="crdb").a
    return Match("crdb.tenants", with_ci(e), CONTEXT, "absolute time: other hardware and versions",
                 _where(d))


def matches(it: pd.DataFrame, rw: pd.DataFrame | None) -> list[Match]:
    refs = by_id(load_references("juice.studies.keystone"))
    ok = _ok(it)
    out = _rw(it, rw, refs)
    for m in (_light_order(ok), _delay(ok), _crdb(ok)):
        if m is not None:
            out.append(m)
    return out + _high(ok, it)


def section(it: pd.DataFrame, rw: pd.DataFrame | None, manifests: Sequence[Mapping[str, Any]]) -> str:
    """The "seed beside Juice" block of the Keystone section."""
    return guarded("Keystone", lambda: seed_table(
        "Keystone", load_references("juice.studies.keystone"), matches(plain(it), rw),
        juice_conditions(manifests)))
