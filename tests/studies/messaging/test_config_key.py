"""Messaging runs that differ only in a recorded fact of their bus (here Erlang's version) are
separate configurations in the table and the findings, never pooled (issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

from juice.studies.messaging import report
from tests.report.synth import messaging_results


def test_runs_differing_only_in_a_bus_fact_are_separate_rows(tmp_path: Path) -> None:
    for erlang in ("25", "26"):
        root = messaging_results(tmp_path / f"erlang{erlang}", delays=(0.0,), agents=(10,), reps=2, n=120)
        for m in root.glob("*/manifest.json"):
            man = json.loads(m.read_text())
            man["facts"] = {**man["facts"], "erlang": erlang, "bus_up_s": 3.2 if erlang == "25" else 4.1}
            m.write_text(json.dumps(man))
    paths = [tmp_path / "erlang25", tmp_path / "erlang26"]
    t = report.analyze(paths, [])
    assert t is not None
    # 3 buses x 2 Erlang versions, each of its own 2 repetitions
    assert len(t) == 6 and set(t["runs"]) == {2}
    assert sorted(set(t["facts.erlang"])) == ["25", "26"]
    assert t.groupby("bus").size().tolist() == [2, 2, 2]
    html = "".join(report.sections(paths))
    assert "<code>facts.erlang</code>" in html and "<th>facts.erlang</th>" in html
    start = html.index("<h3>Findings</h3>")
    findings = html[start:html.index("</section>", start)]
    assert "<li>facts.erlang=25: Deliveries kept in the producer" in findings
    assert "<li>facts.erlang=26: Deliveries kept in the producer" in findings


def test_the_same_bus_facts_keep_one_row_per_configuration(tmp_path: Path) -> None:
    root = messaging_results(tmp_path / "m", delays=(0.0,), agents=(10,), reps=2, n=120)
    t = report.analyze([root], [])
    assert t is not None and len(t) == 3 and set(t["runs"]) == {2}
    df = report.load([root])
    assert df.attrs["config_extra"] == [] and df.attrs["config_notes"] == []
