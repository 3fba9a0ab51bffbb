"""The report's SLA section: one pass/fail row per criterion of every judged run (the verdicts
stored in the runs' manifests by ``juice.sla.store``), before the studies' sections. Runs
judged by no criterion are not listed; no judged run, no section."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from juice.results.samples import runs_under
from juice.sla.store import stored


def section(paths: Sequence[Path]) -> str:
    rows = []
    runs = failed = 0
    for p in paths:
        for d in (runs_under(p) if p.is_dir() else []):
            v = stored(d)
            if not v:
                continue
            runs += 1
            failed += v.get("pass") is False
            for r in v.get("results") or []:
                ok = bool(r.get("success"))
                rows.append(f"<tr><td>{'PASS' if ok else '<b>FAIL</b>'}</td><td>{escape(d.name)}</td>"
                            f"<td>{escape(str(r.get('criterion')))}</td>"
                            f"<td>{escape(str(r.get('detail'))).replace(chr(10), '<br>')}</td></tr>")
    if not runs:
        return ""
    head = (f"<h2>SLA</h2><p>{runs} runs judged against their spec's <code>sla:</code> criteria: "
            f"{'all passed' if not failed else f'<b>{failed} failed</b>'} "
            "(re-judge with <code>juice sla PATH --criteria FILE</code>).</p>")
    return head + ("<table><tr><th>verdict</th><th>run</th><th>criterion</th><th>detail</th></tr>"
                   + "".join(rows) + "</table>")
