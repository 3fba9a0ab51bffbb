"""Keystone runs that differ only in a deployment fact (Keystone's workers) are separate
configurations in every table and finding, never pooled (issue 38)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from juice.contract import ReportInput
from juice.studies.keystone import report
from tests.results.fake_runs import fake_params, write_fake_run


def runs(root: Path, delays: tuple[float, ...] = (50.0,)) -> None:
    """Two repetitions per (workers, delay); 4 workers twice as slow (a known answer)."""
    for i, workers in enumerate((1, 4)):
        for delay in delays:
            for rep in range(2):
                params = fake_params(delay_ms=delay, repetition=rep, run_id=f"{delay:g}-{rep}")
                run = write_fake_run(root, f"w{workers}-{delay:g}ms-r{rep}", params, seed=rep,
                                     scale=0.05 * (1 + i) * (1 + delay / 50))
                m = json.loads((run.path / "manifest.json").read_text())
                m["deployment"] = {"workers": workers, "rdbms": "galera", "timings_s": {"up_s": rep + i}}
                (run.path / "manifest.json").write_text(json.dumps(m))


def test_runs_differing_only_in_a_deployment_fact_are_separate_rows(tmp_path: Path) -> None:
    runs(tmp_path)
    html = "".join(report.sections(ReportInput(paths=[tmp_path], out_html=tmp_path / "r.html")))
    assert "<code>deployment.workers</code>" in html
    per_op = re.search(r"<h3>Per operation.*?(<table.*?</table>)", html, flags=re.S)
    assert per_op is not None
    rows = re.findall(r"<tr><td>galera</td><td class=\"num\">3</td><td class=\"num\">(\d)</td><td>Total</td>"
                      r"<td class=\"num\">(\d+)</td>", per_op.group(1))
    # one Total row per workers value, each over its own 2 runs x 40 iterations
    assert rows == [("1", "80"), ("4", "80")]


def test_findings_are_made_per_deployment_fact(tmp_path: Path) -> None:
    runs(tmp_path, delays=(0.0, 50.0))
    html = "".join(report.sections(ReportInput(paths=[tmp_path], out_html=tmp_path / "r.html")))
    start = html.index("<h3>Findings</h3>")
    findings = html[start:html.index("</section>", start)]
    # the delay effect is stated per workers value, never over both
    assert "<li>deployment.workers=1: galera at 50 ms one-way" in findings
    assert "<li>deployment.workers=4: galera at 50 ms one-way" in findings
    assert "<li>galera at 50 ms" not in findings
