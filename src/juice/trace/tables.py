"""The Python API of tracing: logs in, tidy tables out.

    from juice.trace.tables import trace
    t = trace([Path("results/nova-boot")])          # runs, a study directory, or plain log dirs
    t.boots      # one row per boot (request × instance): state, attempts, phases, API's view
    t.phases     # one row per boot × phase (seconds)
    t.events     # one row per event (corrected time ``t``, raw ``t_raw``, clock)
    t.skew       # one row per clock: offset chosen, bounds [lo, hi], width, pairs, applied, needs
    t.clocks     # one row per log file: its clock, why (--clock, run site, JSON hostname, own file)
    t.errors     # one row per message template × component (every WARNING/ERROR line)
    t.faults     # one row per terminal fault template × component × state (seed 004 Table 1)
    t.summary    # per source: boots, traced %, match % with the API, failure/retry rates, …

A *source* is a Juice run directory (``logs/`` + manifest: clocks are its sites; boots.parquet
gives the client's send and accept times, so the client is the reference clock and the API's
status checks every trace), or a directory of plain service logs from any cloud (files grouped
into clocks by ``clocks`` = file stem → clock name, else by their JSON records' hostname, else
one clock per file: see ``juice.trace.clocks``). ``t.traces`` keeps the boots' state machines
(with corrected times) for exports such as ``juice.trace.otlp``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from juice.errors import UserError
from juice.trace import causes, flow, skew
from juice.trace import clocks as clk
from juice.trace.parse import Event, parse_files

LOG_SUFFIXES = (".log", ".json", ".txt")
CLIENT = "client"


class UnfitRow(TypedDict):
    """Per run: the events no boot took (``flow.Unfit``)."""

    run: str
    orphan_events: int
    no_request_id: int
    other_requests: int
    examples: str


@dataclass
class Traced:
    boots: pd.DataFrame
    phases: pd.DataFrame
    events: pd.DataFrame
    skew: pd.DataFrame
    errors: pd.DataFrame
    faults: pd.DataFrame
    summary: pd.DataFrame
    unfit: list[UnfitRow] = field(default_factory=list)
    clocks: pd.DataFrame = field(default_factory=pd.DataFrame)
    traces: list[tuple[str, flow.Trace, dict[str, str]]] = field(default_factory=list)  # run, boot, clocks

    def write(self, out: Path) -> list[Path]:
        """Each table as ``<out>/trace_<name>.parquet`` (written to a temp file, then renamed)."""
        import os

        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name in ("boots", "phases", "events", "skew", "errors", "faults", "summary", "clocks"):
            df: pd.DataFrame = getattr(self, name)
            p = out / f"trace_{name}.parquet"
            tmp = p.with_name(p.name + ".tmp")
            df.to_parquet(tmp, index=False)
            os.replace(tmp, p)
            paths.append(p)
        return paths


@dataclass
class Source:
    name: str
    files: list[Path]
    run_dir: Path | None = None

    def clocks(self) -> dict[str, str]:
        return run_clocks(self.run_dir) if self.run_dir is not None else {}


def _log_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file() and p.suffix in LOG_SUFFIXES and p.stat().st_size)


def sources(paths: Sequence[Path]) -> list[Source]:
    """Runs (``<run>/logs/``), study directories (their runs; discarded warm-up runs,
    ``<run>.warmup``, left out unless given by their own path) and plain log directories/files."""
    from juice.results.store import WARMUP_SUFFIX

    out: list[Source] = []
    for p in paths:
        if not p.exists():
            raise UserError(f"{p}: no such file or directory")
        if p.is_file():
            out.append(Source(p.stem, [p]))
        elif (p / "logs").is_dir():
            out.append(Source(p.name, _log_files(p / "logs"), p))
        else:
            runs = sorted(d for d in p.iterdir() if d.is_dir() and (d / "logs").is_dir()
                          and not d.name.endswith(WARMUP_SUFFIX))
            if runs:
                out += [Source(d.name, _log_files(d / "logs"), d) for d in runs]
            elif _log_files(p):
                out.append(Source(p.name, _log_files(p)))
    if not out:
        raise UserError(f"no logs under {', '.join(map(str, paths))} (give a run, a study directory "
                        "or a directory of service logs)")
    return out


def run_clocks(run_dir: Path) -> dict[str, str]:
    """stream → clock (``site<k>``) from a Juice run's manifest: every site is one host."""
    try:
        man = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    dep = man.get("deployment") or {}
    nova, comp, plc = dep.get("nova") or {}, dep.get("computes") or {}, dep.get("placement") or {}
    out: dict[str, str] = {}
    if nova.get("api_site") is not None:
        out["juice-api"] = f"site{nova['api_site']}"
    if nova.get("conductor_site") is not None:
        out["juice-conductor"] = f"site{nova['conductor_site']}"
    for k, s in enumerate(nova.get("scheduler_sites") or [], start=1):
        out[f"juice-sched-{k}"] = f"site{s}"
    forked = comp.get("isolation") == "fork"  # one nova-compute per node: juice-c<k>-n<j>
    for k, s in enumerate(comp.get("sites") or [], start=1 + int(comp.get("first_index", 1)) - 1):
        out[f"juice-c{k}"] = f"site{s}"
        for j in range(int(comp.get("nodes_per_process") or 0) if forked else 0):
            out[f"juice-c{k}-n{j:04d}"] = f"site{s}"
    if plc.get("site") is not None:
        out["placement"] = f"site{plc['site']}"
    return out


