"""The report's SLA tables: one pass/fail row per criterion of every judged run (the verdicts
stored in the runs' manifests by ``juice.sla.store``), first in each study's section
(``section(paths, owns=...)``: the runs that study recognises as its own). Runs judged by no criterion are not
listed; no judged run, no table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path

from juice.results import tidy
from juice.results.samples import runs_under
from juice.sla.store import stored
from juice.util.jsontypes import as_objects


def section(paths: Sequence[Path], owns: Callable[[Mapping[str, object]], bool] | None = None,
            heading: str = "h2") -> str:
    """The pass/fail table of the judged runs under ``paths`` (those whose manifest ``owns``
    accepts, when given: a study's ``key_of(manifest) is not None``)."""
    rows = []
    runs = failed = 0
    for p in paths:
        for d in (runs_under(p) if p.is_dir() else []):
            v = stored(d)
            if not v or (owns is not None and not owns(tidy.manifest_or_empty(d))):
                continue
            runs += 1
            failed += v.get("pass") is False
            for r in as_objects(v.get("results")):
                ok = bool(r.get("success"))
                rows.append(f"<tr><td>{'PASS' if ok else '<b>FAIL</b>'}</td><td>{escape(d.name)}</td>"
                            f"<td>{escape(str(r.get('criterion')))}</td>"
                            f"<td>{escape(str(r.get('detail'))).replace(chr(10), '<br>')}</td></tr>")
    if not runs:
        return ""
    head = (f"<{heading}>SLA</{heading}><p>{runs} runs judged against their spec's "
            "<code>sla:</code> criteria: "
            f"{'all passed' if not failed else f'<b>{failed} failed</b>'} "
            "(re-judge with <code>juice sla PATH --criteria FILE</code>).</p>")
    return head + ("<table><tr><th>verdict</th><th>run</th><th>criterion</th><th>detail</th></tr>"
                   + "".join(rows) + "</table>")
