"""The nova runs' trace as a report reads it: the trace of the runs that kept their logs, made
once (``traced``), and the mean time per phase of the boots (``phase_means``). The report's
tracing section is ``juice.report.traces``.

    t = traced(run_dirs)                    # Traced, the error's text, or None (no logs kept)
    m = phase_means(t.boots)                # a row per concurrency, a column per phase
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from juice.trace import flow
from juice.trace.tables import Traced


def phase_means(boots: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Mean seconds per phase of the active boots, a row per concurrency (or in-flight level)."""
    if boots.empty or "state" not in boots.columns:
        return pd.DataFrame()
    act = boots[boots["state"] == "active"]
    key = by or ("concurrency" if "concurrency" in act.columns and act["concurrency"].notna().any()
                 else "in_flight")
    cols = [f"{p}_s" for p in flow.PHASES if f"{p}_s" in act.columns]
    if act.empty or not cols:
        return pd.DataFrame()
    m = act.groupby(key)[cols].mean().astype(float).fillna(0.0)
    m.columns = pd.Index([str(c)[:-2] for c in m.columns])
    return m.loc[:, (m != 0).any(axis=0)]


_TRACED: dict[tuple[tuple[str, float], ...], Traced | str] = {}  # the last trace made, by its logs


def traced(run_dirs: Sequence[Path]) -> Traced | str | None:
    """The trace of the runs that kept their logs: None when none did, the error's text when
    tracing failed (a report is never lost to one unreadable log). The last one is kept: a
    study's findings and the frame's trace section read the same runs once."""
    from juice.trace.tables import trace

    dirs = [Path(d) for d in run_dirs if (Path(d) / "logs").is_dir()]
    if not dirs:
        return None
    key = tuple((str(d.resolve()), (d / "logs").stat().st_mtime) for d in dirs)
    if key in _TRACED:
        return _TRACED[key]
    try:
        found: Traced | str = trace(dirs, workers=1)
    except Exception as e:
        found = str(e)
    _TRACED.clear()
    _TRACED[key] = found
    return found


