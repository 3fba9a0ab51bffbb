"""Findings are computed from the data: a known answer when the data are built with one, and
they change when the data change. Tables fit: constants once, levels by value, short ids."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from juice.report import findings as F
from juice.report import layout
from juice.studies import report as render
from juice.studies.keystone.findings import findings as keystone_findings
from juice.studies.messaging import report as msg_report
from juice.studies.messaging.findings import findings as msg_findings
from juice.studies.nova import report as nova_report
from juice.studies.nova.findings import findings as nova_findings
from tests.report.synth import messaging_results, nova_results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results-0.1"


def test_a_contrast_is_real_when_the_means_differ_and_noise_when_they_do_not() -> None:
    rng = np.random.default_rng(1)
    # three runs a side, each run at its own level (5 % run-to-run)
    runs = np.repeat(["r1", "r2", "r3"], 200)
    a = np.concatenate([rng.normal(1.0 * rng.normal(1, 0.05), 0.1, 200) for _ in range(3)])
    b = np.concatenate([rng.normal(2.0 * rng.normal(1, 0.05), 0.1, 200) for _ in range(3)])
    c = F.contrast(a, b, runs, runs, key="x")
    assert c.verdict == F.REAL and 1.8 < c.ratio < 2.2 and c.runs == (3, 3)
    assert c.a.lo < a.mean() < c.a.hi and c.diff.lo > 0
    a2 = np.concatenate([rng.normal(1.0 * rng.normal(1, 0.05), 0.1, 200) for _ in range(3)])
    same = F.contrast(a, a2, runs, runs, key="y")
    assert same.verdict == F.NOISE and same.diff.lo < 0 < same.diff.hi
    # one run a side: 200 values each, and still no verdict (its iterations share the run's state)
    one = F.contrast(a[:200], b[:200], key="z")
    assert one.verdict == F.ONE_RUN and not one.real
    # every run of one side before every run of the other: confounded, whatever the interval says
    order = {"a1": 0.0, "a2": 1.0, "a3": 2.0, "b1": 3.0, "b2": 4.0, "b3": 5.0}
    conf = F.contrast(a, b, np.char.replace(runs, "r", "a"), np.char.replace(runs, "r", "b"),
                      key="o", order=order)
    assert conf.verdict == F.CONFOUNDED and not conf.real
    mixed = F.contrast(a, b, np.char.replace(runs, "r", "a"), np.char.replace(runs, "r", "b"), key="o",
                       order={**order, "a3": 4.5})
    assert mixed.verdict == F.REAL
    # clusters: two runs far apart on one side widen its interval (the runs are resampled)
    runs = np.repeat(["r1", "r2"], 100)
    wide, _ = F.estimate(np.r_[rng.normal(1, 0.1, 100), rng.normal(3, 0.1, 100)], runs, "w")
    flat, _ = F.estimate(np.r_[rng.normal(1, 0.1, 100), rng.normal(3, 0.1, 100)], None, "w")
    assert (wide.hi - wide.lo) > 3 * (flat.hi - flat.lo)


def test_keystone_findings_follow_the_delay_effect_built_in() -> None:
    rng = np.random.default_rng(2)
    rows = []
    for delay, slow in ((0.0, 1.0), (50.0, 5.0)):
        for rd, f in (("galera", slow), ("mariadb", 1.0)):
            for rep in range(2):
                for v in rng.normal(0.3 * f, 0.02, 40):
                    rows.append({"run": f"{rd}-{delay}-{rep}", "scenario": "K.create_user", "rdbms": rd,
                                 "delay_ms": delay, "failed": False, "total_s": v})
    fs = keystone_findings(pd.DataFrame(rows))
    galera = next(f for f in fs if f.text.startswith("galera at 50 ms"))
    mariadb = next(f for f in fs if f.text.startswith("mariadb at 50 ms"))
    ratio = float(re.search(r"\(([\d.]+)×\)", galera.text).group(1))  # type: ignore[union-attr]
    assert galera.verdict == F.REAL and 4.5 < ratio < 5.5  # 5× built in
    assert mariadb.verdict == F.NOISE


def test_nova_findings_change_with_the_data(tmp_path: Path) -> None:
    flat = nova_findings(nova_report.load([nova_results(tmp_path / "a", sched_effect=0.0)]))
    slow = nova_findings(nova_report.load([nova_results(tmp_path / "b", sched_effect=2.0)]))
    pick = lambda fs: next(f for f in fs if "schedulers vs" in f.text)  # noqa: E731
    assert pick(flat).verdict == F.NOISE and pick(slow).verdict == F.REAL
    knee = next(f for f in flat if f.text.startswith("At 60 concurrent"))
    assert knee.verdict == F.REAL
    assert any("Failures start at 60" in f.text for f in flat)
    assert any("1,000 VMs already running" in f.text and f.verdict == F.REAL for f in flat)


def test_messaging_findings_change_with_the_data(tmp_path: Path) -> None:
    def local_share(root: Path, share: float) -> float:
        fs = msg_findings(msg_report.load([messaging_results(root, local={"rabbitmq×3": share},
                                                             agents=(10,), reps=1)]))
        text = next(f.text for f in fs if f.text.startswith("Deliveries kept"))
        return float(re.search(r"rabbitmq×3 ([\d.]+)%", text).group(1))  # type: ignore[union-attr]

    assert 25 < local_share(tmp_path / "a", 1 / 3) < 42
    assert 75 < local_share(tmp_path / "b", 0.8) < 85


def test_layout_states_constants_once_sorts_levels_and_shortens_ids() -> None:
    df = pd.DataFrame({"level": ["20 (peak)", "5 (peak)", "60 (peak)", "idle"], "pool": [10] * 4,
                       "run": [f"NovaServers.boot_server-mariadb-{i}-" + "x" * 50 for i in range(4)],
                       "t": [2.0, 1.0, 3.0, 0.5]})
    assert list(layout.sort_levels(df, ["level"])["level"]) == ["5 (peak)", "20 (peak)", "60 (peak)", "idle"]
    html = layout.fit_table(df, runs="run", sort=["level"])
    assert "Same in every row: <b>pool</b> = 10" in html and "<th>pool</th>" not in html
    assert "<td>r1</td>" in html and "x" * 50 in html  # the legend keeps the full id
    assert html.index("5 (peak)") < html.index("20 (peak)")
    big = layout.fit_table(pd.DataFrame({"a": range(40), "b": range(40)}))
    assert big.startswith("<details><summary>40 rows")


def test_every_section_opens_with_findings_and_several_get_a_summary(tmp_path: Path) -> None:
    paths = [FIXTURES / "quickstart", FIXTURES / "sdb-fixture", nova_results(tmp_path / "nova"),
             messaging_results(tmp_path / "msg", agents=(10,), reps=1)]
    text = render(paths, tmp_path / "all.html").read_text()
    titles = re.findall(r'<section class=findings data-title="([^"]+)">', text)
    assert titles == ["Keystone", "scheduler-db", "messaging", "nova"] or sorted(titles) == sorted(
        ["Keystone", "scheduler-db", "messaging", "nova"])
    assert text.index("<h2>Summary</h2>") < text.index("<section class=findings")
    one = render([paths[2]], tmp_path / "one.html").read_text()
    assert "<h2>Summary</h2>" not in one and one.count("<section class=findings") == 1
    # each study's findings block comes before its first table
    for h2 in re.findall(r"<h2>(nova: boots[^<]*|Messaging:[^<]*|Scheduler[^<]*)</h2>", text):
        sec = text[text.index(f"<h2>{h2}</h2>"):]
        assert sec.index("<section class=findings") < sec.index("<table")
    assert render(paths, tmp_path / "again.html").read_text().split("</p>", 1)[1] == text.split("</p>", 1)[1]
