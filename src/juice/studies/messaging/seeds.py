"""Seed 003 beside the messaging runs: the Juice value matching each row of ``seed.yaml``
(``juice.report.seeds``), from the runs (``report.load``'s frame: params + summary). A row
whose bus or case was not run (Juice has no qdrouterd mesh) says "not measured here".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from juice.report.findings import estimate, with_ci
from juice.report.seeds import (
    DIFFERENT,
    SAME,
    Match,
    guarded,
    juice_conditions,
    load_references,
    plain,
    seed_table,
)

PACKAGE = "juice.studies.messaging"
BAD_LOCAL = 80.0     # % local below which a bus "keeps traffic local" badly
STRICT_LOCAL = 95.0  # % local from which a bus keeps it strictly local
ROUTER = "Juice has no qdrouterd mesh"


def _kind(df: pd.DataFrame) -> pd.Series:  # type: ignore[type-arg]
    k = df["bus_kind"] if "bus_kind" in df.columns else df["bus"].astype(str).str.split("×").str[0]
    return k.fillna(df["bus"].astype(str)).astype(str)


def _local(g: pd.DataFrame, bus: str) -> str:
    e, _ = estimate(g["locality_pct"].to_numpy(float), None, ("seed-locality", bus), "mean")
    return f"{bus} {with_ci(e, '%', 3)}"


def _locality(df: pd.DataFrame) -> list[Match]:
    if "locality_pct" not in df.columns:
        return []
    sites = df["sites"] if "sites" in df.columns else pd.Series(1, index=df.index)
    multi = df[(sites > 1) & df["locality_pct"].notna()]
    if multi.empty:
        return []
    kind = _kind(multi)
    topo = multi["topology"] if "topology" in multi.columns else pd.Series("", index=multi.index)
    central = multi[(kind == "rabbitmq")]
    bus = multi["bus"].astype(str)
    gateways = kind.str.startswith("nats") & ((topo == "gateways") | bus.str.contains("gateway"))
    local = multi[(kind == "rabbitmq-federation") | gateways]
    cond = (f"{int(multi['sites'].max())} sites, delays "
            + "/".join(f"{d:g}" for d in sorted(multi["delay_ms"].unique())) + " ms one-way")
    out = []
    if not central.empty:
        parts = [_local(g, str(b)) for b, g in central.groupby("bus")]
        worst = float(central.groupby("bus")["locality_pct"].mean().max())
        bad = worst < BAD_LOCAL
        out.append(Match("msg.broker_locality", "; ".join(parts), SAME if bad else DIFFERENT,
                         f"under {BAD_LOCAL:g} % local: consumers anywhere take the messages" if bad else
                         "the broker kept most deliveries local here", cond))
    if not local.empty:
        parts = [_local(g, str(b)) for b, g in local.groupby("bus")]
        least = float(local.groupby("bus")["locality_pct"].mean().min())
        strict = least >= STRICT_LOCAL
        out.append(Match("msg.strict_locality", "; ".join(parts), SAME if strict else DIFFERENT,
                         ("Juice's analogues (federation, NATS gateways: local consumers first) keep "
                          f"≥ {STRICT_LOCAL:g} % local; " if strict else
                          f"below {STRICT_LOCAL:g} % local on an analogue; ") + ROUTER, cond))
    return out


def _scale(df: pd.DataFrame) -> list[Match]:
    out = []
    for tc, rid in (("tc1", "msg.tc1_scale"), ("tc2", "msg.tc2_scale"), ("tc3", "msg.tc3_scale")):
        d = df[df["tc"] == tc] if "tc" in df.columns else df.iloc[:0]
        if d.empty or "agents" not in d.columns:
            continue
        top = d["agents"].max()
        at = d[d["agents"] == top]
        lost = int(at["lost"].fillna(0).sum() + at["errors"].fillna(0).sum())
        clean = lost == 0
        out.append(Match(rid, f"{top:g} agents: {lost} lost or failed over {len(at)} runs "
                         f"({', '.join(sorted(at['bus'].astype(str).unique()))})",
                         SAME if clean else DIFFERENT,
                         (f"carried without loss at this host's scale ({top:g} vs the seed's "
                          f"{'20K' if tc == 'tc2' else '10K'})") if clean else
                         f"losses or errors at {top:g} agents on one host", f"{top:g} agents at most"))
    return out


def matches(df: pd.DataFrame) -> list[Match]:
    if df.empty:
        return []
    return _locality(df) + _scale(df) + [
        Match("msg.balanced_locality", None, DIFFERENT, ROUTER + " (balanced mode)"),
        Match("msg.router_cost", None, DIFFERENT, ROUTER + "; the bus processes' CPU and memory are in "
              "the resource profiles below")]


def section(df: pd.DataFrame, manifests: Sequence[Mapping[str, object]]) -> str:
    """The "seed beside Juice" block of the messaging section."""
    return guarded("messaging", lambda: seed_table(
        "messaging", load_references(PACKAGE), matches(plain(df)), juice_conditions(manifests)))
