"""The fault events a run recorded (``events.jsonl``, written by ``juice.faults.runner``: what
was done and when), read back. The report's faults section is ``juice.report.faults``.

    events = read_events(run_dir)     # [] when the run had no fault schedule
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from juice.faults.runner import EVENTS


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """The fault events of a run ([] when it had no schedule)."""
    try:
        lines = (run_dir / EVENTS).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(x) for x in lines if x.strip()]