def _client_events(run_dir: Path | None) -> tuple[list[tuple[str, float, float | None]], pd.DataFrame | None]:
    """(request id, POST sent, 202 received) per boot of a Juice run, and boots.parquet."""
    if run_dir is None or not (run_dir / "boots.parquet").is_file():
        return [], None
    b = pd.read_parquet(run_dir / "boots.parquet")
    out = []
    for r in b.itertuples(index=False):
        rid, tp = getattr(r, "request_id", None), getattr(r, "t_post", None)
        if isinstance(rid, str) and tp is not None and pd.notna(tp):
            api = getattr(r, "api_s", None)
            acc = float(tp) + float(api) if api is not None and pd.notna(api) else None
            out.append((rid, float(tp), acc))
    return out, b


def _client_pairs(traces: Sequence[flow.Trace], client: Sequence[tuple[str, float, float | None]]
                  ) -> list[skew.Pair]:
    by_rid = {t.rid: t for t in traces}
    out = []
    for rid, sent, accepted in client:
        tr = by_rid.get(rid)
        if tr is None:
            continue
        recv = next((e for e in tr.events if e.kind == "api.received"), None)
        ret = next((e for e in tr.events if e.kind == "api.returned"), None)
        if recv is not None:
            out.append(skew.Pair(CLIENT, sent, recv.stream, recv.t, "client → api (POST)"))
        if ret is not None and accepted is not None:
            out.append(skew.Pair(ret.stream, ret.t, CLIENT, accepted, "api → client (202)"))
    return out


def trace_source(src: Source, correct: bool = True, workers: int | None = None,
                 clocks: Mapping[str, str] | None = None) -> Traced:
    events = parse_files(src.files, workers=workers)
    cmap, why = clk.assign(src.files, clocks, src.clocks())

    def clock_of(stream: str) -> str:
        return cmap.get(stream, stream)

    traces, unfit = flow.build(events)
    client, api_boots = _client_events(src.run_dir)
    pairs = [p for tr in traces for p in skew.pairs_of(tr)] + _client_pairs(traces, client)
    ref = CLIENT if client else clock_of("juice-api") if "juice-api" in cmap else None
    if ref is None:   # preferred; the estimator takes another when nothing comes back to it
        api_streams = [e.stream for e in events if e.kind == "api.received"]
        ref = clock_of(api_streams[0]) if api_streams else None
    sk = skew.estimate(pairs, clock_of, ref)
    sk.enabled = correct
    offsets = {s: sk.offset(clock_of(s)) for s in {e.stream for e in events}}
    before = skew.violations(pairs, {})
    after = skew.violations(pairs, offsets)
    if correct and any(offsets.values()):
        events = skew.apply(events, offsets)
        traces, unfit = flow.build(events)
    boots = _boots(traces, src, api_boots)
    phases = _phases(boots, traces)
    ev = _events(events, src.name, clock_of, offsets)
    sk_df = pd.DataFrame(sk.rows())
    if not sk_df.empty:
        sk_df.insert(0, "run", src.name)
    errors, faults = _errors(events, traces, src.name)
    summary = _summary(src, boots, events, sk, unfit, len(pairs), before, after if correct else before)
    unfit_rows: list[UnfitRow] = [{"run": src.name, "orphan_events": unfit.orphan_events,
                   "no_request_id": unfit.no_request_id, "other_requests": unfit.other_requests,
                   "examples": "; ".join(unfit.examples)}]
    clocks_df = pd.DataFrame(clk.table_rows(src.name, src.files, cmap, why))
    return Traced(boots, phases, ev, sk_df, errors, faults, summary, unfit_rows, clocks_df,
                  [(src.name, tr, cmap) for tr in traces])


