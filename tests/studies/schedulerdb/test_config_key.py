"""Scheduler-db runs that differ only in a recorded fact of their lab (the WAN backend) are fitted
as separate configurations, each named with it, never pooled into one curve (issue 38)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.pyplot as plt

from juice.studies.schedulerdb import report

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "results-0.1" / "sdb-fixture"


def test_runs_differing_only_in_a_lab_fact_are_separate_configurations(tmp_path: Path) -> None:
    a, b = tmp_path / "userspace", tmp_path / "netem"
    runs = sorted(d for d in FIXTURE.iterdir() if d.name.startswith("mariadb-historical-2013.1-")
                  and "-s1-" in d.name)
    for root, backend in ((a, "userspace"), (b, "netem")):
        for d in runs:
            shutil.copytree(d, root / d.name)
            m = root / d.name / "manifest.json"
            man = json.loads(m.read_text())
            man["lab"] = {**man["lab"], "wan_backend": backend}
            m.write_text(json.dumps(man))
    one = report.summary([a])
    assert len(one["configurations"]) == 1 and "extra" not in one["configurations"][0]
    both = report.summary([a, b])
    confs = both["configurations"]
    assert len(confs) == 2
    assert sorted(c["lab.wan_backend"] for c in confs) == ["netem", "userspace"]
    # each fit has the reads of its own runs only, as the one configuration alone had
    assert [c["reads"] for c in confs] == [one["configurations"][0]["reads"]] * 2
    lines = report.summary_lines(both)
    assert any("lab.wan_backend=netem" in line for line in lines)
    assert any("lab.wan_backend=userspace" in line for line in lines)
    html = report.section([a, b])
    assert html is not None and "<code>lab.wan_backend</code>" in html
    plt.close("all")  # the section's figures are pyplot's
