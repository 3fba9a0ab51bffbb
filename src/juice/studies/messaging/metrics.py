"""From the agents' records to one row per message and a run's summary.

    sends, recvs, ends = read_records(files)
    msgs = messages(sends, recvs, expected, warmup_until)    # the tidy per-message table
    s = summarize(msgs, recvs, window_s)                    # counts, percentiles, locality

Per message (``msgs``, stored as ``messages.parquet``): id, topic, m (call|cast|fanout), cli,
site (the producer's), t_int (intended send), t_send, t_done, ok, err, skipped, warmup, expected
(deliveries it should get), delivered (distinct servers that got it, at most ``expected``), dups
(deliveries beyond those: the same server twice, or a call/cast processed by a second server,
e.g. requeued after a partition), local (deliveries in the producer's site), rtt_s (call: reply
received - sent), rtt_int_s (reply received - INTENDED send: includes the generator's lag,
wrk2-style), oneway_s (first delivery - sent), spread_s (last delivery - sent: a fanout's
propagation), oneway_bound_s / spread_bound_s (their clock uncertainty, below).

Lost = expected deliveries that never came, over messages the generator did send (skipped ones
are the generator's, counted apart).

Clocks: a send is timed on its client's host, a delivery on its server's. One clock for every
site of a local lab, so one-way times are exact (bound 0). On SSH hosts each delivery and send
time is put on Juice's clock with its site's offset measured at the run's start
(``juice.profile.clocks``: ``t - offset_s``), so a one-way time between two hosts is corrected
by both offsets and uncertain by the sum of their bounds (``oneway_bound_s``; 0 within a
site: one clock). When that bound exceeds what is measured (the one-way p50), the run's one-way
figures are withheld with the reason (``summary["oneway_withheld"]``,
:func:`withheld`); a site whose offset was not measured withholds every cross-site time."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice.profile.clocks import Clocks

SEND_COLS = ["id", "cli", "site", "topic", "m", "t_int", "t_send", "t_done", "ok", "err", "srv", "t_srv"]
RECV_COLS = ["id", "srv", "site", "t", "sent"]
QS = (0.5, 0.9, 0.99, 0.999)


def json_lines(files: Sequence[Path]) -> Iterator[dict[str, object]]:
    """The JSON objects of JSON-lines ``files``; missing files and unparsable lines (a torn last
    line of a killed writer) are skipped."""
    for f in files:
        if not f.exists():
            continue
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict):
                yield r


def read_records(files: Sequence[Path]) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, object]]]:
    """Sends, deliveries and end lines (``proc``: the file's stem) of the agents' JSON-lines
    files (a torn last line, from a killed agent, is skipped)."""
    sends: list[dict[str, object]] = []
    recvs: list[dict[str, object]] = []
    ends: list[dict[str, object]] = []
    for f in files:
        for rec in json_lines([f]):
            k = rec.get("k")
            if k == "send":
                sends.append(rec)
            elif k == "recv":
                recvs.append(rec)
            else:  # a process's end line, named after its file (<process>.jsonl)
                ends.append({**rec, "proc": f.stem})
    s = pd.DataFrame(sends, columns=SEND_COLS)
    r = pd.DataFrame(recvs, columns=RECV_COLS)
    return s, r, ends


def _clock_columns(sites: pd.Series[float],
                   clocks: Clocks | None) -> tuple[pd.Series[float], pd.Series[float]]:
    """(offset_s, bound_s) per row of ``sites``: 0 and 0 on one clock (or ``clocks`` None: a
    local lab, or records without a lab), the measured offset and bound on hosts, 0 and
    +inf where the site's offset was not measured (its times stay raw; any cross-site
    difference is withheld)."""
    if clocks is None or clocks.one_clock:
        zero = pd.Series(0.0, index=sites.index)
        return zero, zero.copy()
    off, bound = {}, {}
    for site in sites.dropna().unique():
        c = clocks.of(int(site))
        off[site], bound[site] = c if c is not None else (0.0, float("inf"))
    return (sites.map(off).astype(float).fillna(0.0), sites.map(bound).astype(float).fillna(float("inf")))


def messages(sends: pd.DataFrame, recvs: pd.DataFrame, expected: Mapping[str, int],
             warmup_until: float, clocks: Clocks | None = None) -> pd.DataFrame:
    """The per-message table (see the module doc). ``clocks``: each site's clock offset at the
    run's start (None or one clock: times used as recorded)."""
    m = sends.copy()
    m["ok"] = m["ok"].fillna(False).astype(bool)
    m["skipped"] = m["err"].fillna("").astype(str).str.startswith("skipped")
    m["warmup"] = m["t_int"].astype(float) < warmup_until
    m["expected"] = m["topic"].map(dict(expected)).fillna(1).astype(int)
    send_off, _ = _clock_columns(m["site"], clocks)
    if len(recvs):
        r = recvs.merge(m[["id", "site"]].rename(columns={"site": "psite"}), on="id", how="left")
        r["is_local"] = r["site"] == r["psite"]
        off, bound = _clock_columns(r["site"], clocks)
        _, pbound = _clock_columns(r["psite"], clocks)
        r["tj"] = r["t"].astype(float) - off  # on Juice's clock
        # the uncertainty of (delivery - send): none within a site (one clock)
        r["bound"] = np.where(r["is_local"], 0.0, bound + pbound)
        per = r.groupby("id").agg(n=("srv", "size"), distinct=("srv", "nunique"),
                                  local=("is_local", "sum"), first=("tj", "min"), last=("tj", "max"))
        g = r.sort_values(["id", "tj"])
        per["first_bound"] = g.groupby("id")["bound"].first()
        per["last_bound"] = g.groupby("id")["bound"].last()
    else:
        per = pd.DataFrame(columns=["n", "distinct", "local", "first", "last", "first_bound", "last_bound"])
    m = m.merge(per, left_on="id", right_index=True, how="left")
    for c in ("n", "distinct", "local"):
        m[c] = m[c].fillna(0).astype(int)
    # a call/cast is delivered once at most (a second server processing it is a duplicate, e.g.
    # a message requeued after a partition); a fanout once per server
    m["delivered"] = m[["distinct", "expected"]].min(axis=1)
    m["dups"] = m["n"] - m["delivered"]
    t_send = m["t_send"].astype(float)
    call_ok = (m["m"] == "call") & m["ok"]
    m["rtt_s"] = np.where(call_ok, m["t_done"].astype(float) - t_send, np.nan)
    m["rtt_int_s"] = np.where(call_ok, m["t_done"].astype(float) - m["t_int"].astype(float), np.nan)
    t_send_j = t_send - send_off  # the send on Juice's clock (the client's site's offset)
    m["oneway_s"] = m["first"].astype(float) - t_send_j
    m["spread_s"] = m["last"].astype(float) - t_send_j
    m["oneway_bound_s"] = m["first_bound"].astype(float)
    m["spread_bound_s"] = m["last_bound"].astype(float)
    return m.drop(columns=["n", "distinct", "first", "last", "first_bound", "last_bound"])