def trace(paths: Sequence[Path], correct: bool = True, workers: int | None = None,
          clocks: Mapping[str, str] | None = None) -> Traced:
    """Trace every source under ``paths``; the tables are concatenated (a ``run`` column)."""
    srcs = sources(paths)
    if clocks:
        clk.check_known(clocks, (clk.stream_of(f) for s in srcs for f in s.files))
    parts = [trace_source(s, correct, workers, clocks) for s in srcs]
    cat: Callable[[str], pd.DataFrame] = lambda n: pd.concat(  # noqa: E731
        [getattr(p, n) for p in parts if not getattr(p, n).empty] or [pd.DataFrame()], ignore_index=True)
    return Traced(cat("boots"), cat("phases"), cat("events"), cat("skew"), cat("errors"), cat("faults"),
                  cat("summary"), [u for p in parts for u in p.unfit], cat("clocks"),
                  [x for p in parts for x in p.traces])


API_MATCH = {"active": ("ACTIVE",), "no_valid_host": ("ERROR",), "retries_exhausted": ("ERROR",),
             "compute_failed": ("ERROR",), "api_failed": ("failed", "unknown")}


def _api_state(status: object, fault: object) -> str | None:
    """The terminal state the API reported (boots.parquet), in the trace's vocabulary."""
    if not isinstance(status, str):
        return None
    if status == "ACTIVE":
        return "active"
    f = fault if isinstance(fault, str) else ""
    if status == "ERROR":
        return flow._fault_class(f) or "compute_failed"
    return "api_failed" if status in ("failed", "unknown") else status.lower()


def _boots(traces: Sequence[flow.Trace], src: Source, api: pd.DataFrame | None) -> pd.DataFrame:
    params: dict[str, object] = {}
    if src.run_dir is not None:
        try:
            params = json.loads((src.run_dir / "manifest.json").read_text()).get("params") or {}
        except (OSError, ValueError):
            params = {}
    rows = []
    for tr in traces:
        r: dict[str, object] = {
            "run": src.name, "request_id": tr.rid, "uuid": tr.uuid, "state": tr.state,
            "terminal": tr.state in flow.TERMINALS, "attempts": tr.attempts,
            "retries": max(tr.attempts - 1, 0), "host": tr.host, "hosts": ",".join(tr.hosts),
            "alternates": tr.alternates, "claim_conflicts": tr.claim_conflicts, "t_start": tr.t_start,
            "t_end": tr.t_end, "duration_s": tr.duration_s, "api_status": tr.api_status,
            "fault": tr.fault, "fault_template": tr.fault_template, "fault_component": tr.fault_component,
            "anomalies": len(tr.anomalies), "anomaly": "; ".join(tr.anomalies) or None,
            "events": len(tr.events),
            "cause": causes.boot_cause(tr.fault_template, tr.fault,
                                       (e.template for e in tr.events if e.kind == "error"))
            if tr.state != "active" else None}
        for ph in flow.PHASES:
            r[f"{ph}_s"] = tr.phases.get(ph)
        for k in ("concurrency", "schedulers", "delay_ms", "rate"):
            if k in params:
                r[k] = params[k]
        rows.append(r)
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=["run", "request_id", "uuid", "state", "terminal"])
    df["in_flight"] = _in_flight(df)
    if api is not None and not api.empty:
        a = api[["request_id", "id", "status", "fault"]].rename(
            columns={"id": "api_uuid", "status": "api_state_raw", "fault": "api_fault"})
        df = df.merge(a, on="request_id", how="outer", indicator=True)
        df["api_state"] = [_api_state(s, f)
                           for s, f in zip(df["api_state_raw"], df["api_fault"], strict=True)]
        df["state"] = df["state"].fillna("untraced")
        df["run"] = df["run"].fillna(src.name)
        df["terminal"] = df["terminal"].eq(True)  # None (not known) is not terminal
        df["matches_api"] = [bool(s == a) if isinstance(a, str) else None
                             for s, a in zip(df["state"], df["api_state"], strict=True)]
        df = df.drop(columns=["_merge", "api_state_raw"])
    return df


def _in_flight(df: pd.DataFrame) -> list[int]:
    if df.empty or "t_start" not in df.columns:
        return []
    s = df["t_start"].to_numpy(dtype=float)
    e = df["t_end"].to_numpy(dtype=float)
    return [int(((s <= t) & (e > t)).sum()) if t == t else 0 for t in s]


def _phases(boots: pd.DataFrame, traces: Sequence[flow.Trace]) -> pd.DataFrame:
    rows = []
    for tr in traces:
        for ph in flow.PHASES:
            if ph in tr.phases:
                rows.append({"request_id": tr.rid, "uuid": tr.uuid, "state": tr.state, "phase": ph,
                             "seconds": tr.phases[ph]})
    df = pd.DataFrame(rows, columns=["request_id", "uuid", "state", "phase", "seconds"])
    keep = [c for c in ("run", "request_id", "uuid", "concurrency", "in_flight", "schedulers", "delay_ms")
            if c in boots.columns]
    if not df.empty and not boots.empty:
        df = df.merge(boots[keep].dropna(subset=["request_id"]), on=["request_id", "uuid"], how="left")
    return df


