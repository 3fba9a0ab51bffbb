"""A run's server errors by message template, from the log slices the run kept.

    rows = error_rows([Path("logs/keystone-s1.log"), ...])   # one dict per log × level × template
    rows = summed([(run, rows), ...])                        # summed over runs (juice.report.errors)

Two kinds of lines are read:
- oslo.log's (text or JSON; ``juice.trace.parse``): every WARNING, ERROR and CRITICAL line,
  its template (ids, numbers and quoted values removed; JSON logs give oslo's own ``msg``);
- gunicorn's own (``[2026-11-27 03:00:00 +0000] [123] [CRITICAL] WORKER TIMEOUT (pid:456)``):
  the master's view of its workers (timeouts, boot failures), which oslo.log never sees.

A row: ``log`` (the file's stem: ``keystone-s3``), ``component`` (keystone, placement, api,
conductor...), ``level``, ``template``, ``count``, ``example`` (the first such line's message,
cut to 300 characters) and ``cause`` (``juice.trace.causes``, of the template or else of the
example: quoted values such as 'Too many connections' leave the template) when one applies.
At most ``limit`` rows, the most frequent first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from juice.trace import causes
from juice.trace.parse import parse_files, stream_component, template_of

LEVELS = ("CRITICAL", "ERROR", "WARNING")
GUNICORN = re.compile(r"^\[[0-9-]+ [0-9:]+ [+-]\d{4}\] \[\d+\] \[(CRITICAL|ERROR|WARNING)\] (.*)$")
LIMIT = 50


def _gunicorn(path: Path) -> Iterable[tuple[str, str]]:
    """(level, message) of gunicorn's own WARNING/ERROR/CRITICAL lines in ``path``."""
    try:
        with path.open("rb") as f:
            for raw in f:
                if b"] [CRITICAL] " in raw or b"] [ERROR] " in raw or b"] [WARNING] " in raw:
                    m = GUNICORN.match(raw.decode(errors="replace").rstrip())
                    if m:
                        yield m.group(1), m.group(2)
    except OSError:
        return


class ErrorRow(TypedDict):
    """One (log, component, level, template) of ``error_rows``."""

    log: str
    component: str
    level: str
    template: str
    count: int
    example: str
    cause: str | None


def error_rows(paths: Sequence[Path], limit: int = LIMIT) -> list[ErrorRow]:
    """The WARNING/ERROR/CRITICAL lines of ``paths`` by log, level and template (see the module
    doc), the most frequent first, at most ``limit``."""
    counts: dict[tuple[str, str, str, str], int] = {}
    examples: dict[tuple[str, str, str, str], str] = {}

    def add(log: str, comp: str, level: str, template: str, message: str) -> None:
        key = (log, comp, level, template)
        if key in counts:
            counts[key] += 1
        else:
            counts[key] = 1
            examples[key] = re.sub(r"\s+", " ", message)[:300]

    files = [p for p in paths if p.is_file()]
    for e in parse_files(files, workers=1):
        if e.kind == "error" and e.level in LEVELS:
            add(e.stream, e.component or "other", e.level, e.template or template_of(e.detail or ""),
                e.detail or "")
    for p in files:
        for level, msg in _gunicorn(p):
            add(p.stem, stream_component(p.stem) or "other", level, "gunicorn: " + template_of(msg), msg)
    rows: list[ErrorRow] = [
        {"log": k[0], "component": k[1], "level": k[2], "template": k[3], "count": n,
         "example": examples[k],
         "cause": c[0] if (c := causes.cause_of(k[3]) or causes.cause_of(examples[k])) else None}
        for k, n in counts.items()]
    rows.sort(key=lambda r: (LEVELS.index(r["level"]), -r["count"], r["log"], r["template"]))
    return rows[:limit]


@dataclass
class _Sum:
    example: object
    cause: object
    count: int = 0
    runs: set[str] = field(default_factory=set)
    logs: set[str] = field(default_factory=set)


def summed(runs: Iterable[tuple[str, Sequence[Mapping[str, object]]]]) -> list[dict[str, object]]:
    """Rows of several runs (``(run name, rows)``) summed by component, level and template:
    count, the runs and logs they came from, one example, the cause."""
    out: dict[tuple[str, str, str], _Sum] = {}
    for run, rows in runs:
        for r in rows:
            key = (str(r.get("component")), str(r.get("level")), str(r.get("template")))
            agg = out.setdefault(key, _Sum(r.get("example"), r.get("cause")))
            n = r.get("count") or 0
            agg.count += int(n) if isinstance(n, int | float | str) else 0
            agg.runs.add(run)
            agg.logs.add(str(r.get("log")))
    lv = {x: i for i, x in enumerate(LEVELS)}
    order = sorted(out.items(), key=lambda kv: (lv.get(kv[0][1], 9), -kv[1].count))
    return [{"component": k[0], "level": k[1], "template": k[2], "count": v.count, "runs": len(v.runs),
             "logs": ", ".join(sorted(v.logs)[:6]) + (" ..." if len(v.logs) > 6 else ""),
             "example": v.example, "cause": v.cause} for k, v in order]
