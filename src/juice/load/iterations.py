"""Juice's own result files for a load run (the analysis reads these; Rally's format is in
``rally_json``).

``write_iterations(path, results)`` — JSON Lines, one iteration per line, failed ones
included: every ``IterationRecord`` field (``index, site, timestamp, duration, idle_duration,
error, atomic_actions, intended_at, dispatch_lag, latency``) plus ``scenario``; warm-up
iterations (run before the measured window) follow, with ``"warmup": true``. Written
atomically (temp file + rename).

``write_summary(path, results)`` — one JSON object per ``LoadResult`` without its records:
window, setup/cleanup times, client CPU, achieved rate, the DROPPED arrivals (count, indexes,
intended times), the driver failure and the args. Env/credentials are never in a result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from juice.load.api import IterationDict, IterationRecord, LoadResult
from juice.util import atomic


def iteration_rows(results: Sequence[LoadResult]) -> Iterator[IterationDict]:
    for res in results:
        for rec in res.records:
            yield {"scenario": res.scenario, **rec.to_dict()}
        for rec in res.warmup:
            yield {"scenario": res.scenario, **rec.to_dict(), "warmup": True}


def write_iterations(path: Path, results: Sequence[LoadResult]) -> int:
    """Write the JSONL file; returns the number of lines."""
    lines = [json.dumps(row, separators=(",", ":")) for row in iteration_rows(results)]
    atomic.write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def read_iterations(path: Path) -> list[tuple[str, IterationRecord]]:
    """(scenario, record) per line of a file made by ``write_iterations``."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            d: IterationDict = json.loads(line)
            out.append((str(d["scenario"]), IterationRecord.from_dict(d)))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not an iteration record ({e})") from None
    return out


def summary(res: LoadResult) -> dict[str, object]:
    d: dict[str, object] = {**res.to_dict()}
    d.pop("records")
    d["warmup"] = len(res.warmup)
    d.update(iterations=len(res.records), failed_iterations=res.failed_count,
             load_duration=res.load_duration, achieved_rate=res.achieved_rate)
    return d


def write_summary(path: Path, results: Sequence[LoadResult]) -> None:
    atomic.write_json(path, [summary(r) for r in results])