EVENT_COLS = ("t", "stream", "component", "kind", "greq", "req", "uuid", "level", "host", "peer", "value",
              "detail", "template")


def _events(events: Sequence[Event], run: str, clock_of: Callable[[str], str],
            offsets: Mapping[str, float]) -> pd.DataFrame:
    df = pd.DataFrame([[getattr(e, c) for c in EVENT_COLS] for e in events], columns=list(EVENT_COLS))
    df.insert(0, "run", run)
    df["clock"] = [clock_of(s) for s in df["stream"]]
    df["t_raw"] = df["t"] + [offsets.get(s, 0.0) for s in df["stream"]]
    return df.sort_values("t", kind="stable").reset_index(drop=True)


def _errors(events: Sequence[Event], traces: Sequence[flow.Trace], run: str
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    in_boot = {e.rid for tr in traces for e in tr.events if e.kind == "error"}
    rows = [{"run": run, "component": e.component, "level": e.level, "template": e.template or "",
             "request_id": e.rid, "in_boot": e.rid in in_boot} for e in events if e.kind == "error"]
    cols = ["run", "component", "level", "template", "count", "requests", "in_boots", "cause"]
    if rows:
        d = pd.DataFrame(rows)
        errors = (d.groupby(["run", "component", "level", "template"], dropna=False)
                  .agg(count=("template", "size"), requests=("request_id", "nunique"),
                       in_boots=("in_boot", "sum"))
                  .reset_index().sort_values("count", ascending=False))
        errors["cause"] = [_cause(t) for t in errors["template"]]
    else:
        errors = pd.DataFrame(columns=cols)
    frows = [{"run": run, "component": tr.fault_component or "?", "state": tr.state,
              "fault": tr.fault_template or _short(tr.fault) or "unknown"}
             for tr in traces if tr.state not in ("active",) and (tr.state != "incomplete" or tr.fault)]
    faults = (pd.DataFrame(frows).groupby(["run", "component", "state", "fault"]).size()
              .rename("count").reset_index().sort_values("count", ascending=False)
              if frows else pd.DataFrame(columns=["run", "component", "state", "fault", "count"]))
    faults["cause"] = [_cause(f) for f in faults["fault"]]
    return errors, faults


def _cause(text: object) -> str | None:
    found = causes.cause_of(str(text)) if isinstance(text, str) else None
    return found[0] if found else None


def _short(s: str | None) -> str | None:
    return re.sub(r"\s+", " ", s)[:200] if s else None


def _summary(src: Source, boots: pd.DataFrame, events: Sequence[Event], sk: skew.Skew, unfit: flow.Unfit,
             npairs: int, before: int, after: int) -> pd.DataFrame:
    n = len(boots)
    traced = boots[boots["state"] != "untraced"] if "state" in boots.columns else boots
    term = int(traced["terminal"].sum()) if n else 0
    row: dict[str, Any] = {"run": src.name, "files": len(src.files), "events": len(events), "boots": n,
                           "traced": len(traced), "terminal": term,
                           "terminal_pct": round(100.0 * term / n, 2) if n else None}
    for st in (*flow.TERMINALS, "incomplete", "untraced"):
        row[st] = int((boots["state"] == st).sum()) if n else 0
    if n and "matches_api" in boots.columns:
        m = boots["matches_api"].dropna()
        row["api_boots"] = int(boots["api_state"].notna().sum())
        row["matches_api"] = int(m.sum())
        row["match_pct"] = round(100.0 * float(m.sum()) / row["api_boots"], 2) if row["api_boots"] else None
    if len(traced):
        row["failure_pct"] = round(100.0 * float((traced["state"] != "active").sum()) / len(traced), 2)
        row["retry_pct"] = round(100.0 * float((traced["attempts"] > 1).sum()) / len(traced), 2)
        row["anomalous_boots"] = int((traced["anomalies"] > 0).sum())
        act = traced[traced["state"] == "active"]
        if len(act) and traced["t_start"].notna().any():
            window = float(act["t_end"].max() - traced["t_start"].min())
            row["window_s"] = round(window, 3)
            row["active_per_s"] = round(len(act) / window, 4) if window > 0 else None
    row |= {"orphan_events": unfit.orphan_events, "no_request_id": unfit.no_request_id,
            "other_requests": unfit.other_requests, "skew_reference": sk.reference,
            "skew_applied": sk.enabled and sk.consistent, "skew_note": sk.note, "pairs": npairs,
            "pairs_violated_raw": before, "pairs_violated_corrected": after}
    return pd.DataFrame([row])