def withheld(values: pd.Series[float], bounds: pd.Series[float] | None,
             what: str = "one-way p50") -> str | None:
    """Why the times ``values`` (seconds) cannot be reported given their clock ``bounds``
    (seconds, per value), or None: the largest bound over the values above their median
    (:data:`what`), or a site whose clock offset was not measured."""
    if bounds is None:
        return None
    ok = values.notna()
    v, b = values[ok].astype(float), bounds[ok].astype(float).fillna(0.0)
    if not len(v):
        return None
    top = float(b.max())
    if top == float("inf"):
        return "withheld: a site's clock offset was not measured (times across hosts cannot be corrected)"
    p50 = float(v.quantile(0.5))
    if top > 0 and top > abs(p50):
        return f"withheld: clock offset bound {top * 1000:.3g} ms > {what} {p50 * 1000:.3g} ms"
    return None


def latencies(m: pd.DataFrame) -> tuple[str, pd.Series[float]]:
    """(column, values in s) of a run's measured (non warm-up) messages that its latency
    figures use: the call round trips, else the one-way times (none when withheld)."""
    m = m[~m["warmup"].astype(bool)]
    if m["rtt_s"].notna().any():
        return "rtt_s", m["rtt_s"].dropna()
    if withheld(m["oneway_s"], m["oneway_bound_s"] if "oneway_bound_s" in m.columns else None):
        return "oneway_s", m["oneway_s"].iloc[0:0]
    return "oneway_s", m["oneway_s"].dropna()


def _pcts(x: pd.Series[float], prefix: str) -> dict[str, float | None]:
    x = x.dropna().astype(float)
    out: dict[str, float | None] = {f"{prefix}_p{str(q * 100).rstrip('0').rstrip('.')}_ms": None for q in QS}
    out[f"{prefix}_mean_ms"] = out[f"{prefix}_max_ms"] = None
    if len(x):
        for q in QS:
            name = f"{prefix}_p{str(q * 100).rstrip('0').rstrip('.')}_ms"
            out[name] = round(float(x.quantile(q)) * 1000, 3)
        out[f"{prefix}_mean_ms"] = round(float(x.mean()) * 1000, 3)
        out[f"{prefix}_max_ms"] = round(float(x.max()) * 1000, 3)
    return out


def summarize(msgs: pd.DataFrame, recvs: pd.DataFrame, window_s: float,
              server_sites: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A run's figures over the measured messages (warm-up ones left out)."""
    m = msgs[~msgs["warmup"]]
    sent = m[~m["skipped"]]
    errs = sent[~sent["ok"]]["err"].fillna("").astype(str).str.split(":").str[0].value_counts()
    expected = int(sent["expected"].sum())
    delivered = int(sent["delivered"].sum())
    out: dict[str, object] = {
        "messages": int(len(m)), "sent": int(len(sent)), "skipped": int(m["skipped"].sum()),
        "ok": int(sent["ok"].sum()), "errors": int((~sent["ok"]).sum()),
        "errors_by_class": {str(k): int(v) for k, v in errs.items()},
        "expected_deliveries": expected, "delivered": delivered,
        "lost": int((sent["expected"] - sent["delivered"]).clip(lower=0).sum()),
        "duplicates": int(sent["dups"].sum()),
        "window_s": round(window_s, 3),
        "send_rate": round(len(sent) / window_s, 2) if window_s > 0 else None,
        "delivery_rate": round(delivered / window_s, 2) if window_s > 0 else None,
        "locality_pct": round(100.0 * sent["local"].sum() / delivered, 2) if delivered else None,
        "generator_lag_p99_ms": (round(float((sent["t_send"] - sent["t_int"]).quantile(0.99)) * 1000, 3)
                                 if len(sent) else None),
    }
    out.update(_pcts(sent["rtt_s"], "rtt"))
    out.update(_pcts(sent["rtt_int_s"], "rtt_int"))
    fanouts = sent[sent["m"] == "fanout"]
    for col, prefix, label, part in (("oneway_s", "oneway", "one-way p50", sent),
                                     ("spread_s", "spread", "fanout spread p50", fanouts)):
        if prefix == "spread" and not len(part):
            continue
        out.update(_pcts(part[col], prefix))
        bcol = f"{prefix}_bound_s"
        bounds = part[bcol] if bcol in part.columns else None
        vals = part[col].notna()
        if bounds is not None and vals.any():
            top = float(bounds[vals].astype(float).fillna(0.0).max())
            out[f"{prefix}_bound_ms"] = round(top * 1000, 3) if top != float("inf") else None
        why = withheld(part[col], bounds, label)
        if why:  # the figures would be the hosts' clocks, not the delay: not reported
            out.update({k: None for k in _pcts(part[col].iloc[0:0], prefix)})
            out[f"{prefix}_withheld"] = why
    per_site = {}
    for site, g in sent.groupby("site"):
        d = int(g["delivered"].sum())
        per_site[str(site)] = round(100.0 * g["local"].sum() / d, 2) if d else None
    out["locality_pct_by_site"] = per_site
    if len(recvs):
        measured = recvs[recvs["id"].isin(set(sent["id"]))]
        per_srv = measured.groupby("srv").size()
        if server_sites:
            per_srv = per_srv.reindex(list(server_sites), fill_value=0)
        out["deliveries_per_server"] = {
            "servers": int(len(per_srv)), "min": int(per_srv.min()) if len(per_srv) else 0,
            "max": int(per_srv.max()) if len(per_srv) else 0,
            "cv": (round(float(per_srv.std(ddof=0) / per_srv.mean()), 3)
                   if len(per_srv) and per_srv.mean() else None)}
        by_site = measured.groupby("site").size()
        out["deliveries_by_server_site"] = {str(k): int(v) for k, v in by_site.items()}
    return out


def timeline(msgs: pd.DataFrame, bin_s: float = 1.0) -> pd.DataFrame:
    """Per ``bin_s`` of intended send time: sent, ok, failed, lost deliveries, median call RTT."""
    if msgs.empty:
        return pd.DataFrame(columns=["t", "sent", "ok", "failed", "lost", "rtt_p50_ms"])
    t0 = float(msgs["t_int"].min())
    b = ((msgs["t_int"].astype(float) - t0) // bin_s) * bin_s
    lost = (msgs["expected"] - msgs["delivered"]).clip(lower=0).where(~msgs["skipped"], 0)
    m = msgs.assign(t=b, lost=lost,
                    failed=~msgs["ok"] & ~msgs["skipped"])
    g = m.groupby("t")
    out = pd.DataFrame({"sent": g.size(), "ok": g["ok"].sum(), "failed": g["failed"].sum(),
                        "lost": g["lost"].sum(), "rtt_p50_ms": g["rtt_s"].median() * 1000}).reset_index()
    return out
